#pragma once
// The pre-flight memory estimate: every buffer a run will allocate, by part, summed in 64 bits
// with overflow checks and compared with the memory the machine has available, before any
// allocation. A run that cannot fit is refused with exit status 2, naming its largest part.
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include "attn/kernels/runtime.hpp"
#include "attn/matrix.hpp"
#include "attn/model/config.hpp"
#include "attn/model/parallel.hpp"

namespace attn {

struct MemoryPart {
  std::string name;
  std::uint64_t bytes = 0;     // what the run costs: the bytes it writes
  std::uint64_t reserved = 0;  // address space held beyond that (capacity-sized buffers)
};

// What a run is asked to do, as far as memory goes.
struct RunShape {
  std::int64_t batch = 1, prefill = 0, steps = 0;
  std::int64_t max_rows = 1;  // rows of the largest forward call
  int threads = 1;
  bool dump = false;
  std::uint64_t attention_weights = 0;  // bytes of probabilities kept (--attention-weights)
  std::uint64_t logit_lens = 0;         // bytes of the logit lens's logits (engine/lens.hpp)
  std::uint64_t activations = 0;        // bytes of activations kept for the dump
  // The types the weight matrices are held in (a file's dtypes, or the drawn type); norms and
  // biases are F32 always. A file mixing types is counted at the widest, and without AVX-512
  // any BF16 or F16 matrix brings the widening buffers.
  std::vector<WeightType> matrices = {WeightType::f32};
  // The kernels' set (a Kernels name; "": the best this CPU runs): with AVX-512, prefill packs
  // weights into small panels instead of widening blocks.
  std::string isa = {};
  Compute compute = Compute::f32;  // bf16: products of BF16 weights keep x in BF16 besides
  bool all_logits = false;         // a token run keeps every position's logits, not each last one
  ModelEnds ends = {};             // the token model's ends the run builds: their weights, logits
};

// The product of sizes from the user, in bytes; throws InputError naming `what` on a negative
// factor or a product past 2^64.
std::uint64_t checked_product(std::initializer_list<std::int64_t> factors, const std::string& what);

// Every part a run allocates on this rank: the model's buffers as plan_buffers sizes them for
// the rank's share (local_args), its weights, and the run's input, outputs and dump.
std::vector<MemoryPart> memory_parts(const ModelArgs& args, const RunShape& run,
                                     const Shard& shard = {});

struct AvailableMemory {
  std::uint64_t bytes = 0;
  std::string limit;  // which limit it is: "MemAvailable", "cgroup memory.max", ...
};

// The smaller of MemAvailable (/proc/meminfo; without it, free physical pages) and the room the
// process's memory cgroup leaves: v2's memory.max - memory.current, v1's memory.limit_in_bytes -
// memory.usage_in_bytes ("max" or an absurdly large limit: none). Files are read under `root`,
// so that tests can lay out their own /proc and /sys/fs/cgroup.
AvailableMemory available_memory(const std::filesystem::path& root = "/");

// Sums the parts (overflow-checked) and throws InputError if they need more than `available`,
// naming the limit, the largest part and what to lower.
// `source` (the config that asked for the run) leads the message when given.
void check_memory(const std::vector<MemoryPart>& parts, const AvailableMemory& available,
                  const std::string& source = "");

// "1.25 GiB", "312.0 MiB", "4.0 KiB"
std::string bytes_text(std::uint64_t bytes);

}  // namespace attn
