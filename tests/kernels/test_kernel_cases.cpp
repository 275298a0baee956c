// The kernels by registry (llama.cpp's tests/test-backend-ops.cpp): one table of cases, op x
// weight type x kernel set x shape, the shapes at and around every boundary the engine picks a
// path or a block by (rows 1 | 2..kBatchRows | prefill past 32 in tiles; weight rows around
// register blocks, 16- and 64-row items, the compute-bf16 GEMM's 48-feature panels and
// 192-feature blocks; columns around the vector widths, 128-column pieces and 256-column chunks;
// strided rows; 1 and 2 threads). Weight types come from the traits table (weight_type.hpp) and
// element types from ATTN_STORAGE_TYPES, kernel sets from supported_kernels(): a new row of either
// gets every case. Each product is checked against one float64 reference (reference()), within the
// error bound of F32 sums in any order, and a product over a type other than F32 gives the bits of
// the same product over its F32 widening. Widening is checked against the traits' scalar widening.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "attn/kernels/detail/bf16_dot.hpp"
#include "attn/kernels/detail/layout.hpp"
#include "attn/kernels/detail/sets.hpp"
#include "attn/kernels/matmul.hpp"
#include "attn/model/rng.hpp"
#include "test_support.hpp"

namespace {

enum class Op {
  linear,  // attn::linear: gemv at 1 row, the batched kernel to 32, in tiles past it
  batch,   // a set's batched kernel called directly, both FMA-width blockings
  widen,   // a set's widening of rows to F32
  gemv,    // a set's gemv of quantized rows, against its F32 gemv on the widened rows
  bf16,    // compute bf16: BF16 weights times x rounded to BF16 (vdpbf16ps or its emulation)
};

const char* op_name(Op op) {
  switch (op) {
    case Op::linear:
      return "linear";
    case Op::batch:
      return "batch";
    case Op::widen:
      return "widen";
    case Op::gemv:
      return "gemv";
    case Op::bf16:
      return "bf16";
  }
  return "?";
}

struct Case {
  Op op;
  attn::WeightType type;
  std::string set;  // a kernel set, or for Op::bf16 "vdpbf16ps" / "emulated"
  std::int64_t M, n, K, ldw;
  int threads = 1;
  bool accumulate = false, bias = false;
};

std::vector<std::string> sets() {
  return test::kernel_names();
}

// A strided case (ldw > K: a column block of a wider matrix) for odd n.
std::int64_t stride_for(std::int64_t n, std::int64_t K, std::int64_t pad) {
  return K + (n % 2 ? pad : 0);
}

// A quantized type's cases (ggml's blocks; prefill on F32 tiles: matmul.cpp): K in whole blocks of
// B (1, 2, 3 blocks; 4608 columns, nine of the batched kernels' 512-column steps; 11008, where a
// prefill tile is one 48-feature panel), rows around the blocks and tiles, strided by a block.
void add_linear_blocks(std::vector<Case>& out, const attn::WeightTypeTraits& t) {
  const std::int64_t B = t.block;
  struct Shape {
    std::int64_t n, K;
  };
  const Shape decode[] = {{53, B},    {130, 2 * B}, {67, 3 * B}, {5, B},
                          {29, 4608}, {57, 4608},   {64, 8 * B}};
  const std::int64_t decode_rows[] = {1, 2, 3, 4, 5, 7, 8, 9, 11, 12, 13, 16, 17, 31, 32};
  for (const Shape& s : decode)
    for (std::int64_t M : decode_rows)
      for (const std::string& set : sets())
        for (int threads : {1, 2, 16})
          if (threads != 16 || M == 1 || M == 17)
            out.push_back({Op::linear, t.type, set, M, s.n, s.K, s.K + (s.n % 2 ? B : 0), threads,
                           M % 2 == 1, M % 3 == 0});
  const Shape prefill[] = {{1, B},   {47, 2 * B},  {48, 3 * B},  {49, B},   {192, 2 * B},
                           {193, B}, {400, 3 * B}, {100, 11008}, {47, 4608}};
  for (const Shape& s : prefill)
    for (std::int64_t M : {33, 40, 64})
      for (const std::string& set : sets())
        for (int threads : {1, 2, 16})  // 16 on 2 cores: more threads than items
          if (threads == 1 || (threads == 2 && M != 40) || (M == 64 && s.n >= 193))
            out.push_back({Op::linear, t.type, set, M, s.n, s.K, s.K + (s.n % 2 ? B : 0), threads,
                           (M + s.n) % 2 == 1, (M + s.n) % 2 == 1});
}

void add_linear(std::vector<Case>& out) {
  struct Shape {
    std::int64_t n, K;
  };
  // Decode: 4-row register blocks with remainders, several 64-row blocks, K under a vector,
  // odd, whole 16-column blocks, around a 256-column chunk and past the 512-column steps.
  const Shape decode[] = {{53, 37}, {130, 100}, {67, 64}, {5, 3}, {9, 4500}, {49, 257}, {64, 256}};
  const std::int64_t decode_rows[] = {1, 2, 3, 4, 5, 7, 8, 9, 11, 12, 13, 16, 17, 31, 32};
  // The gemv (and the smallest batch): blocks of 16 columns (8 generic) whole or short, 8- and
  // 4-row groups and single rows.
  std::vector<Shape> gemv;
  for (std::int64_t n : {1, 3, 4, 5, 8, 9, 19})
    for (std::int64_t K : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100})
      gemv.push_back({n, K});
  // Prefill: x's rows in two tiles, even and not, and around the third (tiles of at most 30
  // rows: 60 is two, 61 three; on a few shapes, for time); weight rows around 16-row items and
  // the removed F32 GEMM's 48-feature panels and 192-feature blocks; columns around its chunks.
  const std::int64_t prefill_rows[] = {33, 36, 39, 40, 41, 60, 61, 64};
  const auto tile_edge = [](std::int64_t M, std::int64_t n, std::int64_t K) {
    return (M != 60 && M != 61) || ((n == 17 || n == 193) && (K == 17 || K == 600));
  };
  const std::int64_t features[] = {1, 17, 47, 48, 49, 191, 192, 193, 400};
  const std::int64_t columns[] = {1, 15, 16, 17, 255, 256, 257, 600};
  for (const attn::WeightTypeTraits& t : attn::kWeightTypeTraits) {
    if (t.block > 1) {
      add_linear_blocks(out, t);
      continue;
    }
    for (const Shape& s : decode)
      for (std::int64_t M : decode_rows)
        for (const std::string& set : sets())
          for (int threads : {1, 2, 16})  // 16 on 2 cores: more blocks than threads or fewer
            if (threads != 16 || M == 1 || M == 17)
              out.push_back({Op::linear, t.type, set, M, s.n, s.K, stride_for(s.n, s.K, 3), threads,
                             M % 2 == 1, M % 3 == 0});
    for (const Shape& s : gemv)
      for (std::int64_t M : {1, 2})
        for (const std::string& set : sets())
          for (int threads : {1, 2})
            out.push_back({Op::linear, t.type, set, M, s.n, s.K, stride_for(s.n, s.K, 3), threads,
                           s.K % 2 == 1, false});
    for (std::int64_t K : columns)
      for (std::int64_t n : features)
        for (std::int64_t M : prefill_rows)
          for (const std::string& set : sets())
            for (int threads : {1, 2, 3, 16})  // the bits do not depend on the split; 3 and 16
              // on 2 cores (a few shapes: each case starts its threads): oversubscribed
              if (tile_edge(M, n, K) &&
                  (threads == 1 || (threads == 2 && (M == 33 || M == 61 || M == 64)) ||
                   (M == 64 && (K == 16 || K == 257) && (n == 47 || n == 193 || n == 400))))
                out.push_back({Op::linear, t.type, set, M, n, K, stride_for(n, K, 3), threads,
                               (M + n) % 2 == 1, (M + n) % 2 == 1});
  }
}

