// --compute bf16 (issue 23): BF16 weights times activations rounded to BF16 by vdpbf16ps. The
// rounding is checked against PyTorch's .bfloat16() (tests/golden/halves, make_halves.py), a BF16
// layer against PyTorch's float64 reference, and the refusals. The products over the shape space
// the kernels choose paths by are cases of the registry (kernels/test_kernel_cases.cpp, Op::bf16).
// Each runs the kernels with vdpbf16ps where the CPU has it, and with its emulation by FMAs on
// every AVX-512 CPU (bf16_dot_emulated), so the kernels' blocking is tested on CPUs without it.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "attn/engine/run.hpp"
#include "attn/error.hpp"
#include "attn/io/safetensors.hpp"
#include "attn/kernels/detail/bf16_dot.hpp"
#include "attn/kernels/matmul.hpp"
#include "attn/model/rng.hpp"
#include "test_support.hpp"

namespace {

// The kernels this CPU runs: vdpbf16ps, its emulation, or (without AVX-512BW) none.
struct Dot {
  std::string name;
  const attn::Bf16Dot* kernels;
};

std::vector<Dot> dots() {
  std::vector<Dot> out;
  if (const attn::Bf16Dot* d = attn::bf16_dot_native()) out.push_back({"vdpbf16ps", d});
  if (const attn::Bf16Dot* d = attn::bf16_dot_emulated()) out.push_back({"emulated", d});
  if (!attn::has_bf16_dot()) MESSAGE("this CPU has no AVX512-BF16: its emulation runs instead");
  if (out.empty()) MESSAGE("this CPU has no AVX-512BW: the BF16 kernels are not run");
  return out;
}

// compute bf16 on `dot` with `threads` threads, every parallel path taken.
attn::Runtime runtime(const Dot& dot, int threads) {
  attn::Runtime rt = attn::make_runtime(threads, 0);
  rt.compute = attn::Compute::bf16;
  rt.bf16_dot = dot.kernels;
  return rt;
}

// x rounded as PyTorch's .bfloat16() rounds it (tests/golden/halves), by dot's round and pack.
void check_rounding(const attn::Bf16Dot& dot) {
  const attn::SafetensorsFile f =
      attn::open_safetensors(test::golden_dir() / "halves" / "widening.safetensors");
  const attn::TensorInfo& samples = f.info("f32_samples");
  const auto* x = reinterpret_cast<const float*>(f.bytes(samples));
  const auto* torch_bf16 = reinterpret_cast<const std::uint16_t*>(f.bytes(f.info("f32_to_bf16")));
  const std::int64_t n = samples.shape[0];
  // As one row (prefill's rounding) and as rows of 37 packed for decode (tails of 5).
  std::vector<std::uint16_t> rows(std::size_t(attn::rounded_bf16_elements(1, n)));
  dot.round(x, 1, n, rows.data());
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < n; ++i) bad += rows[std::size_t(i)] != torch_bf16[i];
  CHECK(bad == 0);
  const std::int64_t K = 37, M = n / K;
  std::vector<std::uint16_t> packed(std::size_t(attn::packed_bf16_elements(M, K)));
  dot.pack(x, M, K, packed.data());
  bad = 0;
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t k = 0; k < 64; ++k) {
      const std::uint16_t want = k < K ? torch_bf16[m * K + k] : 0;  // zero past K
      bad += packed[std::size_t(k / 32 * M * 32 + m * 32 + k % 32)] != want;
    }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("bf16 compute: activations round to BF16 as PyTorch's .bfloat16() does") {
  for (const Dot& dot : dots()) {
    CAPTURE(dot.name);
    check_rounding(*dot.kernels);
  }
}

TEST_CASE("bf16 compute: F32 and F16 weights stay exact, and the default is F32 compute") {
  const attn::Runtime exact = attn::make_runtime(1, 0);
  CHECK(exact.compute == attn::Compute::f32);
  CHECK(exact.bf16_dot == nullptr);
  for (const Dot& dot : dots())
    for (std::int64_t M : {1, 5, 40}) {
      CAPTURE(dot.name);
      const attn::Runtime bf16 = runtime(dot, 1);
      CAPTURE(M);
      const std::int64_t K = 70, n = 33;
      std::vector<float> w(std::size_t(n * K)), x(std::size_t(M * K));
      for (std::size_t i = 0; i < w.size(); ++i) w[i] = float(attn::uniform_pm1(25, 1, i));
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(attn::uniform_pm1(26, 1, i));
      std::vector<float> got[2];
      for (int r = 0; r < 2; ++r) {
        const attn::Runtime& rt = r == 0 ? exact : bf16;
        got[r].assign(std::size_t(M * n), 0.0f);
        const attn::Projection proj{got[r].data(), attn::Matrix{w.data(), attn::WeightType::f32, 0},
                                    nullptr, n};
        std::vector<float> scratch(std::size_t(attn::scratch_floats(M, K, 1, rt.compute) + 1));
        attn::linear(rt, {&proj, 1}, x.data(), M, K, scratch.data());
      }
      CHECK(std::memcmp(got[0].data(), got[1].data(), got[0].size() * sizeof(float)) == 0);
    }
}

