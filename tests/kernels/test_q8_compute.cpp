// --compute q8 (issue 52): Q8_0, Q4_K and Q6_K weights times the activations quantized to 8 bits
// as llama.cpp quantizes them, integer dot products. The quantized activations and the products
// are checked against llama.cpp's reference C written in numpy (tests/golden/make_q8_dot.py): the
// quantization to the bit, the products within the F32 accumulation's error; every output row
// has the same bits alone and inside any batch, prefill's tiles, and one or two threads; the
// refusals; and F32 weights under q8 stay exact.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/kernels/detail/q8_dot.hpp"
#include "attn/kernels/matmul.hpp"
#include "attn/model/rng.hpp"
#include "test_support.hpp"

namespace {

constexpr std::int64_t kM = 36, kN = 13;  // make_q8_dot.py's rows of x and of w

template <typename T>
std::vector<T> fixture(const std::string& name) {
  const std::filesystem::path path = test::golden_dir() / "q8_dot" / name;
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in, "missing fixture " << path.string() << " (tests/golden/make_q8_dot.py)");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

// compute q8 with `threads` threads, every parallel path taken; null where the CPU lacks VNNI.
bool runtime(int threads, attn::Runtime& rt) {
  if (!attn::q8_dot_native()) {
    MESSAGE("this CPU has no AVX512-VNNI: compute q8 is not run");
    return false;
  }
  rt = attn::make_runtime(threads, 0, "avx512", attn::Compute::q8);
  return true;
}

std::uint32_t bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

const char* name(attn::WeightType t) {
  return t == attn::WeightType::q8_0 ? "q8_0" : t == attn::WeightType::q4_k ? "q4_k" : "q6_k";
}

}  // namespace

TEST_CASE("q8 compute: activations quantize as llama.cpp's quantize_row_q8_0/q8_K_ref") {
  const attn::Q8Dot* dot = attn::q8_dot_native();
  if (!dot) {
    MESSAGE("this CPU has no AVX512-VNNI: compute q8 is not run");
    return;
  }
  for (const std::int64_t K : {32, 96, 256, 768}) {
    CAPTURE(K);
    const std::vector<float> x = fixture<float>("x_" + std::to_string(K) + ".f32");
    for (const attn::WeightType t : {attn::WeightType::q8_0, attn::WeightType::q4_k}) {
      const bool k = t == attn::WeightType::q4_k;
      if (k && K % 256) continue;
      const std::string base = std::string(k ? "q8_k_" : "q8_0_") + std::to_string(K);
      CAPTURE(base);
      const auto qs = fixture<std::int8_t>(base + ".qs");
      const auto d = fixture<float>(base + ".d");
      const std::int64_t row = attn::q8_row_bytes(t, K), blocks = K / (k ? 256 : 32);
      std::vector<std::uint8_t> out(std::size_t(kM * row));
      dot->quantize(t, x.data(), kM, K, out.data());
      std::int64_t bad_q = 0, bad_d = 0, bad_sums = 0;
      for (std::int64_t m = 0; m < kM; ++m) {
        const std::uint8_t* r = out.data() + m * row;
        for (std::int64_t i = 0; i < K; ++i) {  // Q8_0's quants are stored plus 128
          const int got = k ? int(std::int8_t(r[i])) : int(r[i]) - 128;
          bad_q += got != qs[std::size_t(m * K + i)];
        }
        for (std::int64_t b = 0; b < blocks; ++b) {
          float got;
          std::memcpy(&got, r + K + 4 * b, sizeof got);
          bad_d += bits(got) != bits(d[std::size_t(m * blocks + b)]);
        }
        if (!k) continue;
        const auto sums = fixture<std::int16_t>(base + ".sums");
        for (std::int64_t g = 0; g < K / 16; ++g) {
          std::int16_t got;
          std::memcpy(&got, r + K + 4 * blocks + 2 * g, sizeof got);
          bad_sums += got != sums[std::size_t(m * K / 16 + g)];
        }
      }
      CHECK(bad_q == 0);
      CHECK(bad_d == 0);
      CHECK(bad_sums == 0);
    }
  }
}

