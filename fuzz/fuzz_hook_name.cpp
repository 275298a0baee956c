// libFuzzer harness: a hook name as a user gives it (Python's run_with_cache names and patch
// keys) for a llama token model of 12 blocks and an attention-only model of 3: either a point
// whose name is exactly the input (hook_name's round trip), or a refusal (InputError) whose
// message escapes the input. Anything else, a crash or a sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "attn/error.hpp"
#include "attn/model/hooks.hpp"
#include "escaped_message.hpp"

namespace {

attn::ModelArgs model(attn::Block block, std::int64_t n_layers) {
  attn::ModelArgs a = attn::seed_args();
  a.block = block;
  a.n_layers = n_layers;
  return a;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const attn::ModelArgs models[] = {model(attn::Block::llama, 12),
                                           model(attn::Block::attention, 3)};
  const std::string name(reinterpret_cast<const char*>(data), size);
  for (const attn::ModelArgs& a : models) {
    try {
      // The llama model with its head (ln_final), the attention one without.
      const attn::ModelEnds ends{false, a.block == attn::Block::llama};
      const attn::HookPoint p = attn::model_hook_point(a, ends, name);
      if (attn::hook_name(p.site, p.layer) != name) std::abort();
    } catch (const attn::InputError& e) {
      require_escaped(e.what(), name);
    }
  }
  return 0;
}
