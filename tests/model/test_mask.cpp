// Mask none, padding masks (ragged batches) and the attention probabilities.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "attn/engine/run.hpp"
#include "attn/error.hpp"
#include "attn/kernels/matmul.hpp"
#include "test_support.hpp"

namespace {

attn::ModelArgs small_args(attn::Block block, attn::Mask mask, attn::Rope rope) {
  attn::ModelArgs a = test::small_llama_args(block);
  a.rope = rope;
  a.mask = mask;
  a.attention_bias = block == attn::Block::encoder;
  a.max_seq_len = 160;
  return a;
}

struct Result {
  attn::RunOutputs out;
  std::vector<float> x;
};

Result run(const attn::ModelArgs& a, const attn::RunOptions& o, const std::vector<float>& x,
           const attn::Inspect& inspect = {}, const attn::Runtime& rt = attn::make_runtime(2)) {
  attn::Transformer m = attn::make_transformer(a, attn::seeded_weights(a, 3),
                                               o.batch * std::max<std::int64_t>(o.prefill, 1), rt);
  return {attn::run(
              m, x, o, [](const attn::Event&) {}, inspect),
          x};
}

// Output row of position t (batch row b) of a run: prefill rows, then one row per decode step.
const float* output_row(const attn::RunOutputs& out, const attn::RunOptions& o, std::int64_t dim,
                        std::int64_t b, std::int64_t t) {
  if (t < o.prefill) return out.prefill_output.data() + (b * o.prefill + t) * dim;
  return out.decode_output.data() + ((t - o.prefill) * o.batch + b) * dim;
}

// Sequence 1 of a batch of 2 is left-padded by `pad` positions; alone, it is the same sequence
// without them. RoPE none: positions shift, contents do not.
void check_ragged(const attn::ModelArgs& a, std::int64_t P, std::int64_t N, std::int64_t pad,
                  const attn::Runtime& rt = attn::make_runtime(2)) {
  const attn::RunOptions o{2, P, N};
  const std::int64_t T = P + N, dim = a.dim;
  const std::vector<float> x = attn::seeded_input(a, o, 11);
  attn::Inspect inspect;
  inspect.attention_mask.assign(std::size_t(2 * T), 1);
  for (std::int64_t t = 0; t < pad; ++t) inspect.attention_mask[std::size_t(T + t)] = 0;
  const Result batch = run(a, o, x, inspect, rt);

  const attn::RunOptions alone_o{1, P - pad, N};
  std::vector<float> alone_x(x.begin() + (T + pad) * dim, x.end());  // row 1 without its padding
  const Result alone = run(a, alone_o, alone_x, {}, rt);
  double worst = 0;
  for (std::int64_t t = pad; t < T; ++t) {
    const float* got = output_row(batch.out, o, dim, 1, t);
    const float* want = output_row(alone.out, alone_o, dim, 0, t - pad);
    const test::Diff d = test::compare(got, want, dim, {});
    worst = std::max(worst, d.worst_abs);
    CHECK(d.failures == 0);
  }
  // Padded queries (whose keys may all be padded) stay finite.
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t i = 0; i < dim; ++i)
      CHECK(std::isfinite(output_row(batch.out, o, dim, 1, t)[i]));
  MESSAGE("ragged " << std::string(attn::block_name(a.block)) << " mask "
                    << std::string(attn::mask_name(a.mask)) << " P " << P << " N " << N
                    << ": worst |batch - alone| " << worst);
}

}  // namespace

TEST_CASE("padding: a ragged batch gives each sequence's real positions its outputs alone") {
  for (auto block : {attn::Block::attention, attn::Block::llama, attn::Block::encoder})
    for (auto mask : {attn::Mask::causal, attn::Mask::none}) {
      const std::string block_text = attn::block_name(block);
      CAPTURE(block_text);
      const std::string mask_text = attn::mask_name(mask);
      CAPTURE(mask_text);
      check_ragged(small_args(block, mask, attn::Rope::none), 7, 3, 3);
    }
}

TEST_CASE("padding: mask none and causal across the prefill chunk boundary and in decode") {
  const attn::Runtime rt = attn::make_runtime(2, 0);  // every attention task in parallel
  for (std::int64_t P : {63, 64, 65, 66, 129})
    for (auto mask : {attn::Mask::causal, attn::Mask::none}) {
      CAPTURE(P);
      const std::string mask_text = attn::mask_name(mask);
      CAPTURE(mask_text);
      check_ragged(small_args(attn::Block::attention, mask, attn::Rope::none), P, 2, 2, rt);
    }
}

