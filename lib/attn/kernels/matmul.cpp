#include "attn/kernels/matmul.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

#include "attn/kernels/attention.hpp"
#include "attn/kernels/detail/batch_lanes.hpp"
#include "attn/kernels/detail/bf16_dot.hpp"
#include "attn/kernels/detail/blas.hpp"
#include "attn/kernels/detail/gemm.hpp"
#include "attn/kernels/detail/layout.hpp"
#include "attn/kernels/detail/prefill_items.hpp"
#include "attn/kernels/kernels.hpp"
#include "attn/matrix.hpp"

namespace attn {

namespace {

// x [K] deinterleaved for BF16 rows: in each block of 2V, the even columns, then the odd ones.
void deinterleave(const float* x, std::int64_t K, int V, float* xd) {
  for (std::int64_t b = 0; b + 2 * V <= K; b += 2 * V)
    for (int l = 0; l < V; ++l) {
      xd[b + l] = x[b + 2 * l];
      xd[b + V + l] = x[b + 2 * l + 1];
    }
}

bool any_bf16(std::span<const Projection> projections) {
  for (const Projection& p : projections)
    if (p.w.type == WeightType::bf16) return true;
  return false;
}

// x [M, K] packed as [K / kPack, M, kPack] (whole blocks only) into a buffer of the calling
// thread, which grows to the largest product once and is reused: no allocation per step.
const float* pack_rows(const float* x, std::int64_t M, std::int64_t K, float* out) {
  const std::int64_t blocks = K / kPack;
  for (std::int64_t b = 0; b < blocks; ++b)
    for (std::int64_t m = 0; m < M; ++m)
      std::memcpy(out + (b * M + m) * kPack, x + m * K + b * kPack, kPack * sizeof(float));
  return out;
}

// Prefill: w's rows n0..n1. With AVX-512, gemm_avx512 packs and widens the weights itself.
// Else in blocks of widen_rows(K), each one OpenBLAS sgemm: a BF16 or F16 block is widened into
// the thread's scratch first; an F32 block is read in place, in the same blocks, so that both run
// the same sgemm calls and give the same bits (OpenBLAS's Haswell and Zen kernels round
// differently when the columns are split differently).
void prefill_product(const Kernels& kernels, const Projection& p, const float* x, const float* xg,
                     std::int64_t M, std::int64_t K, std::int64_t n0, std::int64_t n1,
                     float* scratch, bool accumulate, std::int64_t m0 = 0) {
  const std::int64_t ldw = p.w.stride(K), rows = widen_rows(K);
  if (kernels.own_gemm)  // xg: rows m0.. of x, into rows m0.. of out
    return gemm_avx512(p.w.at(n0 * ldw), ldw, xg, M, K, p.out + m0 * p.n + n0, p.n, n1 - n0,
                       accumulate, scratch);
  const TypedKernels& k = kernels.typed(p.w.type);
  for (std::int64_t b0 = n0; b0 < n1; b0 += rows) {
    const std::int64_t nb = std::min(rows, n1 - b0);
    const Matrix block = p.w.at(b0 * ldw);
    const float* wb = static_cast<const float*>(block.data);
    std::int64_t ld = ldw;
    if (p.w.type != WeightType::f32) {
      k.widen(block.data, ldw, nb, K, scratch);  // [nb, K]
      wb = scratch;
      ld = K;
    }
    blas::api().sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blasint(M), blasint(nb), blasint(K),
                      1.0f, x, blasint(K), wb, blasint(ld), accumulate ? 1.0f : 0.0f, p.out + b0,
                      blasint(p.n));
  }
}

// x as the products read it: x [M, K] itself; xp, x packed for the batched kernel or
// deinterleaved for the BF16 gemv; xl, x's rows in lanes for batch_lanes; xg, x in 8-row panels
// for the prefill GEMM; xb, x rounded to BF16 for BF16 weights under compute bf16 (packed for
// decode, row by row for prefill), else null, and the kernels that read it.
struct Input {
  const float* x;
  const float* xp;
  const float* xl;
  const float* xg;
  const std::uint16_t* xb;
  const Bf16Dot* dot;
  std::int64_t M, K;
  // The threads' tiles for quantized weights in a prefill on the own GEMM (tile_floats(K) each,
  // thread t's at t times that), else null.
  float* tiles = nullptr;
  std::int64_t tile_floats = 0;

