#pragma once
// Python's values as the engine's, and back (convert.cpp): the module's conversions, shared by
// its bindings (attn_module.cpp) and its Model (model.hpp).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/model/config.hpp"
#include "attn/model/hook_names.hpp"

namespace attn_py {

namespace py = pybind11;

// ModelArgs(**keys): the notebook's defaults (attn.ModelArgs() is configs/gqa.json), each key
// given replacing its value, then read by the same parser as a config file: the same checks
// and messages.
attn::ModelArgs make_args(const py::kwargs& keys);

// An integer argument: a bool, a float or a str is a TypeError, a value past int64 a ValueError,
// each naming the argument (pybind11's own message names neither).
std::int64_t int_arg(py::handle v, const char* name);

// An integer argument that must lie in [lo, hi]: ValueError naming it otherwise.
std::int64_t int_arg(py::handle v, const char* name, std::int64_t lo, std::int64_t hi);

// A float argument: an int or a float (NumPy's too); ranges are the engine's (NaN refused).
double float_arg(py::handle v, const char* name);

// A bool argument: Python's or NumPy's bool only (1 and "yes" are TypeErrors, as a flag that
// silently took any truthy value would hide a misplaced argument).
bool bool_arg(py::handle v, const char* name);
std::optional<bool> optional_bool_arg(py::handle v, const char* name);  // None: not given

// A str argument as UTF-8: TypeError for any other type, ValueError naming the argument for a
// str UTF-8 cannot hold (a lone surrogate).
std::string text_arg(py::handle v, const char* name);

// A file path: a str, bytes or os.PathLike, as the file system's bytes (os.fsencode); a NUL or a
// str the file system cannot encode is a ValueError naming the argument.
std::string path_arg(py::handle v, const char* name);
std::optional<std::string> optional_path_arg(py::handle v, const char* name);  // None: not given

// Token ids [seqlen]: a list, tuple or 1-D integer array of ints, each in [0, vocab_size)
// (TypeError for a non-integer, ValueError naming the argument, the id and its index).
std::vector<std::int32_t> ids_arg(py::handle v, const char* name, std::int64_t vocab_size);

// Whether v is one integer (an int, a NumPy integer or a 0-d array), not a sequence of ids.
bool one_id(py::handle v);

// One token id: IndexError naming the argument when outside [0, vocab_size).
std::int32_t id_arg(py::handle v, const char* name, std::int64_t vocab_size);

// The object's type as Python names it, for messages ("float", "numpy.ndarray").
std::string type_name(py::handle v);

// threads: 0 (the machine's cores) up to attn::kMaxThreads.
int threads_arg(py::handle v);

// A C-contiguous float32 array of `ndim` axes read in place: the buffer protocol, or
// numpy.asarray (PyTorch CPU tensors: no copy) for objects without it.
struct Floats {
  py::buffer_info info;
  py::object keep;  // the object the buffer belongs to
  const float* data() const { return static_cast<const float*>(info.ptr); }
};

Floats floats(py::handle obj, const char* name, int ndim, const std::string& expected);

// A setting named by a library error, as Python says it: the keyword argument that sets it.
std::string with_setting(const attn::InputError& e);

// A Python exception raised in a hook function on the engine's thread: its error indicator is
// set (restored there), and this carries the unwinding back to the call, which raises it.
struct PythonRaised {};

// ids [seqlen] or [batch, seqlen] of any integer array-like, as rows (each row as ids_arg
// reads it).
std::vector<std::vector<std::int32_t>> token_rows(py::handle tokens, std::int64_t vocab_size,
                                                  const char* name = "tokens");

// A float array of `ndim` axes (attention_mask), as a C-contiguous float32 copy: TypeError
// naming the argument for what NumPy cannot read as numbers.
py::array_t<float> float_array(py::handle v, const char* name, int ndim);

std::string shape_text(const std::vector<std::int64_t>& shape);

// A hook name given to argument `arg`, as a point of this model, of `a` built with `ends`
// (ValueError naming both).
attn::HookPoint named_point(const attn::ModelArgs& a, const attn::ModelEnds& ends, py::handle name,
                            const char* arg);

// The points `names` asks for: None every one (in forward order), a hook name or a list of
// them, or a function name -> bool (TransformerLens's names_filter).
std::vector<attn::HookPoint> named_points(const attn::ModelArgs& a, const attn::ModelEnds& ends,
                                          py::handle names);

// A patch's replacement: a float array of exactly `shape`, as C-contiguous float32 (ValueError
// or TypeError naming the point).
py::array_t<float> replacement(py::handle value, const std::string& where,
                               const std::vector<std::int64_t>& shape);

// The config as a dict: every key of the contract, and head_dim.
py::dict args_dict(const attn::ModelArgs& a);

// An argument as the binding receives it: any object, converted by the functions above (so
// pybind11's casts never refuse one); `Shown` only names the type help() shows for it.
template <class Shown>
struct Arg {
  py::handle h;
  operator py::handle() const { return h; }
  bool is_none() const { return h.is_none(); }
};
#define ATTN_PY_SHOWN(Tag, text)                               \
  struct Tag {                                                 \
    static constexpr auto name = py::detail::const_name(text); \
  }
namespace shown {
ATTN_PY_SHOWN(Int, "int");
ATTN_PY_SHOWN(Float, "float");
ATTN_PY_SHOWN(Bool, "bool");
ATTN_PY_SHOWN(OptBool, "bool | None");
ATTN_PY_SHOWN(Text, "str");
ATTN_PY_SHOWN(OptText, "str | None");
ATTN_PY_SHOWN(Texts, "str | list[str]");
ATTN_PY_SHOWN(Path, "str | os.PathLike");
ATTN_PY_SHOWN(OptPath, "str | os.PathLike | None");
ATTN_PY_SHOWN(OptInt, "int | None");
ATTN_PY_SHOWN(OptFloat, "float | None");
ATTN_PY_SHOWN(Id, "int");
ATTN_PY_SHOWN(Ids, "list[int]");
ATTN_PY_SHOWN(OptIds, "list[int] | None");
ATTN_PY_SHOWN(IdOrIds, "int | list[int]");
ATTN_PY_SHOWN(Stop, "int | list[int] | None");
ATTN_PY_SHOWN(Prompt, "str | list[int]");
ATTN_PY_SHOWN(TextOrIds, "str | list[int]");
ATTN_PY_SHOWN(Tokens, "ArrayLike[int]");
ATTN_PY_SHOWN(Array, "ArrayLike[float]");
ATTN_PY_SHOWN(OptArray, "ArrayLike[float] | None");
ATTN_PY_SHOWN(Names, "str | list[str] | Callable[[str], bool] | None");
ATTN_PY_SHOWN(Patch, "dict[str, ArrayLike | Callable] | None");
ATTN_PY_SHOWN(Args, "attn.ModelArgs");
ATTN_PY_SHOWN(SteerVector, "str | os.PathLike | ArrayLike[float] | None");
ATTN_PY_SHOWN(Layers, "int | tuple[int, int] | range | None");
}  // namespace shown
#undef ATTN_PY_SHOWN

}  // namespace attn_py

namespace pybind11::detail {
// Any object loads: the conversion, and its TypeError naming the argument, are convert.cpp's.
template <class Shown>
struct type_caster<attn_py::Arg<Shown>> {
  PYBIND11_TYPE_CASTER(attn_py::Arg<Shown>, Shown::name);
  bool load(handle src, bool) {
    value.h = src;
    return static_cast<bool>(src);
  }
  static handle cast(const attn_py::Arg<Shown>& a, return_value_policy, handle) {
    return a.h.inc_ref();
  }
};
}  // namespace pybind11::detail
