#pragma once
// Attention probabilities kept: the one place a caller hands the forward the buffers they are
// written into (the fused attention kernel never holds them whole). The run keeps each call's
// per layer, Python the last call's, the page one scratch it codes layer by layer, the hooks the
// caller's arrays; each sets its buffers here and reads what the forward wrote.
#include <cstdint>
#include <limits>
#include <vector>

#include "attn/model/observer.hpp"

namespace attn {

class KeptProbabilities {
 public:
  explicit KeptProbabilities(std::int64_t n_layers);
  KeptProbabilities(const KeptProbabilities&) = delete;  // its observer's functions hold `this`
  KeptProbabilities& operator=(const KeptProbabilities&) = delete;

  // Layer l's probabilities [bsz, n_heads, seqlen, keys] go into dest, which holds `capacity`
  // floats (a call needing more is not kept); null: layer l's are not kept.
  void set(std::int64_t layer, float* dest,
           std::int64_t capacity = std::numeric_limits<std::int64_t>::max());
  // Every layer's into the same buffer: each is read before the next layer overwrites it.
  void set_all(float* dest, std::int64_t capacity);
  void clear();

  // The buffer the forward writes layer l's `n` floats into, or null.
  float* buffer(std::int64_t layer, std::int64_t n) const;
  // attn_probs of the layers with a buffer, written there (or copied there when another recorder
  // handed the forward its buffer first): attach it (model.hpp) to keep them.
  const Observer& observer() const { return observer_; }

 private:
  std::vector<float*> dest_;             // [n_layers]
  std::vector<std::int64_t> capacity_;  // [n_layers]
  Observer observer_;
};

}  // namespace attn