TEST_CASE("padding: a fully padded batch row gives finite outputs that attend uniformly") {
  for (auto mask : {attn::Mask::causal, attn::Mask::none}) {
    const attn::ModelArgs a = small_args(attn::Block::llama, mask, attn::Rope::interleaved);
    const attn::RunOptions o{2, 5, 2};
    attn::Inspect inspect;
    inspect.attention_mask.assign(14, 1);
    std::fill(inspect.attention_mask.begin() + 7, inspect.attention_mask.end(), 0);
    inspect.attention_weights = true;
    const Result r = run(a, o, attn::seeded_input(a, o, 5), inspect);
    for (float v : r.out.prefill_output) REQUIRE(std::isfinite(v));
    for (float v : r.out.decode_output) REQUIRE(std::isfinite(v));
    // Row 1, layer 0, head 0, query 2: uniform over the keys it sees.
    const float* p = r.out.attn_prefill[0].data() + (1 * a.n_heads + 0) * 25 + 2 * 5;
    const std::int64_t seen = mask == attn::Mask::causal ? 3 : 5;
    for (std::int64_t j = 0; j < seen; ++j) CHECK(p[j] == doctest::Approx(1.0 / double(seen)));
  }
}

TEST_CASE(
    "attention weights: rows sum to 1 and masked entries are 0 and decode rows equal a prefill's") {
  for (auto mask : {attn::Mask::causal, attn::Mask::none}) {
    const std::string mask_text = attn::mask_name(mask);
    CAPTURE(mask_text);
    const attn::ModelArgs a = small_args(attn::Block::llama, mask, attn::Rope::interleaved);
    const attn::RunOptions o{2, 6, 3};
    const std::int64_t P = 6, N = 3, H = a.n_heads;
    const std::vector<float> x = attn::seeded_input(a, o, 9);
    attn::Inspect inspect;
    inspect.attention_weights = true;
    inspect.attention_mask.assign(18, 1);
    inspect.attention_mask[9 + 1] = 0;  // row 1 pads position 1
    const Result r = run(a, o, x, inspect);
    // The same 9 positions as one prefill.
    const attn::RunOptions whole{2, P + N, 0};
    const Result w = run(a, whole, x, inspect);
    for (std::int64_t l = 0; l < a.n_layers; ++l)
      for (std::int64_t b = 0; b < 2; ++b)
        for (std::int64_t h = 0; h < H; ++h) {
          const float* pre = r.out.attn_prefill[std::size_t(l)].data() + (b * H + h) * P * P;
          for (std::int64_t i = 0; i < P; ++i) {
            double sum = 0;
            for (std::int64_t j = 0; j < P; ++j) {
              const float p = pre[i * P + j];
              sum += p;
              if ((mask == attn::Mask::causal && j > i) || (b == 1 && j == 1)) CHECK(p == 0.0f);
            }
            CHECK(std::fabs(sum - 1) <= 1e-6);
          }
          const float* longer = w.out.attn_prefill[std::size_t(l)].data() + (b * H + h) * 81;
          for (std::int64_t s = 1; s <= N; ++s) {
            const float* dec = r.out.attn_decode[std::size_t(s - 1)][std::size_t(l)].data() +
                               (b * H + h) * (P + s);
            double sum = 0;
            for (std::int64_t j = 0; j < P + s; ++j) sum += dec[j];
            CHECK(std::fabs(sum - 1) <= 1e-6);
            if (mask == attn::Mask::causal) {  // the prefill's row P+s-1 sees the same keys
              const test::Diff d =
                  test::compare(dec, longer + (P + s - 1) * 9, P + s, {1e-4, 1e-6});
              CHECK(d.failures == 0);
            }
          }
          // Under mask none a prefill position sees later ones, so layer 1's input differs
          // between the runs; layer 0's last decode row sees the same keys as the prefill's.
          if (mask == attn::Mask::none && l == 0) {
            const float* dec = r.out.attn_decode[std::size_t(N - 1)][std::size_t(l)].data() +
                               (b * H + h) * (P + N);
            CHECK(test::compare(dec, longer + (P + N - 1) * 9, P + N, {1e-4, 1e-6}).failures == 0);
          }
        }
  }
}

TEST_CASE("attention weights: the memory they need is known before work and limited") {
  attn::ModelArgs a = attn::seed_args();
  attn::RunOptions o{1, 7, 3};
  CHECK(attn::attention_weights_bytes(a, o) == 4 * 6 * (49 + 21 + 6));
  attn::Inspect inspect;
  inspect.attention_weights = true;
  CHECK_NOTHROW(attn::check_attention_weights(a, o, inspect));
  a.n_layers = 64;
  a.n_heads = 64;
  a.dim = 64;
  a.n_kv_heads = 64;
  a.max_seq_len = 4096;
  o = {1, 4096, 0};
  CHECK_THROWS_AS(attn::check_attention_weights(a, o, inspect), attn::InputError);
  inspect.attention_weights = false;
  CHECK_NOTHROW(attn::check_attention_weights(a, o, inspect));
}