// The element types' batched kernels; and the quantized types' (quant_batch.hpp): 1 block (11
// rows: register blocks of 6 or 4 and single rows after them), 3 blocks, and 11008 columns (43
// K-quant blocks: two column chunks from 8 rows of x on, 512-column steps and a half one), M at
// each edge of the avx512 paths (quant_batch.hpp: one register group to 4 rows, groups to
// kRegMaxRows = 8, first rows in registers then the buffer from 9; 16: the rest in groups of 3
// and 4), against the same set's F32 kernel on the widened rows too.
void add_batch(std::vector<Case>& out) {
  for (const attn::WeightTypeTraits& t : attn::kWeightTypeTraits) {
    if (t.block > 1) {
      for (std::int64_t K : {t.block, 3 * t.block, std::int64_t(11008)})
        for (std::int64_t M : {2, 3, 4, 5, 8, 9, 12, 16, 17, 32})
          for (const std::string& set : sets())
            out.push_back({Op::batch, t.type, set, M,
                           K > 1000       ? 13
                           : K == t.block ? 11
                                          : 64,
                           K, K + t.block});
      continue;
    }
    for (std::int64_t K : {257, 4500})
      for (std::int64_t n : {64, 13})
        for (std::int64_t M : {2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, 24, 32})
          for (const std::string& set : sets())
            out.push_back({Op::batch, t.type, set, M, n, K, K + 3});
  }
}

