// Python's values as the engine's, and back: each argument's type checked (TypeError naming
// it), its range left to the engine (ValueError naming it), arrays read in place.
#include "convert.hpp"

#include <pybind11/stl.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "attn/engine/open.hpp"
#include "attn/io/text.hpp"
#include "attn/model/config.hpp"
#include "attn/model/hooks.hpp"

namespace attn_py {

namespace {

// A value's repr for a message, cut to n bytes; a repr that fails (a list nested past the
// recursion limit, an int past Python's digit limit) gives its type's name instead.
std::string short_repr(py::handle v, std::size_t n = 40) {
  try {
    return attn::escape(std::string(py::repr(v)), n);
  } catch (py::error_already_set& e) {
    if (e.matches(PyExc_KeyboardInterrupt)) throw;
    return "<" + type_name(v) + ">";
  }
}

}  // namespace

// ModelArgs(**keys): the notebook's defaults (attn.ModelArgs() is configs/gqa.json), each key
// given replacing its value, then read by the same parser as a config file: the same checks
// and messages.
attn::ModelArgs make_args(const py::kwargs& keys) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, value] : attn::config_values(attn::seed_args()))
    j[key] = nlohmann::json::parse(value);
  const nlohmann::json types = j;  // each key's JSON type, by its default's
  // Derived, or meaningful for one block only: set only when given.
  for (const char* k : {"ffn_hidden", "activation", "norm_first", "attention_bias", "mask"})
    j.erase(k);
  for (const auto& [key, value] : keys) {
    const std::string k = py::str(key);
    if (types.contains(k) && !value.is_none()) {  // None: the parser's (null where allowed)
      const nlohmann::json& d = types[k];
      if (d.is_number_integer()) {
        j[k] = int_arg(value, k.c_str());
        continue;
      }
      if (d.is_number_float()) {
        j[k] = float_arg(value, k.c_str());
        continue;
      }
      if (d.is_boolean()) {
        j[k] = bool_arg(value, k.c_str());
        continue;
      }
      if (d.is_string()) {
        j[k] = text_arg(value, k.c_str());
        continue;
      }
    }
    std::string text;
    try {  // NaN and Inf are not JSON: refused here, naming the key
      text = py::module_::import("json")
                 .attr("dumps")(value, py::arg("allow_nan") = false)
                 .cast<std::string>();
    } catch (py::error_already_set& e) {
      const bool type = e.matches(PyExc_TypeError);
      if (!type && !e.matches(PyExc_ValueError) && !e.matches(PyExc_RecursionError))
        throw;  // KeyboardInterrupt, MemoryError
      const std::string why =
          k + ": " +
          (type ? "expected a number, string, bool or list, got "
                : "must be finite (no NaN, Inf, a value holding itself or nested past Python's "
                  "recursion limit), got ") +
          short_repr(value, 60);
      if (type) throw py::type_error(why);
      throw py::value_error(why);
    }
    j[k] = nlohmann::json::parse(text);
  }
  return attn::parse_config(j.dump(), "ModelArgs");
}

std::string type_name(py::handle v) {
  const py::handle t = v.get_type();
  const std::string module = py::str(t.attr("__module__")), name = py::str(t.attr("__qualname__"));
  return module == "builtins" ? name : module + "." + name;
}

namespace {

py::type_error wrong_type(const char* name, const std::string& expected, py::handle v) {
  return py::type_error(std::string(name) + ": expected " + expected + ", got " + type_name(v));
}

// Python's int of an integer-like (an int, NumPy's integers, anything with __index__ but a
// bool), or a TypeError naming the argument.
py::object index_of(py::handle v, const char* name, const std::string& expected) {
  if (PyBool_Check(v.ptr()) || !PyIndex_Check(v.ptr())) throw wrong_type(name, expected, v);
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(v.ptr()));
  if (!index) {  // NumPy's arrays of several values have __index__ that refuses
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw py::error_already_set();
    PyErr_Clear();
    throw wrong_type(name, expected, v);
  }
  return index;
}

// The int64 of Python's int `index`, or nothing when it does not fit.
std::optional<std::int64_t> int64_of(py::handle index) {
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0 || (x == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return std::nullopt;
  }
  return x;
}

}  // namespace

std::int64_t int_arg(py::handle v, const char* name) {
  const py::object index = index_of(v, name, "an int");
  if (const auto x = int64_of(index)) return *x;
  throw py::value_error(std::string(name) + ": " + short_repr(index) + " is out of range");
}

std::int64_t int_arg(py::handle v, const char* name, std::int64_t lo, std::int64_t hi) {
  const py::object index = index_of(v, name, "an int");
  const auto x = int64_of(index);
  if (!x || *x < lo || *x > hi)
    throw py::value_error(std::string(name) + ": must be in [" + std::to_string(lo) + ", " +
                          std::to_string(hi) + "], got " + short_repr(index));
  return *x;
}