// ---- The CLI: bad input exits 2 naming the culprit ----------------------------------------

namespace {

struct RawTensor {
  std::string name, dtype;
  std::vector<std::int64_t> shape;
  std::string bytes;
};

void write_raw(const std::filesystem::path& path, const std::vector<RawTensor>& tensors) {
  nlohmann::json h = nlohmann::json::object();
  std::string data;
  for (const RawTensor& t : tensors) {
    h[t.name] = {{"dtype", t.dtype},
                 {"shape", t.shape},
                 {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary);
  const std::uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << data;
}

template <typename T>
std::string bytes_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// x [2, 5, 18] for the built-in config, with the given attention_mask.
std::filesystem::path input_with_mask(const RawTensor& mask) {
  const auto path = test::temp_path("attn_mask_input.safetensors");
  write_raw(path, {{"x", "F32", {2, 5, 18}, bytes_of(std::vector<float>(180, 0.5f))}, mask});
  return path;
}

test::CliResult run_with(const std::filesystem::path& input, const std::string& extra = "") {
  return test::run_cli("run --input " + input.string() + " --prefill 3 --steps 2 " + extra);
}

}  // namespace

TEST_CASE("cli: attention_mask of every accepted dtype runs and the trace counts unmasked keys") {
  const std::vector<std::int64_t> i64 = {1, 1, 1, 1, 1, 1, 1, 0, 0, 1};
  const std::vector<std::int32_t> i32(i64.begin(), i64.end());
  const std::vector<float> f32(i64.begin(), i64.end());
  const std::vector<std::uint8_t> u8(i64.begin(), i64.end());
  for (const RawTensor& t : {RawTensor{"attention_mask", "I64", {2, 5}, bytes_of(i64)},
                             RawTensor{"attention_mask", "I32", {2, 5}, bytes_of(i32)},
                             RawTensor{"attention_mask", "F32", {2, 5}, bytes_of(f32)},
                             RawTensor{"attention_mask", "U8", {2, 5}, bytes_of(u8)},
                             RawTensor{"attention_mask", "BOOL", {2, 5}, bytes_of(u8)}}) {
    CAPTURE(t.dtype);
    const test::CliResult r = run_with(input_with_mask(t), "--json");
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("\"unmasked\":[3,2]") != std::string::npos);  // prefill: 3 and 2 of 3
    CHECK(r.out.find("\"unmasked\":[5,3]") != std::string::npos);  // step 2: 5 and 3 of 5
  }
}

TEST_CASE("cli: a bad attention_mask exits 2 naming the file and the tensor and the culprit") {
  const std::vector<std::uint8_t> ok(10, 1);
  std::vector<std::int64_t> two(10, 1);
  two[8] = 2;
  const struct {
    RawTensor mask;
    std::string says;
  } bad[] = {
      {{"attention_mask", "U8", {2, 4}, bytes_of(std::vector<std::uint8_t>(8, 1))}, "[2, 4]"},
      {{"attention_mask", "U8", {10}, bytes_of(ok)}, "expected shape [2, 5]"},
      {{"attention_mask", "I8", {2, 5}, bytes_of(ok)}, "got I8"},
      {{"attention_mask", "I64", {2, 5}, bytes_of(two)}, "at [1, 3]"},
  };
  for (const auto& c : bad) {
    const auto input = input_with_mask(c.mask);
    const test::CliResult r = run_with(input);
    CAPTURE(c.says);
    INFO(r.err);
    CHECK(r.status == 2);
    CHECK(r.err.find(input.string()) != std::string::npos);
    CHECK(r.err.find("attention_mask") != std::string::npos);
    CHECK(r.err.find(c.says) != std::string::npos);
  }
}

TEST_CASE("cli: an unknown --mask and --attention-weights over the limit exit 2") {
  test::CliResult r = test::run_cli("run --mask banana");
  CHECK(r.status == 2);
  CHECK(r.err.find("--mask") != std::string::npos);
  const auto cfg = test::temp_path("attn_mask_big.json");
  std::ofstream(cfg) << R"({"dim": 64, "n_heads": 64, "n_layers": 64, "rope": "none",
                           "max_batch_size": 1, "max_seq_len": 4096})";
  r = test::run_cli("run --config " + cfg.string() +
                    " --prefill 4096 --steps 0 --attention-weights");
  CHECK(r.status == 2);
  CHECK(r.err.find("--attention-weights") != std::string::npos);
  CHECK(r.err.find("1 GiB") != std::string::npos);
  std::filesystem::remove(cfg);
}