void add_widen(std::vector<Case>& out) {
  for (const attn::WeightTypeTraits& t : attn::kWeightTypeTraits) {
    const std::int64_t B = t.block;
    for (std::int64_t K : {1, 3, 7, 8, 9, 15, 16, 17, 19, 31, 32, 33, 255, 256, 257, 4500})
      for (std::int64_t rows : {1, 3, 17})
        for (const std::string& set : sets())
          if (B == 1 || (K <= 19 && K % 4 == 1))  // quantized: K = 1, 9, 17 blocks
            out.push_back({Op::widen, t.type, set, rows, rows, B == 1 ? K : K * B,
                           B == 1 ? K + 3 : (K + 1) * B});
  }
}

// The quantized types' gemv (quant_gemv.hpp): K of 1..8 blocks and Llama's widest (11008 = 43 x
// 256, 14336 = 56 x 256); 32-column blocks around 256 for Q8_0 and Q4_0; every row count 1..65
// (the register blocks of 8 and 4 and the single rows after them); strided rows; both
// accumulate settings.
void add_gemv(std::vector<Case>& out) {
  for (const attn::WeightTypeTraits& t : attn::kWeightTypeTraits) {
    const std::int64_t B = t.block;
    if (B == 1) continue;
    std::vector<std::int64_t> ks = {B,     2 * B, 3 * B, 4 * B, 5 * B,
                                    6 * B, 7 * B, 8 * B, 11008, 14336};
    if (B == 32)
      for (std::int64_t k : {224, 256, 288}) ks.push_back(k);
    std::sort(ks.begin(), ks.end());
    ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
    for (const std::string& set : sets())
      for (std::int64_t K : ks)
        for (std::int64_t n = 1; n <= 65; ++n)
          if (K <= 3 * B || K == 8 * B || (K < 8 * B && (n <= 9 || n % 16 <= 1)) ||
              n % 16 == 1)  // every row count at 1..3 and 8 blocks, the others on a few: time
            for (bool accumulate : {false, true})
              out.push_back({Op::gemv, t.type, set, 1, n, K, K + (n % 2 ? B : 0), 1, accumulate});
  }
}

std::vector<std::string> bf16_dots() {
  std::vector<std::string> out;
  if (attn::bf16_dot_native()) out.push_back("vdpbf16ps");
  if (attn::bf16_dot_emulated()) out.push_back("emulated");
  return out;
}

void add_bf16(std::vector<Case>& out) {
  // Every register blocking to kBatchRows and the prefill past it; K under, at and past the
  // 32-column blocks (masked tail), odd (prefill's half pair), past a GEMM chunk; n: 64-row
  // blocks, the tails of 6-row groups, GEMM panels (48) and blocks (192).
  for (const std::string& dot : bf16_dots()) {
    for (std::int64_t M : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 31, 32, 33, 40, 47})
      for (std::int64_t K : {1, 31, 32, 33, 64, 96, 513, 1100})
        for (std::int64_t pad : {0, 3})
          for (int threads : {1, 2})
            out.push_back(
                {Op::bf16, attn::WeightType::bf16, dot, M, M < 20 ? 71 : 50, K, K + pad, threads});
    for (std::int64_t n : {1, 4, 5, 6, 47, 48, 49, 63, 64, 65, 191, 192, 193, 250})
      for (std::int64_t M : {1, 4, 16, 33})
        for (int threads : {1, 2})
          out.push_back({Op::bf16, attn::WeightType::bf16, dot, M, n, 130, 133, threads});
  }
}

// The registry: every case of every op.
const std::vector<Case>& registry() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> c;
    add_linear(c);
    add_batch(c);
    add_widen(c);
    add_gemv(c);
    add_bf16(c);
    return c;
  }();
  return cases;
}

std::vector<float> uniform(std::size_t n, std::uint64_t stream, double scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = float(attn::uniform_pm1(31, stream, i) * scale);
  return v;
}

