#include "workloads/padding.hpp"

#include <cstring>

#include "attn/error.hpp"
#include "attn/io/safetensors.hpp"

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
      const double v = element(d, p, b * T + j);
      if (v != 0 && v != 1)
        throw InputError(src + ": values must be 0 (padding) or 1 (real position), got " +
                         std::to_string(v) + " at [" + std::to_string(b) + ", " +
                         std::to_string(j) + "]");
      if (j < used) mask[std::size_t(b * used + j)] = v == 1;
    }
  return mask;
}

}  // namespace attn
