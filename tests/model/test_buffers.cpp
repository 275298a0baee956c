// The buffer plan is the one place buffers are sized: make_transformer allocates exactly what it
// says, the memory estimate counts it, and the estimate holds against the peak resident memory
// that real runs of the CLI measure.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/kernels/runtime.hpp"
#include "attn/model/buffers.hpp"
#include "attn/model/memory.hpp"
#include "attn/model/model.hpp"
#include "attn/model/weights.hpp"
#include "test_support.hpp"

namespace {

attn::ModelArgs small(attn::Block block) {
  attn::ModelArgs a;
  a.dim = 48;
  a.n_layers = 2;
  a.n_heads = 4;
  a.n_kv_heads = 2;
  a.ffn_hidden_set = 40;
  a.max_batch_size = 3;
  a.max_seq_len = 80;
  a.block = block;
  a.rope = block == attn::Block::llama ? attn::Rope::interleaved : attn::Rope::none;
  a.attention_bias = block == attn::Block::encoder;
  a.model_parallel_size = 1;
  return a;
}

std::size_t n(std::int64_t floats) {
  return std::size_t(floats);
}

}  // namespace

TEST_CASE("buffers: make_transformer allocates exactly what plan_buffers sizes") {
  for (attn::Block block : {attn::Block::llama, attn::Block::attention, attn::Block::encoder})
    for (int threads : {1, 2, 4})
      for (std::int64_t max_rows : {1, 2, 31, 32, 33, 64, 200}) {
        CAPTURE(int(block));
        CAPTURE(threads);
        CAPTURE(max_rows);
        const attn::ModelArgs a = small(block);
        const attn::Runtime rt = attn::make_runtime(threads);
        const attn::Transformer m =
            attn::make_transformer(a, attn::seeded_weights(a, 3), max_rows, rt);
        const attn::BufferPlan p = attn::plan_buffers(a, {}, max_rows, rt);
        CHECK(m.cache.cache_k.size() == n(p.cache));
        CHECK(m.cache.cache_v.size() == n(p.cache));
        CHECK(m.rope.cos_sin.size() == n(p.rope));
        CHECK(m.act.xb.size() == n(p.xb));
        CHECK(m.act.work.size() == n(p.work));
        CHECK(m.act.scores.size() == n(p.scores));
        CHECK(m.act.pack.size() == n(p.pack));
        CHECK(m.act.partial.empty());
        // Attention's three products fit in front of the FFN's second half, or after it.
        CHECK(p.work >= p.xv_at + max_rows * a.n_kv_heads * a.head_dim());
        CHECK(p.work >= 2 * p.h3_at);
      }
}

// Resident pages of [p, p + bytes), from mincore.
std::uint64_t resident_bytes(const void* p, std::size_t bytes) {
  const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(p) / page * page;
  const std::size_t n = (reinterpret_cast<std::uintptr_t>(p) + bytes - begin + page - 1) / page;
  std::vector<unsigned char> in(n);
  REQUIRE(::mincore(reinterpret_cast<void*>(begin), n * page, in.data()) == 0);
  std::uint64_t r = 0;
  for (unsigned char c : in) r += (c & 1) ? page : 0;
  return r;
}

TEST_CASE("buffers: FloatBuffers read as zeros and cost the pages written, at and around 1 MiB") {
  const std::size_t edge = attn::kZeroedMapBytes / sizeof(float);
  for (std::size_t n : {std::size_t(1), edge - 1, edge, edge + 1, 4 * edge}) {
    CAPTURE(n);
    attn::FloatBuffer b(n);
    if (n >= edge) {  // its own mapping (below: calloc's, counted whole by the estimate)
      CHECK(resident_bytes(b.data(), n * sizeof(float)) == 0);  // nothing written yet
      b[n / 2] = 1.0f;
      CHECK(resident_bytes(b.data(), n * sizeof(float)) == std::uint64_t(sysconf(_SC_PAGESIZE)));
      b[n / 2] = 0.0f;
    }
    // Read last: reading maps the zero page, which mincore counts as in core.
    CHECK(std::all_of(b.begin(), b.end(), [](float v) { return v == 0.0f; }));
  }
  // What a run writes: whole pages, one more per part, never more than the buffer.
  const std::uint64_t cap = std::uint64_t(attn::kZeroedMapBytes) * 4;
  CHECK(attn::written_bytes(attn::kZeroedMapBytes - 1, 8, 1) == attn::kZeroedMapBytes - 1);
  CHECK(attn::written_bytes(cap, 8, 1) == 8 * 2 * attn::kPageBytes);
  CHECK(attn::written_bytes(cap, 8, attn::kPageBytes) == 8 * 2 * attn::kPageBytes);
  CHECK(attn::written_bytes(cap, 8, attn::kPageBytes + 1) == 8 * 3 * attn::kPageBytes);
  CHECK(attn::written_bytes(cap, 8, cap) == cap);
  CHECK(attn::written_bytes(cap, 0, 5) == cap);
}