// n weights (whole blocks) of x stored in type tt: traits' from_f32, or for a type without one
// (all but Q8_0 and Q4_0) blocks of quants drawn from x's bits with F16 scales that keep the
// weights near x's magnitude (d and the min where the traits place them), negative in every
// third block (weights of -0 among them).
void store(const attn::WeightTypeTraits& tt, const float* x, std::int64_t n, std::uint8_t* out) {
  if (tt.from_f32) return tt.from_f32(x, n, out);
  for (std::int64_t b = 0; b < n / tt.block; ++b) {
    std::uint8_t* blk = out + b * tt.block_bytes;
    float amax = 0;
    for (std::int64_t j = 0; j < tt.block; ++j)
      amax = std::max(amax, std::fabs(x[b * tt.block + j]));
    for (std::int64_t j = 0; j < tt.block_bytes; ++j) {
      std::uint32_t u;
      std::memcpy(&u, &x[b * tt.block + j % tt.block], 4);
      blk[j] = std::uint8_t((u >> 5) ^ (u >> 13) ^ std::uint32_t(j * 37));
    }
    auto put = [](std::uint8_t* p, float v) {
      const std::uint16_t h = attn::f32_to_f16(v);
      p[0] = std::uint8_t(h);
      p[1] = std::uint8_t(h >> 8);
    };
    const float sign = b % 3 == 2 ? -1.0f : 1.0f;  // a negative scale every third block
    put(blk + tt.scale_at, sign * amax / (tt.type == attn::WeightType::q6_k ? 2000 : 500));
    if (tt.min_at >= 0) put(blk + tt.min_at, sign * amax / 1000);
  }
}

// [n, ldw] weights drawn in F32, stored in `type` (store, row by row) and widened
// back (to_f32): `stored` is what the kernels read, `values` the weights they multiply.
struct Weights {
  attn::WeightType type;
  std::int64_t n, ldw;
  std::vector<std::uint8_t> stored;
  std::vector<float> values;

  Weights(attn::WeightType t, std::int64_t n, std::int64_t ldw, std::uint64_t stream, double scale)
      : type(t), n(n), ldw(ldw) {
    const attn::WeightTypeTraits& tt = attn::traits(t);
    const std::vector<float> drawn = uniform(std::size_t(n * ldw), stream, scale);
    const std::uint64_t row = attn::weight_bytes(t, ldw, "test weights");
    stored.resize(std::size_t(row) * std::size_t(n) + 64);
    values.resize(drawn.size());
    for (std::int64_t r = 0; r < n; ++r) {
      store(tt, drawn.data() + r * ldw, ldw, stored.data() + r * row);
      tt.to_f32(stored.data() + r * row, ldw, values.data() + r * ldw);
    }
  }
  attn::Matrix matrix() const { return {stored.data(), type, ldw}; }
  attn::Matrix widened() const { return {values.data(), attn::WeightType::f32, ldw}; }
};

// THE reference of every product op: out[m, j] = init + bias[j] + sum over k of w[j, k] x[m, k]
// in float64, and the magnitude of its terms (sum of their absolute values), which bounds the
// error of any order of F32 sums.
struct Reference {
  std::vector<double> value, magnitude;
};

Reference reference(const std::vector<float>& x, const std::vector<float>& w, std::int64_t M,
                    std::int64_t n, std::int64_t K, std::int64_t ldw, const float* init,
                    const float* bias) {
  Reference r{std::vector<double>(std::size_t(M * n)), std::vector<double>(std::size_t(M * n))};
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t j = 0; j < n; ++j) {
      double acc = 0, mag = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        const double p = double(x[std::size_t(m * K + k)]) * w[std::size_t(j * ldw + k)];
        acc += p;
        mag += std::fabs(p);
      }
      const std::size_t i = std::size_t(m * n + j);
      const double extra[] = {init ? double(init[i]) : 0.0, bias ? double(bias[j]) : 0.0};
      for (double e : extra) {
        acc += e;
        mag += std::fabs(e);
      }
      r.value[i] = acc;
      r.magnitude[i] = mag;
    }
  return r;
}

// Outputs past the bound of F32 sums of K + 2 terms in any order: (K + 3) 2^-23 of the
// magnitude (a unit in the last place per addition, with room for the FMA's rounding).
std::int64_t failures(const std::vector<float>& got, const Reference& r, std::int64_t K) {
  std::int64_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double bound = double(K + 3) * std::ldexp(r.magnitude[i], -23) + 1e-30;
    bad += !(std::fabs(double(got[i]) - r.value[i]) <= bound);
  }
  return bad;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// x, init and bias of a case, drawn from its shape.
struct Inputs {
  std::vector<float> x, init, bias;
};