  float* tile(int t) const { return tiles ? tiles + t * tile_floats : nullptr; }
};

bool is_blocks(WeightType t) {
  return traits(t).block > 1;
}

bool any_blocks(std::span<const Projection> projections) {
  for (const Projection& p : projections)
    if (is_blocks(p.w.type)) return true;
  return false;
}

void product(const Kernels& kernels, const Projection& p, const Input& in, std::int64_t n0,
             std::int64_t n1, float* scratch, float* tile, bool accumulate);

// A quantized matrix's rows n0..n1 in a prefill on the own GEMM: tile_rows(K) rows at a time
// widened (the set's widening, exactly traits' to_f32) into the thread's tile, then the GEMM on
// the tile. The GEMM sums in an order that does not depend on the rows' split, so the result has
// the bits of the F32 product over the whole dequantized matrix; and no more than a tile is ever
// widened at once (no dequantized copy of a matrix). Prefill on OpenBLAS widens in
// prefill_product's own blocks instead, those F32 reads in place.
void tiled_product(const Kernels& kernels, const Projection& p, const Input& in, std::int64_t n0,
                   std::int64_t n1, float* scratch, float* tile, bool accumulate) {
  if (!tile) throw std::logic_error("linear: quantized weights without a tile to widen them in");
  const std::int64_t K = in.K, ldw = p.w.stride(K), rows = tile_rows(K);
  const WidenFn widen = kernels.typed(p.w.type).widen;
  for (std::int64_t t0 = n0; t0 < n1; t0 += rows) {
    const std::int64_t nt = std::min(rows, n1 - t0);
    widen(p.w.at(t0 * ldw).data, ldw, nt, K, tile);  // [nt, K]
    const Projection f{p.out + t0, Matrix(tile), nullptr, p.n};
    product(kernels, f, in, 0, nt, scratch, nullptr, accumulate);
  }
}

// One thread's share of one projection; scratch: the thread's panel or widening buffer, for
// prefill; tile: the thread's tile for quantized weights.
void product(const Kernels& kernels, const Projection& p, const Input& in, std::int64_t n0,
             std::int64_t n1, float* scratch, float* tile, bool accumulate) {
  const std::int64_t n = n1 - n0, M = in.M, K = in.K;
  if (n <= 0) return;
  const TypedKernels& k = kernels.typed(p.w.type);
  const std::int64_t ldw = p.w.stride(K);
  const void* w = p.w.at(n0 * ldw).data;
  const float *x = in.x, *xp = in.xp;
  // Quantized rows: decode on their own kernels below (gemv, batched, lanes: each block widened
  // in registers or L1 where it is multiplied); prefill on widened tiles.
  if (is_blocks(p.w.type) && M > kBatchRows && kernels.own_gemm)
    tiled_product(kernels, p, in, n0, n1, scratch, tile, accumulate);
  // A handful of rows: our kernels stream the weights at full bandwidth, reading each weight
  // once for all M rows, where OpenBLAS's sgemm with tiny M does not; for one row our gemv
  // outruns OpenBLAS's sgemv too (docs/perf/kernels.md).
  else if (in.xb && p.w.type == WeightType::bf16 && M <= kBatchRows)
    in.dot->batch(static_cast<const Bf16*>(w), ldw, in.xb, M, K, p.out + n0, p.n, n, accumulate);
  else if (in.xb && p.w.type == WeightType::bf16)
    in.dot->gemm(static_cast<const Bf16*>(w), ldw, in.xb, M, K, p.out + n0, p.n, n, accumulate,
                 scratch);
  else if (M == 1)
    k.gemv(w, ldw, x, xp, p.out + n0, n, K, accumulate);
  else if (in.xl)
    batch_lanes(p.w.at(n0 * ldw), ldw, in.xl, M, K, p.out + n0, p.n, n, accumulate);
  else if (M <= kBatchRows)
    k.batch(w, ldw, xp, x, M, K, p.out + n0, p.n, n, accumulate);
  else
    prefill_product(kernels, p, x, in.xg, M, K, n0, n1, scratch, accumulate);
  if (p.bias)
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t j = n0; j < n1; ++j) p.out[m * p.n + j] += p.bias[j];
}

