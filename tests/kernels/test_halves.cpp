// BF16 and F16 weights kept at half the bytes (issue 10): widened exactly, and a model over them
// gives the bits of the same model over the F32-widened weights. References: PyTorch's .float()
// of every 16-bit pattern and of the golden cases' BF16/F16 files (tests/golden/make_halves.py).
// Each kernel's products over every weight type, against float64 and the F32 widening's bits, are
// the registry's cases (kernels/test_kernel_cases.cpp).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "attn/engine/run.hpp"
#include "attn/io/safetensors.hpp"
#include "attn/kernels/matmul.hpp"
#include "attn/model/model.hpp"
#include "attn/model/parallel.hpp"
#include "attn/model/rng.hpp"
#include "test_support.hpp"

namespace {

bool same_bits(const float* a, const float* b, std::int64_t n) {
  return std::memcmp(a, b, std::size_t(n) * sizeof(float)) == 0;
}

// How many of n values differ in their bits (NaN payloads included).
std::int64_t bit_differences(const float* a, const float* b, std::int64_t n) {
  std::int64_t d = 0;
  for (std::int64_t i = 0; i < n; ++i) d += std::memcmp(a + i, b + i, sizeof(float)) != 0;
  return d;
}

}  // namespace

TEST_CASE("halves: every BF16 and F16 bit pattern widens to PyTorch's float, every kernel set") {
  const attn::SafetensorsFile f =
      attn::open_safetensors(test::golden_dir() / "halves" / "widening.safetensors");
  for (auto [type, name_] : {std::pair{attn::WeightType::f16, std::string("f16")},
                             std::pair{attn::WeightType::bf16, std::string("bf16")}}) {
    const auto& name = name_;  // clang 14 lambdas (doctest INFO) cannot capture a binding
    const auto* bits = reinterpret_cast<const std::uint16_t*>(f.bytes(f.info(name + "_bits")));
    const auto* torch_f32 = reinterpret_cast<const float*>(f.bytes(f.info(name + "_as_f32")));
    CAPTURE(name);
    // The scalar conversions (tails, tests' references) first.
    std::vector<float> scalar(65536);
    for (std::size_t i = 0; i < scalar.size(); ++i)
      scalar[i] =
          type == attn::WeightType::bf16 ? attn::bf16_to_f32(bits[i]) : attn::f16_to_f32(bits[i]);
    CHECK(bit_differences(scalar.data(), torch_f32, 65536) == 0);
    // The kernels: whole vectors ([1, 65536]), and rows of 19 (one vector and a scalar tail at
    // any width) over the first 65531 patterns.
    for (const std::string& isa : test::kernel_names()) {
      CAPTURE(isa);
      const attn::Runtime rt = attn::make_runtime(1, 0, isa);
      std::vector<float> out(65536);
      attn::widen_to_f32(rt, {bits, type}, 1, 65536, out.data());
      CHECK(bit_differences(out.data(), torch_f32, 65536) == 0);
      std::fill(out.begin(), out.end(), 0.0f);
      attn::widen_to_f32(rt, {bits, type}, 65531 / 19, 19, out.data());
      CHECK(bit_differences(out.data(), torch_f32, 65531 / 19 * 19) == 0);
    }
  }
}

TEST_CASE("halves: F32 narrows to BF16 and F16 as PyTorch rounds (nearest even)") {
  const attn::SafetensorsFile f =
      attn::open_safetensors(test::golden_dir() / "halves" / "widening.safetensors");
  const attn::TensorInfo& t = f.info("f32_samples");
  const auto* x = reinterpret_cast<const float*>(f.bytes(t));
  const auto* f16 = reinterpret_cast<const std::uint16_t*>(f.bytes(f.info("f32_to_f16")));
  const auto* bf16 = reinterpret_cast<const std::uint16_t*>(f.bytes(f.info("f32_to_bf16")));
  std::int64_t bad16 = 0, badbf = 0;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    bad16 += attn::f32_to_f16(x[i]) != f16[i];
    badbf += attn::f32_to_bf16(x[i]) != bf16[i];
  }
  CHECK(t.numel() > 20000);
  CHECK(bad16 == 0);
  CHECK(badbf == 0);
}

