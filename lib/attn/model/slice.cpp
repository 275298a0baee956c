#include "attn/model/detail/slice.hpp"

#include <cstring>

namespace attn {

namespace {

bool ends_with_any(const std::string& name, std::initializer_list<const char*> suffixes) {
  for (const char* s : suffixes)
    if (name.ends_with(s)) return true;
  return false;
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

const float* slice_as_f32(const SourceTensor& t, const std::string& name, const TensorSpec& s,
                          std::vector<float>& storage) {
  if (!t.type) return tensor_as_f32(t, name, storage);  // refuses the dtype, naming file and tensor
  const std::int64_t rows = s.shape[0], cols = s.shape.size() == 2 ? s.shape[1] : 1;
  const bool whole_rows = s.col0 == 0 && (s.full.size() == 1 || s.full[1] == cols);
  const Matrix whole{t.data, *t.type};
  if (*t.type == WeightType::f32 && whole_rows &&
      reinterpret_cast<std::uintptr_t>(t.data) % alignof(float) == 0)
    return static_cast<const float*>(whole.at(index_in_full(s, 0, 0)).data);
  // wo and w2 by columns (strided), or widened: repacked once into owned memory, a vector's
  // rows as one run of weights.
  const RowToF32 widen = traits(*t.type).to_f32;
  storage.resize(std::size_t(rows * cols));
  if (s.shape.size() == 1)
    widen(whole.at(index_in_full(s, 0, 0)).data, rows, storage.data());
  else
    for (std::int64_t i = 0; i < rows; ++i)
      widen(whole.at(index_in_full(s, i, 0)).data, cols, storage.data() + i * cols);
  return storage.data();
}

}  // namespace attn
