#pragma once
// What the JSON config readers share (config.cpp, config_meta.cpp for Meta's params.json and
// the tool's keys, config_hf.cpp for Hugging Face's config.json): reading a key as the user's
// file calls it, and the checks and warnings every config passes.
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>

#include "attn/error.hpp"
#include "attn/io/text.hpp"
#include "attn/model/config.hpp"

namespace attn {

using nlohmann::json;

// A value from the file as messages show it: at most a short escaped excerpt.
inline std::string excerpt(const json& v) {
  return escape(v.dump(-1, ' ', false, json::error_handler_t::replace), 60);
}

// The key a config of `format` calls Meta's key `meta_key` (kKeyNames, config.cpp).
std::string key_name(ConfigFormat format, const std::string& arch, const std::string& meta_key);

struct Reader {
  const json& j;
  const std::string& source;
  ConfigFormat format = ConfigFormat::meta;  // whose key names messages say
  const char* parent = "";  // an object's key, for the keys inside it ("rope_scaling.")
  std::string arch = {};    // a GGUF's architecture, its keys' prefix

  bool hf() const { return format == ConfigFormat::hugging_face; }
  // The key as the user's file calls it.
  std::string k(const std::string& meta_key) const {
    return parent + key_name(format, arch, meta_key);
  }

  [[noreturn]] void fail(const std::string& key, const std::string& what,
                         std::string setting = {}) const {
    const char* field = format == ConfigFormat::llama2c ? ": header field " : ": key ";
    throw InputError(source + field + quoted(k(key), 60) + ": " + what, std::move(setting));
  }

  // A string value, or `fallback` when the key is absent or null.
  std::string text(const char* key, const std::string& fallback) const {
    if (!j.contains(key) || j.at(key).is_null()) return fallback;
    if (!j.at(key).is_string()) fail(key, "expected a string, got " + excerpt(j.at(key)));
    return j.at(key).get<std::string>();
  }

  // A boolean value, or `fallback` when the key is absent or null.
  bool flag(const char* key, bool fallback) const {
    if (!j.contains(key) || j.at(key).is_null()) return fallback;
    if (!j.at(key).is_boolean()) fail(key, "expected true or false, got " + excerpt(j.at(key)));
    return j.at(key).get<bool>();
  }

  void integer(const char* key, std::int64_t& out) const {
    if (!j.contains(key)) return;
    const json& v = j.at(key);
    if (!v.is_number_integer()) fail(key, "expected an integer, got " + excerpt(v));
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > INT64_MAX) fail(key, "too large");
    out = v.get<std::int64_t>();
  }

  void number(const char* key, double& out) const {
    if (!j.contains(key)) return;
    const json& v = j.at(key);
    if (!v.is_number()) fail(key, "expected a number, got " + excerpt(v));
    out = v.get<double>();
    if (!std::isfinite(out)) fail(key, "expected a finite number");
  }

  // names: {name, value} pairs, a braced list or a container of them.
  template <typename E, typename Names = std::initializer_list<std::pair<const char*, E>>>
  void choice(const char* key, E& out, const Names& names) const {
    if (!j.contains(key)) return;
    const json& v = j.at(key);
    std::string allowed;
    for (auto& [name, value] : names) {
      if (v.is_string() && v.get<std::string>() == name) {
        out = value;
        return;
      }
      allowed += std::string(allowed.empty() ? "" : ", ") + "\"" + name + "\"";
    }
    fail(key, "expected one of " + allowed + ", got " + excerpt(v));
  }
};

inline void boolean(const Reader& r, const char* key, bool& out) {
  if (!r.j.contains(key)) return;
  if (!r.j.at(key).is_boolean()) r.fail(key, "expected true or false, got " + excerpt(r.j.at(key)));
  out = r.j.at(key).get<bool>();
}

// The checks every config passes (config.cpp), messages naming r's keys. Throws InputError.
void validate(const Reader& r, const ModelArgs& a);

// One warning line for every key of j not in `known`.
void warn_unknown(const json& j, const std::string& source, const std::set<std::string>& known);

// Meta's params.json (the tool's keys, kConfigKeys: config_meta.cpp) and Hugging Face's
// config.json (config_hf.cpp), read, checked and warned about: the config r.j describes.
ModelArgs read_meta_config(const Reader& r);
ModelArgs read_hf_config(const Reader& r);

}  // namespace attn
