#include "attn/kernels/matmul.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

#include "attn/kernels/attention.hpp"
#include "attn/kernels/detail/bf16_dot.hpp"
#include "attn/kernels/detail/blas.hpp"
#include "attn/kernels/detail/layout.hpp"
#include "attn/kernels/detail/q8_dot.hpp"
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

bool any_of_type(std::span<const Projection> projections, WeightType a, WeightType b) {
  for (const Projection& p : projections)
    if (p.w.type == a || p.w.type == b) return true;
  return false;
}

// x [M, K] packed as [K / kPack, M, kPack] (whole blocks only) into a buffer of the calling
// thread, which grows to the largest product once and is reused: no allocation per step.
void pack_rows(const float* x, std::int64_t M, std::int64_t K, float* out) {
  const std::int64_t blocks = K / kPack;
  for (std::int64_t b = 0; b < blocks; ++b)
    for (std::int64_t m = 0; m < M; ++m)
      std::memcpy(out + (b * M + m) * kPack, x + m * K + b * kPack, kPack * sizeof(float));
}

// x's rows in tiles: up to kBatchRows rows are one; more go in tiles of at most `rows`, as even
// as they come (a prefill of 40 rows goes as 20 + 20): each tile is one batched product, so more
// than kBatchRows rows run the very kernels of a decode batch, tile by tile, and every output has
// the canonical order's bits whatever the tile it falls in. Tile t is rows
// first(t)..first(t + 1) - 1, packed from xp + first(t) * kv.
struct Tiles {
  std::int64_t M, count;
  Tiles(std::int64_t M_, std::int64_t rows)
      : M(M_), count(M_ <= kBatchRows ? 1 : (M_ + rows - 1) / rows) {}
  std::int64_t first(std::int64_t t) const { return M * t / count; }
};

// Rows per prefill tile for F32, BF16 and F16 weights: 30, not 32: on Zen 4 their 4 x 6 blocking
// ran a 32-row tile from L2 at 84% of the FMA peak and a 30-row one at 93% (bench_batch_kernel
// --shape 16 4096; docs/perf/prefill-gemm.md, "Zen 4 prefill tiles"). The quantized blocks'
// kernels group x's rows by 4 (Set::kBlockCols): kBatchRows for them.
constexpr std::int64_t kPrefillTileRows = 30;

// Whether every projection's weights are elements (F32, BF16, F16), none quantized blocks.
bool element_weights(std::span<const Projection> projections) {
  for (const Projection& p : projections)
    if (traits(p.w.type).block > 1) return false;
  return true;
}

std::int64_t tile_rows(std::span<const Projection> projections) {
  return element_weights(projections) ? kPrefillTileRows : kBatchRows;
}

// The projections' weights cut into blocks of `rows` rows, one projection after another: block b
// is rows n0..n1 of *p.
struct Block {
  const Projection* p;
  std::int64_t n0, n1;
};
std::int64_t count_blocks(std::span<const Projection> projections, std::int64_t rows) {
  std::int64_t blocks = 0;
  for (const Projection& p : projections) blocks += (p.n + rows - 1) / rows;
  return blocks;
}
Block block_at(std::span<const Projection> projections, std::int64_t rows, std::int64_t b) {
  for (const Projection& p : projections) {
    const std::int64_t nb = (p.n + rows - 1) / rows;
    if (b < nb) return {&p, b * rows, std::min(p.n, (b + 1) * rows)};
    b -= nb;
  }
  return {nullptr, 0, 0};
}

// x as the products read it: x [M, K] itself; xp, x's tiles packed for the batched kernel or,
// for one row, deinterleaved for the BF16 gemv; xb, x rounded to BF16 for BF16 weights under
// compute bf16 (packed for decode, row by row for prefill), else null, and the kernels that read
// it; panels, each thread's panel for the compute-bf16 prefill GEMM; xq, x quantized for compute
// q8 (q8_dot.hpp's layout, both ways where needed), else null, and the kernels that read it.
struct Input {
  const float* x;
  const float* xp;
  const std::uint16_t* xb;
  const Bf16Dot* dot;
  std::int64_t M, K;
  float* panels = nullptr;
  std::int64_t tile_rows = kBatchRows;  // Tiles' rows
  const std::uint8_t* xq = nullptr;
  const Q8Dot* q8 = nullptr;

  float* panel(int slot) const { return panels ? panels + slot * gemm_panel_floats() : nullptr; }
  // x quantized for weights of `type`, or null where they compute otherwise.
  const std::uint8_t* quantized(WeightType type) const {
    return xq && q8_weights(type) ? xq + q8_offset(type, M, K) : nullptr;
  }
};

