// Chat templates: rendering the parsed nodes with Python's and Jinja's semantics (values print
// as Python's str() prints them, transformers' tojson is Python's json.dumps with
// ensure_ascii=False), within bounds on output size, work and call depth.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "attn/error.hpp"
#include "attn/io/text.hpp"
#include "attn/text/chat_template.hpp"
#include "attn/text/chat_template_ast.hpp"
#include "attn/text/unicode.hpp"

namespace attn::chat {

// Bounds on one render: a hostile template stops with an InputError, not a hang or an OOM.
constexpr std::size_t max_text = std::size_t{8} << 20;   // bytes of output and of any string
constexpr std::size_t max_items = std::size_t{1} << 20;  // elements of a list
constexpr std::uint64_t max_steps = 5'000'000;           // nodes, expressions, copied elements
constexpr int max_calls = 64;                            // nested macro calls
constexpr std::int64_t max_range = 100'000;              // as Jinja's sandbox (MAX_RANGE)

using K = Value::Kind;

struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // The argument at `index` or named `key`, else `def`.
  Value get(std::size_t index, std::string_view key, Value def = Value()) const {
    for (const auto& [k, v] : kw)
      if (k == key) return v;
    return index < pos.size() ? pos[index] : def;
  }
};

using Scope = std::unordered_map<std::string, Value>;
enum class Flow { normal, break_, continue_ };

// ---- Text: UTF-8 code points, Python's whitespace ----

struct CodePoint {
  std::uint32_t cp;
  std::size_t at, size;
};

std::vector<CodePoint> code_points(std::string_view s) {
  std::vector<CodePoint> out;
  for (std::size_t k = 0; k < s.size();) {
    const auto c = static_cast<unsigned char>(s[k]);
    const std::size_t n = c < 0x80         ? 1
                          : (c >> 5) == 6  ? 2
                          : (c >> 4) == 14 ? 3
                          : (c >> 3) == 30 ? 4
                                           : 1;
    std::uint32_t cp = n == 1 ? c : c & (0x3F >> (n - 1));
    bool ok = k + n <= s.size();
    for (std::size_t j = 1; ok && j < n; ++j) {
      const auto d = static_cast<unsigned char>(s[k + j]);
      ok = (d >> 6) == 2;
      cp = (cp << 6) | (d & 0x3F);
    }
    if (!ok) {
      out.push_back({0xDC00u | c, k, 1});  // a byte that is not UTF-8 stays one unit
      ++k;
      continue;
    }
    out.push_back({cp, k, n});
    k += n;
  }
  return out;
}

bool py_space(std::uint32_t c) {
  return (c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Python's str.strip/lstrip/rstrip: whitespace, or any code point of `chars`.
std::string strip(std::string_view s, bool left, bool right, const Value& chars) {
  const std::vector<CodePoint> cps = code_points(s);
  std::vector<std::uint32_t> set;
  const bool by_chars = chars.is(K::string);
  if (by_chars)
    for (const CodePoint& c : code_points(chars.s)) set.push_back(c.cp);
  auto drop = [&](std::uint32_t c) {
    return by_chars ? std::find(set.begin(), set.end(), c) != set.end() : py_space(c);
  };
  std::size_t a = 0, b = cps.size();
  while (left && a < b && drop(cps[a].cp)) ++a;
  while (right && b > a && drop(cps[b - 1].cp)) --b;
  if (a == b) return {};
  return std::string(s.substr(cps[a].at, cps[b - 1].at + cps[b - 1].size - cps[a].at));
}


// Python's case mapping on the scripts chat text mostly holds (Latin, Greek, Cyrillic); other
// code points are caseless here. 0 when `c` has no mapping that way.
std::uint32_t other_case(std::uint32_t c, bool upper) {
  auto in = [&](std::uint32_t lo, std::uint32_t hi) { return c >= lo && c <= hi; };
  if (upper) {
    if (in('a', 'z') || (in(0xE0, 0xFE) && c != 0xF7) || (in(0x3B1, 0x3C9) && c != 0x3C2) ||
        in(0x430, 0x44F))
      return c - 0x20;
    if (c == 0xFF) return 0x178;
    if (c == 0xB5) return 0x39C;
    if (c == 0x3C2) return 0x3A3;
    if (in(0x450, 0x45F)) return c - 0x50;
    if ((in(0x100, 0x137) || in(0x14A, 0x177)) && (c & 1)) return c - 1;
    if ((in(0x139, 0x148) || in(0x179, 0x17E)) && !(c & 1)) return c - 1;
    return 0;
  }
  if (in('A', 'Z') || (in(0xC0, 0xDE) && c != 0xD7) || (in(0x391, 0x3A9) && c != 0x3A2) ||
      in(0x410, 0x42F))
    return c + 0x20;
  if (c == 0x178) return 0xFF;
  if (in(0x400, 0x40F)) return c + 0x50;
  if ((in(0x100, 0x137) || in(0x14A, 0x177)) && !(c & 1)) return c + 1;
  if ((in(0x139, 0x148) || in(0x179, 0x17E)) && (c & 1)) return c + 1;
  return 0;
}

bool cased(std::uint32_t c) {
  return other_case(c, true) || other_case(c, false) || c == 0xDF;
}

void append_case(std::string& out, std::string_view s, const CodePoint& c, bool upper);

// str.upper() / str.lower(); mode 't' title(), 'c' capitalize().
std::string change_case(std::string_view s, char mode) {
  std::string out;
  bool previous_cased = false;
  bool first = true;
  for (const CodePoint& c : code_points(s)) {
    bool upper = mode == 'u';
    if (mode == 't') upper = !previous_cased;
    if (mode == 'c') upper = first;
    append_case(out, s, c, upper);
    previous_cased = cased(c.cp);
    first = false;
  }
  return out;
}

void append_case(std::string& out, std::string_view s, const CodePoint& c, bool upper) {
  if (upper && c.cp == 0xDF) {
    out += "SS";
    return;
  }
  if (const std::uint32_t m = other_case(c.cp, upper)) {
    append_utf8(out, char32_t(m));
    return;
  }
  out.append(s.substr(c.at, c.size));
}

std::string case_of(std::string_view s, bool upper) {
  return change_case(s, upper ? 'u' : 'l');
}

// ---- Python's str() and repr() ----

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string sci(buf, r.ptr);  // -d.ddde+XX
  const std::size_t e = sci.find('e');
  const int exp = std::stoi(sci.substr(e + 1));
  std::string digits;
  const bool negative = sci[0] == '-';
  for (std::size_t k = negative; k < e; ++k)
    if (sci[k] != '.') digits += sci[k];
  std::string out = negative ? "-" : "";
  if (exp < -4 || exp >= 16) {  // Python's repr switches to exponents outside [1e-4, 1e16)
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return out + ebuf;
  }
  if (exp < 0) return out + "0." + std::string(std::size_t(-exp - 1), '0') + digits;
  if (digits.size() <= std::size_t(exp) + 1)
    return out + digits + std::string(std::size_t(exp) + 1 - digits.size(), '0') + ".0";
  return out + digits.substr(0, std::size_t(exp) + 1) + "." + digits.substr(std::size_t(exp) + 1);
}

std::string repr(const Value& v);

std::string str(const Value& v) {
  switch (v.kind) {
    case K::undefined:
      return {};
    case K::none:
      return "None";
    case K::boolean:
      return v.b ? "True" : "False";
    case K::integer:
      return std::to_string(v.i);
    case K::floating:
      return float_repr(v.f);
    case K::string:
      return v.s;
    default:
      return repr(v);
  }
}

std::string string_repr(std::string_view s) {
  const char q =
      s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos ? '"' : '\'';
  std::string out(1, q);
  for (const CodePoint& c : code_points(s)) {
    char buf[12];
    if (c.cp == '\\' || c.cp == std::uint32_t(q)) {
      out += '\\';
      out += char(c.cp);
    } else if (c.cp == '\n') {
      out += "\\n";
    } else if (c.cp == '\r') {
      out += "\\r";
    } else if (c.cp == '\t') {
      out += "\\t";
    } else if (c.cp < 0x20 || (c.cp >= 0x7F && c.cp <= 0xA0) || c.cp == 0xAD ||
               (c.cp & 0xFFFFFF00u) == 0xDC00u) {
      std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(c.cp & 0xFF));
      out += buf;
    } else {
      out.append(s.substr(c.at, c.size));
    }
  }
  return out + q;
}