double float_arg(py::handle v, const char* name) {
  if (PyBool_Check(v.ptr()) || PyUnicode_Check(v.ptr()) || PyBytes_Check(v.ptr()) ||
      !PyNumber_Check(v.ptr()))
    throw wrong_type(name, "a float", v);
  const double x = PyFloat_AsDouble(v.ptr());
  if (x == -1.0 && PyErr_Occurred()) {
    if (PyErr_ExceptionMatches(PyExc_TypeError)) {  // an array of several values
      PyErr_Clear();
      throw wrong_type(name, "a float", v);
    }
    if (!PyErr_ExceptionMatches(PyExc_OverflowError)) throw py::error_already_set();
    PyErr_Clear();  // an int past a double's range
    throw py::value_error(std::string(name) + ": " + short_repr(v) + " is out of range");
  }
  return x;
}

bool bool_arg(py::handle v, const char* name) {
  if (PyBool_Check(v.ptr())) return v.ptr() == Py_True;
  if (type_name(v) == "numpy.bool_" || type_name(v) == "numpy.bool")
    return PyObject_IsTrue(v.ptr());
  throw wrong_type(name, "a bool", v);
}

std::optional<bool> optional_bool_arg(py::handle v, const char* name) {
  if (v.is_none()) return std::nullopt;
  return bool_arg(v, name);
}

std::string text_arg(py::handle v, const char* name) {
  if (!PyUnicode_Check(v.ptr())) throw wrong_type(name, "a str", v);
  Py_ssize_t n = 0;
  const char* s = PyUnicode_AsUTF8AndSize(v.ptr(), &n);
  if (s) return std::string(s, std::size_t(n));
  PyErr_Clear();  // UnicodeEncodeError: a code point UTF-8 cannot hold, found below
  const Py_ssize_t len = PyUnicode_GetLength(v.ptr());
  Py_ssize_t i = 0;
  while (i < len &&
         !(PyUnicode_ReadChar(v.ptr(), i) >= 0xD800 && PyUnicode_ReadChar(v.ptr(), i) <= 0xDFFF))
    ++i;
  char cp[8];
  std::snprintf(cp, sizeof cp, "%04X", unsigned(i < len ? PyUnicode_ReadChar(v.ptr(), i) : 0));
  throw py::value_error(std::string(name) + ": not valid Unicode: a lone surrogate U+" + cp +
                        " at index " + std::to_string(i) + " (UTF-8 cannot hold it)");
}

std::string path_arg(py::handle v, const char* name) {
  const py::module_ os = py::module_::import("os");
  if (!PyUnicode_Check(v.ptr()) && !PyBytes_Check(v.ptr()) &&
      !py::hasattr(v.get_type(), "__fspath__"))
    throw wrong_type(name, "a path (str, bytes or os.PathLike)", v);
  py::object bytes;
  try {
    bytes = os.attr("fsencode")(v);
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_UnicodeError)) throw;
    throw py::value_error(std::string(name) + ": " + short_repr(v) +
                          " cannot be a file name here (a character the file system's "
                          "encoding cannot hold)");
  }
  std::string path = bytes.cast<std::string>();
  if (path.find('\0') != std::string::npos)
    throw py::value_error(std::string(name) + ": a path cannot hold a NUL character");
  return path;
}

std::optional<std::string> optional_path_arg(py::handle v, const char* name) {
  if (v.is_none()) return std::nullopt;
  return path_arg(v, name);
}

std::vector<std::int32_t> ids_arg(py::handle v, const char* name, std::int64_t vocab_size) {
  const std::string expected = "token ids (a list of ints)";
  // An ordered sequence (a set's or a dict's order is no sequence's); text is not ids.
  if (PyUnicode_Check(v.ptr()) || PyBytes_Check(v.ptr()) || PyByteArray_Check(v.ptr()) ||
      !(PySequence_Check(v.ptr()) || py::hasattr(v, "__array__")))
    throw wrong_type(name, expected, v);
  if (py::hasattr(v, "ndim")) {  // an array: one axis of integers
    const std::int64_t ndim = int_arg(v.attr("ndim"), name);
    if (ndim != 1)
      throw py::value_error(std::string(name) + ": expected ids [seqlen], got " +
                            std::to_string(ndim) + " axes");
  }
  std::vector<std::int32_t> ids;
  std::size_t i = 0;
  for (py::handle item : v) {
    const py::object index = index_of(item, name, "an int id at index " + std::to_string(i));
    const auto x = int64_of(index);
    if (!x || *x < 0 || *x >= vocab_size)
      throw py::value_error(std::string(name) + ": id " + short_repr(index) + " at index " +
                            std::to_string(i) + " is outside the vocabulary [0, " +
                            std::to_string(vocab_size) + ")");
    ids.push_back(std::int32_t(*x));
    ++i;
  }
  return ids;
}

