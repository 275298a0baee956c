#include "attn/model/kept_probabilities.hpp"

#include <algorithm>

namespace attn {

KeptProbabilities::KeptProbabilities(std::int64_t n_layers)
    : dest_(std::size_t(n_layers), nullptr), capacity_(std::size_t(n_layers), 0) {
  // Every layer asks: a layer without a buffer gets none (probs returns null) and keeps nothing.
  // Its sites never change with the buffers, so a merge made when it was attached stays right.
  observer_.sites = site_bit(Site::attn_probs);
  observer_.probs = [this](std::int64_t layer, std::int64_t bsz, std::int64_t n_heads,
                           std::int64_t seqlen, std::int64_t keys) {
    return buffer(layer, bsz * n_heads * seqlen * keys);
  };
  // Written into another recorder's buffer (it was asked first): copied from there.
  observer_.on_tensor = [this](const Observation& o) {
    const std::int64_t n = o.shape[0] * o.shape[1] * o.shape[2] * o.shape[3];
    float* dest = buffer(o.layer, n);
    if (dest && dest != o.data) std::copy_n(o.data, n, dest);
  };
}

void KeptProbabilities::set(std::int64_t layer, float* dest, std::int64_t capacity) {
  dest_.at(std::size_t(layer)) = dest;
  capacity_[std::size_t(layer)] = dest ? capacity : 0;
}

void KeptProbabilities::set_all(float* dest, std::int64_t capacity) {
  for (std::size_t l = 0; l < dest_.size(); ++l) set(std::int64_t(l), dest, capacity);
}

void KeptProbabilities::clear() {
  set_all(nullptr, 0);
}

float* KeptProbabilities::buffer(std::int64_t layer, std::int64_t n) const {
  if (layer < 0 || layer >= std::int64_t(dest_.size())) return nullptr;
  const auto l = std::size_t(layer);
  return dest_[l] && n <= capacity_[l] ? dest_[l] : nullptr;
}

}  // namespace attn
