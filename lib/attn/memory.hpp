#pragma once
// The pre-flight memory estimate: every buffer a run will allocate, by part, summed in 64 bits
// with overflow checks and compared with the memory the machine has available, before any
// allocation. A run that cannot fit is refused with exit status 2, naming its largest part.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "attn/config.hpp"

namespace attn {

struct MemoryPart {
  std::string name;
  std::uint64_t bytes = 0;
};

// What a run is asked to do, as far as memory goes.
struct RunShape {
  std::int64_t batch = 1, prefill = 0, steps = 0;
  std::int64_t max_rows = 1;  // rows of the largest forward call
  int threads = 1;
  bool dump = false;
  std::uint64_t attention_weights = 0;  // bytes of probabilities kept (--attention-weights)
};

// The product of sizes from the user, in bytes; throws InputError naming `what` on a negative
// factor or a product past 2^64.
std::uint64_t checked_product(std::initializer_list<std::int64_t> factors, const std::string& what);

// Every part a run allocates. Adding a buffer to the engine means adding its line here.
std::vector<MemoryPart> memory_parts(const ModelArgs& args, const RunShape& run);

// MemAvailable from /proc/meminfo; without it, free physical pages.
std::uint64_t available_memory();

// Sums the parts (overflow-checked) and throws InputError if they need more than `available`,
// naming the largest part and what to lower.
void check_memory(const std::vector<MemoryPart>& parts, std::uint64_t available);

// "1.25 GiB", "312.0 MiB", "4.0 KiB"
std::string bytes_text(std::uint64_t bytes);

}  // namespace attn