// out's rows m0..m1, features n0..n1 += the bias, if any.
void add_bias(const Projection& p, std::int64_t m0, std::int64_t m1, std::int64_t n0,
              std::int64_t n1) {
  if (p.bias)
    for (std::int64_t m = m0; m < m1; ++m)
      for (std::int64_t j = n0; j < n1; ++j) p.out[m * p.n + j] += p.bias[j];
}

// Rows n0..n1 (at most kGemvRows) of w against x's tile t (Tiles of in.tile_rows): one batched
// product.
void tile_product(const Kernels& kernels, const Projection& p, const Input& in, std::int64_t n0,
                  std::int64_t n1, std::int64_t t, bool accumulate) {
  const std::int64_t K = in.K, ldw = p.w.stride(K), kv = K / kPack * kPack;
  const Tiles tiles(in.M, in.tile_rows);
  const std::int64_t m0 = tiles.first(t), mt = tiles.first(t + 1) - m0;
  kernels.typed(p.w.type).batch(p.w.at(n0 * ldw).data, ldw, in.xp + m0 * kv, in.x + m0 * K, mt, K,
                                p.out + m0 * p.n + n0, p.n, n1 - n0, accumulate);
}

// One thread's share of one projection: rows n0..n1 (at most kGemvRows) of w against every row of
// x; slot: the thread's, for its panel.
void product(const Kernels& kernels, const Projection& p, const Input& in, std::int64_t n0,
             std::int64_t n1, int slot, bool accumulate) {
  const std::int64_t n = n1 - n0, M = in.M, K = in.K;
  if (n <= 0) return;
  const TypedKernels& k = kernels.typed(p.w.type);
  const std::int64_t ldw = p.w.stride(K);
  const void* w = p.w.at(n0 * ldw).data;
  if (const std::uint8_t* xq = in.quantized(p.w.type)) {  // x's tiles pass over the rows
    const Tiles tiles(M, kBatchRows);                     // the q8 kernels' tiles: kBatchRows rows
    const std::int64_t row = q8_row_bytes(p.w.type, K);
    for (std::int64_t t = 0; t < tiles.count; ++t) {
      const std::int64_t m0 = tiles.first(t), mt = tiles.first(t + 1) - m0;
      in.q8->rows(p.w.type, w, ldw, xq + m0 * row, mt, K, p.out + m0 * p.n + n0, p.n, n,
                  accumulate);
    }
  } else if (in.xb && p.w.type == WeightType::bf16 && M <= kBatchRows) {
    in.dot->batch(static_cast<const Bf16*>(w), ldw, in.xb, M, K, p.out + n0, p.n, n, accumulate);
  } else if (in.xb && p.w.type == WeightType::bf16) {
    in.dot->gemm(static_cast<const Bf16*>(w), ldw, in.xb, M, K, p.out + n0, p.n, n, accumulate,
                 in.panel(slot));
  } else if (M == 1) {
    k.gemv(w, ldw, in.x, in.xp, p.out + n0, n, K, accumulate);
  } else {  // quantized blocks: the weights' rows stay in L2 while the tiles pass (kPrefillRows)
    const Tiles tiles(M, in.tile_rows);
    for (std::int64_t t = 0; t < tiles.count; ++t)
      tile_product(kernels, p, in, n0, n1, t, accumulate);
  }
  add_bias(p, 0, M, n0, n1);
}

// Weight rows per item: kGemvRows for decode; for a prefill of quantized blocks, fewer, so that an
// item's rows stay in L2 while x's tiles pass over them (docs/perf/batch-invariance.md); but the
// compute-bf16 GEMM's own blocks of kGemmNC features, whose register tiles are 48 features wide (an
// item of 16 left two thirds of each tile empty and packed a panel per 16 features).
std::int64_t item_rows(const Input& in) {
  if (in.M <= kBatchRows) return kGemvRows;
  return in.xb ? kGemmNC : kPrefillRows;
}

