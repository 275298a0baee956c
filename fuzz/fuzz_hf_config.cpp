// libFuzzer harness: a Hugging Face config.json (seeded with real ones, fuzz/run.sh) on any
// text, then what the CLI does with it: the overrides (--max-seq-len, --model-parallel, --layers
// as mpirun or the flags would set them) and the memory estimate. Refusals (InputError) are
// expected; anything else, a crash or a sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "attn/error.hpp"
#include "attn/model/config.hpp"
#include "attn/model/memory.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  try {
    // The first byte picks the overrides; the rest is the file.
    const std::uint8_t pick = data[0];
    attn::ModelArgs a = attn::parse_config(
        std::string(reinterpret_cast<const char*>(data + 1), size - 1), "config.json");
    attn::ConfigOverrides o;
    o.max_seq_len = pick & 1 ? 64 : 0;
    o.model_parallel_size = (pick >> 1) & 3;
    o.layer_begin = (pick >> 3) & 1;
    attn::apply_overrides(a, o);
    attn::check_memory(attn::memory_parts(a, {2, 7, 3, 14, 2, true}), {1ull << 30, "fuzz"});
  } catch (const attn::InputError&) {
  }
  return 0;
}
