#include "attn/io/detail/json_checks.hpp"

#include "attn/error.hpp"
#include "attn/io/text.hpp"

namespace attn {

namespace {

using json = nlohmann::json;

struct Checker : nlohmann::json_sax<json> {
  JsonStructure s;
  JsonLimits limits;
  const std::function<void(const JsonStructure&)>* too_deep = nullptr;
  const std::function<void(const JsonStructure&, const std::string&)>* duplicate = nullptr;
  const std::function<void(const JsonStructure&, const std::string&)>* too_many = nullptr;

  // Every value, counted where it starts: in the whole text and in the array holding it.
  bool value() {
    if (++s.values > limits.max_values)
      (*too_many)(s, "more than " + std::to_string(limits.max_values) + " values");
    if (!s.frames.empty() && s.frames.back().is_array &&
        ++s.frames.back().elements > limits.max_array)
      (*too_many)(s, "an array of more than " + std::to_string(limits.max_array) + " elements");
    return true;
  }
  bool open(bool is_array) {
    value();
    if (s.frames.size() >= limits.max_depth) (*too_deep)(s);
    s.frames.push_back({{}, {}, is_array, 0});
    return true;
  }
  bool close() {
    s.frames.pop_back();
    return true;
  }
  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(true); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    s.last_key = k;
    JsonStructure::Frame& f = s.frames.back();
    if (!f.keys.insert(k).second) (*duplicate)(s, k);
    f.last_key = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }
};

}  // namespace

JsonStructure check_json_structure(
    const std::string_view text, const JsonLimits& limits,
    const std::function<void(const JsonStructure&)>& on_too_deep,
    const std::function<void(const JsonStructure&, const std::string& key)>& on_duplicate,
    const std::function<void(const JsonStructure&, const std::string& what)>& on_too_many) {
  Checker c;
  c.limits = limits;
  c.too_deep = &on_too_deep;
  c.duplicate = &on_duplicate;
  c.too_many = &on_too_many;
  json::sax_parse(text.begin(), text.end(), &c, nlohmann::detail::input_format_t::json, false);
  return c.s;
}

json parse_checked_json(std::string_view text, const JsonLimits& limits, const std::string& what) {
  check_json_structure(
      text, limits,
      [&](const JsonStructure&) {
        throw InputError(what + " nests deeper than " + std::to_string(limits.max_depth) +
                         " levels");
      },
      [&](const JsonStructure&, const std::string& k) {
        throw InputError(what + ": key " + quoted(k, 60) + " twice");
      },
      [&](const JsonStructure&, const std::string& many) { throw InputError(what + ": " + many); });
  try {
    return json::parse(text);
  } catch (const json::exception&) {
    throw InputError(what + " is not JSON");
  }
}

}  // namespace attn