TEST_CASE("halves: a BF16 or F16 checkpoint runs bit for bit as PyTorch's F32 widening of it") {
  for (const char* name : {"bf16_llama_mqa_half", "f16_llama_gqa_interleaved"}) {
    CAPTURE(name);
    const std::filesystem::path dir = test::golden_dir() / name;
    attn::ModelArgs a = attn::load_config(dir / "config.json");
    a.max_seq_len = 48;
    a.max_batch_size = 2;
    attn::TransformerWeights half = attn::load_weights(a, dir / "weights.safetensors");
    attn::TransformerWeights wide = attn::load_weights(a, dir / "weights_f32.safetensors");
    CHECK(half.halves);
    CHECK_FALSE(wide.halves);
    CHECK(half.bytes < wide.bytes);
    for (const attn::LayerWeights& l : half.layers)  // matrices stay in the file's type
      for (const attn::Matrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w2, &l.w3})
        CHECK(m->type != attn::WeightType::f32);
    CHECK(half.owned_blocks.empty());  // the fixtures are aligned: views of the mapping
    // Seeded weights drawn straight into BF16 or F16 are the F32 draws rounded.
    const attn::TransformerWeights seeded32 = attn::seeded_weights(a, 3);
    const attn::WeightType type = half.layers[0].wq.type;
    const attn::TransformerWeights seeded16 = attn::seeded_weights(a, 3, {}, type);
    const std::int64_t n = a.n_heads * a.head_dim() * a.dim;
    std::int64_t off = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const float v = attn::element(seeded32.layers[0].wq, i);
      const std::uint16_t h =
          type == attn::WeightType::bf16 ? attn::f32_to_bf16(v) : attn::f32_to_f16(v);
      off += static_cast<const std::uint16_t*>(seeded16.layers[0].wq.data)[i] != h;
    }
    CHECK(seeded16.layers[0].wq.type == type);
    CHECK(off == 0);
    CHECK(seeded16.halves);
    // Prefill of 2 x 20 rows (sgemm over widened blocks), then batched decode of 2 rows; and
    // prefill 5 (batched kernel) with gemv decode, on 1 and 2 threads.
    for (const attn::RunOptions opts : {attn::RunOptions{2, 20, 3}, attn::RunOptions{1, 5, 3}})
      for (int threads : {1, 2}) {
        const attn::Runtime rt = attn::make_runtime(threads, 0);
        const std::vector<float> x = attn::seeded_input(a, opts, 5);
        const std::int64_t rows = opts.batch * opts.prefill;
        attn::Transformer mh =
            attn::make_transformer(a, attn::load_weights(a, dir / "weights.safetensors"), rows, rt);
        attn::Transformer mw = attn::make_transformer(
            a, attn::load_weights(a, dir / "weights_f32.safetensors"), rows, rt);
        const attn::RunOutputs oh = attn::run(mh, x, opts, [](const attn::Event&) {});
        const attn::RunOutputs ow = attn::run(mw, x, opts, [](const attn::Event&) {});
        CAPTURE(opts.batch);
        CAPTURE(opts.prefill);
        CAPTURE(threads);
        REQUIRE(oh.prefill_output.size() == ow.prefill_output.size());
        CHECK(same_bits(oh.prefill_output.data(), ow.prefill_output.data(),
                        std::int64_t(oh.prefill_output.size())));
        CHECK(same_bits(oh.decode_output.data(), ow.decode_output.data(),
                        std::int64_t(oh.decode_output.size())));
        CHECK(same_bits(mh.cache.cache_k.data(), mw.cache.cache_k.data(),
                        std::int64_t(mh.cache.cache_k.size())));
      }
  }
}

