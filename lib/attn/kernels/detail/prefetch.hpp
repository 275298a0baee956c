#pragma once
// How the decode kernels ask for the weights ahead of where they read them, in one place: the
// kernels (matmul.cpp) and the bench's streaming read, which must read as the kernels do.
#include <cstdint>

namespace attn {

// Bytes ahead of where a row is read that its weights are asked for, into L2 (prefetcht1). The
// hardware prefetchers alone leave the stream's loads waiting on memory while the FMAs idle, and
// then the FMAs busy while memory idles; asked for 3 KB ahead, loads and FMAs overlap
// (docs/perf/kernels.md).
inline constexpr std::int64_t kPrefetchBytes = 3072;

// A block of weight rows read column by column, `rows` rows at a time, over columns begin..end:
// past `end`, the stream goes on at `begin` of the row `rows` rows on. Asking there for what
// lies past a row's end keeps the next rows' first kilobytes coming too, where asking past the
// row's end in memory would fetch rows this block already read (docs/perf/kernels.md). ahead() is
// the same for every row of a column, so the kernels work it out once per column and keep the
// address arithmetic out of the FMAs' way.
struct Stream {
  std::int64_t begin, end, rows;

  // Elements from row r's column k to the one to ask for.
  template <typename T>
  std::int64_t ahead(std::int64_t k, std::int64_t ldw) const {
    constexpr std::int64_t near = kPrefetchBytes / std::int64_t(sizeof(T));
    return k + near < end ? near : rows * ldw + begin - end + near;
  }
};

// Bytes ahead of where the batched kernel reads a weight row that it asks for them into L1 as
// well (prefetcht0), in every group of x's rows: from 9 rows on, the groups after the first read
// the weight rows again after the earlier groups' x rows have passed through L1, and the
// weights' loads, not the FMAs, held the kernel up (perf; docs/perf/kernels.md).
inline constexpr std::int64_t kL1PrefetchBytes = 512;

// Asks for p + elements into L2. In integers: the address may lie past the matrix, where a
// prefetch is harmless.
template <typename T>
[[gnu::always_inline]] inline void prefetch_at(const T* p, std::int64_t elements) {
  __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(p) +
                                                   std::uintptr_t(elements) * sizeof(T)),
                     0, 2);
}

// Asks for p + elements into L1.
template <typename T>
[[gnu::always_inline]] inline void prefetch_l1_at(const T* p, std::int64_t elements) {
  __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(p) +
                                                   std::uintptr_t(elements) * sizeof(T)),
                     0, 3);
}

// The prefill GEMMs' next chunk of weights (rows x cols from w, rows ldw apart) asked for into L2
// while the tiles run on this chunk's panels, a few cache lines per tile: packing otherwise
// waits on memory for every row it starts (docs/perf/prefill-gemm.md).
template <typename T>
struct ChunkPrefetch {
  const T* w;  // the matrix; the chunk starts at row `row`, column `col`
  std::int64_t ldw, row, col, rows, lines_per_row, per_tile;
  std::int64_t r = 0, line = 0;  // the next line to ask for: row r of the chunk, its line-th line

  ChunkPrefetch(const T* w, std::int64_t ldw, std::int64_t row, std::int64_t col, std::int64_t rows,
                std::int64_t cols, std::int64_t tiles)
      : w(w), ldw(ldw), row(row), col(col), rows(rows) {
    lines_per_row = (cols * std::int64_t(sizeof(T)) + 63) / 64;
    per_tile = tiles > 0 ? (rows * lines_per_row + tiles - 1) / tiles : 0;
  }
  // Counters, not a division per line: a 64-bit idiv per line is slow next to the tile's work.
  void step() {
    constexpr std::int64_t kLine = 64 / std::int64_t(sizeof(T));
    for (std::int64_t i = 0; i < per_tile && r < rows; ++i) {
      prefetch_at(w, (row + r) * ldw + col + line * kLine);
      if (++line == lines_per_row) {
        line = 0;
        ++r;
      }
    }
  }
};

}  // namespace attn