// Each (type, K): M = 1, 2, around the batch kernel's tiles and prefill's (33+ rows: tiles of
// up to 32), threads 1 and 2, the rows taken from the end of x so that M = 1 is not always row 0.
// Every product within (2 blocks + 8) 2^-24 of the sum of its terms' magnitudes of the reference
// (lane sums converted and added once a block, then a tree of 4), and every row's bits the same
// in every batch.
TEST_CASE("q8 compute: products against llama.cpp's reference dot products, batch-invariant") {
  attn::Runtime rts[2];
  if (!runtime(1, rts[0]) || !runtime(2, rts[1])) return;
  for (const attn::WeightType t :
       {attn::WeightType::q8_0, attn::WeightType::q4_k, attn::WeightType::q6_k}) {
    for (const std::int64_t K : {32, 96, 256, 768}) {
      if (t != attn::WeightType::q8_0 && K % 256) continue;
      const std::string base = std::string(name(t)) + "_" + std::to_string(K);
      CAPTURE(base);
      const std::vector<float> x = fixture<float>("x_" + std::to_string(K) + ".f32");
      const auto w = fixture<std::uint8_t>(base + ".blocks");
      const auto want = fixture<double>(base + ".y");
      const auto bound = fixture<double>(base + ".bound");
      const double blocks = double(K / attn::traits(t).block);
      std::map<std::int64_t, std::uint32_t> seen;  // m * kN + n: the first bits
      std::int64_t far = 0, differ = 0;
      double worst = 0;
      for (const std::int64_t M : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 36})
        for (const attn::Runtime& rt : rts) {
          const std::int64_t m0 = kM - M;
          std::vector<float> y(std::size_t(M * kN), -1.0f);
          std::vector<float> scratch(
              std::size_t(attn::scratch_floats(M, K, rt.threads, rt.compute)));
          const attn::Projection p{y.data(), attn::Matrix{w.data(), t, 0}, nullptr, kN};
          attn::linear(rt, {&p, 1}, x.data() + m0 * K, M, K, scratch.data());
          for (std::int64_t m = 0; m < M; ++m)
            for (std::int64_t n = 0; n < kN; ++n) {
              const std::size_t at = std::size_t((m0 + m) * kN + n);
              const double got = y[std::size_t(m * kN + n)];
              const double err = std::abs(got - want[at]) / std::max(bound[at], 1e-300);
              worst = std::max(worst, err);
              far += err > (2 * blocks + 8) * 0x1p-24;
              const auto [it, fresh] = seen.emplace(std::int64_t(at), bits(float(got)));
              differ += !fresh && it->second != bits(float(got));
            }
        }
      MESSAGE(base << ": worst error " << worst << " of the terms' magnitudes");
      CHECK(far == 0);
      CHECK(differ == 0);
    }
  }
}

TEST_CASE("q8 compute: accumulates onto y") {
  attn::Runtime rt;
  if (!runtime(2, rt)) return;
  const std::int64_t K = 256, M = 3;
  const std::vector<float> x = fixture<float>("x_256.f32");
  const auto w = fixture<std::uint8_t>("q4_k_256.blocks");
  std::vector<float> plain(std::size_t(M * kN)), added(std::size_t(M * kN), 1.5f);
  std::vector<float> scratch(std::size_t(attn::scratch_floats(M, K, rt.threads, rt.compute)));
  const attn::Projection p{plain.data(), attn::Matrix{w.data(), attn::WeightType::q4_k, 0}, nullptr,
                           kN};
  attn::linear(rt, {&p, 1}, x.data(), M, K, scratch.data());
  const attn::Projection a{added.data(), attn::Matrix{w.data(), attn::WeightType::q4_k, 0}, nullptr,
                           kN};
  attn::linear(rt, {&a, 1}, x.data(), M, K, scratch.data(), true);
  for (std::size_t i = 0; i < plain.size(); ++i) CHECK(added[i] == 1.5f + plain[i]);
}

TEST_CASE("q8 compute: F32 weights stay exact, and the refusals") {
  CHECK(attn::parse_compute("q8") == attn::Compute::q8);
  CHECK(std::string(attn::compute_name(attn::Compute::q8)) == "q8");
  CHECK_THROWS_AS(attn::parse_compute("q9"), attn::InputError);
  if (!attn::has_q8_dot()) {
    CHECK_THROWS_AS(attn::make_runtime(1, 0, "", attn::Compute::q8), attn::InputError);
    return;
  }
  CHECK_THROWS_AS(attn::make_runtime(1, 0, "avx2", attn::Compute::q8), attn::InputError);
  CHECK_THROWS_AS(attn::make_runtime(1, 0, "generic", attn::Compute::q8), attn::InputError);
  attn::Runtime q8;
  REQUIRE(runtime(2, q8));
  const attn::Runtime exact = attn::make_runtime(2, 0, "avx512");
  for (const std::int64_t M : {1, 5, 40}) {
    CAPTURE(M);
    const std::int64_t K = 70, n = 33;
    std::vector<float> w(std::size_t(n * K)), x(std::size_t(M * K));
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = float(attn::uniform_pm1(25, 1, i));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(attn::uniform_pm1(26, 1, i));
    std::vector<float> got[2];
    for (int r = 0; r < 2; ++r) {
      const attn::Runtime& rt = r == 0 ? exact : q8;
      got[r].assign(std::size_t(M * n), 0.0f);
      std::vector<float> scratch(std::size_t(attn::scratch_floats(M, K, rt.threads, rt.compute)));
      const attn::Projection p{got[r].data(), attn::Matrix{w.data()}, nullptr, n};
      attn::linear(rt, {&p, 1}, x.data(), M, K, scratch.data());
    }
    CHECK(std::memcmp(got[0].data(), got[1].data(), got[0].size() * sizeof(float)) == 0);
  }
}