std::string repr(const Value& v) {
  switch (v.kind) {
    case K::string:
      return string_repr(v.s);
    case K::list: {
      std::string out = v.tuple ? "(" : "[";
      for (std::size_t k = 0; k < v.list->size(); ++k) out += (k ? ", " : "") + repr((*v.list)[k]);
      return out + (!v.tuple ? "]" : v.list->size() == 1 ? ",)" : ")");
    }
    case K::dict: {
      std::string out = v.is_namespace ? "<Namespace {" : "{";
      for (std::size_t k = 0; k < v.dict->size(); ++k)
        out += (k ? ", " : "") + string_repr((*v.dict)[k].first) + ": " + repr((*v.dict)[k].second);
      return out + (v.is_namespace ? "}>" : "}");
    }
    case K::function:
      return "<function " + v.s + ">";
    case K::undefined:
      return "Undefined";
    default:
      return str(v);
  }
}

// ---- Python's json.dumps(x, ensure_ascii=..., indent=..., separators=..., sort_keys=...) ----

struct JsonStyle {
  bool ascii = false, sort = false;
  std::string indent;  // empty with has_indent: newlines only
  bool has_indent = false;
  std::string item = ", ", key = ": ";
};

void json_string(std::string& out, std::string_view s, bool ascii) {
  out += '"';
  for (const CodePoint& c : code_points(s)) {
    char buf[16];
    switch (c.cp) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (c.cp < 0x20 || (ascii && c.cp >= 0x7F)) {
      if (c.cp >= 0x10000) {
        const std::uint32_t v = c.cp - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c.cp));
      }
      out += buf;
    } else {
      out.append(s.substr(c.at, c.size));
    }
  }
  out += '"';
}

// ---- The renderer ----