TEST_CASE("buffers: a rank's plan is its share, with the partial sums") {
  attn::ModelArgs a = small(attn::Block::llama);
  a.model_parallel_size = 2;
  const attn::Shard shard{1, 2};
  const attn::ModelArgs local = attn::local_args(a, shard);
  const attn::Runtime rt = attn::make_runtime(1);
  const attn::BufferPlan whole = attn::plan_buffers(a, {}, 8, rt);
  const attn::BufferPlan p = attn::plan_buffers(local, shard, 8, rt);
  CHECK(p.cache * 2 == whole.cache);
  CHECK(p.partial == 8 * a.dim);
  const attn::Transformer m =
      attn::make_transformer(a, attn::seeded_weights(a, 3, shard), 8, rt, shard);
  CHECK(m.act.partial.size() == n(p.partial));
  CHECK(m.cache.cache_k.size() == n(p.cache));
  // The estimate counts the rank's KV cache and weights, not the whole model's.
  attn::RunShape r{1, 4, 2, 4, 1, false};
  auto part = [](const std::vector<attn::MemoryPart>& parts, const std::string& name) {
    for (const attn::MemoryPart& q : parts)
      if (q.name == name) return q.bytes;
    return std::uint64_t(0);
  };
  const auto mine = attn::memory_parts(a, r, shard), all = attn::memory_parts(a, r);
  CHECK(2 * part(mine, "KV cache") == part(all, "KV cache"));
  CHECK(part(mine, "weights") < part(all, "weights"));
  CHECK(part(mine, "model-parallel partial sums") == std::uint64_t(4 * a.dim * 4));
}

TEST_CASE("buffers: sizes past 2^63 bytes are refused by name, before any allocation") {
  attn::ModelArgs a = small(attn::Block::llama);
  a.max_seq_len = std::int64_t(1) << 24;
  a.n_layers = std::int64_t(1) << 24;
  a.max_batch_size = std::int64_t(1) << 24;
  CHECK_THROWS_WITH_AS(attn::plan_buffers(a, {}, 8, attn::make_runtime(1)),
                       doctest::Contains("KV cache"), attn::InputError);
  a = small(attn::Block::llama);
  a.head_dim_set = std::int64_t(1) << 62;
  CHECK_THROWS_AS(attn::plan_buffers(a, {}, 8, attn::make_runtime(1)), attn::InputError);
}

// AddressSanitizer adds shadow memory and redzones to every allocation, so the resident size of
// a sanitized run says nothing about the estimate: the case exists in plain builds only.
#if defined(__SANITIZE_ADDRESS__)
#define ATTN_TEST_RSS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ATTN_TEST_RSS 0
#endif
#endif
#ifndef ATTN_TEST_RSS
#define ATTN_TEST_RSS 1
#endif

#if ATTN_TEST_RSS
namespace {

// The peak resident set of `argv` run to its end, in bytes, with its exit status.
struct Peak {
  int status = -1;
  std::uint64_t bytes = 0;
};

Peak peak_rss(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, std::uint64_t(usage.ru_maxrss) * 1024};
}

std::uint64_t total(const std::vector<attn::MemoryPart>& parts) {
  std::uint64_t t = 0;
  for (const attn::MemoryPart& p : parts) t += p.bytes;
  return t;
}

}  // namespace

