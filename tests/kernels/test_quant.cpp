// ggml's quantized blocks (issues 36 and 48): Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K,
// Q4_K, Q5_K, Q6_K and IQ4_XS widened exactly as llama.cpp's dequantize_row_* (the fixtures of
// tests/golden/make_quant.py: gguf-py's numpy dequantization, checked there against ggml's C
// functions), Q8_0 and Q4_0 stored as quantize_row_*_ref stores them; a model over quantized
// matrices gives the bits of the same model over their dequantized F32 copies, and holds them at
// their bytes, read in place; so do llama-quantize's files of each type against their F32 twins
// dequantized by gguf-py (tests/golden/make_quant_models.py, where llama.cpp's build is cached).
// The products' bits on every path, kernel set and shape are the registry's cases
// (kernels/test_kernel_cases.cpp).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "attn/engine/run.hpp"
#include "attn/engine/session.hpp"
#include "attn/kernels/matmul.hpp"
#include "attn/model/model.hpp"
#include "attn/model/weights.hpp"
#include "test_support.hpp"

namespace {

using attn::WeightType;

// Every row of ggml's blocks in the traits table.
const std::vector<WeightType> kBlockTypes = [] {
  std::vector<WeightType> v;
  for (const attn::WeightTypeTraits& t : attn::kWeightTypeTraits)
    if (t.block > 1) v.push_back(t.type);
  return v;
}();

std::string lower(const char* name) {
  std::string s = name;
  for (char& c : s) c = char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

template <typename T>
std::vector<T> read_raw(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in, "missing fixture " << path.string() << " (tests/golden/make_quant.py)");
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

std::filesystem::path fixture(WeightType t, const char* ext) {
  return test::golden_dir() / "quant" / (lower(attn::weight_type_name(t)) + ext);
}

bool same_bits(const float* a, const float* b, std::int64_t n) {
  return std::memcmp(a, b, std::size_t(n) * sizeof(float)) == 0;
}

// The index of the first differing value, or -1.
std::int64_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return std::int64_t(i);
  return a.size() == b.size() ? -1 : std::int64_t(std::min(a.size(), b.size()));
}

}  // namespace

TEST_CASE("quant: every block widens to gguf-py's (and ggml's) dequantized bits") {
  for (WeightType t : kBlockTypes) {
    const attn::WeightTypeTraits& tt = attn::traits(t);
    const std::string name = tt.name;
    CAPTURE(name);
    const std::vector<std::uint8_t> blocks = read_raw<std::uint8_t>(fixture(t, ".blocks"));
    const std::vector<float> want = read_raw<float>(fixture(t, ".f32"));
    const std::int64_t n_blocks = std::int64_t(blocks.size()) / tt.block_bytes;
    REQUIRE(n_blocks * tt.block_bytes == std::int64_t(blocks.size()));
    REQUIRE(std::int64_t(want.size()) == n_blocks * tt.block);
    std::vector<float> got(want.size(), -1.0f);
    tt.to_f32(blocks.data(), std::int64_t(want.size()), got.data());
    CHECK(first_difference(got, want) == -1);
    CHECK(tt.first_non_finite(blocks.data(), std::int64_t(want.size())) == -1);
    // Each kernel set's widening (the products' tiles, embedding rows): 10 rows of 60 blocks,
    // and the same rows strided (a column block of a matrix twice as wide).
    const std::int64_t rows = 10, K = n_blocks / rows * tt.block;
    REQUIRE(rows * K == std::int64_t(want.size()));
    for (const std::string& set : test::kernel_names()) {
      CAPTURE(set);
      std::vector<float> wide(want.size(), -1.0f);
      attn::find_kernels(set)->typed(t).widen(blocks.data(), K, rows, K, wide.data());
      CHECK(first_difference(wide, want) == -1);
      std::vector<float> half(std::size_t(rows * K / 2), -1.0f), expect(half.size());
      attn::find_kernels(set)->typed(t).widen(blocks.data(), K, rows, K / 2, half.data());
      for (std::int64_t r = 0; r < rows; ++r)
        std::memcpy(expect.data() + r * K / 2, want.data() + r * K, std::size_t(K / 2) * 4);
      if ((K / 2) % tt.block == 0) CHECK(first_difference(half, expect) == -1);
    }
    // element() widens one weight's block.
    const attn::Matrix m{blocks.data(), t};
    for (std::int64_t i : {std::int64_t(0), tt.block - 1, tt.block, 7 * tt.block + 5})
      CHECK(std::memcmp(&want[std::size_t(i)], &(const float&)attn::element(m, i), 4) == 0);
  }
}