// Decode and batches: the weights are cut into blocks of kGemvRows rows, one item each, which the
// threads claim as they finish, so a thread slowed by the other core's neighbours does not hold up
// the step. Each output row is computed by one item, whatever ran it.
void linear_rows(const Runtime& rt, bool parallel, std::span<const Projection> projections,
                 const Input& in, bool accumulate) {
  std::int64_t blocks = 0;
  for (const Projection& p : projections) blocks += (p.n + kGemvRows - 1) / kGemvRows;
  rt.run(blocks, parallel, [&](std::int64_t i, int) -> std::int64_t {
    for (const Projection& p : projections) {
      const std::int64_t nb = (p.n + kGemvRows - 1) / kGemvRows;
      if (i < nb) {
        const std::int64_t n0 = i * kGemvRows, n1 = std::min(p.n, n0 + kGemvRows);
        product(*rt.kernels, p, in, n0, n1, nullptr, nullptr, accumulate);
        return 2 * in.M * in.K * (n1 - n0);
      }
      i -= nb;
    }
    return 0;
  });
}

// Floats of one thread's prefill scratch for inputs of K features: gemm_avx512's panels, or
// widen_rows(K) rows to widen BF16 and F16 blocks into.
std::int64_t prefill_floats(const Kernels& kernels, std::int64_t K) {
  return kernels.own_gemm ? gemm_panel_floats() : widen_rows(K) * K;
}

// Floats of the prefill scratch before the threads' own: x packed for gemm_avx512, which every
// thread reads.
std::int64_t prefill_shared_floats(const Kernels& kernels, std::int64_t M, std::int64_t K) {
  return kernels.own_gemm ? gemm_rows_floats(M, K) : 0;
}

// Prefill: the items of PrefillItems, each on the thread's own scratch. gemm_avx512's bits do not
// depend on the cut; OpenBLAS's do (where a call's columns start and end), so on OpenBLAS the
// blocks are prefill_product's own (widen_rows(K) rows from each projection's row 0) and x's rows
// are never cut: every thread count makes the same sgemm calls.
void prefill(const Runtime& rt, bool parallel, std::span<const Projection> projections,
             const Input& in, float* scratch, bool accumulate) {
  const Kernels& kernels = *rt.kernels;
  const bool own = kernels.own_gemm;
  // Only products that reach gemm_avx512 directly take a cut of x's rows: the compute-bf16 GEMM
  // reads x rounded row by row, and a quantized tile would be widened once per chunk.
  bool plain = own;
  for (const Projection& p : projections)
    plain = plain && !is_blocks(p.w.type) && !(in.xb && p.w.type == WeightType::bf16);
  const int threads = parallel ? rt.threads : 1;
  const PrefillItems items =
      own ? PrefillItems(projections, in.M, threads, kGemmNC, kGemmSteal, plain)
          : PrefillItems(projections, in.M, 1, widen_rows(in.K), widen_rows(in.K), false);
  const std::int64_t shared = prefill_shared_floats(kernels, in.M, in.K);
  rt.run(items.count(), parallel, [&](std::int64_t i, int slot) -> std::int64_t {
    const PrefillBlock b = items.at(i, projections);
    // F32 weights on OpenBLAS need no scratch: it may be null, and null + offset is UB.
    float* mine = scratch ? scratch + shared + slot * prefill_floats(kernels, in.K) : nullptr;
    const Projection& p = projections[b.part];
    if (b.m0 == 0 && b.m1 == in.M) {
      product(kernels, p, in, b.n0, b.n1, mine, in.tile(slot), accumulate);
    } else {  // rows m0..m1 of x (their panels in xg) on gemm_avx512 itself: product() would
              // take a few rows for a decode batch
      prefill_product(kernels, p, nullptr, in.xg + b.m0 * in.K, b.m1 - b.m0, in.K, b.n0, b.n1, mine,
                      accumulate, b.m0);
      if (p.bias)
        for (std::int64_t m = b.m0; m < b.m1; ++m)
          for (std::int64_t j = b.n0; j < b.n1; ++j) p.out[m * p.n + j] += p.bias[j];
    }
    return 2 * (b.m1 - b.m0) * in.K * (b.n1 - b.n0);
  });
}

}  // namespace