bool one_id(py::handle v) {
  if (PyBool_Check(v.ptr()) || !PyIndex_Check(v.ptr())) return false;
  return !py::hasattr(v, "ndim") || int_arg(v.attr("ndim"), "ndim") == 0;  // not an array
}

std::int32_t id_arg(py::handle v, const char* name, std::int64_t vocab_size) {
  const py::object index = index_of(v, name, "a token id (int)");
  const auto x = int64_of(index);
  if (!x || *x < 0 || *x >= vocab_size)
    throw py::index_error(std::string(name) + ": " + short_repr(index) +
                          " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
  return std::int32_t(*x);
}

// threads: 0 (the machine's cores) up to attn::kMaxThreads.
int threads_arg(py::handle v) {
  const std::int64_t t = int_arg(v, "threads");
  if (t < 0 || t > attn::kMaxThreads)
    throw py::value_error("threads: must be in [0, " + std::to_string(attn::kMaxThreads) +
                          "] (0: the machine's cores), got " + std::to_string(t));
  return int(t);
}

Floats floats(py::handle obj, const char* name, int ndim, const std::string& expected) {
  py::object o = py::reinterpret_borrow<py::object>(obj);
  if (!PyObject_CheckBuffer(o.ptr())) {
    try {
      o = py::module_::import("numpy").attr("asarray")(o);
    } catch (py::error_already_set& e) {
      throw py::type_error(std::string(name) + ": expected a float32 array " + expected +
                           " on the CPU, got " + type_name(obj) + " (" + e.what() + ")");
    }
  }
  Floats f{py::reinterpret_borrow<py::buffer>(o).request(), o};
  const std::string& fmt = f.info.format;  // "<f" and "=f": explicit little-endian float32
  if (fmt != "f" && fmt != "<f" && fmt != "=f")
    throw py::type_error(std::string(name) + ": expected float32, got format '" + f.info.format +
                         "'");
  if (f.info.ndim != ndim)
    throw py::value_error(std::string(name) + ": expected shape " + expected + ", got " +
                          std::to_string(f.info.ndim) + " axes");
  py::ssize_t stride = sizeof(float);
  for (py::ssize_t i = ndim - 1; i >= 0; --i) {
    if (f.info.shape[std::size_t(i)] > 1 && f.info.strides[std::size_t(i)] != stride)
      throw py::value_error(std::string(name) + ": must be C-contiguous (numpy.ascontiguousarray)");
    stride *= f.info.shape[std::size_t(i)];
  }
  return f;
}

// A setting named by a library error, as Python says it: the keyword argument that sets it.
std::string with_setting(const attn::InputError& e) {
  if (e.setting.empty()) return e.what();
  std::string names = e.setting;  // "max_seq_len,steps": each one fixes it
  for (std::size_t i; (i = names.find(',')) != std::string::npos;) names.replace(i, 1, "= or ");
  return std::string(e.what()) + " (set with " + names + "=)";
}

// ids [seqlen] or [batch, seqlen] of any integer array-like, as rows (each row as ids_arg
// reads it).
std::vector<std::vector<std::int32_t>> token_rows(py::handle tokens, std::int64_t vocab_size,
                                                  const char* name) {
  if (PyUnicode_Check(tokens.ptr()) || PyBytes_Check(tokens.ptr()))
    throw wrong_type(name, "token ids [seqlen] or [batch, seqlen]", tokens);
  py::object t;
  try {
    t = py::module_::import("numpy").attr("asarray")(tokens);
  } catch (py::error_already_set& e) {  // rows of different lengths, or not a sequence
    if (!e.matches(PyExc_ValueError) && !e.matches(PyExc_TypeError)) throw;
    throw py::value_error(
        std::string(name) +
        ": expected ids [seqlen] or [batch, seqlen], every row of the same length (pad "
        "them), got a " +
        type_name(tokens) + " NumPy cannot read as one");
  }
  const int ndim = py::cast<int>(t.attr("ndim"));
  if (ndim == 0) throw wrong_type(name, "token ids [seqlen] or [batch, seqlen]", tokens);
  if (ndim != 1 && ndim != 2)
    throw py::value_error(std::string(name) + ": expected ids [seqlen] or [batch, seqlen], got " +
                          std::to_string(ndim) + " axes");
  const std::string kind = py::str(t.attr("dtype").attr("kind"));  // O: ints past int64
  if (kind != "i" && kind != "u" && kind != "O" && py::cast<std::int64_t>(t.attr("size")) > 0)
    throw py::type_error(std::string(name) + ": expected integer ids, got dtype " +
                         std::string(py::str(t.attr("dtype"))));
  if (ndim == 1) t = t.attr("reshape")(1, -1);
  std::vector<std::vector<std::int32_t>> rows;
  for (py::handle row : t.attr("tolist")()) rows.push_back(ids_arg(row, name, vocab_size));
  return rows;
}

py::array_t<float> float_array(py::handle v, const char* name, int ndim) {
  py::object arr;
  try {
    arr = py::module_::import("numpy").attr("asarray")(v);
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_ValueError) && !e.matches(PyExc_TypeError)) throw;
    throw wrong_type(name, "a float array", v);
  }
  const std::string kind = py::str(arr.attr("dtype").attr("kind"));
  if (kind != "f" && kind != "i" && kind != "u" && kind != "b")
    throw py::type_error(std::string(name) + ": expected a float array, got dtype " +
                         std::string(py::str(arr.attr("dtype"))));
  if (py::cast<int>(arr.attr("ndim")) != ndim)
    throw py::value_error(std::string(name) + ": expected " + std::to_string(ndim) + " axes, got " +
                          std::string(py::str(arr.attr("ndim"))));
  return py::module_::import("numpy").attr("ascontiguousarray")(arr, py::arg("dtype") = "float32");
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// A hook name given to argument `arg`, as a point of this model (ValueError naming both).
attn::HookPoint named_point(const attn::ModelArgs& a, const attn::ModelEnds& ends, py::handle name,
                            const char* arg) {
  if (!py::isinstance<py::str>(name))
    throw py::type_error(std::string(arg) + ": expected hook names (str), got " + type_name(name));
  try {
    return attn::model_hook_point(a, ends, text_arg(name, arg));
  } catch (const attn::InputError& e) {
    throw py::value_error(std::string(arg) + ": " + e.what());
  }
}