// A prefill of F32, BF16 or F16 weights: its items are a tile of x's rows against kGemvRows
// weight rows, tile by tile (every projection's blocks against tile 0, then tile 1, ...), so a
// thread's tile of x stays in L2 while the weight rows stream past it from memory, prefetched
// as decode streams them. Items of kPrefillRows rows against every tile read all of x (8 MB at
// 512 x 4096) from L3 once per 16 rows, 4 times as often as 64 rows, and held the F16 products
// at 73-79% of the FMA peak against 79-82% (docs/perf/prefill-gemm.md, "Zen 4 prefill, round
// two"). Each output is still one tile's batched product: the same bits whatever the items.
void linear_tiles(const Runtime& rt, bool parallel, std::span<const Projection> projections,
                  const Input& in, bool accumulate) {
  const Tiles tiles(in.M, in.tile_rows);
  const std::int64_t blocks = count_blocks(projections, kGemvRows);  // per tile
  rt.run(blocks * tiles.count, parallel, [&](std::int64_t i, int) -> std::int64_t {
    const std::int64_t t = i / blocks, m0 = tiles.first(t), m1 = tiles.first(t + 1);
    const Block b = block_at(projections, kGemvRows, i % blocks);
    tile_product(*rt.kernels, *b.p, in, b.n0, b.n1, t, accumulate);
    add_bias(*b.p, m0, m1, b.n0, b.n1);
    return 2 * (m1 - m0) * in.K * (b.n1 - b.n0);
  });
}

// The weights are cut into blocks of item_rows(in) rows, one item each; each thread claims its own
// contiguous range of them in order, so its weight rows are one stream, and takes the tail of
// another's range when its own is done, so a thread slowed by the other core's neighbours does
// not hold up the step (pool.hpp). Each output is computed by one item, whatever ran it, in the
// canonical order: the threads split outputs only. A prefill of F32, BF16 or F16 weights cuts
// x's rows too (linear_tiles).
void linear_rows(const Runtime& rt, bool parallel, std::span<const Projection> projections,
                 const Input& in, bool accumulate) {
  if (in.M > kBatchRows && !in.xb && !in.xq && element_weights(projections))
    return linear_tiles(rt, parallel, projections, in, accumulate);
  const std::int64_t rows = item_rows(in);
  rt.run(count_blocks(projections, rows), parallel, [&](std::int64_t i, int slot) -> std::int64_t {
    const Block b = block_at(projections, rows, i);
    product(*rt.kernels, *b.p, in, b.n0, b.n1, slot, accumulate);
    return 2 * in.M * in.K * (b.n1 - b.n0);
  });
}

// Floats of the compute-bf16 prefill GEMM's panels (every thread's), else 0.
std::int64_t panel_floats(std::int64_t M, int threads, Compute compute) {
  return compute == Compute::bf16 && M > kBatchRows ? threads * gemm_panel_floats() : 0;
}

}  // namespace

std::int64_t pack_floats(std::int64_t M, std::int64_t K) {
  // 1: x deinterleaved (deinterleave); else x's tiles packed for the batched kernel
  return M == 1 ? K : M * (K / kPack) * kPack;
}

std::int64_t scratch_floats(std::int64_t max_rows, std::int64_t k_max, int threads,
                            Compute compute) {
  // x packed (as many rows as the largest call: pack_floats grows with M from 2 rows on), then
  // the compute-bf16 GEMM's panels, then x in BF16; or, under compute q8, x quantized (64-byte
  // aligned).
  const std::int64_t rows = std::min(max_rows, kBatchRows);
  const std::int64_t pack = std::max(pack_floats(1, k_max), pack_floats(max_rows, k_max));
  std::int64_t bf16 = 0;
  if (compute == Compute::bf16)
    bf16 = std::max(packed_bf16_elements(rows, k_max),
                    max_rows > kBatchRows ? rounded_bf16_elements(max_rows, k_max) : 0);
  // (K rounded up to 256: both layouts counted for any K <= k_max, whichever blocks it has)
  const std::int64_t k256 = (k_max + 255) / 256 * 256;
  const std::int64_t q8 =
      compute == Compute::q8 ? 16 + (q8_input_bytes(max_rows, k256) + 3) / 4 : 0;
  return pack + panel_floats(max_rows, threads, compute) + (bf16 + 1) / 2 + q8;
}

