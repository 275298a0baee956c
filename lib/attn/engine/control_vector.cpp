#include "attn/engine/control_vector.hpp"

#include <charconv>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>

#include "attn/engine/session.hpp"
#include "attn/error.hpp"
#include "attn/io/gguf.hpp"
#include "attn/io/text.hpp"

namespace attn {

namespace {

constexpr std::uint32_t kGgmlF32 = 0;  // ggml_type GGML_TYPE_F32

std::int64_t checkpoint_layers(const ModelArgs& a) {
  return a.checkpoint_layers ? a.checkpoint_layers : a.first_layer + a.n_layers;
}

// "direction.N" -> N, or -1 when the name is not one (llama.cpp refuses the file then too).
std::int64_t direction_layer(std::string_view name) {
  constexpr std::string_view prefix = "direction.";
  if (!name.starts_with(prefix) || name.size() == prefix.size()) return -1;
  std::int64_t n = -1;
  const char* end = name.data() + name.size();
  const auto [stop, ec] = std::from_chars(name.data() + prefix.size(), end, n);
  return ec == std::errc() && stop == end ? n : -1;
}

void check_range(const ModelArgs& a, const LayerRange& r) {
  if (r.first < 0 || r.second < r.first)
    throw InputError("control vector layer range " + std::to_string(r.first) + ".." +
                         std::to_string(r.second) + ": expected 0 <= A <= B",
                     "control_vector_layer_range");
  (void)a;
}

// The file's own checks: what it says it is, and for which model.
void check_header(const GgufFile& f, const ModelArgs& a) {
  const auto arch = f.string("general.architecture");
  if (arch && *arch != "controlvector")
    throw InputError(f.path + ": general.architecture is " + quoted(*arch, 60) +
                     ", not a control vector (\"controlvector\")");
  const auto hint = f.string("controlvector.model_hint");
  if (hint && !a.arch.empty() && *hint != a.arch)
    throw InputError(f.path + ": controlvector.model_hint " + quoted(*hint, 60) +
                     " names another architecture than the model's " + quoted(a.arch, 60));
}

// Adds one file's directions times scale to rows [n_layers, dim] within `range`.
void add_file(const ControlVectorFile& file, const ModelArgs& a, const LayerRange& range,
              std::vector<float>& rows) {
  const std::shared_ptr<const GgufFile> g = open_gguf(file.path);
  const GgufFile& f = *g;
  check_header(f, a);
  if (f.tensors.empty()) throw InputError(f.path + ": no direction tensors");
  const std::int64_t layers = checkpoint_layers(a);
  for (const GgufTensorInfo& t : f.tensors) {
    const std::string name = f.path + ": tensor " + quoted(t.name, 60);
    const std::int64_t n = direction_layer(t.name);
    if (n < 1 || n >= layers)
      throw InputError(name + ": expected direction.N with N in [1, " + std::to_string(layers) +
                       ") for this model's " + std::to_string(layers) + " layers");
    if (t.ggml_type != kGgmlF32)
      throw InputError(name + " is " + ggml_type_name(t.ggml_type) + ", expected F32");
    if (t.shape.size() != 1 || t.shape[0] != a.dim)
      throw InputError(name + ": expected 1-D of the model's dim " + std::to_string(a.dim));
    const std::int64_t l = n - a.first_layer;  // the model's block
    if (n < range.first || n > range.second || l < 0 || l >= a.n_layers) continue;
    const std::uint8_t* data = f.bytes.data() + t.offset;
    float* row = rows.data() + l * a.dim;
    for (std::int64_t i = 0; i < a.dim; ++i) {
      float v;
      std::memcpy(&v, data + i * 4, 4);
      if (!std::isfinite(v))
        throw InputError(name + ": element " + std::to_string(i) + " is not finite");
      row[i] += v * float(file.scale);  // in float, as llama.cpp
    }
  }
}

}  // namespace

LayerRange default_layer_range(const ModelArgs& a) {
  return {1, checkpoint_layers(a)};
}

std::vector<float> load_control_vectors(std::span<const ControlVectorFile> files,
                                        const ModelArgs& a, std::optional<LayerRange> range) {
  const LayerRange r = range.value_or(default_layer_range(a));
  check_range(a, r);
  std::vector<float> rows(std::size_t(a.n_layers * a.dim), 0.0f);
  for (const ControlVectorFile& file : files) {
    if (!std::isfinite(file.scale))
      throw InputError(
          escape(file.path.string(), 60) + ": the control vector's scale is not finite",
          "control_vector_scaled");
    add_file(file, a, r, rows);
  }
  return rows;
}

std::vector<float> steering_from(std::span<const float> values, std::int64_t rows, double scale,
                                 const ModelArgs& a, std::optional<LayerRange> range,
                                 const std::string& what) {
  const LayerRange r = range.value_or(default_layer_range(a));
  check_range(a, r);
  const std::int64_t layers = checkpoint_layers(a);
  if (!std::isfinite(scale)) throw InputError(what + ": the scale is not finite", "scale");
  if (rows != 1 && rows != layers)
    throw InputError(what + ": expected [" + std::to_string(a.dim) + "] or [" +
                     std::to_string(layers) + ", " + std::to_string(a.dim) + "] (a row per layer)");
  if (std::int64_t(values.size()) != rows * a.dim)
    throw InputError(what + ": expected rows of the model's dim " + std::to_string(a.dim));
  std::vector<float> out(std::size_t(a.n_layers * a.dim), 0.0f);
  for (std::int64_t l = 0; l < a.n_layers; ++l) {
    const std::int64_t n = a.first_layer + l;
    if (n < 1 || n < r.first || n > r.second) continue;  // block 0 never gets one (llama.cpp)
    const float* src = values.data() + (rows == 1 ? 0 : n) * a.dim;
    for (std::int64_t i = 0; i < a.dim; ++i) {
      if (!std::isfinite(src[i]))
        throw InputError(what + ": element " + std::to_string(i) + " of row " +
                         std::to_string(rows == 1 ? 0 : n) + " is not finite");
      out[std::size_t(l * a.dim + i)] = src[i] * float(scale);
    }
  }
  return out;
}

void set_steering(Session& e, std::vector<float> steering) {
  const ModelArgs& a = e.model.args;
  if (!steering.empty() && std::int64_t(steering.size()) != a.n_layers * a.dim)
    throw InputError("steering: expected [" + std::to_string(a.n_layers) + ", " +
                     std::to_string(a.dim) + "] values");
  e.model.steering = std::move(steering);
}

}  // namespace attn
