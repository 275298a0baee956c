#include "attn/model/input.hpp"

#include <algorithm>
#include <cstring>

#include "attn/error.hpp"
#include "attn/io/safetensors.hpp"
#include "attn/model/finite.hpp"
#include "attn/model/rng.hpp"

namespace attn {

namespace {

// Element i of a tensor as a double, for the dtypes an attention_mask may have.
double element(Dtype d, const std::uint8_t* p, std::int64_t i) {
  switch (d) {
    case Dtype::F32: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case Dtype::I64: {
      std::int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      return double(v);
    }
    case Dtype::I32: {
      std::int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    default:  // U8, BOOL
      return p[i];
  }
}

}  // namespace

bool padding_value(double v, const std::string& what, std::int64_t b, std::int64_t t) {
  if (v != 0 && v != 1)
    throw InputError(what + ": values must be 0 (padding) or 1 (real position), got " +
                     std::to_string(v) + " at [" + std::to_string(b) + ", " + std::to_string(t) +
                     "]");
  return v == 1;
}

std::vector<std::uint8_t> load_attention_mask(const std::filesystem::path& path,
                                              const RunOptions& o) {
  const SafetensorsFile f = open_safetensors(path);
  const std::string src = path.string() + ": tensor 'attention_mask'";
  if (!f.header.tensors.count("attention_mask")) return {};
  const TensorInfo& t = f.info("attention_mask");
  const Dtype d = t.dtype;
  if (d != Dtype::F32 && d != Dtype::I64 && d != Dtype::I32 && d != Dtype::U8 && d != Dtype::BOOL)
    throw InputError(src + ": expected dtype F32, I64, I32, U8 or BOOL, got " + dtype_name(d));
  const std::int64_t T = f.header.tensors.count("x") ? f.info("x").shape.at(1) : -1;
  if (t.shape.size() != 2 || t.shape[0] != o.batch || t.shape[1] != T)
    throw InputError(src + ": expected shape [" + std::to_string(o.batch) + ", " +
                     std::to_string(T) + "] (x's batch and positions), got " + shape_text(t.shape));
  const std::int64_t used = o.prefill + o.steps;
  std::vector<std::uint8_t> mask(std::size_t(o.batch * used));  // [B, P+N]
  const std::uint8_t* p = f.bytes(t);
  for (std::int64_t b = 0; b < o.batch; ++b)
    for (std::int64_t j = 0; j < T; ++j) {
      const bool real = padding_value(element(d, p, b * T + j), src, b, j);
      if (j < used) mask[std::size_t(b * used + j)] = real;
    }
  return mask;
}

std::vector<float> seeded_input(const ModelArgs& a, const RunOptions& o, std::uint64_t seed) {
  std::vector<float> x(std::size_t(o.batch * (o.prefill + o.steps) * a.dim));  // [B, P+N, dim]
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = normal(seed, 0xC0FFEE, i);
  return x;
}

std::vector<float> load_input(const std::filesystem::path& path, const ModelArgs& a, RunOptions& o,
                              bool batch_given) {
  const SafetensorsFile f = open_safetensors(path);
  const std::string src = path.string();
  if (!f.header.tensors.count("x")) throw InputError(src + ": tensor 'x' is missing");
  const TensorInfo& t = f.info("x");
  if (t.dtype != Dtype::F32)
    throw InputError(src + ": tensor 'x': expected dtype F32, got " + dtype_name(t.dtype));
  if (t.shape.size() != 3 || t.shape[2] != a.dim)
    throw InputError(src + ": tensor 'x': expected shape [B, T, " + std::to_string(a.dim) +
                     "], got " + shape_text(t.shape));
  if (t.shape[0] < 1 || t.shape[1] < 1)
    throw InputError(src + ": tensor 'x': expected at least one batch row and position, got " +
                     shape_text(t.shape));
  if (batch_given && t.shape[0] != o.batch)
    throw InputError(src + ": tensor 'x' has batch " + std::to_string(t.shape[0]) +
                         ", but the run's batch is " + std::to_string(o.batch),
                     "batch");
  o.batch = t.shape[0];
  check_capacity(a, o);
  const std::int64_t T = t.shape[1];
  if (T < o.prefill + o.steps)
    throw InputError(src + ": tensor 'x' has " + std::to_string(T) + " positions, prefill " +
                     std::to_string(o.prefill) + " + steps " + std::to_string(o.steps) + " need " +
                     std::to_string(o.prefill + o.steps));
  std::vector<float> storage;
  const float* data = tensor_as_f32(f, "x", storage);
  // Keep only the positions the run uses: [B, P+N, dim].
  const std::int64_t used = o.prefill + o.steps;
  std::vector<float> x(std::size_t(o.batch * used * a.dim));
  for (std::int64_t b = 0; b < o.batch; ++b)
    std::copy_n(data + b * T * a.dim, used * a.dim, x.data() + b * used * a.dim);
  check_finite(x.data(), std::int64_t(x.size()), f.path, "x");
  return x;
}

std::int64_t input_batch(const std::filesystem::path& path) {
  // The header alone, before the memory estimate: nothing mapped yet.
  const SafetensorsHeaderRead f = read_safetensors_header(path);
  const auto it = f.header.tensors.find("x");
  if (it == f.header.tensors.end() || it->second.shape.size() != 3 || it->second.shape[0] < 1)
    return 1;
  return it->second.shape[0];
}

void check_fits(const ModelArgs& a, std::int64_t batch, std::int64_t start_pos, std::int64_t seqlen,
                const std::string& what) {
  if (batch < 1)
    throw InputError(what + ": batch " + std::to_string(batch) + " must be at least 1", "batch");
  if (batch > a.max_batch_size)
    throw InputError(what + ": batch " + std::to_string(batch) +
                         " is over the cache's max_batch_size " + std::to_string(a.max_batch_size) +
                         " (" + a.source + "; max_batch_size " + std::to_string(batch) +
                         " makes room)",
                     "max_batch_size");
  // Each term alone first, so that their sum cannot overflow.
  if (seqlen < 0 || start_pos < 0 || start_pos > a.max_seq_len ||
      seqlen > a.max_seq_len - start_pos) {
    // A sum only of terms a cache could hold (max_seq_len is at most 2^24) is worth printing.
    const bool room = start_pos >= 0 && seqlen >= 0 && start_pos <= (std::int64_t(1) << 24) &&
                      seqlen <= (std::int64_t(1) << 24);
    const std::string need = room ? "positions " + std::to_string(start_pos) + ".." +
                                        std::to_string(start_pos + seqlen - 1) + " need " +
                                        std::to_string(start_pos + seqlen)
                                  : std::to_string(seqlen) + " positions from " +
                                        std::to_string(start_pos) + " need more";
    throw InputError(
        what + ": the cache is full: " + need + ", but max_seq_len is " +
            std::to_string(a.max_seq_len) + " (" + a.source +
            (room ? "; max_seq_len " + std::to_string(start_pos + seqlen) + " makes room)" : ")"),
        "max_seq_len");
  }
}

void check_capacity(const ModelArgs& a, const RunOptions& o) {
  if (o.batch < 1 || o.prefill < 0 || o.steps < 0)
    throw InputError("the batch must be at least 1, the prefill and the steps at least 0", "batch");
  // A term past 2^40 is refused alone (no cache holds it), so that the sum cannot overflow.
  constexpr std::int64_t kHuge = std::int64_t(1) << 40;
  if (o.prefill > kHuge || o.steps > kHuge)
    check_fits(a, o.batch, 0, std::max(o.prefill, o.steps), "the run");
  check_fits(a, o.batch, 0, o.prefill + o.steps, "the run");
  if (o.prefill + o.steps < 1)
    throw InputError("nothing to run: the prefill and the steps are both 0", "steps");
}

}  // namespace attn