TEST_CASE("quant: Q8_0 and Q4_0 store as ggml's reference quantizers (gguf-py's bytes)") {
  for (WeightType t : {WeightType::q8_0, WeightType::q4_0}) {
    const attn::WeightTypeTraits& tt = attn::traits(t);
    const std::string name = tt.name;
    CAPTURE(name);
    const std::vector<float> x = read_raw<float>(fixture(t, ".input"));
    const std::vector<std::uint8_t> want = read_raw<std::uint8_t>(fixture(t, ".stored"));
    REQUIRE(std::int64_t(x.size()) / tt.block * tt.block_bytes == std::int64_t(want.size()));
    std::vector<std::uint8_t> got(want.size(), 0xAA);
    REQUIRE(bool(tt.from_f32));
    tt.from_f32(x.data(), std::int64_t(x.size()), got.data());
    std::int64_t differ = 0;
    for (std::size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
    CHECK(differ == 0);
  }
  for (WeightType t : kBlockTypes)
    if (t != WeightType::q8_0 && t != WeightType::q4_0)
      CHECK_FALSE(bool(attn::traits(t).from_f32));  // read from files only
}

TEST_CASE("quant: a NaN or Inf scale is found at its block's first weight") {
  for (WeightType t : kBlockTypes) {
    const attn::WeightTypeTraits& tt = attn::traits(t);
    const std::string name = tt.name;
    CAPTURE(name);
    std::vector<std::uint8_t> blocks = read_raw<std::uint8_t>(fixture(t, ".blocks"));
    const std::int64_t n = 8 * tt.block;
    // The F16 fields: d, and the min where the block has one (ggml-common.h's offsets).
    const std::int64_t d_at = std::map<WeightType, std::int64_t>{
        {WeightType::q6_k, 208}, {WeightType::q2_k, 80}, {WeightType::q3_k, 108}}[t];
    const std::int64_t m_at = std::map<WeightType, std::int64_t>{{WeightType::q4_k, 2},
                                                                 {WeightType::q5_k, 2},
                                                                 {WeightType::q4_1, 2},
                                                                 {WeightType::q5_1, 2},
                                                                 {WeightType::q2_k, 82}}[t];
    REQUIRE(tt.scale_at == d_at);
    REQUIRE(tt.min_at == (m_at ? m_at : -1));
    std::vector<std::int64_t> scales = {d_at};
    if (m_at) scales.push_back(m_at);
    for (std::int64_t off : scales)
      for (std::uint16_t bad :
           {std::uint16_t(0x7C00), std::uint16_t(0xFC00), std::uint16_t(0x7E01)}) {
        std::vector<std::uint8_t> b(blocks.begin(), blocks.begin() + 8 * tt.block_bytes);
        b[std::size_t(5 * tt.block_bytes + off)] = std::uint8_t(bad);
        b[std::size_t(5 * tt.block_bytes + off + 1)] = std::uint8_t(bad >> 8);
        CHECK(tt.first_non_finite(b.data(), n) == 5 * tt.block);
      }
  }
}

TEST_CASE("quant: ggml's type ids, the names and the refusals") {
  // ggml.h's enum ggml_type.
  const std::pair<std::uint32_t, const char*> ids[] = {
      {8, "Q8_0"}, {2, "Q4_0"}, {12, "Q4_K"}, {13, "Q5_K"}, {14, "Q6_K"},   {3, "Q4_1"},
      {6, "Q5_0"}, {7, "Q5_1"}, {10, "Q2_K"}, {11, "Q3_K"}, {20, "IQ4_NL"}, {23, "IQ4_XS"}};
  for (const auto& [id, name] : ids) {
    const std::string type = name;
    CAPTURE(type);
    REQUIRE(attn::weight_type_of_ggml(id));
    CHECK(std::string(attn::weight_type_name(*attn::weight_type_of_ggml(id))) == name);
    CHECK(attn::find_weight_type(lower(name)) == attn::weight_type_of_ggml(id));
    CHECK(attn::weight_alignment(*attn::weight_type_of_ggml(id)) == 2);
  }
  CHECK(kBlockTypes.size() == std::size(ids));
  for (std::uint32_t other : {9u, 15u, 16u, 21u, 39u, 1000u})  // Q8_1, Q8_K, IQ2_XXS, ...
    CHECK_FALSE(attn::weight_type_of_ggml(other));
  // Drawing weights needs a quantizer: the K-quants are refused, naming the setting.
  attn::ModelArgs a;
  a.dim = 256;
  a.n_layers = 1;
  a.n_heads = 4;
  a.n_kv_heads = 2;
  a.ffn_hidden_set = 512;
  a.max_seq_len = 8;
  try {
    (void)attn::seeded_weights(a, 1, {}, WeightType::q4_k);
    FAIL("Q4_K weights were drawn");
  } catch (const attn::InputError& e) {
    CHECK(std::string(e.what()).find("Q4_K") != std::string::npos);
    CHECK(e.setting == "weight_types");
  }
}

namespace {

// llama layers whose every matrix dimension is whole blocks of 256, with a token model.
attn::ModelArgs block_args() {
  attn::ModelArgs a;
  a.dim = 256;
  a.n_layers = 2;
  a.n_heads = 4;
  a.n_kv_heads = 2;
  a.ffn_hidden_set = 512;
  a.vocab_size = 64;
  a.max_batch_size = 2;
  a.max_seq_len = 48;
  return a;
}

// Tokens in and logits out where there is a vocabulary.
attn::ModelEnds block_ends(const attn::ModelArgs& a) {
  return {a.vocab_size > 0, a.vocab_size > 0};
}

// A row of `cols` weights in type t of magnitude about `bound`: Q8_0 and Q4_0 quantized from
// uniform draws; the K-quants as random blocks (every quant drawn) with scales that keep the
// weights near the bound.
std::vector<std::uint8_t> draw_row(WeightType t, std::int64_t cols, float bound,
                                   std::uint64_t& state) {
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return std::uint32_t(state >> 33);
  };
  const attn::WeightTypeTraits& tt = attn::traits(t);
  std::vector<std::uint8_t> row(attn::weight_bytes(t, cols, "test row"));
  if (tt.from_f32) {
    std::vector<float> x(static_cast<std::size_t>(cols));
    for (float& v : x) v = bound * (float(next() % 20001) / 10000.0f - 1.0f);
    tt.from_f32(x.data(), cols, row.data());
    return row;
  }
  for (std::uint8_t& b : row) b = std::uint8_t(next());
  for (std::int64_t b = 0; b < cols / tt.block; ++b) {
    std::uint8_t* blk = row.data() + b * tt.block_bytes;
    auto put = [](std::uint8_t* p, float v) {
      const std::uint16_t h = attn::f32_to_f16(v);
      p[0] = std::uint8_t(h);
      p[1] = std::uint8_t(h >> 8);
    };
    // Q4_K, Q5_K: d * sc * q up to 63 x 31, less dmin * m; Q6_K: d * sc * q up to 127 x 32.
    put(blk + tt.scale_at, t == WeightType::q6_k ? bound / 4000 : bound / 1000);
    if (tt.min_at >= 0) put(blk + tt.min_at, bound / 2000);
  }
  return row;
}

// The config's tensors in memory twice: `quant` with the matrices in type t, `wide` with them
// dequantized to F32 (traits' to_f32), the vectors the same F32 values in both.
void make_sources(const attn::ModelArgs& a, WeightType t, test::MemorySource& quant,
                  test::MemorySource& wide) {
  std::vector<attn::LayerWeights> layers(std::size_t(a.n_layers));
  attn::TokenWeights tokens;
  std::vector<attn::TensorSpec> specs = attn::tensor_specs(a, layers);
  for (const attn::TensorSpec& s : attn::token_tensor_specs(a, block_ends(a), tokens))
    specs.push_back(s);
  std::uint64_t state = 42;
  for (const attn::TensorSpec& s : specs) {
    if (quant.contains(s.name)) continue;  // a tied head
    const std::int64_t rows = s.shape[0], cols = s.shape.size() == 2 ? s.shape[1] : 1;
    test::MemorySource::Held f32{"F32", WeightType::f32, s.shape, {}};
    f32.bytes.resize(std::size_t(rows * cols * 4));
    if (!s.slot.matrix) {  // norms near 1
      for (std::int64_t i = 0; i < rows * cols; ++i) {
        const float v = 1.0f + float(i % 7) / 64;
        std::memcpy(f32.bytes.data() + 4 * i, &v, 4);
      }
      quant.tensors[s.name] = f32;
      wide.tensors[s.name] = f32;
      continue;
    }
    test::MemorySource::Held q{attn::weight_type_name(t), t, s.shape, {}};
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::vector<std::uint8_t> row = draw_row(t, cols, 1.0f / 16, state);
      q.bytes.insert(q.bytes.end(), row.begin(), row.end());
      attn::traits(t).to_f32(row.data(), cols,
                             reinterpret_cast<float*>(f32.bytes.data()) + r * cols);
    }
    quant.tensors[s.name] = std::move(q);
    wide.tensors[s.name] = std::move(f32);
  }
}

}  // namespace