struct Renderer {
  std::string name;  // escaped for messages
  Scope root;
  std::vector<Scope> scopes;  // the current frame's scopes above root (loops, a macro's own)
  std::string* out = nullptr;
  std::uint64_t steps = 0;
  int calls = 0, line = 0;
  std::time_t now = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(name + ": line " + std::to_string(line) + ": " + what);
  }

  void step(std::uint64_t n = 1) {
    steps += n;
    if (steps > max_steps)
      fail("rendering takes more than " + std::to_string(max_steps) + " steps");
  }

  Value text(std::string s) {
    if (s.size() > max_text) fail("a string longer than " + std::to_string(max_text) + " bytes");
    step(s.size() / 64);
    return Value::string(std::move(s));
  }
  Value list(List l) {
    if (l.size() > max_items) fail("a list longer than " + std::to_string(max_items) + " items");
    step(l.size());
    return Value::of_list(std::move(l));
  }

  void emit(std::string_view s) {
    if (out->size() + s.size() > max_text)
      fail("the output is longer than " + std::to_string(max_text) + " bytes");
    out->append(s);
  }

  // ---- names ----

  Value lookup(const std::string& n) {
    for (auto s = scopes.rbegin(); s != scopes.rend(); ++s)
      if (auto it = s->find(n); it != s->end()) return it->second;
    if (auto it = root.find(n); it != root.end()) return it->second;
    return global(n);
  }

  void assign(const std::string& n, Value v) {
    (scopes.empty() ? root : scopes.back())[n] = std::move(v);
  }

  Value global(const std::string& n);

  // ---- truth, equality, order ----

  static bool truthy(const Value& v) {
    switch (v.kind) {
      case K::undefined:
      case K::none:
        return false;
      case K::boolean:
        return v.b;
      case K::integer:
        return v.i != 0;
      case K::floating:
        return v.f != 0;
      case K::string:
        return !v.s.empty();
      case K::list:
        return !v.list->empty();
      case K::dict:
        return !v.dict->empty();
      case K::function:
        return true;
    }
    return false;
  }
  static bool numeric(const Value& v) {
    return v.is(K::integer) || v.is(K::floating) || v.is(K::boolean);
  }
  static double number(const Value& v) {
    return v.is(K::floating) ? v.f : v.is(K::boolean) ? double(v.b) : double(v.i);
  }
  static bool is_int(const Value& v) { return v.is(K::integer) || v.is(K::boolean); }
  static std::int64_t integer(const Value& v) { return v.is(K::boolean) ? v.b : v.i; }

  static bool equal(const Value& a, const Value& b) {
    if (numeric(a) && numeric(b)) {
      if (is_int(a) && is_int(b)) return integer(a) == integer(b);
      return number(a) == number(b);
    }
    if (a.kind != b.kind) return false;
    switch (a.kind) {
      case K::string:
        return a.s == b.s;
      case K::list:
        if (a.list->size() != b.list->size()) return false;
        for (std::size_t k = 0; k < a.list->size(); ++k)
          if (!equal((*a.list)[k], (*b.list)[k])) return false;
        return true;
      case K::dict: {
        if (a.dict->size() != b.dict->size()) return false;
        for (const auto& [k, v] : *a.dict) {
          const Value* w = find(*b.dict, k);
          if (!w || !equal(v, *w)) return false;
        }
        return true;
      }
      case K::function:
        return a.fn == b.fn;
      default:
        return true;  // undefined, none
    }
  }

  static const Value* find(const Dict& d, std::string_view key) {
    for (const auto& [k, v] : d)
      if (k == key) return &v;
    return nullptr;
  }

  static std::string type_name(const Value& v) {
    static const char* const names[] = {"Undefined", "NoneType", "bool", "int",     "float",
                                        "str",       "list",     "dict", "function"};
    return names[int(v.kind)];
  }

  bool less(const Value& a, const Value& b) {
    if (numeric(a) && numeric(b)) {
      if (is_int(a) && is_int(b)) return integer(a) < integer(b);
      return number(a) < number(b);
    }
    if (a.is(K::string) && b.is(K::string)) return a.s < b.s;
    if (a.is(K::list) && b.is(K::list)) {
      for (std::size_t k = 0; k < a.list->size() && k < b.list->size(); ++k) {
        if (less((*a.list)[k], (*b.list)[k])) return true;
        if (less((*b.list)[k], (*a.list)[k])) return false;
      }
      return a.list->size() < b.list->size();
    }
    fail("'<' is not supported between " + type_name(a) + " and " + type_name(b));
  }

  // ---- iteration, length, items ----

  std::vector<Value> iterate(const Value& v) {
    switch (v.kind) {
      case K::undefined:
        return {};
      case K::list:
        return *v.list;
      case K::dict: {
        std::vector<Value> keys;
        for (const auto& kv : *v.dict) keys.push_back(Value::string(kv.first));
        return keys;
      }
      case K::string: {
        std::vector<Value> chars;
        for (const CodePoint& c : code_points(v.s))
          chars.push_back(Value::string(v.s.substr(c.at, c.size)));
        return chars;
      }
      default:
        fail(attn::quoted(type_name(v)) + " is not iterable");
    }
  }

  std::int64_t length(const Value& v) {
    switch (v.kind) {
      case K::undefined:
        return 0;
      case K::string:
        return std::int64_t(code_points(v.s).size());
      case K::list:
        return std::int64_t(v.list->size());
      case K::dict:
        return std::int64_t(v.dict->size());
      default:
        fail("a " + type_name(v) + " has no length");
    }
  }

  Value items(const Value& v) {
    List out;
    if (v.is(K::undefined)) return list({});
    if (!v.is(K::dict)) fail("items of a " + type_name(v));
    for (const auto& [k, x] : *v.dict) {
      Value pair = Value::of_list({Value::string(k), x});
      pair.tuple = true;
      out.push_back(std::move(pair));
    }
    return list(std::move(out));
  }

  // ---- attributes, items, slices ----

  Value attribute(const Value& obj, const std::string& attr) {
    if (obj.is(K::undefined)) fail("an undefined value has no attribute " + attn::quoted(attr));
    if (has_method(obj, attr)) return bound_method(obj, attr);
    if (obj.is(K::dict))
      if (const Value* v = find(*obj.dict, attr)) return *v;
    return Value();
  }

  Value item(const Value& obj, const Value& key) {
    if (obj.is(K::undefined)) fail("an undefined value has no item " + attn::quoted(str(key)));
    if (obj.is(K::dict) && key.is(K::string)) {
      if (const Value* v = find(*obj.dict, key.s)) return *v;
    } else if ((obj.is(K::list) || obj.is(K::string)) && is_int(key)) {
      const std::vector<Value> all = obj.is(K::list) ? std::vector<Value>() : iterate(obj);
      const std::vector<Value>& seq = obj.is(K::list) ? *obj.list : all;
      std::int64_t k = integer(key);
      if (k < 0) k += std::int64_t(seq.size());
      if (k >= 0 && k < std::int64_t(seq.size())) return seq[std::size_t(k)];
      return Value();
    }
    if (key.is(K::string) && has_method(obj, key.s)) return bound_method(obj, key.s);
    return Value();
  }

  Value slice(const Value& obj, const Value& a, const Value& b, const Value& c) {
    if (!obj.is(K::list) && !obj.is(K::string)) fail("a slice of a " + type_name(obj));
    const std::vector<Value> seq = iterate(obj);
    const std::int64_t n = std::int64_t(seq.size());
    const std::int64_t st = c.is(K::none) ? 1 : integer(c);
    if (st == 0) fail("a slice step of zero");
    auto bound = [&](const Value& v, std::int64_t def) {
      if (v.is(K::none)) return def;
      if (!is_int(v)) fail("a slice index that is not an integer");
      std::int64_t k = integer(v);
      if (k < 0) k += n;
      return st > 0 ? std::clamp<std::int64_t>(k, 0, n) : std::clamp<std::int64_t>(k, -1, n - 1);
    };
    const std::int64_t from = bound(a, st > 0 ? 0 : n - 1), to = bound(b, st > 0 ? n : -1);
    List part;
    for (std::int64_t k = from; st > 0 ? k < to : k > to; k += st)
      part.push_back(seq[std::size_t(k)]);
    if (!obj.is(K::string)) return list(std::move(part));
    std::string s;
    for (const Value& v : part) s += v.s;
    return text(std::move(s));
  }

  // ---- methods of str, dict, list ----

  static bool has_method(const Value& obj, std::string_view m) {
    static const std::vector<std::string_view> str_methods = {
        "strip",    "lstrip",  "rstrip",  "split", "rsplit",     "startswith",
        "endswith", "replace", "upper",   "lower", "title",      "capitalize",
        "format",   "find",    "count",   "join",  "splitlines", "isdigit",
        "isspace",  "isalpha", "isalnum", "index"};
    static const std::vector<std::string_view> dict_methods = {"get", "items",  "keys", "values",
                                                               "pop", "update", "copy"};
    static const std::vector<std::string_view> list_methods = {"index", "count",  "append",
                                                               "pop",   "extend", "insert"};
    const auto& table = obj.is(K::string) ? str_methods
                        : obj.is(K::dict) ? dict_methods
                        : obj.is(K::list) ? list_methods
                                          : std::vector<std::string_view>();
    return std::find(table.begin(), table.end(), m) != table.end();
  }

  Value bound_method(const Value& obj, const std::string& m) {
    return Value::function(m, [obj, m](Renderer& r, Args& args) { return r.method(obj, m, args); });
  }

  Value method(const Value& obj, const std::string& m, Args& a) {
    if (obj.is(K::string)) return string_method(obj.s, m, a);
    if (obj.is(K::dict)) {
      if (m == "get") {
        const Value key = a.get(0, "key");
        const Value* v = key.is(K::string) ? find(*obj.dict, key.s) : nullptr;
        return v ? *v : a.get(1, "default", Value::none());
      }
      if (m == "items") return items(obj);
      if (m == "keys") return list(iterate(obj));
      if (m == "values") {
        List vs;
        for (const auto& kv : *obj.dict) vs.push_back(kv.second);
        return list(std::move(vs));
      }
    }
    if (obj.is(K::list) && (m == "index" || m == "count")) {
      std::int64_t count = 0;
      for (std::size_t k = 0; k < obj.list->size(); ++k)
        if (equal((*obj.list)[k], a.get(0, "value"))) {
          if (m == "index") return Value::integer(std::int64_t(k));
          ++count;
        }
      if (m == "index") fail("the value is not in the list");
      return Value::integer(count);
    }
    // transformers renders in Jinja's ImmutableSandboxedEnvironment, which refuses these.
    fail("the sandbox refuses " + attn::quoted(m) + ", which changes a " + type_name(obj));
  }

  Value string_method(const std::string& s, const std::string& m, Args& a) {
    if (m == "strip" || m == "lstrip" || m == "rstrip")
      return text(strip(s, m != "rstrip", m != "lstrip", a.get(0, "chars")));
    if (m == "upper" || m == "lower") return text(case_of(s, m == "upper"));
    if (m == "split" || m == "rsplit")
      return split(s, a.get(0, "sep", Value::none()), a.get(1, "maxsplit", Value::integer(-1)),
                   m == "rsplit");
    if (m == "startswith" || m == "endswith") {
      const Value p = a.get(0, "prefix");
      const std::vector<Value> options = p.is(K::list) ? *p.list : std::vector<Value>{p};
      for (const Value& o : options) {
        if (!o.is(K::string)) fail(m + " takes a string");
        if (o.s.size() <= s.size() &&
            (m == "startswith" ? s.compare(0, o.s.size(), o.s) == 0
                               : s.compare(s.size() - o.s.size(), o.s.size(), o.s) == 0))
          return Value::boolean(true);
      }
      return Value::boolean(false);
    }
    if (m == "replace")
      return replace(s, a.get(0, "old"), a.get(1, "new"), a.get(2, "count", Value::integer(-1)));
    if (m == "title") return text(title(s));
    if (m == "capitalize") return text(capitalize(s));
    if (m == "format") return text(format(s, a));
    if (m == "find" || m == "index") {
      const std::string needle = string_arg(a.get(0, "sub"), m);
      const std::size_t at = s.find(needle);
      if (at == std::string::npos) {
        if (m == "index") fail("substring not found");
        return Value::integer(-1);
      }
      return Value::integer(std::int64_t(code_points(std::string_view(s).substr(0, at)).size()));
    }
    if (m == "count") {
      const std::string needle = string_arg(a.get(0, "sub"), m);
      if (needle.empty()) return Value::integer(std::int64_t(code_points(s).size()) + 1);
      std::int64_t n = 0;
      for (std::size_t at = s.find(needle); at != std::string::npos;
           at = s.find(needle, at + needle.size()))
        ++n;
      return Value::integer(n);
    }
    if (m == "join") return text(join(iterate(a.get(0, "iterable")), s));
    if (m == "splitlines") {
      List lines;
      for (std::string& l : split_lines(s)) lines.push_back(Value::string(std::move(l)));
      return list(std::move(lines));
    }
    bool all = !s.empty();
    for (const CodePoint& c : code_points(s)) {
      const bool digit = c.cp >= '0' && c.cp <= '9';
      const bool alpha = (c.cp | 0x20) >= 'a' && (c.cp | 0x20) <= 'z';
      all = all && (m == "isdigit"   ? digit
                    : m == "isspace" ? py_space(c.cp)
                    : m == "isalpha" ? alpha
                                     : digit || alpha);
    }
    return Value::boolean(all);
  }

  std::string string_arg(const Value& v, const std::string& what) {
    if (!v.is(K::string)) fail(what + " takes a string, not a " + type_name(v));
    return v.s;
  }

  Value split(const std::string& s, const Value& sep, const Value& maxsplit, bool from_right) {
    std::int64_t left = is_int(maxsplit) ? integer(maxsplit) : -1;
    List parts;
    if (sep.is(K::none)) {  // runs of whitespace, none at either end
      const std::vector<CodePoint> cps = code_points(s);
      std::vector<std::pair<std::size_t, std::size_t>> words;
      for (std::size_t k = 0; k < cps.size();) {
        while (k < cps.size() && py_space(cps[k].cp)) ++k;
        if (k == cps.size()) break;
        const std::size_t from = k;
        while (k < cps.size() && !py_space(cps[k].cp)) ++k;
        words.emplace_back(cps[from].at, cps[k - 1].at + cps[k - 1].size);
      }
      if (left >= 0 && std::int64_t(words.size()) > left + 1) {
        if (from_right) fail("rsplit with a limit and no separator is not supported");
        words.resize(std::size_t(left) + 1);
        words.back().second =
            std::string(strip(s.substr(words.back().first), false, true, Value())).size() +
            words.back().first;
      }
      for (auto [a, b] : words) parts.push_back(Value::string(s.substr(a, b - a)));
      return list(std::move(parts));
    }
    const std::string d = string_arg(sep, "split");
    if (d.empty()) fail("split with an empty separator");
    if (from_right) {
      std::vector<std::string> rev;
      std::size_t end = s.size();
      for (std::size_t at;
           left != 0 && end >= d.size() && (at = s.rfind(d, end - d.size())) != std::string::npos;
           --left) {
        rev.push_back(s.substr(at + d.size(), end - at - d.size()));
        end = at;
      }
      rev.push_back(s.substr(0, end));
      for (auto it = rev.rbegin(); it != rev.rend(); ++it) parts.push_back(Value::string(*it));
      return list(std::move(parts));
    }
    std::size_t from = 0;
    for (std::size_t at; left != 0 && (at = s.find(d, from)) != std::string::npos; --left) {
      parts.push_back(Value::string(s.substr(from, at - from)));
      from = at + d.size();
    }
    parts.push_back(Value::string(s.substr(from)));
    return list(std::move(parts));
  }

  Value replace(const std::string& s, const Value& old_v, const Value& new_v, const Value& count) {
    const std::string old = string_arg(old_v, "replace"), repl = string_arg(new_v, "replace");
    std::int64_t left = is_int(count) ? integer(count) : -1;
    std::string out;
    if (old.empty()) {  // Python inserts the replacement around every code point
      const std::vector<CodePoint> cps = code_points(s);
      for (std::size_t k = 0; k <= cps.size(); ++k) {
        if (left-- != 0) out += repl;
        if (out.size() > max_text)
          fail("a string longer than " + std::to_string(max_text) + " bytes");
        if (k < cps.size()) out.append(s, cps[k].at, cps[k].size);
      }
      return text(std::move(out));
    }
    std::size_t from = 0;
    for (std::size_t at; left != 0 && (at = s.find(old, from)) != std::string::npos; --left) {
      out.append(s, from, at - from);
      out += repl;
      if (out.size() > max_text)
        fail("a string longer than " + std::to_string(max_text) + " bytes");
      from = at + old.size();
    }
    out.append(s, from, std::string::npos);
    return text(std::move(out));
  }

  static std::string title(const std::string& s) { return change_case(s, 't'); }
  static std::string capitalize(const std::string& s) { return change_case(s, 'c'); }

  static std::vector<std::string> split_lines(const std::string& s) {
    std::vector<std::string> lines;
    std::size_t from = 0;
    for (std::size_t k = 0; k < s.size(); ++k)
      if (s[k] == '\n' || s[k] == '\r') {
        lines.push_back(s.substr(from, k - from));
        if (s[k] == '\r' && k + 1 < s.size() && s[k + 1] == '\n') ++k;
        from = k + 1;
      }
    if (from < s.size()) lines.push_back(s.substr(from));
    return lines;
  }

  // str.format with {} {0} {name}, {{ and }}, no format specifications.
  std::string format(const std::string& s, Args& a) {
    std::string out;
    std::size_t next = 0;
    for (std::size_t k = 0; k < s.size(); ++k) {
      if ((s[k] == '{' || s[k] == '}') && k + 1 < s.size() && s[k + 1] == s[k]) {
        out += s[k++];
        continue;
      }
      if (s[k] == '}') fail("str.format: a single '}'");
      if (s[k] != '{') {
        out += s[k];
        continue;
      }
      const std::size_t end = s.find('}', k);
      if (end == std::string::npos) fail("str.format: a single '{'");
      const std::string field = s.substr(k + 1, end - k - 1);
      if (field.find_first_of(":!.[") != std::string::npos)
        fail("str.format: " + attn::quoted(field) + " is not supported");
      Value v;
      if (field.empty()) {
        v = a.get(next++, "");
      } else if (std::all_of(field.begin(), field.end(),
                             [](char c) { return c >= '0' && c <= '9'; })) {
        v = a.get(std::size_t(std::stoul(field.substr(0, 6))), "");
      } else {
        v = a.get(SIZE_MAX, field);
      }
      if (v.is(K::undefined)) fail("str.format: no argument for " + attn::quoted(field));
      out += str(v);
      k = end;
    }
    return out;
  }

  std::string join(const std::vector<Value>& items, const std::string& sep) {
    std::string out;
    for (std::size_t k = 0; k < items.size(); ++k) {
      if (k) out += sep;
      out += str(items[k]);
      if (out.size() > max_text)
        fail("a string longer than " + std::to_string(max_text) + " bytes");
    }
    return out;
  }

  // ---- json ----

  void to_json(std::string& out, const Value& v, const JsonStyle& style, int level) {
    step();
    if (level > 200) fail("tojson: a value nested deeper than 200");
    if (out.size() > max_text) fail("a string longer than " + std::to_string(max_text) + " bytes");
    auto newline = [&](int l) {
      if (!style.has_indent) return;
      out += '\n';
      for (int k = 0; k < l; ++k) out += style.indent;
    };
    switch (v.kind) {
      case K::none:
        out += "null";
        return;
      case K::boolean:
        out += v.b ? "true" : "false";
        return;
      case K::integer:
        out += std::to_string(v.i);
        return;
      case K::floating:
        out += std::isnan(v.f)   ? "NaN"
               : std::isinf(v.f) ? (v.f < 0 ? "-Infinity" : "Infinity")
                                 : float_repr(v.f);
        return;
      case K::string:
        json_string(out, v.s, style.ascii);
        return;
      case K::list: {
        if (v.list->empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (std::size_t k = 0; k < v.list->size(); ++k) {
          if (k) out += style.item;
          newline(level + 1);
          to_json(out, (*v.list)[k], style, level + 1);
        }
        newline(level);
        out += ']';
        return;
      }
      case K::dict: {
        if (v.dict->empty()) {
          out += "{}";
          return;
        }
        std::vector<const std::pair<std::string, Value>*> entries;
        for (const auto& e : *v.dict) entries.push_back(&e);
        if (style.sort)
          std::stable_sort(entries.begin(), entries.end(),
                           [](auto* a, auto* b) { return a->first < b->first; });
        out += '{';
        for (std::size_t k = 0; k < entries.size(); ++k) {
          if (k) out += style.item;
          newline(level + 1);
          json_string(out, entries[k]->first, style.ascii);
          out += style.key;
          to_json(out, entries[k]->second, style, level + 1);
        }
        newline(level);
        out += '}';
        return;
      }
      default:
        fail("tojson: a " + type_name(v) + " is not JSON serializable");
    }
  }

  // transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
  Value tojson(const Value& v, const Args& a) {
    JsonStyle style;
    style.ascii = truthy(a.get(0, "ensure_ascii", Value::boolean(false)));
    const Value indent = a.get(1, "indent", Value::none());
    if (is_int(indent)) {
      style.has_indent = true;
      style.indent =
          std::string(std::size_t(std::clamp<std::int64_t>(integer(indent), 0, 64)), ' ');
    } else if (indent.is(K::string)) {
      style.has_indent = true;
      style.indent = indent.s;
    }
    if (style.has_indent) style.item = ",";
    const Value seps = a.get(2, "separators", Value::none());
    if (seps.is(K::list) && seps.list->size() == 2 && (*seps.list)[0].is(K::string) &&
        (*seps.list)[1].is(K::string)) {
      style.item = (*seps.list)[0].s;
      style.key = (*seps.list)[1].s;
    }
    style.sort = truthy(a.get(3, "sort_keys", Value::boolean(false)));
    std::string out;
    to_json(out, v, style, 0);
    return text(std::move(out));
  }

  // ---- expressions ----

  Value eval(const Expr& e) {
    step();
    line = e.line;
    switch (e.kind) {
      case Expr::Kind::literal:
        return e.value;
      case Expr::Kind::name:
        return lookup(e.name);
      case Expr::Kind::attr:
        return attribute(eval(*e.args[0]), e.name);
      case Expr::Kind::item: {
        Value obj = eval(*e.args[0]);
        return item(obj, eval(*e.args[1]));
      }
      case Expr::Kind::slice: {
        Value obj = eval(*e.args[0]);
        Value a = eval(*e.args[1]), b = eval(*e.args[2]), c = eval(*e.args[3]);
        return slice(obj, a, b, c);
      }
      case Expr::Kind::call:
        return call(e);
      case Expr::Kind::filter: {
        Value v = eval(*e.args[0]);
        Args a = arguments(e);
        line = e.line;
        return filter(e.name, v, a);
      }
      case Expr::Kind::test: {
        Value v = eval(*e.args[0]);
        Args a = arguments(e);
        line = e.line;
        return Value::boolean(test(e.name, v, a) != e.negated);
      }
      case Expr::Kind::unary:
        return unary(e.name, eval(*e.args[0]));
      case Expr::Kind::binary:
        return binary(e);
      case Expr::Kind::cond:
        return truthy(eval(*e.args[0])) ? eval(*e.args[1]) : eval(*e.args[2]);
      case Expr::Kind::list: {
        List items;
        for (const ExprPtr& x : e.args) items.push_back(eval(*x));
        Value v = list(std::move(items));
        v.tuple = e.tuple;
        return v;
      }
      case Expr::Kind::dict: {
        Dict d;
        for (std::size_t k = 0; k + 1 < e.args.size(); k += 2) {
          Value key = eval(*e.args[k]);
          if (!key.is(K::string)) fail("a dict key that is not a string is not supported");
          Value v = eval(*e.args[k + 1]);
          auto it = std::find_if(d.begin(), d.end(), [&](auto& kv) { return kv.first == key.s; });
          if (it != d.end())
            it->second = std::move(v);
          else
            d.emplace_back(key.s, std::move(v));
        }
        step(d.size());
        return Value::of_dict(std::move(d));
      }
    }
    return Value();
  }

  // Arguments after the operand (filters, tests) or the callee (calls).
  Args arguments(const Expr& e) {
    Args a;
    for (std::size_t k = 1; k < e.args.size(); ++k) a.pos.push_back(eval(*e.args[k]));
    for (const auto& [key, x] : e.kwargs) a.kw.emplace_back(key, eval(*x));
    return a;
  }

  Value call(const Expr& e) {
    const Expr& callee = *e.args[0];
    if (callee.kind == Expr::Kind::attr) {
      Value obj = eval(*callee.args[0]);
      if (has_method(obj, callee.name)) {
        Args a = arguments(e);
        line = e.line;
        return method(obj, callee.name, a);
      }
      Value f = attribute(obj, callee.name);
      return call_value(f, e);
    }
    Value f = eval(callee);
    return call_value(f, e);
  }

  Value call_value(const Value& f, const Expr& e) {
    if (!f.is(K::function))
      fail(f.is(K::undefined) ? "calls an undefined value"
                              : "a " + type_name(f) + " is not callable");
    Args a = arguments(e);
    line = e.line;
    return (*f.fn)(*this, a);
  }

  Value unary(const std::string& op, const Value& v) {
    if (op == "not") return Value::boolean(!truthy(v));
    if (!numeric(v)) fail("bad operand type for unary " + op + ": " + type_name(v));
    if (op == "+") return is_int(v) ? Value::integer(integer(v)) : v;
    if (is_int(v)) {
      if (integer(v) == INT64_MIN) fail("integer overflow");
      return Value::integer(-integer(v));
    }
    return Value::floating(-v.f);
  }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    Value l = eval(*e.args[0]);
    if (op == "and") return truthy(l) ? eval(*e.args[1]) : l;
    if (op == "or") return truthy(l) ? l : eval(*e.args[1]);
    Value r = eval(*e.args[1]);
    line = e.line;
    if (op == "==") return Value::boolean(equal(l, r));
    if (op == "!=") return Value::boolean(!equal(l, r));
    if (op == "<") return Value::boolean(less(l, r));
    if (op == ">") return Value::boolean(less(r, l));
    if (op == "<=") return Value::boolean(!less(r, l));
    if (op == ">=") return Value::boolean(!less(l, r));
    if (op == "in") return Value::boolean(contains(r, l));
    if (op == "~") return text(str(l) + str(r));
    return arithmetic(op, l, r);
  }

  bool contains(const Value& container, const Value& v) {
    switch (container.kind) {
      case K::undefined:
        return false;
      case K::string:
        if (!v.is(K::string)) fail("'in <string>' requires a string, not a " + type_name(v));
        return container.s.find(v.s) != std::string::npos;
      case K::list:
        return std::any_of(container.list->begin(), container.list->end(),
                           [&](const Value& x) { return equal(x, v); });
      case K::dict:
        return v.is(K::string) && find(*container.dict, v.s);
      default:
        fail("'in' a " + type_name(container));
    }
  }

  Value arithmetic(const std::string& op, const Value& l, const Value& r) {
    if (op == "+" && l.is(K::string) && r.is(K::string)) return text(l.s + r.s);
    if (op == "+" && l.is(K::list) && r.is(K::list)) {
      List both = *l.list;
      both.insert(both.end(), r.list->begin(), r.list->end());
      return list(std::move(both));
    }
    if (op == "*" && (l.is(K::string) || l.is(K::list)) && is_int(r)) return repeat(l, integer(r));
    if (op == "*" && (r.is(K::string) || r.is(K::list)) && is_int(l)) return repeat(r, integer(l));
    if (!numeric(l) || !numeric(r))
      fail("unsupported operand types for " + op + ": " + type_name(l) + " and " + type_name(r));
    if (op == "/") {
      if (number(r) == 0) fail("division by zero");
      return Value::floating(number(l) / number(r));
    }
    if (is_int(l) && is_int(r)) return integer_arithmetic(op, integer(l), integer(r));
    const double a = number(l), b = number(r);
    if ((op == "//" || op == "%") && b == 0) fail("float division by zero");
    if (op == "+") return Value::floating(a + b);
    if (op == "-") return Value::floating(a - b);
    if (op == "*") return Value::floating(a * b);
    if (op == "//") return Value::floating(std::floor(a / b));
    if (op == "%") {
      const double m = std::fmod(a, b);
      return Value::floating(m != 0 && ((m < 0) != (b < 0)) ? m + b : m);
    }
    return Value::floating(std::pow(a, b));
  }

  Value integer_arithmetic(const std::string& op, std::int64_t a, std::int64_t b) {
    std::int64_t v = 0;
    bool overflow = false;
    if (op == "+")
      overflow = __builtin_add_overflow(a, b, &v);
    else if (op == "-")
      overflow = __builtin_sub_overflow(a, b, &v);
    else if (op == "*")
      overflow = __builtin_mul_overflow(a, b, &v);
    else if (op == "//" || op == "%") {
      if (b == 0) fail("integer division or modulo by zero");
      if (a == INT64_MIN && b == -1) fail("integer overflow");
      std::int64_t q = a / b, m = a % b;
      if (m != 0 && ((m < 0) != (b < 0))) {
        --q;
        m += b;
      }
      v = op == "//" ? q : m;
    } else {  // **
      if (b < 0) return Value::floating(std::pow(double(a), double(b)));
      v = 1;
      for (std::int64_t k = 0; k < b && !overflow; ++k) {
        overflow = __builtin_mul_overflow(v, a, &v);
        if (v == 0 || v == 1) break;
        step();
      }
    }
    if (overflow) fail("integer overflow");
    return Value::integer(v);
  }

  Value repeat(const Value& v, std::int64_t n) {
    n = std::max<std::int64_t>(n, 0);
    const std::size_t unit = v.is(K::string) ? v.s.size() : v.list->size();
    const std::size_t limit = v.is(K::string) ? max_text : max_items;
    if (unit && std::uint64_t(n) > limit / unit)
      fail("a repetition longer than " + std::to_string(limit));
    if (v.is(K::string)) {
      std::string out;
      for (std::int64_t k = 0; k < n; ++k) out += v.s;
      return text(std::move(out));
    }
    List out;
    for (std::int64_t k = 0; k < n; ++k) out.insert(out.end(), v.list->begin(), v.list->end());
    return list(std::move(out));
  }

  // ---- filters and tests ----

  Value filter(const std::string& f, const Value& v, Args& a);
  bool test(const std::string& t, const Value& v, const Args& a);

  // `x.a.b` for selectattr, map, sort, ... (Jinja's attribute= paths).
  Value path(const Value& v, const Value& attr) {
    if (is_int(attr)) return item(v, attr);
    Value cur = v;
    std::string p = str(attr);
    for (std::size_t from = 0;;) {
      const std::size_t dot = p.find('.', from);
      const std::string part =
          p.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
      if (cur.is(K::undefined)) return cur;
      Value key = !part.empty() && std::all_of(part.begin(), part.end(),
                                               [](char c) { return c >= '0' && c <= '9'; })
                      ? Value::integer(std::stoll(part.substr(0, 18)))
                      : Value::string(part);
      cur = item(cur, key);
      if (dot == std::string::npos) return cur;
      from = dot + 1;
    }
  }

  // ---- statements ----

  Flow render(const Body& body) {
    for (const auto& n : body) {
      const Flow f = render(*n);
      if (f != Flow::normal) return f;
    }
    return Flow::normal;
  }

  Flow render(const Node& n) {
    step();
    line = n.line;
    switch (n.kind) {
      case Node::Kind::text:
        emit(n.text);
        return Flow::normal;
      case Node::Kind::output:
        emit(str(eval(*n.exprs[0])));
        return Flow::normal;
      case Node::Kind::if_:
        for (const auto& [cond, body] : n.branches)
          if (truthy(eval(*cond))) return render(body);
        return render(n.else_body);
      case Node::Kind::for_:
        return loop(n);
      case Node::Kind::set:
        set(n, eval(*n.exprs[0]));
        return Flow::normal;
      case Node::Kind::set_block: {
        Value v = text(capture(n.body));
        if (n.filter_call) v = apply_filters(*n.filter_call, v);
        assign(n.text, std::move(v));
        return Flow::normal;
      }
      case Node::Kind::macro:
        assign(n.text, macro(n));
        return Flow::normal;
      case Node::Kind::break_:
        return Flow::break_;
      case Node::Kind::continue_:
        return Flow::continue_;
      case Node::Kind::filter:
        emit(str(apply_filters(*n.filter_call, text(capture(n.body)))));
        return Flow::normal;
    }
    return Flow::normal;
  }

  // A filter chain parsed on an empty literal, applied to `v`.
  Value apply_filters(const Expr& chain, const Value& v) {
    if (chain.kind != Expr::Kind::filter) return v;
    Value inner = apply_filters(*chain.args[0], v);
    Args a = arguments(chain);
    line = chain.line;
    return filter(chain.name, inner, a);
  }

  std::string capture(const Body& body) {
    std::string* saved = out;
    std::string buffer;
    out = &buffer;
    try {
      render(body);
    } catch (...) {
      out = saved;
      throw;
    }
    out = saved;
    return buffer;
  }

  void set(const Node& n, Value v) {
    if (n.attribute_target) {
      Value ns = lookup(n.targets[0]);
      if (!ns.is(K::dict) || !ns.is_namespace)
        fail("cannot assign an attribute of a " + type_name(ns) + " (only of a namespace)");
      for (auto& kv : *ns.dict)
        if (kv.first == n.targets[1]) {
          kv.second = std::move(v);
          return;
        }
      ns.dict->emplace_back(n.targets[1], std::move(v));
      return;
    }
    if (n.targets.size() == 1) return assign(n.targets[0], std::move(v));
    unpack(n.targets, v);
  }

  void unpack(const std::vector<std::string>& targets, const Value& v) {
    const std::vector<Value> parts = iterate(v);
    if (parts.size() != targets.size())
      fail("cannot unpack " + std::to_string(parts.size()) + " values into " +
           std::to_string(targets.size()));
    for (std::size_t k = 0; k < parts.size(); ++k) assign(targets[k], parts[k]);
  }

  Flow loop(const Node& n) {
    const Value iterable = eval(*n.exprs[0]);
    if (iterable.is(K::none)) fail("'NoneType' object is not iterable");
    std::vector<Value> items = iterate(iterable);
    step(items.size());
    scopes.emplace_back();
    const std::size_t depth = scopes.size();
    if (n.exprs.size() > 1) {  // the loop's `if` filters before loop.length is known
      std::vector<Value> kept;
      for (Value& v : items) {
        bind(n.targets, v);
        if (truthy(eval(*n.exprs[1]))) kept.push_back(std::move(v));
      }
      items = std::move(kept);
    }
    // One loop object per loop, its fields updated in place (Jinja's LoopContext is one object).
    Value info = Value::of_dict({{"index0", {}},
                                 {"index", {}},
                                 {"revindex0", {}},
                                 {"revindex", {}},
                                 {"first", {}},
                                 {"last", {}},
                                 {"length", {}},
                                 {"previtem", {}},
                                 {"nextitem", {}},
                                 {"depth", Value::integer(1)},
                                 {"depth0", Value::integer(0)}});
    Dict& d = *info.dict;
    for (std::size_t k = 0; k < items.size(); ++k) {
      scopes.resize(depth);
      scopes.back().clear();
      bind(n.targets, items[k]);
      const std::int64_t i = std::int64_t(k), len = std::int64_t(items.size());
      d[0].second = Value::integer(i);
      d[1].second = Value::integer(i + 1);
      d[2].second = Value::integer(len - i - 1);
      d[3].second = Value::integer(len - i);
      d[4].second = Value::boolean(k == 0);
      d[5].second = Value::boolean(k + 1 == items.size());
      d[6].second = Value::integer(len);
      d[7].second = k ? items[k - 1] : Value();
      d[8].second = k + 1 < items.size() ? items[k + 1] : Value();
      scopes.back()["loop"] = info;
      if (render(n.body) == Flow::break_) break;
    }
    scopes.resize(depth - 1);
    if (items.empty()) return render(n.else_body);
    return Flow::normal;
  }

  void bind(const std::vector<std::string>& targets, const Value& v) {
    if (targets.size() == 1)
      assign(targets[0], v);
    else
      unpack(targets, v);
  }

  Value macro(const Node& n) {
    const Node* node = &n;
    return Value::function(n.text, [node](Renderer& r, Args& a) { return r.call_macro(*node, a); });
  }

  Value call_macro(const Node& n, Args& a) {
    if (++calls > max_calls) fail("macro calls nested deeper than " + std::to_string(max_calls));
    if (a.pos.size() > n.params.size())
      fail("macro " + attn::quoted(n.text) + " takes " + std::to_string(n.params.size()) +
           " arguments");
    std::vector<Scope> saved = std::move(scopes);
    scopes.assign(1, Scope());
    const int saved_line = line;
    std::string result;
    try {
      for (std::size_t k = 0; k < n.params.size(); ++k) {
        const auto& [param, def] = n.params[k];
        Value v = a.get(k, param, Value::with(K::undefined));
        if (v.is(K::undefined) && def) v = eval(*def);
        scopes.back()[param] = std::move(v);
      }
      for (const auto& kw : a.kw)
        if (std::none_of(n.params.begin(), n.params.end(),
                         [&](auto& p) { return p.first == kw.first; }))
          fail("macro " + attn::quoted(n.text) + " has no argument " + attn::quoted(kw.first));
      result = capture(n.body);
    } catch (...) {
      scopes = std::move(saved);
      --calls;
      throw;
    }
    scopes = std::move(saved);
    --calls;
    line = saved_line;
    return text(std::move(result));
  }
};

