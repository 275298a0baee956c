// Python's values as the engine's, and back: each argument's type checked (TypeError naming
// it), its range left to the engine (ValueError naming it), arrays read in place.
#include "convert.hpp"

#include <pybind11/stl.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "attn/engine/open.hpp"
#include "attn/io/text.hpp"
#include "attn/model/config.hpp"
#include "attn/model/hooks.hpp"

namespace attn_py {

// ModelArgs(**keys): the notebook's defaults (attn.ModelArgs() is configs/gqa.json), each key
// given replacing its value, then read by the same parser as a config file: the same checks
// and messages.
attn::ModelArgs make_args(const py::kwargs& keys) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, value] : attn::config_values(attn::seed_args()))
    j[key] = nlohmann::json::parse(value);
  // Derived, or meaningful for one block only: set only when given.
  for (const char* k : {"ffn_hidden", "activation", "norm_first", "attention_bias", "mask"})
    j.erase(k);
  for (const auto& [key, value] : keys) {
    const std::string k = py::str(key);
    std::string text;
    try {  // NaN and Inf are not JSON: refused here, naming the key
      text = py::module_::import("json")
                 .attr("dumps")(value, py::arg("allow_nan") = false)
                 .cast<std::string>();
    } catch (py::error_already_set& e) {
      const bool type = e.matches(PyExc_TypeError);
      if (!type && !e.matches(PyExc_ValueError)) throw;  // RecursionError, KeyboardInterrupt
      const std::string got = py::str(py::repr(value));
      const std::string why =
          k + ": " +
          (type ? "expected a number, string, bool or list, got "
                : "must be finite (no NaN, Inf or a value holding itself), got ") +
          attn::escape(got, 60);
      if (type) throw py::type_error(why);
      throw py::value_error(why);
    }
    j[k] = nlohmann::json::parse(text);
  }
  return attn::parse_config(j.dump(), "ModelArgs");
}

// An integer argument: a bool, a float or a str is a TypeError, a value past int64 a ValueError,
// each naming the argument (pybind11's own message names neither).
std::int64_t int_arg(py::handle v, const char* name) {
  if (PyBool_Check(v.ptr()) || !PyIndex_Check(v.ptr()))
    throw py::type_error(std::string(name) + ": expected an int, got " +
                         std::string(py::str(v.get_type().attr("__name__"))));
  const py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(v.ptr()));
  if (!index) throw py::error_already_set();  // an __index__ that raised
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0 || (x == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    throw py::value_error(std::string(name) + ": " + std::string(py::str(v)).substr(0, 40) +
                          " is out of range");
  }
  return x;
}

// A float argument: an int or a float (NumPy's too); ranges are the engine's (NaN refused).
double float_arg(py::handle v, const char* name) {
  if (PyBool_Check(v.ptr()) || PyUnicode_Check(v.ptr()) || PyBytes_Check(v.ptr()) ||
      !PyNumber_Check(v.ptr()))
    throw py::type_error(std::string(name) + ": expected a float, got " +
                         std::string(py::str(v.get_type().attr("__name__"))));
  const double x = PyFloat_AsDouble(v.ptr());
  if (x == -1.0 && PyErr_Occurred()) throw py::error_already_set();
  return x;
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
                           " on the CPU, got " + std::string(py::str(obj.get_type())) + " (" +
                           e.what() + ")");
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

// ids [seqlen] or [batch, seqlen] of any integer array-like, as rows.
std::vector<std::vector<std::int32_t>> token_rows(py::handle tokens, std::int64_t vocab_size) {
  std::vector<std::vector<std::int32_t>> rows;
  py::object t = py::module_::import("numpy").attr("asarray")(tokens);
  if (py::cast<int>(t.attr("ndim")) == 1) t = t.attr("reshape")(1, -1);
  if (py::cast<int>(t.attr("ndim")) != 2)
    throw py::value_error("tokens: expected ids [seqlen] or [batch, seqlen]");
  // Integers only: True is not id 1, 286.9 not 286.
  const std::string kind = py::str(t.attr("dtype").attr("kind"));
  if (kind != "i" && kind != "u" && py::cast<std::int64_t>(t.attr("size")) > 0)
    throw py::type_error("tokens: expected integer ids, got dtype " +
                         std::string(py::str(t.attr("dtype"))));
  try {
    for (py::handle row : t.attr("tolist")()) rows.push_back(row.cast<std::vector<std::int32_t>>());
  } catch (const py::cast_error&) {  // past 32 bits: never wrapped into the vocabulary
    throw py::value_error("tokens: an id is outside the vocabulary [0, " +
                          std::to_string(vocab_size) + ")");
  }
  return rows;
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
    throw py::type_error(std::string(arg) + ": expected hook names (str), got " +
                         std::string(py::str(name.get_type().attr("__name__"))));
  try {
    return attn::model_hook_point(a, ends, name.cast<std::string>());
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
        std::string(py::str(names.get_type().attr("__name__"))));
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
    throw py::type_error(where + ": expected a float array, got " +
                         std::string(py::str(value.get_type().attr("__name__"))));
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
