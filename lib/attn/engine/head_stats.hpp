#pragma once
// The per-head figures of attention probabilities that readers sort heads by (attn-cli view's
// model view, its --json): how spread a head's rows are, and how much of them goes to the first
// token (the "sink"), the previous token and the token itself. Summed in float64 from the
// float32 probabilities, one query row at a time, so a caller can feed rows as a run makes them.
#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace attn {

inline constexpr std::array<std::string_view, 4> kHeadStatNames = {"entropy", "first", "prev",
                                                                   "diag"};

// Sums over the query rows added so far.
struct HeadStats {
  double entropy = 0;  // -sum_j p ln p (nats), 0 ln 0 = 0
  double first = 0;    // p[0]
  double prev = 0;     // p[t-1], rows t >= 1
  double diag = 0;     // p[t]
  std::int64_t rows = 0, prev_rows = 0, diag_rows = 0;
};

// Adds query row t (its position) whose probabilities over keys 0 .. p.size()-1 are p: every
// key it sees (causal: t+1 keys; no mask, a prefill row: all the prefill's).
void add_row(HeadStats& s, std::span<const float> p, std::int64_t t);

// The means in kHeadStatNames' order: entropy and first over every row, prev over rows t >= 1,
// diag over rows that see key t; NaN where no row counts.
std::array<double, 4> head_means(const HeadStats& s);

}  // namespace attn
