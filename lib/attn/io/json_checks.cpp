#include "attn/io/detail/json_checks.hpp"

namespace attn {

namespace {

using json = nlohmann::json;

struct Checker : nlohmann::json_sax<json> {
  JsonStructure s;
  std::size_t max_depth = 0;
  const std::function<void(const JsonStructure&)>* too_deep = nullptr;
  const std::function<void(const JsonStructure&, const std::string&)>* duplicate = nullptr;

  bool open(bool is_array) {
    if (s.frames.size() >= max_depth) (*too_deep)(s);
    s.frames.push_back({{}, {}, is_array});
    return true;
  }
  bool close() {
    s.frames.pop_back();
    return true;
  }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
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
    const std::string_view text, std::size_t max_depth,
    const std::function<void(const JsonStructure&)>& on_too_deep,
    const std::function<void(const JsonStructure&, const std::string& key)>& on_duplicate) {
  Checker c;
  c.max_depth = max_depth;
  c.too_deep = &on_too_deep;
  c.duplicate = &on_duplicate;
  json::sax_parse(text.begin(), text.end(), &c, nlohmann::detail::input_format_t::json, false);
  return c.s;
}

}  // namespace attn
