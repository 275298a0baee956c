// The pre-flight memory estimate: weights counted in the type they are held in, the widening
// buffers only for BF16 and F16 matrices, and the memory available read from /proc/meminfo and
// the process's cgroup (v1 and v2), from fixture files laid out under a temporary root.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/io/checkpoint.hpp"
#include "attn/kernels/matmul.hpp"
#include "attn/model/memory.hpp"
#include "attn/model/weights.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

namespace {

using attn::WeightType;
using test::TempDir;

void write_text(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary);
  out.write(text.data(), std::streamsize(text.size()));
  REQUIRE(out.good());
}

std::uint64_t part(const std::vector<attn::MemoryPart>& parts, const std::string& name) {
  for (const attn::MemoryPart& p : parts)
    if (p.name == name) return p.bytes;
  FAIL("no part " << name);
  return 0;
}

// Three llama layers with biases: dim 64, 4 heads of 16, 2 KV heads, FFN 96.
attn::ModelArgs small_llama() {
  attn::ModelArgs a;
  a.dim = 64;
  a.n_layers = 3;
  a.n_heads = 4;
  a.n_kv_heads = 2;
  a.attention_bias = true;
  a.ffn_hidden_set = 96;
  a.max_batch_size = 1;
  a.max_seq_len = 64;
  return a;
}

// small_llama's weights part with `types` held.
std::uint64_t weights_part(const std::vector<WeightType>& types, std::int64_t max_rows = 8) {
  attn::RunShape r{1, 8, 2, max_rows, 3, false};
  r.matrices = types;
  return part(attn::memory_parts(small_llama(), r), "weights");
}

std::uint64_t widening_part(const std::vector<WeightType>& types, std::int64_t max_rows,
                            const std::string& isa) {
  attn::RunShape r{1, max_rows, 2, max_rows, 3, false};
  r.matrices = types;
  r.isa = isa;
  return part(attn::memory_parts(small_llama(), r), "packed rows");
}

}  // namespace

TEST_CASE("memory: matrices count at their type's bytes, norms and biases at F32's") {
  // Per layer: wq, wo [64, 64]; wk, wv [32, 64]; w1, w3 [96, 64]; w2 [64, 96].
  const std::uint64_t matrices = 3 * (2 * 64 * 64 + 2 * 32 * 64 + 3 * 96 * 64);
  // Per layer: bq, bo [64]; bk, bv [32]; attention_norm, ffn_norm [64].
  const std::uint64_t vectors = 3 * (64 + 32 + 32 + 64 + 64 + 64);
  CHECK(weights_part({WeightType::f32}) == matrices * 4 + vectors * 4);
  CHECK(weights_part({WeightType::bf16}) == matrices * 2 + vectors * 4);
  CHECK(weights_part({WeightType::f16}) == matrices * 2 + vectors * 4);
  CHECK(attn::RunShape{}.matrices == std::vector<WeightType>{WeightType::f32});  // the default
  // A file mixing types: every matrix at the widest.
  CHECK(weights_part({WeightType::bf16, WeightType::f32}) == matrices * 4 + vectors * 4);
  CHECK(weights_part({WeightType::bf16, WeightType::f16}) == matrices * 2 + vectors * 4);
}

TEST_CASE("memory: prefill's buffers: x's tiles packed, no widening or panels, any type") {
  const std::vector<std::string> isas = test::kernel_names();
  for (const std::string& isa : isas) {
    CAPTURE(isa);
    // A prefill of 64 rows on 3 threads runs the batched kernel over x's tiles (matmul.cpp): x
    // packed whole, 64 rows of k_max = 96 features; no weight is widened outside the kernels'
    // registers and L1 buffers, so no per-thread buffer, whatever the type or the set.
    const std::uint64_t packed = 64 * 96 * 4;
    for (WeightType t : {WeightType::f32, WeightType::bf16, WeightType::f16})
      CHECK(widening_part({t}, 64, isa) == packed);
    CHECK(widening_part({WeightType::f32, WeightType::bf16}, 64, isa) == packed);
    // Decode-sized calls need neither, whatever the type.
    CHECK(widening_part({WeightType::bf16}, 1, isa) == widening_part({WeightType::f32}, 1, isa));
  }
  // "": the best set this CPU runs.
  CHECK(widening_part({WeightType::bf16}, 64, "") ==
        widening_part({WeightType::bf16}, 64, isas[0]));
}

