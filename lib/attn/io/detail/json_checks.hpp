#pragma once
// Checks nlohmann does not make, in one SAX pass before the document is built: nesting depth
// (the DOM and its error paths recurse), duplicate keys (nlohmann keeps the last silently), and
// how many values there are (a DOM value costs ~100 bytes: a 60 MB file of small values would
// cost gigabytes) and in one array (a shape of 33 million zeros).
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
    std::size_t elements = 0;
  };
  std::vector<Frame> frames;  // the open objects and arrays, outermost first
  std::string last_key;       // the last key read anywhere, for messages about a value
  std::size_t values = 0;     // every value so far, containers included
};

struct JsonLimits {
  std::size_t max_depth = 64;
  std::size_t max_values = std::size_t(1) << 20;
  std::size_t max_array = std::size_t(1) << 20;  // elements in any one array
};

// Walks `text`; calls on_too_deep(s) when nesting would pass max_depth, on_duplicate(s, key) at
// a repeated key, and on_too_many(s, what) past max_values or max_array ("more than N values");
// all are expected to throw. Syntax errors are left to the parse that follows. Returns the state
// at the end or at the error, for messages.
JsonStructure check_json_structure(
    const std::string_view text, const JsonLimits& limits,
    const std::function<void(const JsonStructure&)>& on_too_deep,
    const std::function<void(const JsonStructure&, const std::string& key)>& on_duplicate,
    const std::function<void(const JsonStructure&, const std::string& what)>& on_too_many);

// The checks above, then the parse, each refusal an InputError starting with `what` (the file and
// the key or line it came from): for documents no caller needs a message of its own about.
nlohmann::json parse_checked_json(std::string_view text, const JsonLimits& limits,
                                  const std::string& what);

}  // namespace attn