Inputs inputs(const Case& c) {
  const std::uint64_t s = std::uint64_t(c.M * 7919 + c.n * 31 + c.K);
  return {uniform(std::size_t(c.M * c.K), s, c.op == Op::bf16 ? 4.0 : 1.0),
          uniform(std::size_t(c.M * c.n), s + 1, 1.0), uniform(std::size_t(c.n), s + 2, 1.0)};
}

// The kernels' scratch of `floats`: one buffer kept across cases, grown and never cleared (a
// kernel writes its scratch before reading it). A fresh zeroed one per case, sized for 16
// threads at the largest K, was most of the sanitized run's time.
float* scratch_of(std::int64_t floats) {
  static std::vector<float> scratch;
  if (std::int64_t(scratch.size()) < floats) scratch.resize(std::size_t(floats));
  return scratch.data();
}

std::vector<float> run_linear(const Case& c, const attn::Matrix& w, const Inputs& in) {
  const attn::Runtime rt = attn::make_runtime(c.threads, 0, c.set);
  std::vector<float> out = c.accumulate ? in.init : std::vector<float>(in.init.size(), -1.0f);
  float* scratch = scratch_of(attn::scratch_floats(c.M, c.K, c.threads, rt.compute) + 1);
  const attn::Projection p{out.data(), w, c.bias ? in.bias.data() : nullptr, c.n};
  attn::linear(rt, {&p, 1}, in.x.data(), c.M, c.K, scratch, c.accumulate);
  return out;
}

// A case's weights, inputs and reference, kept while the next cases (other sets and threads)
// share them: the float64 loops would otherwise take most of the test's time.
struct Prepared {
  Case key;
  Weights w;
  Inputs in;
  Reference r;
};

bool same_data(const Case& a, const Case& b) {
  return a.type == b.type && a.M == b.M && a.n == b.n && a.K == b.K && a.ldw == b.ldw &&
         a.accumulate == b.accumulate && a.bias == b.bias;
}

const Prepared& prepared(const Case& c) {
  static std::optional<Prepared> last;
  if (last && same_data(last->key, c)) return *last;
  Weights w(c.type, c.n, c.ldw, std::uint64_t(c.K), 1 / std::sqrt(double(c.K)));
  Inputs in = inputs(c);
  Reference r =
      reference(in.x, w.values, c.M, c.n, c.K, c.ldw, c.accumulate ? in.init.data() : nullptr,
                c.bias ? in.bias.data() : nullptr);
  last.emplace(Prepared{c, std::move(w), std::move(in), std::move(r)});
  return *last;
}

// The last one-thread output of a case's data on a set: two threads give its bits.
struct OneThread {
  std::optional<Case> key;
  std::vector<float> out;
};

// Every row of the case's x computed alone (M = 1, one thread) on the case's set: the bits each
// row must have in any company (one order per output: docs/design.md). Kept per set while the
// case's data lasts; the sets that share the canonical order (avx512, avx2) must agree.
const std::vector<float>& alone(const Case& c, const Prepared& p) {
  static std::optional<Case> key;
  static std::deque<std::pair<std::string, std::vector<float>>> by_set;  // references stay valid
  if (!key || !same_data(*key, c)) {
    key = c;
    by_set.clear();
  }
  for (const auto& [set, out] : by_set)
    if (set == c.set) return out;
  std::vector<float> rows(std::size_t(c.M * c.n));
  for (std::int64_t m = 0; m < c.M; ++m) {
    Case one = c;
    one.M = 1;
    one.threads = 1;
    Inputs in{std::vector<float>(p.in.x.begin() + m * c.K, p.in.x.begin() + (m + 1) * c.K),
              std::vector<float>(p.in.init.begin() + m * c.n, p.in.init.begin() + (m + 1) * c.n),
              p.in.bias};
    const std::vector<float> row = run_linear(one, p.w.matrix(), in);
    std::copy(row.begin(), row.end(), rows.begin() + m * c.n);
  }
  by_set.emplace_back(c.set, std::move(rows));
  return by_set.back().second;
}

// The sets whose products share the canonical order's 16 chains: the same bits.
bool sixteen_chains(const std::string& set) {
  return set == "avx512" || set == "avx2";
}