std::int64_t widen_rows(std::int64_t K) {
  return std::max<std::int64_t>(16, kWidenFloats / std::max<std::int64_t>(K, 1) / 16 * 16);
}

std::int64_t pack_floats(std::int64_t M, std::int64_t K) {
  // 1: x deinterleaved (deinterleave); else packed for the batched kernel, or in lanes
  if (M == 1) return K;
  return std::max(M * (K / kPack) * kPack, M >= kLanesFrom ? lanes_floats(M, K) : 0);
}

std::int64_t tile_rows(std::int64_t K) {  // whole 48-feature panels, up to a 192-feature block
  K = std::max<std::int64_t>(K, 1);
  return std::clamp(kWidenFloats / K / kGemmSteal * kGemmSteal, kGemmSteal, kGemmNC);
}

std::int64_t tile_floats(std::int64_t K) {
  // A bound of tile_rows(K) * K that grows with K, so that a call's tiles fit in the scratch
  // sized for the largest call.
  return std::max(kWidenFloats, kGemmSteal * K);
}

std::int64_t scratch_floats(std::int64_t max_rows, std::int64_t k_max, int threads, bool halves,
                            bool blocks, const Kernels& kernels, Compute compute) {
  halves = halves || blocks;  // quantized weights are widened as halves are, besides their tiles
  // The packed rows (M <= kBatchRows) and the prefill buffers (M > kBatchRows) are never needed
  // by the same call, so they share the buffer. widen_rows(K) * K <= max(16 K, kWidenFloats).
  // x in BF16 (compute bf16) lies after them.
  const std::int64_t rows = std::min(max_rows, kBatchRows);
  const std::int64_t pack = std::max(pack_floats(1, k_max), pack_floats(rows, k_max));
  const std::int64_t prefill = max_rows <= kBatchRows ? 0
                               : kernels.own_gemm     ? gemm_panel_floats()
                               : halves               ? std::max(16 * k_max, kWidenFloats)
                                                      : 0;
  const std::int64_t shared =
      max_rows <= kBatchRows ? 0 : prefill_shared_floats(kernels, max_rows, k_max);
  std::int64_t bf16 = 0;
  if (compute == Compute::bf16)
    bf16 = std::max(packed_bf16_elements(rows, k_max),
                    max_rows > kBatchRows ? rounded_bf16_elements(max_rows, k_max) : 0);
  const bool tiles = blocks && max_rows > kBatchRows && kernels.own_gemm;  // tiled_product's
  return std::max(pack, shared + threads * prefill) + (bf16 + 1) / 2 +
         (tiles ? threads * tile_floats(k_max) : 0);
}

namespace {

// x for the products of one call (Input), in the caller's scratch: packed or deinterleaved F32
// at its start, BF16 after the F32 part (compute bf16 with BF16 weights; on avx512 only).
Input prepare_input(const Runtime& rt, bool parallel, std::span<const Projection> projections,
                    const float* x, std::int64_t M, std::int64_t K, float* scratch) {
  Input in{x, nullptr, nullptr, nullptr, nullptr, nullptr, M, K};
  // Compute bf16, but where the exact kernels are as fast (Bf16Dot::exact_below) they run.
  const bool bf16 = rt.compute == Compute::bf16 && any_bf16(projections) &&
                    !(rt.bf16_dot && M <= kBatchRows && M < rt.bf16_dot->exact_below);
  if (M >= rt.kernels->lanes_from && M <= kBatchRows) {
    pack_lanes(x, M, K, scratch);
    in.xl = scratch;
  } else if (M >= 2 && M <= kBatchRows) {
    in.xp = pack_rows(x, M, K, scratch);
  }
  if (M > kBatchRows && rt.kernels->own_gemm) {
    // x's 8-row panels are independent: the pool's items, so that the threads do not wait while
    // one packs them all (1% of a prefill on one thread, an eighth of it on 16 otherwise;
    // docs/perf/prefill-gemm.md).
    rt.run((M + kGemmMR - 1) / kGemmMR, parallel,
           [&](std::int64_t i, int) { pack_gemm_panels(x, M, K, i, i + 1, scratch); });
    in.xg = scratch;
  }
  if (M == 1 && any_bf16(projections) && !bf16) {
    deinterleave(x, K, rt.kernels->lanes, scratch);
    in.xp = scratch;
  }
  if (!bf16) return in;
  if (!rt.bf16_dot) throw std::logic_error("linear: compute bf16 without its kernels");
  const std::int64_t f32 = M <= kBatchRows ? std::max(pack_floats(1, K), pack_floats(M, K))
                                           : prefill_shared_floats(*rt.kernels, M, K) +
                                                 rt.threads * prefill_floats(*rt.kernels, K);
  auto* xb = reinterpret_cast<std::uint16_t*>(scratch + f32);
  if (M <= kBatchRows)
    rt.bf16_dot->pack(x, M, K, xb);
  else
    rt.bf16_dot->round(x, M, K, xb);
  in.xb = xb;
  in.dot = rt.bf16_dot;
  return in;
}

}  // namespace