TEST_CASE("q8 compute: --compute q8 runs F32 weights exactly, a bad value exits 2") {
  const test::CliResult bad = test::run_cli("run --compute q9");
  CHECK(bad.status == 2);
  CHECK(bad.err.find("--compute") != std::string::npos);
  const std::string f32 = test::temp_path("q8_compute_f32.safetensors").string(),
                    q8 = test::temp_path("q8_compute_q8.safetensors").string();
  REQUIRE(test::run_cli("run -t 2 --compute f32 --dump " + f32).status == 0);
  const test::CliResult r = test::run_cli("run -t 2 --compute q8 --dump " + q8);
  if (!attn::has_q8_dot()) {  // refused, the flag named
    CHECK(r.status == 2);
    CHECK(r.err.find("--compute") != std::string::npos);
    return;
  }
  REQUIRE(r.status == 0);
  // the seed notebook's F32 weights: the exact kernels, the same bits in every tensor
  const auto bytes = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  CHECK(bytes(q8) == bytes(f32));
}

TEST_CASE("q8 compute: beside an F32 matrix sharing x, each gives the bits it gives alone") {
  attn::Runtime q8;
  if (!runtime(2, q8)) return;
  const attn::Runtime exact = attn::make_runtime(2, 0, "avx512");
  const std::int64_t K = 256;
  const std::vector<float> x = fixture<float>("x_256.f32");
  const auto w = fixture<std::uint8_t>("q4_k_256.blocks");
  std::vector<float> wf(std::size_t(7 * K));
  for (std::size_t i = 0; i < wf.size(); ++i) wf[i] = float(attn::uniform_pm1(27, 1, i));
  for (const std::int64_t M : {1, 3, 36}) {
    CAPTURE(M);
    std::vector<float> scratch(std::size_t(attn::scratch_floats(M, K, 2, attn::Compute::q8)));
    std::vector<float> both_q(std::size_t(M * kN)), both_f(std::size_t(M * 7));
    std::vector<float> alone_q(both_q.size()), alone_f(both_f.size());
    const attn::Matrix wq{w.data(), attn::WeightType::q4_k, 0};
    const attn::Projection both[2] = {{both_q.data(), wq, nullptr, kN},
                                      {both_f.data(), attn::Matrix{wf.data()}, nullptr, 7}};
    attn::linear(q8, both, x.data(), M, K, scratch.data());
    const attn::Projection pq{alone_q.data(), wq, nullptr, kN};
    attn::linear(q8, {&pq, 1}, x.data(), M, K, scratch.data());
    const attn::Projection pf{alone_f.data(), attn::Matrix{wf.data()}, nullptr, 7};
    attn::linear(exact, {&pf, 1}, x.data(), M, K, scratch.data());
    CHECK(std::memcmp(both_q.data(), alone_q.data(), both_q.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(both_f.data(), alone_f.data(), both_f.size() * sizeof(float)) == 0);
  }
}

// linear() puts x quantized after the F32 scratch (64-byte aligned): scratch_floats counts it for
// every K up to k_max, whichever blocks K and k_max are made of (the FFN's hidden size need not
// be a multiple of 32 where the attention's dim is).
TEST_CASE("q8 compute: the scratch holds x quantized for any K up to k_max") {
  for (const std::int64_t M : {1, 5, 32, 40, 512})
    for (const std::int64_t k_max : {256, 300, 770, 14336})
      for (const std::int64_t K : {32, 96, 256, 288, 768, 14336}) {
        if (K > k_max) continue;
        CAPTURE(M);
        CAPTURE(k_max);
        CAPTURE(K);
        const std::int64_t need = std::max(attn::pack_floats(1, K), attn::pack_floats(M, K)) + 16 +
                                  (attn::q8_input_bytes(M, K) + 3) / 4;
        CHECK(attn::scratch_floats(M, k_max, 2, attn::Compute::q8) >= need);
      }
}
