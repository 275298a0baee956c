#include "attn/engine/lens.hpp"

#include <algorithm>
#include <string>

#include "attn/error.hpp"
#include "attn/model/memory.hpp"

namespace attn {

namespace {

// a * b, refused past 2^62 elements (a buffer that big is refused as the memory's anyway).
std::int64_t checked_product(std::int64_t a, std::int64_t b, const char* what) {
  if (a < 0 || b < 0 || (a > 0 && b > (std::int64_t(1) << 62) / a))
    throw InputError(std::string("the logit lens's ") + what + " would overflow", "logit_lens");
  return a * b;
}

}  // namespace

void top_logits(const float* logits, std::int64_t vocab, int n, TopLogit* out) {
  const std::int64_t k = std::min<std::int64_t>(std::max(n, 0), std::max<std::int64_t>(vocab, 0));
  std::int64_t kept = 0;
  for (std::int64_t i = 0; i < vocab; ++i) {
    const float v = logits[i];
    // Full: only a strictly higher logit enters (ties keep the lower id, met first).
    if (kept == k && !(v > out[k - 1].logit)) continue;
    std::int64_t j = kept < k ? kept++ : k - 1;
    for (; j > 0 && out[j - 1].logit < v; --j) out[j] = out[j - 1];
    out[j] = {std::int32_t(i), v};
  }
}

std::uint64_t logit_lens_bytes(const ModelArgs& a, std::int64_t max_rows, int k, bool keep_logits) {
  if (a.vocab_size <= 0 || k < 1) return 0;
  const std::int64_t k_used = std::min<std::int64_t>(k, a.vocab_size);
  const std::int64_t rows = checked_product(a.n_layers, max_rows, "rows");
  // As make_logit_lens allocates: fed [n_layers], top [rows, k_used], logits.
  const std::uint64_t top =
      attn::checked_product({rows, k_used, std::int64_t(sizeof(TopLogit))}, "logit lens");
  const std::uint64_t logits = attn::checked_product(
      {keep_logits ? rows : max_rows, a.vocab_size, std::int64_t(sizeof(float))}, "logit lens");
  std::uint64_t total = std::uint64_t(a.n_layers);
  if (__builtin_add_overflow(total, top, &total) || __builtin_add_overflow(total, logits, &total))
    throw InputError("the logit lens would need more than 2^64 bytes", "logit_lens");
  return total;
}

void check_logit_lens(const ModelArgs& a, const ModelEnds& ends, int k) {
  if (k < 1 || k > kLensMaxK)
    throw InputError("the logit lens takes 1 to " + std::to_string(kLensMaxK) +
                         " top tokens per position, got " + std::to_string(k),
                     "logit_lens");
  if (a.vocab_size <= 0 || !ends.logits_out)
    throw InputError(
        a.source +
            ": the logit lens needs token input to a model with its final norm and "
            "output head; this run has " +
            (a.vocab_size <= 0
                 ? "no vocabulary (vocab_size " + std::to_string(a.vocab_size) + ")"
                 : "no output head (layers " + std::to_string(a.first_layer) + ":" +
                       std::to_string(a.first_layer + a.n_layers) + ", or no token input)"),
        "logit_lens");
}

LogitLens make_logit_lens(const Transformer& m, int k, bool keep_logits) {
  const ModelArgs& a = m.args;
  check_logit_lens(a, m.ends, k);
  if (m.shard.size > 1)
    throw InputError("the logit lens runs on one process (model_parallel_size 1)",
                     "model_parallel_size");
  LogitLens lens;
  lens.k = k;
  lens.k_used = int(std::min<std::int64_t>(k, a.vocab_size));
  lens.n_layers = a.n_layers;
  lens.max_rows = m.act.plan.max_rows;
  lens.vocab_size = a.vocab_size;
  lens.keep_logits = keep_logits;
  lens.fed.assign(std::size_t(a.n_layers), 0);
  const std::int64_t rows = checked_product(a.n_layers, lens.max_rows, "rows");
  lens.top.resize(std::size_t(checked_product(rows, lens.k_used, "top tokens")));
  // [n_layers or 1, max_rows, vocab_size]
  lens.logits.resize(
      std::size_t(checked_product(keep_logits ? rows : lens.max_rows, a.vocab_size, "logits")));
  return lens;
}

void feed_lens(LogitLens& lens, Transformer& m, const Observation& o) {
  if (o.site != Site::resid_post || o.ndim != 3 || o.layer < 0 || o.layer >= lens.n_layers)
    throw InputError("the logit lens is fed resid_post of a block only");
  const std::int64_t bsz = o.shape[0], seqlen = o.shape[1], rows = bsz * seqlen;
  if (rows > lens.max_rows || o.shape[2] != m.args.dim || lens.vocab_size != m.args.vocab_size)
    throw InputError("the logit lens was made for another model or fewer rows");
  if (o.layer <= lens.last_layer || o.start_pos != lens.start_pos || bsz != lens.bsz ||
      seqlen != lens.seqlen || lens.calls == 0) {  // a new forward call
    std::fill(lens.fed.begin(), lens.fed.end(), 0);
    lens.bsz = bsz, lens.seqlen = seqlen, lens.start_pos = o.start_pos;
    ++lens.calls;
  }
  lens.last_layer = o.layer;
  lens.fed[std::size_t(o.layer)] = 1;
  // The head's product as output_logits makes it, on the call's rows: the last layer's rows are
  // the logits' bits.
  float* logits = lens.logits.data() + (lens.keep_logits ? o.layer * lens.max_rows : 0) *
                                           lens.vocab_size;  // [rows, vocab_size]
  output_logits(m, o.data, rows, logits);
  TopLogit* top = lens.top.data() + o.layer * lens.max_rows * lens.k_used;
  for (std::int64_t r = 0; r < rows; ++r)
    top_logits(logits + r * lens.vocab_size, lens.vocab_size, lens.k_used, top + r * lens.k_used);
}

LensRecorder::LensRecorder(Transformer& m, int k, bool keep_logits)
    : m_(m), lens_(make_logit_lens(m, k, keep_logits)) {
  observer_.sites = site_bit(Site::resid_post);
  observer_.on_tensor = [this](const Observation& o) { feed(o); };
}

void LensRecorder::feed(const Observation& o) {
  feed_lens(lens_, m_, o);
  if (!copy_to_) return;
  const std::int64_t n = o.shape[0] * o.shape[1] * lens_.vocab_size;
  std::vector<float>& dst = (*copy_to_)[std::size_t(o.layer)];
  if (std::int64_t(dst.size()) == n) std::copy_n(lens_.logits.data(), n, dst.data());
}

}  // namespace attn