TEST_CASE("quant: a model over quantized matrices gives the bits of its dequantized F32 twin") {
  const attn::ModelArgs a = block_args();
  for (WeightType t : kBlockTypes) {
    const std::string name = attn::weight_type_name(t);
    CAPTURE(name);
    auto quant = std::make_unique<test::MemorySource>("memory.gguf"),
         wide = std::make_unique<test::MemorySource>("memory.gguf");
    make_sources(a, t, *quant, *wide);
    // Read in place: every matrix a view of the source's bytes, no F32 copy of any.
    const test::MemorySource& held = *quant;
    attn::TransformerWeights w = attn::load_weights(a, {std::move(quant)}, {}, block_ends(a));
    CHECK(w.blocks);
    std::uint64_t stored = 0, f32_owned = 0;
    for (const auto& [n, h] : held.tensors) stored += h.bytes.size();
    for (const std::vector<float>& o : w.owned) f32_owned += o.size() * 4;
    CHECK(w.owned_blocks.empty());
    CHECK(f32_owned == 0);
    CHECK(w.bytes == stored);
    for (const attn::LayerWeights& l : w.layers)
      for (const attn::Matrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w2, &l.w3}) {
        CHECK(m->type == t);
        bool in_source = false;
        for (const auto& [n, h] : held.tensors) in_source |= m->data == h.bytes.data();
        CHECK(in_source);
      }
    CHECK(w.tokens.tok_embeddings.type == t);
    // Prefill 2 x 20 rows (the GEMM or sgemm over tiles), then batched decode of 2; prefill 5
    // (the batched kernel) and gemv decode; on 1 and 2 threads; tokens in, logits out.
    for (int threads : {1, 2})
      for (const std::pair<int, int>& shape : {std::pair{2, 20}, std::pair{1, 5}}) {
        const int bsz = shape.first, seqlen = shape.second;  // clang 14: no bindings in CAPTURE
        CAPTURE(threads);
        CAPTURE(seqlen);
        const attn::Runtime rt = attn::make_runtime(threads, 0);
        auto q2 = std::make_unique<test::MemorySource>("memory.gguf"),
             w2 = std::make_unique<test::MemorySource>("memory.gguf");
        make_sources(a, t, *q2, *w2);
        attn::Transformer mq = attn::make_transformer(
            a, attn::load_weights(a, {std::move(q2)}, {}, block_ends(a)), bsz * seqlen, rt);
        attn::Transformer mw = attn::make_transformer(
            a, attn::load_weights(a, {std::move(w2)}, {}, block_ends(a)), bsz * seqlen, rt);
        std::vector<std::int32_t> tokens(std::size_t(bsz * seqlen));
        for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = std::int32_t(i * 7 % 64);
        std::vector<float> lq(std::size_t(bsz * seqlen * a.vocab_size)), lw(lq.size());
        attn::forward(mq, tokens.data(), bsz, seqlen, 0, lq.data(), true);
        attn::forward(mw, tokens.data(), bsz, seqlen, 0, lw.data(), true);
        CHECK(same_bits(lq.data(), lw.data(), std::int64_t(lq.size())));
        for (std::int64_t step = 0; step < 3; ++step) {  // decode: one token per sequence
          std::vector<std::int32_t> next(std::size_t(bsz), std::int32_t(step + 3));
          attn::forward(mq, next.data(), bsz, 1, seqlen + step, lq.data());
          attn::forward(mw, next.data(), bsz, 1, seqlen + step, lw.data());
          CHECK(same_bits(lq.data(), lw.data(), bsz * a.vocab_size));
        }
      }
  }
}