// Real runs of the CLI: what each allocates beyond the smallest run (the process itself: code,
// libraries) is at most the estimate of its parts, and the estimate is not far above it. Each run
// is dominated by a different part. The smallest run prefills 2 positions.
TEST_CASE("buffers: the memory estimate holds against the peak RSS of real runs") {
  const std::string cli = ATTN_CLI, dir = std::string(ATTN_SOURCE_DIR) + "/configs/";
  const Peak floor = peak_rss({cli, "run", "--prefill", "2", "--steps", "0", "-t", "1"});
  REQUIRE(floor.status == 0);
  struct Run {
    const char* what;
    std::vector<std::string> flags;
    attn::RunShape shape;
  };
  attn::ModelArgs a = attn::llama3_8b_layer_args();
  a.dim = 1024;
  a.n_heads = 16;
  a.n_kv_heads = 4;
  a.ffn_hidden_set = 3584;
  a.n_layers = 2;
  const std::string cfg = test::temp_path("buffers_config.json").string();
  {
    std::FILE* f = std::fopen(cfg.c_str(), "w");
    REQUIRE(f);
    std::fprintf(f,
                 "{\"dim\": 1024, \"n_layers\": 2, \"n_heads\": 16, \"n_kv_heads\": 4, "
                 "\"ffn_hidden\": 3584, \"max_batch_size\": 4, \"max_seq_len\": 8192}");
    std::fclose(f);
  }
  a.max_batch_size = 4;
  a.max_seq_len = 8192;
  const std::vector<Run> runs = {
      {"KV cache", {"--prefill", "8", "--steps", "2", "-t", "1"}, {1, 8, 2, 8, 1, false}},
      {"prefill activations",
       {"--prefill", "1024", "--steps", "1", "-b", "4", "-t", "2"},
       {4, 1024, 1, 4096, 2, false}},
      {"dump",
       {"--prefill", "512", "--steps", "4", "-b", "4", "-t", "1", "--dump",
        test::temp_path("buffers_dump.safetensors").string()},
       {4, 512, 4, 2048, 1, true}},
  };
  for (const Run& r : runs) {
    const std::string what = r.what;
    CAPTURE(what);
    std::vector<std::string> args = {cli, "run", "--config", cfg};
    args.insert(args.end(), r.flags.begin(), r.flags.end());
    const Peak p = peak_rss(args);
    REQUIRE(p.status == 0);
    const std::uint64_t used = p.bytes > floor.bytes ? p.bytes - floor.bytes : 0;
    const std::uint64_t estimate = total(attn::memory_parts(a, r.shape));
    MESSAGE(what << ": peak " << p.bytes / 1048576 << " MiB, above the floor " << used / 1048576
                 << " MiB, estimate " << estimate / 1048576 << " MiB");
    CHECK(used <= estimate + (4u << 20));  // page rounding, the allocator's headers
    CHECK(estimate <= used + used / 10 + (64u << 20));
  }
}
#endif

namespace {

// kB of transparent huge pages in the mappings of this process that overlap [p, p + bytes)
// (/proc/self/smaps; advise_huge_pages splits a mapping at the range's whole pages), or -1 where
// the file cannot be read.
long huge_kb_in(const void* p, std::size_t bytes) {
  std::FILE* f = std::fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  const auto begin = reinterpret_cast<std::uintptr_t>(p), end = begin + bytes;
  long kb = 0;
  bool inside = false;
  char line[512];
  while (std::fgets(line, sizeof line, f)) {
    // A mapping's first line: "start-end perms ..."; its fields follow as "Name: value kB".
    unsigned long lo = 0, hi = 0;
    const char* dash = std::strchr(line, '-');
    const char* space = std::strchr(line, ' ');
    if (dash && space && dash < space && std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
      inside = lo < end && hi > begin;
      continue;
    }
    long v = 0;
    if (inside && std::sscanf(line, "AnonHugePages: %ld kB", &v) == 1) kb += v;
  }
  std::fclose(f);
  return kb;
}

bool huge_pages_off() {
  std::FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (!f) return true;
  char line[128] = {};
  const bool got = std::fgets(line, sizeof line, f) != nullptr;
  std::fclose(f);
  return !got || std::strstr(line, "[never]") != nullptr;
}

}  // namespace

TEST_CASE("buffers: drawn weights are asked for on huge pages, F32 and in their own type") {
  if (huge_pages_off()) {
    MESSAGE("skipped: transparent huge pages are off on this machine");
    return;
  }
  attn::ModelArgs a = small(attn::Block::llama);
  a.dim = 1024;
  a.n_heads = 8;
  a.n_kv_heads = 8;
  a.ffn_hidden_set = 4096;
  a.n_layers = 1;
  for (attn::WeightType type : {attn::WeightType::f32, attn::WeightType::bf16}) {
    CAPTURE(attn::weight_type_name(type));
    const attn::TransformerWeights w = attn::seeded_weights(a, 3, {}, type);
    const attn::Matrix& w1 = w.layers[0].w1;  // [4096, 1024]: 16 MB of F32, 8 MB of BF16
    const long kb = huge_kb_in(w1.data, attn::weight_bytes(type, 4096 * 1024, "w1"));
    REQUIRE(kb >= 0);
    CHECK(kb >= 2048);  // at least one 2 MiB page of it
  }
}
