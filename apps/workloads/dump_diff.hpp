#pragma once
// Two dumps compared tensor by tensor in the order the forward computes them (attn-cli diff): a
// run's dump against another's, or against tensors saved from PyTorch under the same names
// (TransformerLens's hook names, model/hook_names.hpp). The first tensor past the tolerance is
// where two runs part. attn-cli diff's reading half; its table and JSON are commands/diff.cpp's.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace cli {

// torch.allclose's test, B the reference: |a - b| <= atol + rtol * |b|; a NaN equals a NaN at the
// same place only, an infinity the same infinity. The defaults are torch.allclose's.
struct DiffTolerance {
  double rtol = 1e-5;
  double atol = 1e-8;
};

// Where a dump's tensor is computed, as a sort key: the input first; then call by call (the
// prefill, decode.1, decode.2, ...) block by block, in each block the sites as the forward
// computes them (kForwardSites) with the dump's own tensors where they are made (cache.{l}.k
// after hook_rot_k, cache.{l}.v after hook_v, attn.{l}.* at hook_pattern, lens.{l}.* after
// hook_resid_post); after the blocks the output, ln_final.hook_normalized and the logits; names
// of none of these last, by name.
struct ForwardRank {
  std::int64_t call = 0;   // -1 the input, 0 the prefill, i decode step i, max: unknown names
  std::int64_t layer = 0;  // the block; max: after the blocks
  std::int64_t slot = 0;   // the place in the block
  friend auto operator<=>(const ForwardRank&, const ForwardRank&) = default;
};
ForwardRank forward_rank(std::string_view name);

// Sorts names in forward order (ties by name).
void sort_forward(std::vector<std::string>& names);

// One name's comparison.
struct TensorDiff {
  std::string name;
  bool in_a = false, in_b = false;
  std::string dtype_a, dtype_b;                // "F32", ...; empty when absent
  std::vector<std::int64_t> shape_a, shape_b;  // empty when absent
  std::int64_t numel = 0;                      // compared elements (same shapes only)
  std::int64_t over = 0;       // elements past the tolerance, non-finite mismatches included
  std::int64_t nonfinite = 0;  // of them: a NaN or an infinity not matched at the same place
  double max_abs = 0;          // max |a - b| over the elements finite in both
  double max_rel = 0;          // max |a - b| / |b| over them where b != 0
  bool same_shape() const { return in_a && in_b && shape_a == shape_b; }
  bool equal() const { return same_shape() && over == 0; }
};

struct DumpDiff {
  std::string a, b;  // the files
  DiffTolerance tolerance;
  std::vector<TensorDiff> tensors;  // every name of either file, in forward order
  std::string first;                // the first name in both that differs (shape or values)
  bool equal() const;               // same names, same shapes, every value within the tolerance
};

// Reads both safetensors files (F32, F16, BF16 or F64 tensors) and compares them. Throws
// InputError naming the file (and tensor) when one cannot be read or holds another dtype.
DumpDiff diff_dumps(const std::filesystem::path& a, const std::filesystem::path& b,
                    DiffTolerance tolerance = {});

}  // namespace cli