void check_linear(const Case& c) {
  static OneThread one;
  const Prepared& p = prepared(c);
  const std::vector<float> got = run_linear(c, p.w.matrix(), p.in);
  CHECK(failures(got, p.r, c.K) == 0);
  const std::vector<float>& rows = alone(c, p);
  CHECK(same_bits(got, rows));  // each row has its bits alone, whatever the rows beside it
  if (sixteen_chains(c.set))
    for (const std::string& other : sets())
      if (other != c.set && sixteen_chains(other)) {
        Case o = c;
        o.set = other;
        CHECK(same_bits(rows, alone(o, p)));
      }
  if (c.threads == 1)
    one = {c, got};
  else if (one.key && same_data(*one.key, c) && one.key->set == c.set)
    CHECK(same_bits(got, one.out));
  if (c.type != attn::WeightType::f32 && c.threads == 1)
    CHECK(same_bits(got, run_linear(c, p.w.widened(), p.in)));
}

// A set's kernels of every element type, for a CPU whose 512-bit FMAs run at full width or not.
std::vector<attn::TypedKernels> typed_kernels(const std::string& set, bool full_width) {
  std::vector<attn::TypedKernels> k;
#define ATTN_TEST_TYPED(T, name) k.push_back(attn::name##_##T##_kernels(full_width));
  if (set == "generic") {
    ATTN_STORAGE_TYPES(ATTN_TEST_TYPED, generic)
  }
#if defined(__x86_64__)
  if (set == "avx2") {
    ATTN_STORAGE_TYPES(ATTN_TEST_TYPED, avx2)
  }
  if (set == "avx512") {
    ATTN_STORAGE_TYPES(ATTN_TEST_TYPED, avx512)
  }
#endif
#undef ATTN_TEST_TYPED
  REQUIRE(k.size() == attn::kElementTypeCount);
  return k;
}

void check_batch(const Case& c) {
  const Weights w(c.type, c.n, c.ldw, 5, 1 / std::sqrt(double(c.K)));
  const Inputs in = inputs(c);
  std::vector<float> xp(std::size_t(c.M * c.K));  // [K / kPack, M, kPack], as linear() packs
  for (std::int64_t b = 0; b < c.K / attn::kPack; ++b)
    for (std::int64_t m = 0; m < c.M; ++m)
      for (std::int64_t l = 0; l < attn::kPack; ++l)
        xp[std::size_t((b * c.M + m) * attn::kPack + l)] =
            in.x[std::size_t(m * c.K + b * attn::kPack + l)];
  const Reference r = reference(in.x, w.values, c.M, c.n, c.K, c.ldw, nullptr, nullptr);
  const bool blocks = attn::traits(c.type).block > 1;
  std::vector<float> out[2];
  for (bool full_width : {false, true}) {
    CAPTURE(full_width);
    std::vector<float>& y = out[full_width];
    y.assign(std::size_t(c.M * c.n), 0.0f);
    // A quantized type's kernel is one for both widths (define_kernels.hpp); the F32 one is not.
    const attn::BatchFn batch = blocks
                                    ? attn::find_kernels(c.set)->typed(c.type).batch
                                    : typed_kernels(c.set, full_width)[std::size_t(c.type)].batch;
    REQUIRE(bool(batch));
    batch(w.stored.data(), c.ldw, xp.data(), in.x.data(), c.M, c.K, y.data(), c.n, c.n, false);
    CHECK(failures(y, r, c.K) == 0);
    if (blocks) {  // the bits of the set's F32 kernel over the widened rows
      std::vector<float> f32(y.size(), 0.0f);
      typed_kernels(c.set, full_width)[std::size_t(attn::WeightType::f32)].batch(
          w.values.data(), c.ldw, xp.data(), in.x.data(), c.M, c.K, f32.data(), c.n, c.n, false);
      CHECK(same_bits(y, f32));
    }
  }
  CHECK(same_bits(out[0], out[1]));  // the bits do not depend on the blocking
}

// Widening against the traits' scalar widening, bit for bit (NaN payloads included).
void check_widen(const Case& c) {
  const Weights w(c.type, c.n, c.ldw, 7, 4.0);
  std::vector<float> got(std::size_t(c.n * c.K), -1.0f), want(got.size());
  attn::find_kernels(c.set)->typed(c.type).widen(w.stored.data(), c.ldw, c.n, c.K, got.data());
  for (std::int64_t r = 0; r < c.n; ++r)
    std::memcpy(want.data() + r * c.K, w.values.data() + r * c.ldw,
                std::size_t(c.K) * sizeof(float));
  CHECK(same_bits(got, want));
}

