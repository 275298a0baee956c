#pragma once
// The per-head figures of attention probabilities that readers sort heads by (attn-cli view's
// model view, its --json): how spread a head's rows are, and how much of them goes to the first
// token (the "sink"), the previous token and the token itself; and TransformerLens's head
// detector scores (detect_head with its defaults: error measure "mul", BOS and the current token
// not excluded) of its three patterns. Summed in float64 from the float32 probabilities, one
// query row at a time, so a caller can feed rows as a run makes them.
#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace attn {

inline constexpr std::array<std::string_view, 7> kHeadStatNames = {
    "entropy",       "first", "prev", "diag", "previous_token_head", "duplicate_token_head",
    "induction_head"};

// Sums over the query rows added so far.
struct HeadStats {
  double entropy = 0;  // -sum_j p ln p (nats), 0 ln 0 = 0
  double first = 0;    // p[0]
  double prev = 0;     // p[t-1], rows t >= 1
  double diag = 0;     // p[t]
  std::int64_t rows = 0, prev_rows = 0, diag_rows = 0;
  // detect_head's "mul" score is sum(A * D) / sum(A) over the whole pattern A (rows as added)
  // and a detection pattern D: these are the numerators and denominators.
  double mass = 0;        // sum_j p[j], every row
  double previous = 0;    // D[t][t-1] = 1
  double token_mass = 0;  // sum_j p[j], rows whose tokens are known
  double duplicate = 0;   // D[t][j] = 1 where j < t and token j is token t
  double induction = 0;   // D[t][j] = 1 where 1 <= j <= t and token j-1 is token t
};

// Adds query row t (its position) whose probabilities over keys 0 .. p.size()-1 are p: every
// key it sees (causal: t+1 keys; no mask, a prefill row: all the prefill's). ids: the tokens of
// positions 0 .. at least t (shorter or empty: the row counts towards no token-based score).
void add_row(HeadStats& s, std::span<const float> p, std::int64_t t,
             std::span<const std::int32_t> ids = {});

// The means in kHeadStatNames' order: entropy and first over every row, prev over rows t >= 1,
// diag over rows that see key t; the detector scores as above; NaN where no row counts.
std::array<double, kHeadStatNames.size()> head_means(const HeadStats& s);

}  // namespace attn