TEST_CASE("memory: a refusal names the limit that applied") {
  const auto parts = attn::memory_parts(small_llama(), {1, 8, 2, 8, 1, false});
  try {
    attn::check_memory(parts, {3ull << 29, "cgroup memory.max"});  // 1.5 GiB: enough
    attn::check_memory(parts, {1 << 10, "cgroup memory.max"});
    FAIL("no error");
  } catch (const attn::InputError& e) {
    CHECK(std::string(e.what()).find("but 1.00 KiB are available (cgroup memory.max)") !=
          std::string::npos);
  }
}

TEST_CASE("memory: available memory is the smaller of MemAvailable and the cgroup's room") {
  TempDir dir;
  const fs::path& root = dir.path;
  const std::uint64_t gib = 1ull << 30;
  // 8 GiB free on the machine.
  write_text(root / "proc/meminfo", "MemTotal:       16777216 kB\nMemAvailable:    8388608 kB\n");
  auto available = [&] { return attn::available_memory(root); };

  SUBCASE("missing cgroup files: MemAvailable") {
    CHECK(available().bytes == 8 * gib);
    CHECK(available().limit == "MemAvailable");
    write_text(root / "proc/self/cgroup", "0::/user.slice/job\n");
    CHECK(available().bytes == 8 * gib);
  }
  SUBCASE("cgroup v2: memory.max - memory.current of the process's own cgroup") {
    write_text(root / "proc/self/cgroup", "0::/user.slice/job\n");
    const fs::path cg = root / "sys/fs/cgroup/user.slice/job";
    write_text(cg / "memory.max", "2147483648\n");     // 2 GiB
    write_text(cg / "memory.current", "536870912\n");  // 0.5 GiB used
    CHECK(available().bytes == 3 * gib / 2);
    CHECK(available().limit == "cgroup memory.max");
    write_text(cg / "memory.max", "max\n");
    CHECK(available().bytes == 8 * gib);
    CHECK(available().limit == "MemAvailable");
    write_text(cg / "memory.max", "17179869184\n");  // 16 GiB: MemAvailable is smaller
    CHECK(available().bytes == 8 * gib);
    write_text(cg / "memory.max", "268435456\n");  // 0.25 GiB, more than that used: no room
    CHECK(available().bytes == 0);
  }
  SUBCASE("cgroup v2 in a container: its cgroup at the mount's root") {
    write_text(root / "proc/self/cgroup", "0::/\n");
    write_text(root / "sys/fs/cgroup/memory.max", "1073741824\n");
    write_text(root / "sys/fs/cgroup/memory.current", "0\n");
    CHECK(available().bytes == gib);
    CHECK(available().limit == "cgroup memory.max");
  }
  SUBCASE("cgroup v1: memory.limit_in_bytes - memory.usage_in_bytes") {
    write_text(root / "proc/self/cgroup", "12:cpu,cpuacct:/job\n4:memory:/job\n0::/\n");
    const fs::path cg = root / "sys/fs/cgroup/memory/job";
    write_text(cg / "memory.limit_in_bytes", "1073741824\n");
    write_text(cg / "memory.usage_in_bytes", "268435456\n");
    CHECK(available().bytes == 3 * gib / 4);
    CHECK(available().limit == "cgroup memory.limit_in_bytes");
    // v1's "no limit" is 2^63 - 4096.
    write_text(cg / "memory.limit_in_bytes", "9223372036854771712\n");
    CHECK(available().bytes == 8 * gib);
    CHECK(available().limit == "MemAvailable");
  }
  SUBCASE("cgroup v1 in a container: the host's path, its cgroup at the mount's root") {
    write_text(root / "proc/self/cgroup", "4:memory:/docker/0123abcd\n");
    write_text(root / "sys/fs/cgroup/memory/memory.limit_in_bytes", "2147483648\n");
    write_text(root / "sys/fs/cgroup/memory/memory.usage_in_bytes", "1073741824\n");
    CHECK(available().bytes == gib);
  }
}