void linear(const Runtime& rt, std::span<const Projection> projections, const float* x,
            std::int64_t M, std::int64_t K, float* scratch, bool accumulate) {
  std::int64_t flops = 0;
  for (const Projection& p : projections) flops += 2 * M * K * p.n;
  const Kernels& kernels = *rt.kernels;
  // Waking a second thread costs microseconds, more than a small product takes.
  const bool parallel = rt.worth_parallel(flops);
  Input in = prepare_input(rt, parallel, projections, x, M, K, scratch);
  if (any_blocks(projections) && M > kBatchRows && kernels.own_gemm) {  // tiled_product's, after
    // everything else in the scratch
    in.tiles = scratch + scratch_floats(M, K, rt.threads, true, false, kernels, rt.compute);
    in.tile_floats = tile_floats(K);
  }
  if (M <= kBatchRows) return linear_rows(rt, parallel, projections, in, accumulate);
  prefill(rt, parallel, projections, in, scratch, accumulate);
}

void group_scores(const Runtime& rt, const float* q, std::int64_t n, const float* k,
                  std::int64_t keys, std::int64_t hd, float scale, float* s) {
  rt.kernels->scores(q, n, k, keys, hd, scale, s);
}

void group_mix(const Runtime& rt, const float* p, std::int64_t n, const float* v, std::int64_t keys,
               std::int64_t hd, float* out) {
  rt.kernels->mix(p, n, v, keys, hd, out);
}

void widen_to_f32(const Runtime& rt, const Matrix& w, std::int64_t rows, std::int64_t K,
                  float* out) {
  rt.kernels->typed(w.type).widen(w.data, w.stride(K), rows, K, out);
}

void open_blas_for(const Runtime& rt, std::int64_t batch, std::int64_t positions,
                   std::int64_t start_pos, std::int64_t head_dim) {
  const std::int64_t rows = std::min(positions, kAttentionChunk);
  const bool attention = rows > 1 && attention_on_blas(rows, start_pos + positions, head_dim);
  if (attention || (batch * positions > kBatchRows && !rt.kernels->own_gemm)) blas::api();
}

std::string blas_core() {
  if (!blas::loaded()) return "not loaded";  // no product has needed it: opening it costs time
  const char* core = blas::api().get_corename();
  return core ? core : "unknown";
}

}  // namespace attn

namespace attn {

std::string matmul_path(const Runtime& rt) {
  const std::string prefill =
      rt.kernels->own_gemm
          ? "own AVX-512 GEMM (8 x 48 tiles, x in 8-row panels, weights packed per block) on "
            "192-feature blocks, 48-feature ones at the end, x's rows cut too when the blocks are "
            "few"
          : "single-threaded OpenBLAS sgemm on fixed blocks of rows";
  const std::int64_t from = rt.kernels->lanes_from;
  const std::string lanes = from <= kBatchRows ? ", from M = " + std::to_string(from) +
                                                     " with the rows in vector lanes, summed as "
                                                     "the GEMM sums"
                                               : "";
  return "pool of " + std::to_string(rt.threads) +
         " threads, items claimed as they finish: " + prefill + " (M > " +
         std::to_string(kBatchRows) + "), own " + rt.kernels->name +
         " kernels on 64-row blocks (M = 1: gemv; M = 2.." + std::to_string(kBatchRows) +
         ": each weight read once for all rows" + lanes + ")";
}

}  // namespace attn