// ---- filters ----

using Filter = Value (*)(Renderer&, const Value&, Args&);

bool case_less(Renderer& r, const Value& a, const Value& b, bool case_sensitive) {
  if (!case_sensitive && a.is(K::string) && b.is(K::string))
    return case_of(a.s, false) < case_of(b.s, false);
  return r.less(a, b);
}

Value sorted(Renderer& r, const Value& v, const Value& reverse, const Value& case_sensitive,
             const Value& attribute) {
  std::vector<Value> items = r.iterate(v);
  const bool cs = Renderer::truthy(case_sensitive);
  auto key = [&](const Value& x) {
    return attribute.is(K::none) || attribute.is(K::undefined) ? x : r.path(x, attribute);
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    return case_less(r, key(a), key(b), cs);
  });
  if (Renderer::truthy(reverse)) std::reverse(items.begin(), items.end());
  return r.list(std::move(items));
}

// selectattr/rejectattr/select/reject: (attribute?, test name, test args...).
Value select(Renderer& r, const Value& v, Args& a, bool by_attribute, bool keep) {
  std::size_t k = 0;
  Value attr = by_attribute ? a.get(k++, "") : Value();
  Value test = a.get(k++, "");
  Args test_args;
  test_args.pos.assign(a.pos.begin() + std::ptrdiff_t(std::min(k, a.pos.size())), a.pos.end());
  if (!test.is(K::undefined) && (!test.is(K::string) || !is_test(test.s)))
    r.fail("no test named " + attn::quoted(str(test)));
  List out;
  if (!Renderer::truthy(v)) return r.list({});  // Jinja: `if value: for item in value`
  for (const Value& x : r.iterate(v)) {
    const Value subject = by_attribute ? r.path(x, attr) : x;
    const bool pass =
        test.is(K::undefined) ? Renderer::truthy(subject) : r.test(test.s, subject, test_args);
    if (pass == keep) out.push_back(x);
  }
  return r.list(std::move(out));
}