// The points `names` asks for: None every one (in forward order), a hook name or a list of
// them, or a function name -> bool (TransformerLens's names_filter).
std::vector<attn::HookPoint> named_points(const attn::ModelArgs& a, const attn::ModelEnds& ends,
                                          py::handle names) {
  const std::vector<attn::HookPoint> all = attn::hook_points(a, ends);
  if (names.is_none()) return all;
  std::vector<attn::HookPoint> out;
  if (!py::isinstance<py::str>(names) && PyCallable_Check(names.ptr())) {
    const py::object filter = py::reinterpret_borrow<py::object>(names);
    for (const attn::HookPoint& p : all)
      if (py::bool_(filter(attn::hook_name(p.site, p.layer)))) out.push_back(p);
    return out;
  }
  if (!py::isinstance<py::str>(names) && !py::isinstance<py::iterable>(names))
    throw py::type_error(
        "names: expected None, a hook name, a list of them or a function name "
        "-> bool, got " +
        type_name(names));
  py::list items;
  if (py::isinstance<py::str>(names))
    items.append(names);
  else
    items = py::list(py::reinterpret_borrow<py::object>(names));
  for (py::handle item : items) {
    const attn::HookPoint p = named_point(a, ends, item, "names");
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  return out;
}

// A patch's replacement: a float array of exactly `shape`, as C-contiguous float32 (ValueError
// or TypeError naming the point).
py::array_t<float> replacement(py::handle value, const std::string& where,
                               const std::vector<std::int64_t>& shape) {
  const py::module_ np = py::module_::import("numpy");
  py::object arr;
  try {
    arr = np.attr("asarray")(value);
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_TypeError) && !e.matches(PyExc_ValueError)) throw;
    throw py::type_error(where + ": expected a float array, got " + type_name(value));
  }
  if (std::string(py::str(arr.attr("dtype").attr("kind"))) != "f")
    throw py::type_error(where + ": expected a float array, got " +
                         std::string(py::str(value.get_type().attr("__name__"))) + " of dtype " +
                         std::string(py::str(arr.attr("dtype"))));
  std::vector<std::int64_t> got;
  for (py::handle d : arr.attr("shape")) got.push_back(d.cast<std::int64_t>());
  if (got != shape)
    throw py::value_error(where + ": expected shape " + shape_text(shape) + ", got " +
                          shape_text(got));
  return np.attr("ascontiguousarray")(arr, py::arg("dtype") = "float32");
}

py::dict args_dict(const attn::ModelArgs& a) {
  py::dict d;
  for (const auto& [key, value] : attn::config_values(a))
    d[py::str(key)] = py::module_::import("json").attr("loads")(value);
  d["head_dim"] = a.head_dim();
  return d;
}

}  // namespace attn_py