TEST_CASE("memory: a file's matrix types come from its header, nothing mapped before the load") {
  // Block attention, dim 4, one head: wq, wk, wv, wo [4, 4]; wq BF16, the others F32 (zeros).
  attn::ModelArgs a;
  a.dim = 4;
  a.n_heads = a.n_kv_heads = 1;
  a.block = attn::Block::attention;
  a.rope = attn::Rope::none;
  TempDir dir;
  const fs::path w = dir.path / "mixed.safetensors";
  std::string header = R"({"layers.0.attention.wq.weight":{"dtype":"BF16","shape":[4,4],)"
                       R"("data_offsets":[0,32]})";
  for (int i = 0; i < 3; ++i) {
    const char* name[] = {"wk", "wv", "wo"};
    header += ",\"layers.0.attention." + std::string(name[i]) +
              R"(.weight":{"dtype":"F32","shape":[4,4],"data_offsets":[)" +
              std::to_string(32 + 64 * i) + "," + std::to_string(96 + 64 * i) + "]}";
  }
  header += "}";
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[std::size_t(i)] = char((header.size() >> (8 * i)) & 0xFF);
  write_text(w, file + header + std::string(32 + 3 * 64, '\0'));

  attn::WeightsSource source = attn::open_weights(w);
  CHECK(attn::matrix_types(a, source) ==
        std::vector<WeightType>{WeightType::bf16, WeightType::f32});
  CHECK(dynamic_cast<const attn::Checkpoint&>(*source.tensors).files.empty());
  const attn::TransformerWeights loaded = attn::load_weights(a, std::move(source));
  CHECK(loaded.halves);
  CHECK(loaded.layers[0].wq.type == WeightType::bf16);
  // the header read first went to the mapping
  CHECK(dynamic_cast<const attn::Checkpoint&>(*loaded.tensors).headers.empty());
}

TEST_CASE("memory: the CLI counts a BF16 file's matrices at half an F32 file's bytes") {
  // The same model in BF16 and in F32: dim 32, 4 heads of 8, 1 KV head, FFN 96 (4 * 32 * 2/3
  // rounded up to a multiple of 32), biases. A cache far past any machine's memory makes the
  // estimate refuse the run and list its parts.
  const std::uint64_t matrices = 2 * 32 * 32 + 2 * 8 * 32 + 3 * 96 * 32;
  const std::uint64_t vectors = 32 + 8 + 8 + 32 + 32 + 32;  // bq, bk, bv, bo, two norms
  auto kib = [](std::uint64_t bytes) {
    char text[64];
    std::snprintf(text, sizeof text, "Parts: weights %.2f KiB;", double(bytes) / 1024);
    return std::string(text);
  };
  const fs::path d = test::golden_dir() / "bf16_llama_mqa_half";
  for (const auto& [file_, bytes] :
       {std::pair{"weights.safetensors", matrices * 2 + vectors * 4},
        std::pair{"weights_f32.safetensors", matrices * 4 + vectors * 4}}) {
    const auto& file = file_;  // clang 14 lambdas (doctest INFO) cannot capture a binding
    CAPTURE(file);
    const test::CliResult r =
        test::run_cli("run --config '" + (d / "config.json").string() + "' --weights '" +
                      (d / file).string() + "' --max-batch 16777216 --max-seq-len 1048576");
    CHECK(r.status == 2);
    CHECK_MESSAGE(r.err.find(kib(bytes)) != std::string::npos, r.err);
  }
}
