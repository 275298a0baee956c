#pragma once
// Errors the user can fix (bad config, weights, input, flags, cache capacity): exit status 2.
// Anything else that escapes is a bug or an environment failure: exit status 1.
#include <stdexcept>
#include <string>

namespace attn {

struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A forward call stopped at a layer boundary because Transformer::cancel was set (Ctrl-C in a
// notebook). The cache holds whatever the stopped call wrote past the filled positions.
struct Interrupted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace attn