Value f_tojson(Renderer& r, const Value& v, Args& a) {
  return r.tojson(v, a);
}
Value f_length(Renderer& r, const Value& v, Args&) {
  return Value::integer(r.length(v));
}
Value f_trim(Renderer& r, const Value& v, Args& a) {
  return r.text(strip(str(v), true, true, a.get(0, "chars")));
}
Value f_string(Renderer& r, const Value& v, Args&) {
  return v.is(K::string) ? v : r.text(str(v));
}
Value f_default(Renderer&, const Value& v, Args& a) {
  const bool boolean = Renderer::truthy(a.get(1, "boolean", Value::boolean(false)));
  if (v.is(K::undefined) || (boolean && !Renderer::truthy(v)))
    return a.get(0, "default_value", Value::string(""));
  return v;
}
Value f_join(Renderer& r, const Value& v, Args& a) {
  std::vector<Value> items = r.iterate(v);
  const Value attr = a.get(1, "attribute", Value::none());
  if (!attr.is(K::none))
    for (Value& x : items) x = r.path(x, attr);
  return r.text(r.join(items, str(a.get(0, "d", Value::string("")))));
}
Value f_items(Renderer& r, const Value& v, Args&) {
  return r.items(v);
}
Value f_upper(Renderer& r, const Value& v, Args&) {
  return r.text(case_of(str(v), true));
}
Value f_lower(Renderer& r, const Value& v, Args&) {
  return r.text(case_of(str(v), false));
}
Value f_safe(Renderer& r, const Value& v, Args&) {
  return v.is(K::string) ? v : r.text(str(v));
}
Value f_dictsort(Renderer& r, const Value& v, Args& a) {
  if (!v.is(K::dict)) r.fail("dictsort of a " + Renderer::type_name(v));
  const bool cs = Renderer::truthy(a.get(0, "case_sensitive", Value::boolean(false)));
  const Value by = a.get(1, "by", Value::string("key"));
  const std::size_t pos = by.is(K::string) && by.s == "value" ? 1 : 0;
  std::vector<Value> items = *r.items(v).list;
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return case_less(r, (*x.list)[pos], (*y.list)[pos], cs);
  });
  if (Renderer::truthy(a.get(2, "reverse", Value::boolean(false))))
    std::reverse(items.begin(), items.end());
  return r.list(std::move(items));
}
Value f_list(Renderer& r, const Value& v, Args&) {
  return r.list(r.iterate(v));
}
Value f_replace(Renderer& r, const Value& v, Args& a) {
  return r.replace(str(v), a.get(0, "old"), a.get(1, "new"), a.get(2, "count", Value::none()));
}
Value f_selectattr(Renderer& r, const Value& v, Args& a) {
  return select(r, v, a, true, true);
}
Value f_rejectattr(Renderer& r, const Value& v, Args& a) {
  return select(r, v, a, true, false);
}
Value f_select(Renderer& r, const Value& v, Args& a) {
  return select(r, v, a, false, true);
}
Value f_reject(Renderer& r, const Value& v, Args& a) {
  return select(r, v, a, false, false);
}
Value f_map(Renderer& r, const Value& v, Args& a) {
  List out;
  if (!Renderer::truthy(v)) return r.list({});  // Jinja: `if value: for item in value`
  const Value attr = a.get(SIZE_MAX, "attribute");
  if (!attr.is(K::undefined)) {
    const Value def = a.get(SIZE_MAX, "default");
    for (const Value& x : r.iterate(v)) {
      Value y = r.path(x, attr);
      out.push_back(y.is(K::undefined) && !def.is(K::undefined) ? def : y);
    }
    return r.list(std::move(out));
  }
  const Value name = a.get(0, "");
  if (!name.is(K::string) || !is_filter(name.s))
    r.fail("map: no filter named " + attn::quoted(str(name)));
  Args rest;
  rest.pos.assign(a.pos.begin() + 1, a.pos.end());
  rest.kw = a.kw;
  for (const Value& x : r.iterate(v)) out.push_back(r.filter(name.s, x, rest));
  return r.list(std::move(out));
}
Value f_indent(Renderer& r, const Value& v, Args& a) {
  const Value w = a.get(0, "width", Value::integer(4));
  const std::string pad =
      w.is(K::string)
          ? w.s
          : std::string(std::size_t(std::clamp<std::int64_t>(Renderer::integer(w), 0, 256)), ' ');
  const bool first = Renderer::truthy(a.get(1, "first", Value::boolean(false)));
  const bool blank = Renderer::truthy(a.get(2, "blank", Value::boolean(false)));
  const std::vector<std::string> lines = Renderer::split_lines(str(v) + "\n");
  std::string out;
  for (std::size_t k = 0; k < lines.size(); ++k) {
    if (k) out += '\n';
    if (k && (blank || !lines[k].empty())) out += pad;
    out += lines[k];
    if (out.size() > max_text)
      r.fail("a string longer than " + std::to_string(max_text) + " bytes");
  }
  return r.text(first ? pad + out : out);
}
Value f_int(Renderer& r, const Value& v, Args& a) {
  if (Renderer::is_int(v)) return Value::integer(Renderer::integer(v));
  if (v.is(K::floating) && std::isfinite(v.f) && std::fabs(v.f) < 9e18)
    return Value::integer(std::int64_t(v.f));
  if (v.is(K::string)) {
    const std::string s = strip(v.s, true, true, Value());
    std::int64_t out = 0;
    const auto res =
        std::from_chars(s.data() + (!s.empty() && s[0] == '+'), s.data() + s.size(), out);
    if (res.ec == std::errc() && res.ptr == s.data() + s.size() && !s.empty())
      return Value::integer(out);
    double d = 0;
    const auto fres = std::from_chars(s.data(), s.data() + s.size(), d);
    if (fres.ec == std::errc() && fres.ptr == s.data() + s.size() && std::fabs(d) < 9e18)
      return Value::integer(std::int64_t(d));
  }
  (void)r;
  return a.get(0, "default", Value::integer(0));
}
Value f_float(Renderer&, const Value& v, Args& a) {
  if (Renderer::numeric(v)) return Value::floating(Renderer::number(v));
  if (v.is(K::string)) {
    const std::string s = strip(v.s, true, true, Value());
    double d = 0;
    const auto res = std::from_chars(s.data(), s.data() + s.size(), d);
    if (res.ec == std::errc() && res.ptr == s.data() + s.size() && !s.empty())
      return Value::floating(d);
  }
  return a.get(0, "default", Value::floating(0));
}
Value f_unique(Renderer& r, const Value& v, Args& a) {
  const bool cs = Renderer::truthy(a.get(0, "case_sensitive", Value::boolean(false)));
  const Value attr = a.get(1, "attribute", Value::none());
  List out;
  std::vector<Value> seen;
  for (const Value& x : r.iterate(v)) {
    Value key = attr.is(K::none) ? x : r.path(x, attr);
    if (!cs && key.is(K::string)) key.s = case_of(key.s, false);
    r.step(seen.size());
    if (std::none_of(seen.begin(), seen.end(),
                     [&](const Value& s) { return Renderer::equal(s, key); })) {
      seen.push_back(key);
      out.push_back(x);
    }
  }
  return r.list(std::move(out));
}
Value f_sort(Renderer& r, const Value& v, Args& a) {
  return sorted(r, v, a.get(0, "reverse", Value::boolean(false)),
                a.get(1, "case_sensitive", Value::boolean(false)),
                a.get(2, "attribute", Value::none()));
}
Value extreme(Renderer& r, const Value& v, Args& a, bool largest) {
  const Value s =
      sorted(r, v, Value::boolean(false), a.get(0, "case_sensitive", Value::boolean(false)),
             a.get(1, "attribute", Value::none()));
  if (s.list->empty()) return Value();
  return largest ? s.list->back() : s.list->front();
}
Value f_min(Renderer& r, const Value& v, Args& a) {
  return extreme(r, v, a, false);
}
Value f_max(Renderer& r, const Value& v, Args& a) {
  return extreme(r, v, a, true);
}
Value f_first(Renderer& r, const Value& v, Args&) {
  const std::vector<Value> items = r.iterate(v);
  return items.empty() ? Value() : items.front();
}
Value f_last(Renderer& r, const Value& v, Args&) {
  const std::vector<Value> items = r.iterate(v);
  return items.empty() ? Value() : items.back();
}
Value f_capitalize(Renderer& r, const Value& v, Args&) {
  return r.text(Renderer::capitalize(str(v)));
}
Value f_title(Renderer& r, const Value& v, Args&) {
  return r.text(Renderer::title(str(v)));
}
Value f_abs(Renderer& r, const Value& v, Args&) {
  if (!Renderer::numeric(v)) r.fail("abs of a " + Renderer::type_name(v));
  if (Renderer::is_int(v))
    return Value::integer(std::abs(std::max(Renderer::integer(v), -INT64_MAX)));
  return Value::floating(std::fabs(v.f));
}
Value f_reverse(Renderer& r, const Value& v, Args&) {
  std::vector<Value> items = r.iterate(v);
  std::reverse(items.begin(), items.end());
  if (!v.is(K::string)) return r.list(std::move(items));
  return r.text(r.join(items, ""));
}
Value f_sum(Renderer& r, const Value& v, Args& a) {
  const Value attr = a.get(0, "attribute", Value::none());
  Value total = a.get(1, "start", Value::integer(0));
  for (const Value& x : r.iterate(v))
    total = r.arithmetic("+", total, attr.is(K::none) ? x : r.path(x, attr));
  return total;
}
Value f_escape(Renderer& r, const Value& v, Args&) {
  std::string out;
  for (const char c : str(v)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return r.text(std::move(out));
}
Value f_round(Renderer& r, const Value& v, Args& a) {
  if (!Renderer::numeric(v)) r.fail("round of a " + Renderer::type_name(v));
  const double scale =
      std::pow(10.0, double(std::clamp<std::int64_t>(
                         Renderer::integer(a.get(0, "precision", Value::integer(0))), -30, 30)));
  const std::string method = str(a.get(1, "method", Value::string("common")));
  const double x = Renderer::number(v) * scale;
  const double y = method == "ceil"    ? std::ceil(x)
                   : method == "floor" ? std::floor(x)
                                       : std::round(x);
  return Value::floating(y / scale);
}
Value f_wordcount(Renderer& r, const Value& v, Args&) {
  return Value::integer(
      std::int64_t(r.split(str(v), Value::none(), Value::integer(-1), false).list->size()));
}
Value f_attr(Renderer& r, const Value& v, Args& a) {
  return r.attribute(v, str(a.get(0, "name")));
}

struct NamedFilter {
  std::string_view name;
  Filter fn;
};
// Jinja's built-in filters that chat templates use, and transformers' tojson.
const NamedFilter filters[] = {{"tojson", f_tojson},
                               {"length", f_length},
                               {"count", f_length},
                               {"trim", f_trim},
                               {"string", f_string},
                               {"default", f_default},
                               {"d", f_default},
                               {"join", f_join},
                               {"items", f_items},
                               {"upper", f_upper},
                               {"lower", f_lower},
                               {"safe", f_safe},
                               {"dictsort", f_dictsort},
                               {"list", f_list},
                               {"replace", f_replace},
                               {"selectattr", f_selectattr},
                               {"rejectattr", f_rejectattr},
                               {"select", f_select},
                               {"reject", f_reject},
                               {"map", f_map},
                               {"indent", f_indent},
                               {"int", f_int},
                               {"float", f_float},
                               {"unique", f_unique},
                               {"sort", f_sort},
                               {"min", f_min},
                               {"max", f_max},
                               {"first", f_first},
                               {"last", f_last},
                               {"capitalize", f_capitalize},
                               {"title", f_title},
                               {"abs", f_abs},
                               {"reverse", f_reverse},
                               {"sum", f_sum},
                               {"e", f_escape},
                               {"escape", f_escape},
                               {"round", f_round},
                               {"wordcount", f_wordcount},
                               {"attr", f_attr}};

Value Renderer::filter(const std::string& f, const Value& v, Args& a) {
  for (const NamedFilter& nf : filters)
    if (nf.name == f) return nf.fn(*this, v, a);
  fail("no filter named " + attn::quoted(f));
}

// ---- tests ----

bool Renderer::test(const std::string& t, const Value& v, const Args& a) {
  const Value arg = a.get(0, "value");
  if (t == "defined") return !v.is(K::undefined);
  if (t == "undefined") return v.is(K::undefined);
  if (t == "none") return v.is(K::none);
  if (t == "string") return v.is(K::string);
  if (t == "mapping") return v.is(K::dict);
  if (t == "iterable")
    return v.is(K::string) || v.is(K::list) || v.is(K::dict) || v.is(K::undefined);
  if (t == "sequence") return v.is(K::string) || v.is(K::list) || v.is(K::dict);
  if (t == "number") return numeric(v);
  if (t == "integer") return v.is(K::integer);
  if (t == "float") return v.is(K::floating);
  if (t == "boolean") return v.is(K::boolean);
  if (t == "true") return v.is(K::boolean) && v.b;
  if (t == "false") return v.is(K::boolean) && !v.b;
  if (t == "callable") return v.is(K::function);
  if (t == "equalto" || t == "eq" || t == "==") return equal(v, arg);
  if (t == "ne" || t == "!=") return !equal(v, arg);
  if (t == "lt") return less(v, arg);
  if (t == "gt") return less(arg, v);
  if (t == "le") return !less(arg, v);
  if (t == "ge") return !less(v, arg);
  if (t == "in") return contains(arg, v);
  if (t == "odd" || t == "even" || t == "divisibleby") {
    if (!is_int(v)) fail("test " + t + " of a " + type_name(v));
    const std::int64_t d = t == "divisibleby" ? (is_int(arg) ? integer(arg) : 0) : 2;
    if (d == 0) fail("integer division or modulo by zero");
    const std::int64_t m = d == -1 ? 0 : integer(v) % d;
    return t == "odd" ? m != 0 : m == 0;
  }
  if (t == "lower" || t == "upper") {
    const std::string s = str(v);
    return s == case_of(s, t == "upper") && s != case_of(s, t != "upper");
  }
  if (t == "sameas") {
    if (v.kind != arg.kind) return false;
    if (v.is(K::list)) return v.list == arg.list;
    if (v.is(K::dict)) return v.dict == arg.dict;
    return equal(v, arg);
  }
  if (t == "escaped") return false;
  fail("no test named " + attn::quoted(t));
}

const std::string_view test_table[] = {
    "defined", "undefined", "none",        "string", "mapping", "iterable", "sequence", "number",
    "integer", "float",     "boolean",     "true",   "false",   "callable", "equalto",  "eq",
    "==",      "ne",        "!=",          "lt",     "gt",      "le",       "ge",       "in",
    "odd",     "even",      "divisibleby", "lower",  "upper",   "sameas",   "escaped"};

bool is_filter(std::string_view name) {
  return std::any_of(std::begin(filters), std::end(filters),
                     [&](const NamedFilter& f) { return f.name == name; });
}
bool is_test(std::string_view name) {
  return std::find(std::begin(test_table), std::end(test_table), name) != std::end(test_table);
}

// ---- globals ----

Value Renderer::global(const std::string& n) {
  if (n == "range")
    return Value::function(n, [](Renderer& r, Args& a) {
      if (!a.kw.empty() || a.pos.empty() || a.pos.size() > 3) r.fail("range takes 1 to 3 integers");
      for (const Value& v : a.pos)
        if (!is_int(v)) r.fail("range takes integers, not a " + type_name(v));
      const std::int64_t start = a.pos.size() > 1 ? integer(a.pos[0]) : 0;
      const std::int64_t stop = integer(a.pos.size() > 1 ? a.pos[1] : a.pos[0]);
      const std::int64_t st = a.pos.size() > 2 ? integer(a.pos[2]) : 1;
      if (st == 0) r.fail("range's step is zero");
      List out;
      for (std::int64_t k = start; st > 0 ? k < stop : k > stop; k += st) {
        if (std::int64_t(out.size()) >= max_range)
          r.fail("range is longer than " + std::to_string(max_range));
        out.push_back(Value::integer(k));
        if ((st > 0 && k > INT64_MAX - st) || (st < 0 && k < INT64_MIN - st)) break;
      }
      return r.list(std::move(out));
    });
  if (n == "namespace" || n == "dict")
    return Value::function(n, [n](Renderer& r, Args& a) {
      Dict d;
      for (const Value& p : a.pos) {
        if (!p.is(K::dict)) r.fail(n + " takes keyword arguments or a dict");
        d.insert(d.end(), p.dict->begin(), p.dict->end());
      }
      for (auto& kv : a.kw) d.emplace_back(kv.first, kv.second);
      Value v = Value::of_dict(std::move(d));
      v.is_namespace = n == "namespace";
      return v;
    });
  if (n == "raise_exception")
    return Value::function(
        n, [](Renderer& r, Args& a) -> Value { r.fail(escape(str(a.get(0, "message")), 500)); });
  if (n == "strftime_now")
    return Value::function(n, [](Renderer& r, Args& a) {
      const std::string fmt = r.string_arg(a.get(0, "format"), "strftime_now");
      if (fmt.size() > 200) r.fail("strftime_now: a format longer than 200 bytes");
      std::tm tm{};
      localtime_r(&r.now, &tm);
      char buf[1024];
      const std::size_t n = fmt.empty() ? 0 : std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
      return r.text(std::string(buf, n));
    });
  return Value();
}

// ---- JSON variables ----

Value from_json(const nlohmann::ordered_json& j, int depth) {
  if (depth > 200) throw InputError("chat template variables: nested deeper than 200");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(j.get<std::int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      if (j.get<std::uint64_t>() > std::uint64_t(INT64_MAX))
        return Value::floating(j.get<double>());
      return Value::integer(std::int64_t(j.get<std::uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float:
      return Value::floating(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List l;
      for (const auto& x : j) l.push_back(from_json(x, depth + 1));
      return Value::of_list(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (const auto& [k, x] : j.items()) d.emplace_back(k, from_json(x, depth + 1));
      return Value::of_dict(std::move(d));
    }
    default:
      return Value();
  }
}

std::string render(const ChatTemplate::Program& program, const std::string& name, Scope variables,
                   std::optional<std::int64_t> now) {
  Renderer r;
  r.name = escape(name);
  r.root = std::move(variables);
  r.now = static_cast<std::time_t>(now ? *now : std::int64_t(std::time(nullptr)));
  std::string out;
  r.out = &out;
  r.render(program.body);
  return out;
}

}  // namespace attn::chat

namespace attn {

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                 const ChatOptions& options) const {
  using chat::Value;
  chat::List list;
  for (const ChatMessage& m : messages)
    list.push_back(
        Value::of_dict({{"role", Value::string(m.role)}, {"content", Value::string(m.content)}}));
  chat::Scope vars;
  vars["messages"] = Value::of_list(std::move(list));
  vars["tools"] = Value::none();  // transformers passes tools=None and documents=None
  vars["documents"] = Value::none();
  vars["add_generation_prompt"] = Value::boolean(options.add_generation_prompt);
  vars["bos_token"] = Value::string(options.bos_token);
  vars["eos_token"] = Value::string(options.eos_token);
  return chat::render(*program_, name_, std::move(vars), options.now);
}

std::string ChatTemplate::render_json(std::string_view variables,
                                      std::optional<std::int64_t> now) const {
  const auto j = nlohmann::ordered_json::parse(variables, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw InputError(escape(name_) + ": the variables are not a JSON object");
  chat::Scope vars;
  for (const auto& [k, x] : j.items()) vars[k] = chat::from_json(x, 0);
  return chat::render(*program_, name_, std::move(vars), now);
}

}  // namespace attn