TEST_CASE("quant: a tensor of a ggml type without a row is refused naming tensor and type") {
  const attn::ModelArgs a = block_args();
  auto quant = std::make_unique<test::MemorySource>("memory.gguf"),
       wide = std::make_unique<test::MemorySource>("memory.gguf");
  make_sources(a, WeightType::q8_0, *quant, *wide);
  test::MemorySource::Held& wq = quant->tensors.at("layers.0.attention.wq.weight");
  wq.dtype = "IQ2_XXS";  // ggml type 16: no row reads it
  wq.type = std::nullopt;
  try {
    (void)attn::load_weights(a, {std::move(quant)}, {}, block_ends(a));
    FAIL("an IQ2_XXS tensor was loaded");
  } catch (const attn::InputError& e) {
    const std::string msg = e.what();
    CAPTURE(msg);
    CHECK(msg.find("layers.0.attention.wq.weight") != std::string::npos);
    CHECK(msg.find("IQ2_XXS") != std::string::npos);
  }
}

TEST_CASE("quant: a rank's block of a quantized matrix is a view on block boundaries") {
  attn::ModelArgs a = block_args();
  a.vocab_size = 0;
  for (int r = 0; r < 2; ++r) {
    CAPTURE(r);
    auto quant = std::make_unique<test::MemorySource>("memory.gguf"),
         wide = std::make_unique<test::MemorySource>("memory.gguf");
    make_sources(a, WeightType::q8_0, *quant, *wide);
    const attn::TransformerWeights whole = attn::load_weights(a, {std::move(wide)});
    const attn::TransformerWeights part = attn::load_weights(a, {std::move(quant)}, {r, 2});
    CHECK(part.owned_blocks.empty());  // wo's and w2's columns strided in place, not copied
    // wq: this rank's 128 rows of 256; wo and w2: its half of the columns (128 of 256, 256 of
    // 512), each row a strided run of whole Q8_0 blocks.
    struct Slice {
      const attn::Matrix &p, &w;
      std::int64_t rows, cols, cols_whole, row0, col0;
    };
    const attn::LayerWeights &pl = part.layers[1], &wl = whole.layers[1];
    const Slice slices[] = {{pl.wq, wl.wq, 128, 256, 256, 128 * r, 0},
                            {pl.wo, wl.wo, 256, 128, 256, 0, 128 * r},
                            {pl.w2, wl.w2, 256, 256, 512, 0, 256 * r}};
    for (const Slice& s : slices) {
      CHECK(s.p.type == WeightType::q8_0);
      std::int64_t bad = 0;
      for (std::int64_t i = 0; i < s.rows; ++i)
        for (std::int64_t j = 0; j < s.cols; ++j)
          bad += attn::element(s.p.row(i, s.cols), j) !=
                 attn::element(s.w, (s.row0 + i) * s.cols_whole + s.col0 + j);
      CHECK(bad == 0);
    }
  }
  // Q4_K's blocks are 256 weights: a rank's 128 columns of wo would end inside one.
  auto quant = std::make_unique<test::MemorySource>("memory.gguf"),
       wide = std::make_unique<test::MemorySource>("memory.gguf");
  make_sources(a, WeightType::q4_k, *quant, *wide);
  CHECK_THROWS_WITH_AS(attn::load_weights(a, {std::move(quant)}, {1, 2}),
                       doctest::Contains("Q4_K rows are blocks of 256 weights"), attn::InputError);
}

