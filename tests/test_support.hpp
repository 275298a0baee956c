#pragma once
// Shared by the tests: fixture paths, comparing f32 buffers at a stated tolerance, running the CLI.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

#include "attn/engine/open.hpp"
#include "attn/error.hpp"
#include "attn/io/tensor_source.hpp"
#include "attn/kernels/kernels.hpp"
#include "attn/model/config.hpp"
#include "attn/weight_type.hpp"

namespace test {

// Tensors held in memory, as a file's mapping would hold them: the load's views point here.
class MemorySource : public attn::TensorSource {
 public:
  struct Held {
    std::string dtype;
    std::optional<attn::WeightType> type;
    std::vector<std::int64_t> shape;
    std::vector<std::uint8_t> bytes;
  };
  std::map<std::string, Held> tensors;

  explicit MemorySource(std::string name = "memory") : name_(std::move(name)) {}

  // n bytes at p, of `type` (named as its traits name it).
  void add(const std::string& name, attn::WeightType type, std::vector<std::int64_t> shape,
           const void* p, std::size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    tensors[name] = {attn::traits(type).name, type, std::move(shape),
                     std::vector<std::uint8_t>(b, b + n)};
  }

  const std::string& source() const override { return name_; }
  bool contains(const std::string& name) const override { return tensors.count(name) != 0; }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& [name, t] : tensors) out.push_back(name);
    return out;
  }
  attn::SourceTensor describe(const std::string& name) override {
    attn::SourceTensor t = tensor(name);
    t.data = nullptr;
    return t;
  }
  attn::SourceTensor tensor(const std::string& name) override {
    const Held& h = tensors.at(name);
    return {h.dtype, h.type, h.shape, h.bytes.data(), h.bytes.size(), name_};
  }

 private:
  std::string name_;
};

inline std::filesystem::path source_dir() {
  return ATTN_SOURCE_DIR;
}
inline std::filesystem::path golden_dir() {
  return source_dir() / "tests" / "golden";
}
// A golden token model's folder (tests/golden/model, make_model.py).
inline std::filesystem::path model_dir(const std::string& name) {
  return golden_dir() / "model" / name;
}

// The tests' small model (seed_args's norm_eps, rope_theta and batch): dim 16, 4 heads over 2 KV
// heads, max_seq_len 16, with `block`'s usual ends: RoPE and a causal mask except for encoder,
// biases except for llama, a 24-wide FFN for encoder. A test changes what it studies.
// The setting an InputError names, or "(none)" when the call succeeds.
template <class Call>
std::string setting_of(Call call) {
  try {
    call();
  } catch (const attn::InputError& e) {
    return e.setting;
  }
  return "(none)";
}

inline attn::ModelArgs small_llama_args(attn::Block block = attn::Block::llama,
                                        std::int64_t n_layers = 2) {
  attn::ModelArgs a = attn::seed_args();
  a.dim = 16;
  a.n_heads = 4;
  a.n_kv_heads = 2;
  a.n_layers = n_layers;
  a.block = block;
  a.rope = block == attn::Block::encoder ? attn::Rope::none : attn::Rope::interleaved;
  a.mask = block == attn::Block::encoder ? attn::Mask::none : attn::Mask::causal;
  a.attention_bias = block != attn::Block::llama;
  a.ffn_hidden_set = block == attn::Block::encoder ? 24 : 0;
  a.max_seq_len = 16;
  return a;
}

// An I32 tensor of a safetensors file, as values (the golden models' tokens and greedy chains).
std::vector<std::int32_t> i32_tensor(const std::filesystem::path& file, const std::string& name);

struct Tolerance {
  double rtol = 1e-4, atol = 1e-5;
};

struct Diff {
  double worst_abs = 0, worst_ratio = 0;  // ratio: |got-exp| / (atol + rtol |exp|), <= 1 passes
  std::int64_t failures = 0;
};

inline Diff compare(const float* got, const float* expected, std::int64_t n, Tolerance tol) {
  Diff d;
  for (std::int64_t i = 0; i < n; ++i) {
    const double err = std::fabs(double(got[i]) - double(expected[i]));
    const double ratio = err / (tol.atol + tol.rtol * std::fabs(double(expected[i])));
    d.worst_abs = std::max(d.worst_abs, err);
    d.worst_ratio = std::max(d.worst_ratio, std::isnan(ratio) ? 1e30 : ratio);
    if (!(ratio <= 1.0)) ++d.failures;
  }
  return d;
}

// A fresh directory under the temp dir, removed with everything in it at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::vector<std::string> names() const;  // the entries' names, sorted
};

// A directory of this test process's own (ctest runs tests in parallel, and other checkouts'
// tests may run beside them), removed with its files when the process exits.
inline const std::filesystem::path& temp_dir() {
  static const TempDir dir;
  return dir.path;
}

// A file name in temp_dir().
inline std::filesystem::path temp_path(const std::string& name) {
  return temp_dir() / name;
}

// Every tensor of the safetensors file `expected` is in `got` with its shape and within tol
// (doctest checks, one per tensor); returns the worst error over all of them.
Diff compare_files(const std::filesystem::path& got, const std::filesystem::path& expected,
                   Tolerance tol = {});

struct CliResult {
  int status = -1;
  std::string out, err;
};

// Runs attn-cli with the given arguments (a shell-quoted string), capturing stdout and stderr.
CliResult run_cli(const std::string& args);
// Runs a whole shell command line the same way.
CliResult run_shell(const std::string& command);

// The names of the kernel sets this CPU runs, best first: tests run each of them.
inline std::vector<std::string> kernel_names() {
  std::vector<std::string> out;
  for (const attn::Kernels* k : attn::supported_kernels()) out.push_back(k->name);
  return out;
}

// A model as a user names it: its weights (a file or folder), a tokenizer, the threads.
inline attn::ModelSpec spec_of(const std::filesystem::path& weights,
                               const std::filesystem::path& tokenizer = {}, int threads = 1) {
  attn::ModelSpec s;
  s.weights = weights;
  s.tokenizer = tokenizer;
  s.threads = threads;
  return s;
}

}  // namespace test