// A quantized gemv has the bits of the same set's F32 gemv on the widened rows, with and
// without accumulating into y (whose initial values the widened product starts from too).
void check_gemv(const Case& c) {
  const Weights w(c.type, c.n, c.ldw, std::uint64_t(c.K + c.n), 1 / std::sqrt(double(c.K)));
  const Inputs in = inputs(c);
  const attn::Kernels& k = *attn::find_kernels(c.set);
  const attn::GemvFn gemv = k.typed(c.type).gemv;
  REQUIRE(bool(gemv));
  std::vector<float> got = in.init, want = in.init;
  gemv(w.stored.data(), c.ldw, in.x.data(), nullptr, got.data(), c.n, c.K, c.accumulate);
  k.typed(attn::WeightType::f32)
      .gemv(w.values.data(), c.ldw, in.x.data(), nullptr, want.data(), c.n, c.K, c.accumulate);
  CHECK(same_bits(got, want));
  const Reference r = reference(in.x, w.values, 1, c.n, c.K, c.ldw,
                                c.accumulate ? in.init.data() : nullptr, nullptr);
  CHECK(failures(got, r, c.K) == 0);
}

// compute bf16: the reference over x rounded to BF16 as the kernels round it; and within the
// stated bound (2^-8 of the magnitude, docs/perf/bf16-compute.md) of the exact product.
void check_bf16(const Case& c) {
  const Weights w(c.type, c.n, c.ldw, std::uint64_t(c.M * c.K + c.n), 1.0);
  const Inputs in = inputs(c);
  attn::Runtime rt = attn::make_runtime(c.threads, 0);
  rt.compute = attn::Compute::bf16;
  rt.bf16_dot = c.set == "vdpbf16ps" ? attn::bf16_dot_native() : attn::bf16_dot_emulated();
  std::vector<float> got(std::size_t(c.M * c.n), -1.0f);
  float* scratch = scratch_of(attn::scratch_floats(c.M, c.K, c.threads, rt.compute) + 1);
  const attn::Projection p{got.data(), w.matrix(), nullptr, c.n};
  attn::linear(rt, {&p, 1}, in.x.data(), c.M, c.K, scratch);
  if (c.M <= attn::kBatchRows && c.M < rt.bf16_dot->exact_below) {
    // Rows where this CPU's exact kernels are as fast: the exact product's bits.
    rt.compute = attn::Compute::f32;
    std::vector<float> exact(got.size(), -2.0f);
    const attn::Projection e{exact.data(), w.matrix(), nullptr, c.n};
    attn::linear(rt, {&e, 1}, in.x.data(), c.M, c.K, scratch);
    CHECK(std::memcmp(got.data(), exact.data(), got.size() * sizeof(float)) == 0);
    return;
  }
  std::vector<float> rounded = in.x;
  for (float& v : rounded) v = attn::bf16_to_f32(attn::f32_to_bf16(v));
  CHECK(failures(got, reference(rounded, w.values, c.M, c.n, c.K, c.ldw, nullptr, nullptr), c.K) ==
        0);
  const Reference exact = reference(in.x, w.values, c.M, c.n, c.K, c.ldw, nullptr, nullptr);
  std::int64_t far = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    far += !(std::fabs(got[i] - exact.value[i]) <= std::ldexp(exact.magnitude[i], -8) + 1e-30);
  CHECK(far == 0);
}

void check(const Case& c) {
  switch (c.op) {
    case Op::linear:
      return check_linear(c);
    case Op::batch:
      return check_batch(c);
    case Op::widen:
      return check_widen(c);
    case Op::gemv:
      return check_gemv(c);
    case Op::bf16:
      return check_bf16(c);
  }
}

// Runs the registry's cases of `op` (with rows from M0 to M1); how many ran.
std::int64_t run_cases(Op op, std::int64_t M0 = 0, std::int64_t M1 = 1 << 30) {
  std::int64_t ran = 0;
  for (const Case& c : registry()) {
    if (c.op != op || c.M < M0 || c.M > M1) continue;
    const std::string type = attn::weight_type_name(c.type);
    CAPTURE(type);
    CAPTURE(c.set);
    CAPTURE(c.M);
    CAPTURE(c.n);
    CAPTURE(c.K);
    CAPTURE(c.ldw);
    CAPTURE(c.threads);
    CAPTURE(c.accumulate);
    CAPTURE(c.bias);
    check(c);
    ++ran;
  }
  return ran;
}

}  // namespace

