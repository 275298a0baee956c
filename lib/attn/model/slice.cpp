#include "attn/model/detail/slice.hpp"

#include <cstring>

namespace attn {

namespace {

bool ends_with_any(const std::string& name, std::initializer_list<const char*> suffixes) {
  for (const char* s : suffixes)
    if (name.ends_with(s)) return true;
  return false;
}

float element(const std::uint8_t* p, Dtype d) {
  if (d == Dtype::F32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  const std::uint16_t h = std::uint16_t(p[0] | (p[1] << 8));  // little-endian halves
  return d == Dtype::F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

}  // namespace

void shard_specs(std::vector<TensorSpec>& specs, const Shard& shard) {
  if (shard.size == 1) return;
  for (TensorSpec& s : specs) {
    if (ends_with_any(s.name, {"wq.weight", "wk.weight", "wv.weight", "wq.bias", "wk.bias",
                               "wv.bias", "w1.weight", "w3.weight"})) {
      s.full = s.shape;
      s.full[0] *= shard.size;
      s.row0 = shard.rank * s.shape[0];
    } else if (ends_with_any(s.name, {"wo.weight", "w2.weight"})) {
      s.full = s.shape;
      s.full[1] *= shard.size;
      s.col0 = shard.rank * s.shape[1];
    }
  }
}

bool is_per_rank_path(const std::string& path) {
  return path.find("{rank}") != std::string::npos;
}

std::string rank_path(const std::string& path, int rank) {
  std::string p = path;
  for (std::size_t i = p.find("{rank}"); i != std::string::npos; i = p.find("{rank}", i))
    p.replace(i, 6, std::to_string(rank));
  return p;
}

const float* slice_as_f32(const SafetensorsFile& file, const std::string& name, const TensorSpec& s,
                          std::vector<float>& storage) {
  const TensorInfo& t = file.info(name);
  if (t.dtype != Dtype::F32 && t.dtype != Dtype::F16 && t.dtype != Dtype::BF16)
    return tensor_as_f32(file, name, storage);  // refuses the dtype, naming file and tensor
  const std::uint8_t* src = file.bytes(t);
  const std::int64_t rows = s.shape[0], cols = s.shape.size() == 2 ? s.shape[1] : 1;
  const bool whole_rows = s.col0 == 0 && (s.full.size() == 1 || s.full[1] == cols);
  if (t.dtype == Dtype::F32 && whole_rows &&
      reinterpret_cast<std::uintptr_t>(src) % alignof(float) == 0)
    return reinterpret_cast<const float*>(src) + index_in_full(s, 0, 0);
  // wo and w2 by columns (strided), or converted: repacked once into owned memory.
  const std::uint64_t size = dtype_size(t.dtype);
  storage.resize(std::size_t(rows * cols));
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j)
      storage[std::size_t(i * cols + j)] =
          element(src + std::uint64_t(index_in_full(s, i, j)) * size, t.dtype);
  return storage.data();
}

}  // namespace attn
