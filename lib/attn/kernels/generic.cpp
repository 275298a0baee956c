// The kernels every x86-64 (and any other) CPU runs: vectors of 4 floats, the FMAs in software
// where the CPU has none (std::fma), so the bits are those of the other sets.
#include "attn/kernels/detail/define_kernels.hpp"
#include "attn/kernels/detail/sets.hpp"

namespace attn {
namespace {
ATTN_KERNELS(generic, , 4, ATTN_BATCH_NARROW, false)
}  // namespace

const Kernels& generic_kernels() {
  return k_generic;
}

}  // namespace attn