TEST_CASE("bf16 compute: refused by name where it cannot run") {
  CHECK_THROWS_AS(attn::parse_compute("fp8"), attn::InputError);
  CHECK(attn::parse_compute("bf16") == attn::Compute::bf16);
  if (!attn::has_bf16_dot()) {
    CHECK_THROWS_AS(attn::make_runtime(1, 0, "", attn::Compute::bf16), attn::InputError);
    return;
  }
  CHECK(attn::make_runtime(1, 0, "", attn::Compute::bf16).bf16_dot == attn::bf16_dot_native());
  CHECK_THROWS_AS(attn::make_runtime(1, 0, "avx2", attn::Compute::bf16), attn::InputError);
  CHECK_THROWS_AS(attn::make_runtime(1, 0, "generic", attn::Compute::bf16), attn::InputError);
}

TEST_CASE("bf16 compute: a BF16 layer within the stated bound of PyTorch's float64 reference") {
  // tests/golden/bf16_llama_mqa_half: PyTorch in float64 on the BF16 weights (make_golden.py).
  const auto dir = test::golden_dir() / "bf16_llama_mqa_half";
  const attn::ModelArgs args = attn::load_config(dir / "config.json");
  attn::RunOptions opts{2, 3, 4};
  const std::vector<float> x = attn::load_input(dir / "input.safetensors", args, opts, true);
  const attn::SafetensorsFile expected = attn::open_safetensors(dir / "expected.safetensors");
  for (const Dot& dot : dots())
    for (int threads : {1, 2}) {
      CAPTURE(dot.name);
      CAPTURE(threads);
      attn::Transformer m =
          attn::make_transformer(args, attn::load_weights(args, dir / "weights.safetensors"),
                                 opts.batch * opts.prefill, runtime(dot, threads));
      const attn::RunOutputs out = attn::run(m, x, opts, [](const attn::Event&) {});
      // Each output's worst error over the tensor's largest magnitude: docs/perf/bf16-compute.md
      // states 2^-7 for a layer (exact F32 compute is within the golden tolerance, 1e-4).
      auto worst = [&](const std::string& name, const float* got, std::int64_t n) {
        std::vector<float> storage;
        const float* want = attn::tensor_as_f32(expected, name, storage);
        double err = 0, peak = 0;
        for (std::int64_t i = 0; i < n; ++i) {
          err = std::max(err, std::fabs(double(got[i]) - want[i]));
          peak = std::max(peak, std::fabs(double(want[i])));
        }
        return err / peak;
      };
      const std::int64_t B = opts.batch, dim = args.dim;
      const double prefill = worst("prefill.output", out.prefill_output.data(), B * 3 * dim);
      double decode = 0;
      for (std::int64_t i = 1; i <= opts.steps; ++i)
        decode = std::max(decode, worst("decode." + std::to_string(i) + ".output",
                                        out.decode_output.data() + (i - 1) * B * dim, B * dim));
      MESSAGE("bf16 compute, worst error over max |output|: prefill " << prefill << ", decode "
                                                                      << decode);
      CHECK(prefill <= 1.0 / 128);
      CHECK(decode <= 1.0 / 128);
      // The BF16 path ran (exact compute: about 1e-7 here) where it runs for these 6 rows.
      if (dot.kernels->exact_below <= B * 3) CHECK(prefill > 1e-6);
    }
}

TEST_CASE("bf16 compute: the CLI's --compute, and its refusals") {
  const auto dir = test::golden_dir() / "bf16_llama_mqa_half";
  const std::string files = "--config " + (dir / "config.json").string() + " --weights " +
                            (dir / "weights.safetensors").string() + " --prefill 3 --steps 2";
  const test::CliResult bad = test::run_cli("run " + files + " --compute fp8");
  CHECK(bad.status == 2);
  CHECK(bad.err.find("--compute") != std::string::npos);
  const test::CliResult exact = test::run_cli("run --json " + files);
  const test::CliResult bf16 = test::run_cli("run --json " + files + " --compute bf16");
  REQUIRE(exact.status == 0);
  if (!attn::has_bf16_dot()) {
    CHECK(bf16.status == 2);
    CHECK(bf16.err.find("AVX512-BF16") != std::string::npos);
    return;
  }
  INFO("stderr: " << bf16.err);
  CHECK(bf16.status == 0);
}