TEST_CASE("kernel cases: every op has cases for every weight type and kernel set it runs on") {
  const std::vector<std::string> isas = sets();
  REQUIRE(!isas.empty());
  CHECK(isas.back() == "generic");
  CHECK(attn::make_runtime(1).kernels->name == isas.front());
  CHECK_THROWS(attn::make_runtime(1, 0, "no-such-isa"));
  for (Op op : {Op::linear, Op::batch, Op::widen, Op::gemv})
    for (const attn::WeightTypeTraits& t : attn::kWeightTypeTraits)
      for (const std::string& set : sets()) {
        if (op == Op::gemv && t.block == 1) continue;  // its gemv is linear's at M = 1
        std::int64_t n = 0;
        for (const Case& c : registry()) n += c.op == op && c.type == t.type && c.set == set;
        const std::string op_text = op_name(op), type = t.name;
        CAPTURE(op_text);
        CAPTURE(type);
        CAPTURE(set);
        CHECK(n > 0);
      }
}

TEST_CASE(
    "kernel cases: linear decode (gemv, batched) against float64, F32's and alone rows' bits") {
  CHECK(run_cases(Op::linear, 1, attn::kBatchRows) > 0);
}

TEST_CASE("kernel cases: linear prefill (tiles) against float64, F32's and alone rows' bits") {
  CHECK(run_cases(Op::linear, attn::kBatchRows + 1) > 0);
}

TEST_CASE("kernel cases: each set's batched kernel at both FMA-width blockings, the same bits") {
  CHECK(run_cases(Op::batch) > 0);
}

TEST_CASE("kernel cases: each set widens rows as the traits' scalar widening does") {
  CHECK(run_cases(Op::widen) > 0);
}

TEST_CASE("kernel cases: each set's gemv of quantized rows has the bits of its F32 gemv") {
  CHECK(run_cases(Op::gemv) > 0);
}

TEST_CASE("kernel cases: compute bf16 against float64 over rounded x and the stated bound") {
  if (bf16_dots().empty()) {
    MESSAGE("this CPU has no AVX-512BW: the BF16 kernels are not run");
    return;
  }
  CHECK(run_cases(Op::bf16) > 0);
}

TEST_CASE("weight types: each traits row is found by its names and keeps what it stores") {
  for (const attn::WeightTypeTraits& t : attn::kWeightTypeTraits) {
    const std::string name = t.name;
    CAPTURE(name);
    CHECK(&attn::traits(t.type) == &t);
    CHECK(attn::find_weight_type(t.name) == t.type);
    std::string lower = t.name;
    for (char& ch : lower) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    CHECK(attn::find_weight_type(lower) == t.type);
    if (t.safetensors) CHECK(attn::weight_type_of_safetensors(t.safetensors) == t.type);
    CHECK(attn::weight_type_names().find(t.name) != std::string::npos);
    // Whole blocks only, and sizes past 2^64 bytes, are refused.
    CHECK_THROWS_AS(attn::weight_bytes(t.type, -t.block, "test"), attn::InputError);
    const std::int64_t big = std::numeric_limits<std::int64_t>::max() / t.block * t.block;
    const unsigned __int128 bytes = (unsigned __int128)(big / t.block) * t.block_bytes;
    if (bytes >> 64)
      CHECK_THROWS_AS(attn::weight_bytes(t.type, big, "test"), attn::InputError);
    else
      CHECK(attn::weight_bytes(t.type, big, "test") == std::uint64_t(bytes));
    if (t.block > 1) CHECK_THROWS_AS(attn::weight_bytes(t.type, 1, "test"), attn::InputError);
    // Small integers and halves are exact in every type of one weight a block: stored and
    // widened back unchanged, finite; a NaN among them is found where it is. (Quantized blocks:
    // kernels/test_quant.cpp, against gguf-py.)
    if (t.block > 1) continue;
    const std::int64_t n = 4 * t.block;
    std::vector<float> x(static_cast<std::size_t>(n)), back(x.size());
    for (std::int64_t i = 0; i < n; ++i) x[std::size_t(i)] = float(i % 7 - 3) / 2;
    std::vector<std::uint8_t> stored(attn::weight_bytes(t.type, n, "test"));
    t.from_f32(x.data(), n, stored.data());
    t.to_f32(stored.data(), n, back.data());
    CHECK(back == x);
    CHECK(t.first_non_finite(stored.data(), n) == -1);
    x[std::size_t(n - 2)] = std::nanf("");
    t.from_f32(x.data(), n, stored.data());
    CHECK(t.first_non_finite(stored.data(), n) == n - 2);
  }
  CHECK_FALSE(attn::find_weight_type("Q9_9"));
  CHECK_FALSE(attn::weight_type_of_safetensors("I32"));
}