namespace {

// Under compute q8, x quantized after the F32 scratch (64-byte aligned) for the types of the
// projections that need it, each tile of rows on its own as the pool's items.
Input quantize_input(const Runtime& rt, bool parallel, std::span<const Projection> projections,
                     Input in, float* scratch) {
  const std::int64_t M = in.M, K = in.K;
  const bool q80 = any_of_type(projections, WeightType::q8_0, WeightType::q8_0);
  const bool q8k = any_of_type(projections, WeightType::q4_k, WeightType::q6_k);
  if (!q80 && !q8k) return in;
  if (!rt.q8_dot) throw std::logic_error("linear: compute q8 without its kernels");
  const std::int64_t f32 = std::max(pack_floats(1, K), pack_floats(M, K));
  const auto at = reinterpret_cast<std::uintptr_t>(scratch + f32);
  auto* xq = reinterpret_cast<std::uint8_t*>((at + 63) / 64 * 64);
  const Tiles tiles(M, kBatchRows);  // as product()'s q8 tiles
  rt.run(tiles.count, parallel && tiles.count > 1, [&](std::int64_t t, int) {
    const std::int64_t m0 = tiles.first(t), mt = tiles.first(t + 1) - m0;
    for (const WeightType type : {WeightType::q8_0, WeightType::q4_k})
      if (type == WeightType::q8_0 ? q80 : q8k)
        rt.q8_dot->quantize(type, in.x + m0 * K, mt, K,
                            xq + q8_offset(type, M, K) + m0 * q8_row_bytes(type, K));
  });
  in.xq = xq;
  in.q8 = rt.q8_dot;
  return in;
}

// x for the products of one call (Input), in the caller's scratch: packed or deinterleaved F32
// at its start, the compute-bf16 panels and x in BF16 after it (on avx512 only).
Input prepare_input(const Runtime& rt, bool parallel, std::span<const Projection> projections,
                    const float* x, std::int64_t M, std::int64_t K, float* scratch) {
  Input in{x, nullptr, nullptr, nullptr, M, K};
  in.tile_rows = tile_rows(projections);
  // Compute bf16, but where the exact kernels are as fast (Bf16Dot::exact_below) they run.
  const bool bf16 = rt.compute == Compute::bf16 && any_bf16(projections) &&
                    !(rt.bf16_dot && M <= kBatchRows && M < rt.bf16_dot->exact_below);
  // Under compute q8 with every matrix of a q8 type, only the quantized x is read.
  const bool all_q8 = rt.compute == Compute::q8 &&
                      std::all_of(projections.begin(), projections.end(),
                                  [](const Projection& p) { return q8_weights(p.w.type); });
  if (M >= 2 && !all_q8) {  // each tile packed on its own, as the pool's items if several
    const Tiles tiles(M, in.tile_rows);
    const std::int64_t kv = K / kPack * kPack;
    rt.run(tiles.count, parallel && tiles.count > 1, [&](std::int64_t t, int) {
      const std::int64_t m0 = tiles.first(t);
      pack_rows(x + m0 * K, tiles.first(t + 1) - m0, K, scratch + m0 * kv);
    });
    in.xp = scratch;
  }
  if (M == 1 && any_bf16(projections) && !bf16) {
    deinterleave(x, K, rt.kernels->lanes, scratch);
    in.xp = scratch;
  }
  if (rt.compute == Compute::q8) return quantize_input(rt, parallel, projections, in, scratch);
  if (!bf16) return in;
  if (!rt.bf16_dot) throw std::logic_error("linear: compute bf16 without its kernels");
  const std::int64_t f32 = std::max(pack_floats(1, K), pack_floats(M, K));
  in.panels = M > kBatchRows ? scratch + f32 : nullptr;
  auto* xb =
      reinterpret_cast<std::uint16_t*>(scratch + f32 + panel_floats(M, rt.threads, rt.compute));
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
  // Waking a second thread costs microseconds, more than a small product takes.
  const bool parallel = rt.worth_parallel(flops);
  const Input in = prepare_input(rt, parallel, projections, x, M, K, scratch);
  linear_rows(rt, parallel, projections, in, accumulate);
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

std::string blas_core() {
  if (!blas::loaded()) return "not loaded";  // only the sgemm probe opens it: opening costs time
  const char* core = blas::api().get_corename();
  return core ? core : "unknown";
}

}  // namespace attn

namespace attn {

std::string matmul_path(const Runtime& rt) {
  return "pool of " + std::to_string(rt.threads) +
         " threads, each a contiguous range of items, the tails stolen: own " + rt.kernels->name +
         " kernels on blocks of weight rows (" + std::to_string(kGemvRows) + " for decode, " +
         std::to_string(kGemvRows) + " against one tile of x for prefill, " +
         std::to_string(kPrefillRows) +
         " against every tile for quantized blocks; M = 1: gemv; M = 2.." +
         std::to_string(kBatchRows) +
         ": each weight read once for all rows; more: x's rows in "
         "tiles of up to " +
         std::to_string(kPrefillTileRows) + ", " + std::to_string(kBatchRows) +
         " for quantized blocks), every output in the canonical order (" +
         std::to_string(rt.kernels->lanes * 2) +
         " chains, then one tree) whatever the rows computed with it";
}

}  // namespace attn
