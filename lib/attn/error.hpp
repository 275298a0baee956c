#pragma once
// Errors the user can fix (bad config, weights, input, options, cache capacity): exit status 2.
// Anything else that escapes is a bug or an environment failure: exit status 1.
#include <stdexcept>
#include <string>

namespace attn {

// The library's messages name files, config keys and tensors, never a front's words: where one
// setting fixes the error, `setting` names it as a config key or engine option ("max_seq_len",
// "max_batch_size", "layers", "threads", ...), and each front says it in its own words
// (attn-cli: --max-seq-len; Python: max_seq_len=). Where several each fix it, a comma list,
// the likeliest first ("max_seq_len,steps": a larger cache or fewer steps).
struct InputError : std::runtime_error {
  explicit InputError(const std::string& what, std::string setting = {})
      : std::runtime_error(what), setting(std::move(setting)) {}
  std::string setting;
};

// A run refused before any allocation because it needs more memory than the machine has
// available (the pre-flight estimate): Python raises MemoryError for it.
struct MemoryLimitError : InputError {
  using InputError::InputError;
};

// A forward call stopped at a layer boundary because Transformer::cancel was set (Ctrl-C in a
// notebook). The cache holds whatever the stopped call wrote past the filled positions.
struct Interrupted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace attn
