#pragma once
// Checks nlohmann does not make, in one SAX pass before the document is built: nesting depth
// (the DOM and its error paths recurse) and duplicate keys (nlohmann keeps the last silently).
// A SAX pass and then a plain parse, not a parser callback: nlohmann's callback parser rescans
// the parent object after every child, which is quadratic (minutes for 200,000 tensors).
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_set>
#include <vector>

namespace attn {

struct JsonStructure {
  struct Frame {
    std::unordered_set<std::string> keys;
    std::string last_key;
    bool is_array = false;
  };
  std::vector<Frame> frames;  // the open objects and arrays, outermost first
  std::string last_key;       // the last key read anywhere, for messages about a value
};

// Walks `text`; calls on_too_deep(s) when nesting would pass max_depth and on_duplicate(s, key)
// at a repeated key (both are expected to throw). Syntax errors are left to the parse that
// follows. Returns the state at the end or at the error, for messages.
JsonStructure check_json_structure(
    const std::string_view text, std::size_t max_depth,
    const std::function<void(const JsonStructure&)>& on_too_deep,
    const std::function<void(const JsonStructure&, const std::string& key)>& on_duplicate);

}  // namespace attn