namespace {

// The golden file `file` with a 1-byte tensor in front, written to `out`: every tensor at an odd
// address.
void write_shifted(const std::filesystem::path& file, const std::filesystem::path& out_path) {
  std::ifstream in(file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  nlohmann::ordered_json header = nlohmann::ordered_json::parse(bytes.substr(8, n));
  for (auto& [name, info] : header.items())
    if (name != "__metadata__")
      for (auto& o : info["data_offsets"]) o = o.get<std::uint64_t>() + 1;
  header["pad"] = {{"dtype", "U8"}, {"shape", {1}}, {"data_offsets", {0, 1}}};
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  const std::uint64_t len = h.size();
  std::ofstream out(out_path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << h << '\0' << bytes.substr(8 + n);
}

}  // namespace

TEST_CASE("halves: misaligned BF16 tensors are copied once, still in BF16, and run alike") {
  const std::filesystem::path dir = test::golden_dir() / "bf16_llama_mqa_half";
  test::TempDir tmp;
  const std::filesystem::path shifted = tmp.path / "shifted.safetensors";
  write_shifted(dir / "weights.safetensors", shifted);

  attn::ModelArgs a = attn::load_config(dir / "config.json");
  const attn::TransformerWeights moved = attn::load_weights(a, shifted);
  CHECK(moved.owned_blocks.size() == 7);  // the seven matrices, copied once
  CHECK(moved.layers[0].wq.type == attn::WeightType::bf16);
  const attn::RunOptions opts{1, 5, 2};
  const std::vector<float> x = attn::seeded_input(a, opts, 3);
  attn::Transformer mm = attn::make_transformer(a, attn::load_weights(a, shifted), 5);
  attn::Transformer ma =
      attn::make_transformer(a, attn::load_weights(a, dir / "weights.safetensors"), 5);
  const attn::RunOutputs om = attn::run(mm, x, opts, [](const attn::Event&) {});
  const attn::RunOutputs oa = attn::run(ma, x, opts, [](const attn::Event&) {});
  CHECK(same_bits(om.decode_output.data(), oa.decode_output.data(),
                  std::int64_t(oa.decode_output.size())));
}

TEST_CASE(
    "halves: a rank's block of a misaligned F16 matrix is copied in F16, element for element") {
  // Model parallel over 2 ranks: rows of wq/wk/wv/w1/w3, columns of wo/w2. Each rank holds only
  // its block, at 2 bytes an element as the memory estimate counts it (it was widened to F32).
  const std::filesystem::path dir = test::golden_dir() / "f16_llama_gqa_interleaved";
  test::TempDir tmp;
  const std::filesystem::path shifted = tmp.path / "shifted.safetensors";
  write_shifted(dir / "weights.safetensors", shifted);
  attn::ModelArgs a = attn::load_config(dir / "config.json");
  a.model_parallel_size = 2;
  REQUIRE(a.n_kv_heads % 2 == 0);
  for (int r = 0; r < 2; ++r) {
    const attn::Shard shard{r, 2};
    const attn::ModelArgs l = attn::local_args(a, shard);
    const attn::TransformerWeights moved = attn::load_weights(a, shifted, shard);
    const attn::TransformerWeights aligned =
        attn::load_weights(a, dir / "weights.safetensors", shard);
    const std::int64_t q = l.n_heads * l.head_dim(), kv = l.n_kv_heads * l.head_dim();
    const std::int64_t hidden = l.ffn_hidden(), dim = a.dim;
    CHECK(moved.owned_blocks.size() == std::size_t(7 * a.n_layers));
    for (std::size_t layer = 0; layer < moved.layers.size(); ++layer) {
      const attn::LayerWeights& m = moved.layers[layer];
      const attn::LayerWeights& w = aligned.layers[layer];
      const struct {
        const attn::Matrix &got, &want;
        std::int64_t rows, cols;
      } mats[] = {{m.wq, w.wq, q, dim},     {m.wk, w.wk, kv, dim},     {m.wv, w.wv, kv, dim},
                  {m.wo, w.wo, dim, q},     {m.w1, w.w1, hidden, dim}, {m.w3, w.w3, hidden, dim},
                  {m.w2, w.w2, dim, hidden}};
      for (const auto& t : mats) {
        CAPTURE(r);
        CAPTURE(layer);
        CHECK(t.got.type == attn::WeightType::f16);
        std::int64_t differ = 0;
        for (std::int64_t i = 0; i < t.rows; ++i)
          for (std::int64_t j = 0; j < t.cols; ++j)
            differ +=
                attn::element(t.got.row(i, t.cols), j) != attn::element(t.want.row(i, t.cols), j);
        CHECK(differ == 0);
      }
    }
  }
}
