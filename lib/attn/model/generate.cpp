#include "attn/model/generate.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>

#include "attn/error.hpp"
#include "attn/model/rng.hpp"

namespace attn {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// p = softmax(logit / temp) over the candidates (sorted by logit, highest first).
void softmax(std::vector<SampleCandidate>& c, double temp) {
  double sum = 0;
  for (SampleCandidate& x : c) sum += x.p = std::exp((double(x.logit) - double(c[0].logit)) / temp);
  for (SampleCandidate& x : c) x.p /= sum;
}

std::int32_t argmax(std::span<const float> logits) {
  return std::int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// 16777216 as such, 0.95 as 0.95.
std::string number_text(double v) {
  char text[32];
  std::snprintf(text, sizeof text, std::fabs(v) < 1e15 && v == std::floor(v) ? "%.0f" : "%g", v);
  return text;
}

// Written as !(in range) so that NaN is out of range.
void check_range(double v, double lo, double hi, const char* setting) {
  if (!(v >= lo && v <= hi))
    throw InputError(std::string(setting) + " must be in [" + number_text(lo) + ", " +
                         number_text(hi) + "], got " + number_text(v),
                     setting);
}

// The logits a draw may choose from: the first n_vocab.
std::span<const float> choosable(std::span<const float> logits, const Sampling& s) {
  return s.n_vocab > 0 && std::size_t(s.n_vocab) < logits.size()
             ? logits.first(std::size_t(s.n_vocab))
             : logits;
}

}  // namespace

void check_sampling(const Sampling& s) {
  check_range(s.temp, 0, 100, "temp");
  check_range(double(s.top_k), 0, double(std::int64_t(1) << 24), "top_k");
  check_range(s.top_p, 0, 1, "top_p");
  check_range(s.min_p, 0, 1, "min_p");
  check_range(s.repeat_penalty, 0, 100, "repeat_penalty");
  if (s.repeat_penalty == 0)  // it divides the logits
    throw InputError("repeat_penalty must be in (0, 100], got 0", "repeat_penalty");
  check_range(double(s.repeat_last_n), -1, double(INT32_MAX), "repeat_last_n");
  check_range(s.presence_penalty, -100, 100, "presence_penalty");
  check_range(s.frequency_penalty, -100, 100, "frequency_penalty");
}

// In llama.cpp's float arithmetic: a token seen `count` times in the window has its logit
// divided by repeat_penalty (multiplied, if not positive), then count * frequency_penalty +
// presence_penalty taken off. The counts are kept in p, which the softmax sets afterwards: no
// map, no allocation.
void apply_penalties(std::span<SampleCandidate> c, const Sampling& s,
                     std::span<const std::int32_t> context) {
  const std::size_t n =
      s.repeat_last_n < 0 ? context.size() : std::min(context.size(), std::size_t(s.repeat_last_n));
  for (const std::int32_t id : context.last(n))
    if (id >= 0 && std::size_t(id) < c.size()) c[std::size_t(id)].p += 1;
  const float repeat = float(s.repeat_penalty), freq = float(s.frequency_penalty),
              present = float(s.presence_penalty);
  for (SampleCandidate& x : c) {
    if (x.p == 0) continue;
    x.logit = x.logit <= 0 ? x.logit * repeat : x.logit / repeat;
    x.logit -= float(x.p) * freq + present;
    x.p = 0;
  }
}

bool penalties_off(const Sampling& s) {
  return s.repeat_last_n == 0 ||
         (s.repeat_penalty == 1 && s.presence_penalty == 0 && s.frequency_penalty == 0);
}

std::int32_t sample(std::span<const float> all, const Sampling& s, std::uint64_t draw,
                    std::vector<SampleCandidate>& c, std::span<const std::int32_t> context) {
  const std::span<const float> logits = choosable(all, s);
  const bool penalize = !penalties_off(s) && !context.empty();
  if (s.temp <= 0 && !penalize) return argmax(logits);
  c.resize(logits.size());  // allocates on the first draw only
  for (std::size_t i = 0; i < c.size(); ++i) c[i] = {std::int32_t(i), logits[i]};
  if (penalize) apply_penalties(c, s, context);
  if (s.temp <= 0)  // greedy after the penalties, as llama.cpp's chain
    return std::max_element(
               c.begin(), c.end(),
               [](const SampleCandidate& a, const SampleCandidate& b) { return a.logit < b.logit; })
        ->id;
  const auto higher = [](const SampleCandidate& a, const SampleCandidate& b) {
    return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
  };
  const std::size_t k = s.top_k > 0 ? std::min(c.size(), std::size_t(s.top_k)) : c.size();
  std::partial_sort(c.begin(), c.begin() + std::ptrdiff_t(k), c.end(), higher);
  c.resize(k);
  softmax(c, 1.0);
  std::size_t keep = c.size();
  double cum = 0;
  for (std::size_t i = 0; i < c.size(); ++i)  // top-p: the fewest that reach p
    if ((cum += c[i].p) >= s.top_p) {
      keep = i + 1;
      break;
    }
  c.resize(keep);
  const double floor = s.min_p * c[0].p;
  c.erase(
      std::remove_if(c.begin() + 1, c.end(), [&](const SampleCandidate& x) { return x.p < floor; }),
      c.end());
  softmax(c, s.temp);
  const double u = (uniform_pm1(s.seed, 0x5a4d, draw) + 1.0) / 2.0;  // [0, 1)
  cum = 0;
  for (const SampleCandidate& x : c)
    if ((cum += x.p) > u) return x.id;
  return c.back().id;
}

void generate(Transformer& m, Generation& g, std::span<const std::int32_t> prompt,
              std::int64_t steps, const Sampling& s, std::span<const std::int32_t> stop,
              bool feed_last, const std::function<void(const Generated&)>& on_token) {
  const std::int64_t vocab = m.args.vocab_size;
  if (prompt.empty() && g.logits.empty())
    throw InputError("generate: no prompt and no saved logits to continue from");
  g.logits.resize(std::size_t(vocab));
  if (!prompt.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    forward(m, prompt.data(), 1, std::int64_t(prompt.size()), std::int64_t(g.tokens.size()),
            g.logits.data());
    g.prompt_seconds += seconds_since(t0);
    g.prompt_tokens += std::int64_t(prompt.size());
    g.tokens.insert(g.tokens.end(), prompt.begin(), prompt.end());
  }
  for (std::int64_t step = 0; step < steps; ++step) {
    const std::int64_t pos = std::int64_t(g.tokens.size());
    const std::int32_t id = sample(g.logits, s, std::uint64_t(pos), g.candidates, g.tokens);
    on_token({id, step, choosable(g.logits, s)});
    const bool last = step + 1 == steps || std::find(stop.begin(), stop.end(), id) != stop.end();
    if (last && !feed_last) break;
    if (pos + 1 > m.args.max_seq_len)
      throw InputError(
          "the cache is full at " + std::to_string(pos) + " positions: raise max_seq_len for more",
          "max_seq_len");
    const auto t0 = std::chrono::steady_clock::now();
    forward(m, &id, 1, 1, pos, g.logits.data());
    g.eval_seconds += seconds_since(t0);
    ++g.eval_tokens;
    g.tokens.push_back(id);
    if (last) break;
  }
}

}  // namespace attn