namespace {

namespace fs = std::filesystem;

// llama.cpp's cached build (bench/llama_cpp.sh), complete when its stamp is there.
fs::path llama_cpp_cache() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const fs::path cache = xdg && *xdg ? fs::path(xdg) : fs::path(home ? home : "/") / ".cache";
  return cache / "attn-cli" / "llama.cpp" / "3.22.1";
}

// tests/golden/make_quant_models.py's files, made once per test process; empty (and a message
// why) without llama.cpp's build or gguf-py's numpy.
const fs::path& quant_models() {
  static const fs::path dir = [] {
    const fs::path cache = llama_cpp_cache();
    if (!fs::exists(cache / "build" / ".built")) {
      MESSAGE("SKIP: no llama.cpp build at " << cache.string() << "/build (bench/llama_cpp.sh)");
      return fs::path();
    }
    const fs::path out = test::temp_path("quant_models");
    const test::CliResult r = test::run_shell(
        "/usr/bin/python3 " + (test::golden_dir() / "make_quant_models.py").string() + " " +
        out.string());
    if (r.status != 0) {
      MESSAGE("make_quant_models.py failed (" << r.status << "): " << r.err);
      return fs::path();
    }
    return out;
  }();
  return dir;
}

}  // namespace

TEST_CASE("quant: llama-quantize's files of each type give the bits of their gguf-py F32 twins") {
  const fs::path& dir = quant_models();
  if (dir.empty()) return;
  // The type each llama-quantize type is about (its mixture keeps F32 norms, may put Q6_K in
  // output.weight and, for the K mixtures, other K-quants in some matrices).
  const std::pair<const char*, const char*> types[] = {
      {"q4_1", "Q4_1"},     {"q5_0", "Q5_0"}, {"q5_1", "Q5_1"},
      {"q3_k_m", "Q3_K"},   {"q2_k", "Q2_K"}, {"iq4_nl", "IQ4_NL"},
      {"iq4_xs", "IQ4_XS"}, {"f16", "F16"},   {"bf16", "BF16"}};
  std::vector<std::int32_t> prompt(40);
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = std::int32_t(3 + (i * 37) % 317);
  constexpr std::int64_t kVocab = 320;
  for (const auto& [file, type_name] : types) {
    const std::string type = type_name;
    CAPTURE(type);
    std::ifstream held(dir / (std::string(file) + ".types"));
    const std::string held_types((std::istreambuf_iterator<char>(held)), {});
    REQUIRE(held_types.find(type + "\n") != std::string::npos);
    const std::optional<WeightType> wt = attn::find_weight_type(type);
    REQUIRE(wt);
    bool seen = false;
    for (int threads : {1, 2}) {
      CAPTURE(threads);
      attn::ModelSpec qs = test::spec_of(dir / (std::string(file) + ".gguf"), {}, threads);
      attn::ModelSpec fs = test::spec_of(dir / (std::string(file) + "-f32.gguf"), {}, threads);
      attn::Session q = attn::open_session(qs, {1, 64, 8});
      attn::Session f = attn::open_session(fs, {1, 64, 8});
      for (const attn::LayerWeights& l : q.model.weights.layers)
        for (const attn::Matrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w2, &l.w3})
          seen |= m->type == *wt;
      REQUIRE(f.model.weights.layers[0].wq.type == WeightType::f32);
      // Prefill of 40 (the GEMM on widened tiles), of 5 (the batched kernel), then decode (gemv).
      std::vector<float> a(40 * kVocab), b(40 * kVocab);
      for (std::int64_t n : {40, 5}) {
        attn::reset(q);
        attn::reset(f);
        attn::forward_tokens(q, prompt.data(), 1, n, 0, a.data(), true);
        attn::forward_tokens(f, prompt.data(), 1, n, 0, b.data(), true);
        CHECK(std::memcmp(a.data(), b.data(), std::size_t(n * kVocab) * 4) == 0);
      }
      float spread = 0;  // logits over several units: a wrong weight would move them
      for (std::int64_t i = 0; i < kVocab; ++i) spread = std::max(spread, std::fabs(a[i]));
      CHECK(spread > 2.0f);
      for (std::int32_t t : {11, 300, 1, 7}) {
        const std::int64_t pos = q.filled;
        attn::forward_tokens(q, &t, 1, 1, pos, a.data(), false);
        attn::forward_tokens(f, &t, 1, 1, pos, b.data(), false);
        CHECK(std::memcmp(a.data(), b.data(), kVocab * 4) == 0);
      }
    }
    CHECK(seen);  // the layers hold the type, read in place
  }
}

TEST_CASE("quant: a GGUF tensor of a ggml type without a row is refused naming tensor and type") {
  const fs::path& dir = quant_models();
  if (dir.empty()) return;
  try {
    (void)attn::open_session(test::spec_of(dir / "other.gguf"), {1, 64, 8});
    FAIL("a Q8_1 tensor was loaded");
  } catch (const attn::InputError& e) {
    const std::string msg = e.what();
    CAPTURE(msg);
    CHECK(msg.find("attn_q") != std::string::npos);
    CHECK(msg.find("Q8_1") != std::string::npos);
  }
}
