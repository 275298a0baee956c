#pragma once
// A generation saved and continued in another process (--save-session, --load-session): the
// filled part of the KV cache, the tokens it holds, the logits that choose the next one, and
// fingerprints of the config and weights it was computed with, in one safetensors file.
#include <filesystem>
#include <string>
#include <string_view>

#include "attn/io/output.hpp"
#include "attn/model/generate.hpp"
#include "attn/model/model.hpp"

namespace attn {

// A digest of the weights the model reads: every tensor's name, type, shape and 1024 of its
// elements spread over it (a different checkpoint differs in them; reading all would take
// seconds for a large one).
std::string weights_fingerprint(const Transformer& m);

// Writes the session into a temporary file beside `path`, returned uncommitted (output.hpp).
// Batch 1: the cache's first sequence. `conversation` (a chat's messages, opaque here): kept
// in the file when not empty.
OutputFile stage_session(const std::filesystem::path& path, const Transformer& m,
                         const Generation& g, std::string_view conversation = {});

// Reads a saved session into m's cache and g, and its conversation (empty when it has none)
// into `conversation` when given. Throws InputError naming the file and what differs from m: a
// config key, the weights, the cache's capacity.
void load_session(const std::filesystem::path& path, Transformer& m, Generation& g,
                  std::string* conversation = nullptr);

}  // namespace attn