TEST_CASE("cli: --mask none changes the prefill and --attention-weights adds the probabilities") {
  const auto causal = test::temp_path("attn_mask_causal.safetensors");
  const auto none = test::temp_path("attn_mask_none.safetensors");
  REQUIRE(test::run_cli("run --attention-weights --dump " + causal.string()).status == 0);
  REQUIRE(test::run_cli("run --mask none --attention-weights --dump " + none.string()).status == 0);
  const attn::SafetensorsFile c = attn::open_safetensors(causal), n = attn::open_safetensors(none);
  CHECK(c.info("attn.0.prefill").shape == std::vector<std::int64_t>{1, 6, 7, 7});
  CHECK(c.info("attn.0.decode.3").shape == std::vector<std::int64_t>{1, 6, 1, 10});
  std::vector<float> sc, sn;
  const float* pc = attn::tensor_as_f32(c, "attn.0.prefill", sc);
  const float* pn = attn::tensor_as_f32(n, "attn.0.prefill", sn);
  CHECK(pc[1] == 0.0f);  // query 0 cannot see key 1 under the causal mask
  CHECK(pn[1] > 0.0f);
  std::filesystem::remove(causal);
  std::filesystem::remove(none);
}

TEST_CASE("config: mask and ffn_hidden and activation and norm_first and the encoder block") {
  const auto a = attn::parse_config(R"({"dim": 32, "n_heads": 8, "block": "encoder"})", "c.json");
  CHECK(a.attention_bias);
  CHECK(a.mask == attn::Mask::none);
  CHECK(a.rope == attn::Rope::none);
  CHECK(a.ffn_hidden() == 2048);
  CHECK(a.activation == attn::Activation::relu);
  CHECK_FALSE(a.norm_first);
  const auto b = attn::parse_config(
      R"({"dim": 32, "n_heads": 8, "ffn_hidden": 40, "mask": "none", "block": "encoder",
          "activation": "gelu", "norm_first": true})",
      "c.json");
  CHECK(b.ffn_hidden() == 40);
  CHECK(b.activation == attn::Activation::gelu);
  CHECK(b.norm_first);
  CHECK(
      attn::parse_config(R"({"dim": 32, "n_heads": 8, "ffn_hidden": 40})", "c.json").ffn_hidden() ==
      40);
  CHECK(attn::parse_config(R"({"dim": 32, "n_heads": 8})", "c.json").mask == attn::Mask::causal);
  const struct {
    const char* json;
    const char* key;
  } bad[] = {
      {R"({"dim": 32, "n_heads": 8, "mask": "banana"})", "'mask'"},
      {R"({"dim": 32, "n_heads": 8, "block": "encoder", "activation": "swish"})", "'activation'"},
      {R"({"dim": 32, "n_heads": 8, "block": "encoder", "attention_bias": false})",
       "'attention_bias'"},
      {R"({"dim": 32, "n_heads": 8, "ffn_hidden": 0})", "'ffn_hidden'"},
      {R"({"dim": 32, "n_heads": 8, "norm_first": 1})", "'norm_first'"},
  };
  for (const auto& c : bad) {
    CAPTURE(c.json);
    try {
      attn::parse_config(c.json, "c.json");
      FAIL("accepted");
    } catch (const attn::InputError& e) {
      CHECK(std::string(e.what()).find(c.key) != std::string::npos);
      CHECK(std::string(e.what()).find("c.json") != std::string::npos);
    }
  }
}

TEST_CASE("cli: the config trace shows mask and ffn_hidden and activation and norm_first") {
  const auto cfg = test::temp_path("attn_encoder.json");
  std::ofstream(cfg) << R"({"dim": 16, "n_heads": 4, "block": "encoder", "ffn_hidden": 24,
                           "activation": "gelu", "norm_first": true, "max_batch_size": 1,
                           "max_seq_len": 12})";
  test::CliResult r = test::run_cli("run --json --config " + cfg.string());
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out.substr(0, r.out.find('\n')));
  CHECK(j.at("mask") == "none");
  CHECK(j.at("ffn_hidden") == 24);
  CHECK(j.at("activation") == "gelu");
  CHECK(j.at("norm_first") == true);
  CHECK(j.at("block") == "encoder");
  r = test::run_cli("run --config " + cfg.string());
  CHECK(r.out.find(
            "block encoder, rope none, mask none, ffn_hidden 24, activation gelu, norm_first") !=
        std::string::npos);
  std::filesystem::remove(cfg);
}
