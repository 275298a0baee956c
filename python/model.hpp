#pragma once
// The Python front of one attn::Session (model.hpp, included by attn_module.cpp only): the
// arrays the engine reads and writes, the GIL released while it runs, Ctrl-C between blocks.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "attn/engine/chat.hpp"
#include "attn/engine/control_vector.hpp"
#include "attn/engine/lens.hpp"
#include "attn/engine/session.hpp"
#include "attn/error.hpp"
#include "attn/kernels/matmul.hpp"
#include "attn/kernels/runtime.hpp"
#include "attn/model/config.hpp"
#include "attn/model/generate.hpp"
#include "attn/model/hooks.hpp"
#include "attn/model/kept_probabilities.hpp"
#include "attn/model/memory.hpp"
#include "attn/model/model.hpp"
#include "attn/model/weights.hpp"
#include "attn/text/tokenizer.hpp"
#include "convert.hpp"

namespace attn_py {

// Set by the SIGINT handler a long call installs: one process has one SIGINT.
inline std::atomic<bool> g_cancel{false};

// The Python front of one attn::Session: argument shapes and types are checked here (TypeError,
// ValueError naming the argument); everything else is the engine's. One call at a time: the
// GIL is released while the engine runs, so a second Python thread waits on the lock.
class Model {
 public:
  Model(attn::Session e, bool attention_weights)
      : e_(std::move(e)), keep_probs_(attention_weights), kept_(e_.model.args.n_layers) {}

  static attn::ModelSpec spec(py::handle threads, py::handle compute, std::uint64_t seed) {
    attn::ModelSpec s;
    s.threads = threads_arg(threads);
    s.compute = attn::parse_compute(text_arg(compute, "compute"));
    s.seed = seed;
    return s;
  }

  // Model(args, weights=None, ...): the cache sized by args, for calls of up to the whole cache.
  static std::unique_ptr<Model> from_args(py::handle args_arg, py::handle weights, py::handle seed,
                                          py::handle threads, py::handle attention_weights,
                                          py::handle compute) {
    if (!py::isinstance<attn::ModelArgs>(args_arg))
      throw py::type_error("args: expected attn.ModelArgs, got " + type_name(args_arg));
    const attn::ModelArgs args = args_arg.cast<attn::ModelArgs>();
    const std::uint64_t draw_seed = std::uint64_t(int_arg(seed, "seed", 0, INT64_MAX));
    const bool keep_probs = bool_arg(attention_weights, "attention_weights");
    attn::ModelSpec s = spec(threads, compute, draw_seed);
    if (const auto w = optional_path_arg(weights, "weights")) s.weights = *w;
    py::gil_scoped_release release;
    return std::make_unique<Model>(attn::open_session(s, {args.max_batch_size, 0, 0}, args),
                                   keep_probs);
  }

  // Model.from_pretrained(path): a checkpoint file or folder with config.json and
  // tokenizer.json beside it, found as attn-cli's -m finds them.
  static std::unique_ptr<Model> from_pretrained(py::handle path, py::handle config,
                                                py::handle tokenizer, py::handle max_seq_len,
                                                py::handle max_batch_size, py::handle threads,
                                                py::handle compute, py::handle attention_weights) {
    attn::ModelSpec s = spec(threads, compute, 42);
    s.weights = path_arg(path, "path");
    if (const auto c = optional_path_arg(config, "config")) s.config = *c;
    if (const auto t = optional_path_arg(tokenizer, "tokenizer")) s.tokenizer = *t;
    s.overrides.max_seq_len = int_arg(max_seq_len, "max_seq_len");
    s.overrides.max_batch_size = int_arg(max_batch_size, "max_batch_size");
    const bool keep_probs = bool_arg(attention_weights, "attention_weights");
    const std::int64_t batch = std::max<std::int64_t>(1, s.overrides.max_batch_size);
    try {
      py::gil_scoped_release release;
      return std::make_unique<Model>(attn::open_session(s, {batch, 0, 0}), keep_probs);
    } catch (attn::InputError& e) {  // the engine's weights are this function's path
      if (e.setting == "weights") e.setting = "path";
      throw;
    }
  }

  const attn::ModelArgs& args() const { return e_.model.args; }
  std::int64_t filled() const { return e_.filled; }
  std::uintptr_t last_input_address() const { return last_input_; }
  int threads() const { return e_.model.rt.threads; }
  double last_seconds() const { return last_seconds_; }
  const std::optional<attn::Tokenizer>& tokenizer() const { return e_.tokenizer; }

  // The tokenizer for a call that needs one (`what`), or a ValueError saying where one comes from.
  const attn::Tokenizer& text_tokenizer(const char* what) const {
    if (!e_.tokenizer)
      throw py::value_error(std::string(what) +
                            ": this model has no tokenizer (Model.from_pretrained finds "
                            "tokenizer.json beside config.json, a GGUF holds its own)");
    return *e_.tokenizer;
  }

  // A start_pos argument: a position of the cache.
  std::int64_t position(py::handle v) const {
    return int_arg(v, "start_pos", 0, args().max_seq_len);
  }

  py::array_t<float> prefill(py::handle x, py::handle start_arg, py::handle mask_arg,
                             py::handle attention_mask) {
    const std::int64_t start_pos = position(start_arg);
    const std::optional<std::string> mask =
        mask_arg.is_none() ? std::nullopt : std::optional(text_arg(mask_arg, "mask"));
    const Floats in = floats(x, "x", 3, "[batch, seqlen, dim=" + std::to_string(args().dim) + "]");
    check_dim(in);
    const std::int64_t B = in.info.shape[0], T = in.info.shape[1];
    auto lock = hold();
    attn::check_fits(args(), B, start_pos, T, "x");
    attn::set_mask(e_, mask ? attn::parse_mask(*mask) : args().mask);
    padding(attention_mask, B, T, start_pos);
    return run(in, B, T, start_pos);
  }

  py::array_t<float> decode(py::handle x, py::handle attention_mask) {
    const std::int64_t dim = args().dim;
    const Floats in = floats(x, "x", 3, "[batch, 1, dim=" + std::to_string(dim) + "]");
    check_dim(in);
    const std::int64_t B = in.info.shape[0];
    if (in.info.shape[1] != 1)
      throw py::value_error("x: expected shape [batch, 1, " + std::to_string(dim) + "], got " +
                            std::to_string(in.info.shape[1]) + " positions (prefill takes more)");
    auto lock = hold();
    if (e_.filled == 0) throw py::value_error("decode: prefill first (the cache is empty)");
    attn::check_fits(args(), B, e_.filled, 1, "x");
    padding(attention_mask, B, 1, e_.filled);
    return run(in, B, 1, e_.filled);
  }

  // The filled part of layer l's cache, [batch, n_kv_heads, filled, head_dim]: a view of the
  // cache itself (valid until the next call changes it; copy() to keep it).
  py::array_t<float> cache(py::handle layer_arg, bool values, py::object self) const {
    const std::int64_t layer = int_arg(layer_arg, "layer");
    const attn::KVCache& c = e_.model.cache;
    if (layer < 0 || layer >= c.n_layers)
      throw py::index_error("layer: " + std::to_string(layer) + " out of range 0.." +
                            std::to_string(c.n_layers - 1));
    const float* base = values ? c.v(layer, 0, 0, 0) : c.k(layer, 0, 0, 0);
    const py::ssize_t f = sizeof(float);
    return py::array_t<float>({py::ssize_t(e_.batch), py::ssize_t(c.n_kv_heads),
                               py::ssize_t(e_.filled), py::ssize_t(c.head_dim)},
                              {f * c.n_kv_heads * c.max_seq_len * c.head_dim,
                               f * c.max_seq_len * c.head_dim, f * c.head_dim, f},
                              base, self);
  }

  // The last call's probabilities of layer l: [batch, n_heads, seqlen, start_pos + seqlen].
  py::array_t<float> attention_weights(py::handle layer_arg) const {
    const std::int64_t layer = int_arg(layer_arg, "layer");
    if (!keep_probs_)
      throw py::value_error(
          "attention weights are kept only with Model(..., attention_weights=True)");
    if (probs_.empty())
      throw py::value_error("no forward call has kept attention weights yet (generate keeps none)");
    if (layer < 0 || layer >= std::int64_t(probs_.size()))
      throw py::index_error("layer: " + std::to_string(layer) + " out of range 0.." +
                            std::to_string(probs_.size() - 1));
    return probs_[std::size_t(layer)];
  }

  void reset() {
    auto lock = hold();
    attn::reset(e_);
  }

  // model.steer(vector_or_file, scale, layers): llama.cpp's control vector (a GGUF file) or an
  // array, [dim] for every layer of the range or [n_layers, dim] a row per layer; None clears.
  void steer(py::handle v, py::handle scale, py::handle layers) {
    const double k = float_arg(scale, "scale");
    const std::optional<attn::LayerRange> range = layers_arg(layers);
    std::vector<float> rows;
    if (py::isinstance<py::str>(v) || py::isinstance<py::bytes>(v) ||
        py::hasattr(v, "__fspath__")) {
      const attn::ControlVectorFile file{path_arg(v, "vector_or_file"), k};
      rows = attn::load_control_vectors({&file, 1}, args(), range);
    } else if (!v.is_none()) {
      const py::array a = py::module_::import("numpy").attr("asarray")(v);
      if (a.ndim() != 1 && a.ndim() != 2)
        throw py::value_error("vector_or_file: expected [dim] or [n_layers, dim], got " +
                              std::to_string(a.ndim()) + " axes");
      const py::array_t<float> f = float_array(a, "vector_or_file", int(a.ndim()));
      rows = attn::steering_from({f.data(), std::size_t(f.size())}, a.ndim() == 1 ? 1 : a.shape(0),
                                 k, args(), range, "vector_or_file");
    }
    auto lock = hold();
    attn::set_steering(e_, std::move(rows));
  }

  // layers: None (llama.cpp's default range), one layer, (start, end) both inclusive as
  // --control-vector-layer-range, or a range() of step 1.
  static std::optional<attn::LayerRange> layers_arg(py::handle layers) {
    if (layers.is_none()) return std::nullopt;
    if (py::isinstance<py::int_>(layers) && !py::isinstance<py::bool_>(layers)) {
      const std::int64_t l = int_arg(layers, "layers", 0, INT32_MAX);
      return attn::LayerRange{l, l};
    }
    if (py::isinstance(layers, py::module_::import("builtins").attr("range"))) {
      if (int_arg(layers.attr("step"), "layers.step") != 1 ||
          int_arg(layers.attr("stop"), "layers.stop") <= int_arg(layers.attr("start"), "layers"))
        throw py::value_error("layers: expected a range of step 1 holding a layer");
      return attn::LayerRange{int_arg(layers.attr("start"), "layers", 0, INT32_MAX),
                              int_arg(layers.attr("stop"), "layers", 1, INT32_MAX) - 1};
    }
    if (!py::isinstance<py::tuple>(layers) || py::len(layers) != 2)
      throw py::type_error("layers: expected None, an int, (start, end) or a range, got " +
                           type_name(layers));
    const py::tuple t = layers.cast<py::tuple>();
    return attn::LayerRange{int_arg(t[0], "layers", 0, INT32_MAX),
                            int_arg(t[1], "layers", 0, INT32_MAX)};
  }

  // Meta's Transformer.forward(tokens, start_pos): logits [batch, 1, vocab_size] of each
  // sequence's last position, or [batch, seqlen, vocab_size] with all_positions. observer: the
  // call's own recorder (hooks, the lens), attached under the call's lock.
  py::array_t<float> forward_tokens(const std::vector<std::vector<std::int32_t>>& tokens,
                                    std::int64_t start_pos, bool all_positions,
                                    const attn::Observer* observer = nullptr) {
    attn::require_token_model(args(), "forward(tokens)");
    const std::int64_t B = std::int64_t(tokens.size()), T = B ? std::int64_t(tokens[0].size()) : 0;
    std::vector<std::int32_t> flat;
    for (const auto& row : tokens) {
      if (std::int64_t(row.size()) != T)
        throw py::value_error("tokens: every sequence must have the same length (pad them)");
      flat.insert(flat.end(), row.begin(), row.end());
    }
    py::array_t<float> out(
        {py::ssize_t(B), py::ssize_t(all_positions ? T : 1), py::ssize_t(args().vocab_size)});
    float* y = out.mutable_data();
    auto lock = hold();
    attn::check_fits(args(), B, start_pos, T, "tokens");
    if (!observer) {
      keep_probabilities(B, T, start_pos);
      timed(B * T, start_pos + T,
            [&] { attn::forward_tokens(e_, flat.data(), B, T, start_pos, y, all_positions); });
      return out;
    }
    // The call's own recorder, detached however it ends.
    drop_probabilities();
    const attn::Attached observed(e_.model, *observer);
    hook_thread_ = std::this_thread::get_id();
    timed(B * T, start_pos + T,
          [&] { attn::forward_tokens(e_, flat.data(), B, T, start_pos, y, all_positions); });
    return out;
  }

  // forward(tokens) with hook points kept (run_with_cache: names) and patched (patch: {hook
  // name: array or function}): the logits, and the kept activations by hook name. The kept
  // bytes are checked against max_bytes (None: the memory available) before the run.
  std::pair<py::array_t<float>, py::dict> run_hooked(py::handle tokens, bool keep, py::handle names,
                                                     py::handle start_arg, bool all_positions,
                                                     py::handle patch, py::handle max_bytes) {
    const attn::ModelArgs& a = args();
    attn::require_token_model(a, "forward(tokens)");
    const auto rows = token_rows(tokens, a.vocab_size);
    const std::int64_t start_pos = position(start_arg);
    const attn::HookCall call{std::int64_t(rows.size()),
                              rows.empty() ? 0 : std::int64_t(rows[0].size()), start_pos};
    attn::check_fits(a, call.bsz, start_pos, call.seqlen, "tokens");
    attn::Hooks hooks(a.n_layers);
    py::dict kept;
    std::vector<attn::HookPoint> points;
    if (keep) {  // run_with_cache: names None is every point
      points = named_points(a, e_.model.ends, names);
      const std::uint64_t bytes = attn::hook_bytes(a, points, call, "names");
      if (max_bytes.is_none()) {
        const attn::AvailableMemory available = attn::available_memory();
        attn::check_hook_bytes(bytes, available.bytes, available.limit, "names");
      } else {
        const std::int64_t limit = int_arg(max_bytes, "max_bytes");
        if (limit < 0) throw py::value_error("max_bytes: must not be negative");
        attn::check_hook_bytes(bytes, std::uint64_t(limit), "max_bytes", "names");
      }
      for (const attn::HookPoint& p : points) {
        const std::vector<std::int64_t> shape = attn::hook_shape(a, p.site, call);
        py::array_t<float> arr(std::vector<py::ssize_t>(shape.begin(), shape.end()));
        hooks.keep(p, arr.mutable_data());
        kept[py::str(attn::hook_name(p.site, p.layer))] = arr;
      }
    }
    std::vector<py::array_t<float>> held;           // replacements, alive through the call
    std::vector<std::unique_ptr<float[]>> scratch;  // patched attn_probs not kept
    if (!patch.is_none())
      patches(patch, &call, attn::hook_bytes(a, {{attn::Site::attn_probs, 0}}, call, "patch") / 4,
              hooks, held, scratch);
    auto logits = forward_tokens(rows, start_pos, all_positions, &hooks.observer());
    return {logits, kept};
  }

  // Every hook point of this model, in forward order (TransformerLens's hook_dict keys).
  std::vector<std::string> hook_names() const {
    std::vector<std::string> names;
    for (const attn::HookPoint& p : attn::hook_points(args(), e_.model.ends))
      names.push_back(attn::hook_name(p.site, p.layer));
    return names;
  }

  // One weight as stored, [rows, cols] (a norm: [dim]), under Meta's names: tok_embeddings,
  // output, norm, and per layer wq, wk, wv, wo, w1, w2, w3, attention_norm, ffn_norm. F32: a
  // read-only view of the model's own (self its base); another type only with widen, as a
  // float32 copy, its bytes checked against the memory available first.
  py::array weight(py::handle kind_arg, py::handle layer_arg, py::handle widen_arg,
                   py::handle rows_arg, py::object self) const {
    const std::string kind = text_arg(kind_arg, "kind");
    const bool widen = bool_arg(widen_arg, "widen");
    const std::optional<WeightView> found = find_weight(kind, layer_arg);
    if (!rows_arg.is_none()) {  // some rows widened, whatever the type: never the whole matrix
      if (found->vec) throw py::value_error("rows: " + kind + " is a vector, not a matrix");
      const std::vector<std::int32_t> rows = ids_arg(rows_arg, "rows", found->rows);
      py::array_t<float> copy({py::ssize_t(rows.size()), py::ssize_t(found->cols)});
      float* dest = copy.mutable_data();
      for (std::size_t r = 0; r < rows.size(); ++r)
        attn::widen_to_f32(e_.model.rt, found->m.row(rows[r], found->cols), 1, found->cols,
                           dest + std::int64_t(r) * found->cols);
      return copy;
    }
    const py::ssize_t f = sizeof(float);
    py::array out;
    if (found->vec) {
      out = py::array_t<float>({py::ssize_t(found->rows)}, {f}, found->vec, self);
    } else if (found->m.type == attn::WeightType::f32) {
      const std::int64_t ld = found->m.stride(found->cols);
      out = py::array_t<float>({py::ssize_t(found->rows), py::ssize_t(found->cols)}, {f * ld, f},
                               static_cast<const float*>(found->m.data), self);
    } else {
      const std::string type = attn::traits(found->m.type).name;
      if (!widen)
        throw py::value_error(
            kind + ": the weights are " + type +
            ": ask for a float32 copy with widen=True (W_Q.widened(l) and the like)");
      const std::uint64_t bytes = attn::checked_product({found->rows, found->cols, 4}, kind);
      const attn::AvailableMemory available = attn::available_memory();
      attn::check_hook_bytes(bytes, available.bytes, available.limit, "widen");
      py::array_t<float> copy({py::ssize_t(found->rows), py::ssize_t(found->cols)});
      float* dest = copy.mutable_data();
      {
        py::gil_scoped_release release;
        attn::widen_to_f32(e_.model.rt, found->m, found->rows, found->cols, dest);
      }
      return copy;
    }
    out.attr("flags").attr("writeable") = false;
    return out;
  }

  // The logit lens of forward(tokens, start_pos) (attn-cli's --logit-lens, the same recorder):
  // each block's resid_post through the final norm and the head, [n_layers, batch, seqlen,
  // vocab_size], with the logits of the call.
  std::pair<py::array_t<float>, py::array_t<float>> logit_lens(py::handle tokens,
                                                               py::handle start_arg) {
    const attn::ModelArgs& a = args();
    attn::require_token_model(a, "logit_lens");
    const auto rows = token_rows(tokens, a.vocab_size);
    const std::int64_t start_pos = position(start_arg);
    const std::int64_t B = std::int64_t(rows.size()), T = B ? std::int64_t(rows[0].size()) : 0;
    auto lock = hold();
    attn::check_fits(a, B, start_pos, T, "tokens");
    attn::check_logit_lens(a, e_.model.ends, 1);
    const attn::AvailableMemory available = attn::available_memory();
    attn::check_hook_bytes(attn::logit_lens_bytes(a, e_.model.act.plan.max_rows, 1, true) +
                               attn::checked_product({a.n_layers, B, T, a.vocab_size, 4}, "tokens"),
                           available.bytes, available.limit, "tokens");
    attn::LensRecorder recorder(e_.model, 1, true);
    lock.unlock();  // forward_tokens takes it, and attaches the recorder under it
    py::array_t<float> lens(
        {py::ssize_t(a.n_layers), py::ssize_t(B), py::ssize_t(T), py::ssize_t(a.vocab_size)});
    const py::array_t<float> logits = forward_tokens(rows, start_pos, true, &recorder.observer());
    const std::int64_t n = B * T * a.vocab_size;
    for (std::int64_t l = 0; l < a.n_layers; ++l)
      std::memcpy(lens.mutable_data() + l * n, attn::lens_logits(recorder.lens(), l),
                  std::size_t(n) * sizeof(float));
    return {lens, logits};
  }

  // llama.cpp's penalties, under its names and transformers' (repetition_penalty).
  struct Penalties {
    py::handle repetition_penalty, repeat_penalty, repeat_last_n, presence_penalty,
        frequency_penalty;
  };

  // Up to `steps` new ids after the prompt (ids, or text when the model has a tokenizer), greedy
  // unless temp > 0, stopping after an id of `stop` (None: the tokenizer's end-of-sequence ids).
  // From position 0, or after a loaded session's tokens. The last id is fed too, so that the
  // cache can be saved and continued. transformers' names (max_new_tokens, temperature,
  // do_sample) set the same settings. Every argument is converted, and the engine has checked
  // the ranges (ValueError naming the argument given), before any work.
  std::vector<std::int32_t> generate(py::handle prompt, py::handle steps_arg, py::handle temp_arg,
                                     py::handle top_k, py::handle top_p, py::handle min_p,
                                     py::handle seed, py::handle stop, py::handle max_new_tokens,
                                     py::handle temperature, py::handle do_sample,
                                     const Penalties& penalties, py::handle patch = py::none()) {
    attn::require_token_model(args(), "generation");  // before ids are read against its vocabulary
    const Either steps_given = either(steps_arg, "steps", max_new_tokens, "max_new_tokens");
    const Either temp_given = either(temp_arg, "temp", temperature, "temperature");
    const std::int64_t steps =
        steps_given.value.is_none() ? 32 : int_arg(steps_given.value, steps_given.name);
    double temp = temp_given.value.is_none() ? 0.0 : float_arg(temp_given.value, temp_given.name);
    if (const std::optional<bool> sample = optional_bool_arg(do_sample, "do_sample")) {
      if (!*sample)
        temp = 0;  // transformers: greedy whatever the temperature
      else if (temp_given.value.is_none())
        temp = 1;  // transformers' default temperature
      else if (!(temp > 0))
        throw py::value_error(std::string(temp_given.name) +
                              ": do_sample=True samples at a temperature above 0, got " +
                              short_text(temp_given.value));
    }
    attn::Sampling sampling{temp, int_arg(top_k, "top_k"), float_arg(top_p, "top_p"),
                            float_arg(min_p, "min_p"),
                            std::uint64_t(int_arg(seed, "seed", 0, INT64_MAX))};
    const Either repeat = either(penalties.repeat_penalty, "repeat_penalty",
                                 penalties.repetition_penalty, "repetition_penalty");
    if (!repeat.value.is_none()) sampling.repeat_penalty = float_arg(repeat.value, repeat.name);
    sampling.repeat_last_n = int_arg(penalties.repeat_last_n, "repeat_last_n");
    sampling.presence_penalty = float_arg(penalties.presence_penalty, "presence_penalty");
    sampling.frequency_penalty = float_arg(penalties.frequency_penalty, "frequency_penalty");
    const std::int64_t vocab = args().vocab_size;
    std::optional<std::vector<std::int32_t>> stops;
    if (!stop.is_none())  // one id, or a list of them (transformers' eos_token_id)
      stops = one_id(stop) ? std::vector<std::int32_t>{id_arg(stop, "stop", vocab)}
                           : ids_arg(stop, "stop", vocab);
    std::vector<std::int32_t> out;
    auto lock = hold();
    const std::vector<std::int32_t> ids = prompt_ids(prompt);  // no BOS when continuing
    if (!stops) stops = attn::stop_ids(e_, false);
    try {
      attn::check_generation(e_, ids, steps, sampling);  // steps bounded: the sums below hold
    } catch (const attn::MemoryLimitError&) {
      throw;
    } catch (const attn::InputError& e) {  // named as the caller named the setting
      throw py::value_error(as_given(e, {{"steps", steps_given.name},
                                         {"temp", temp_given.name},
                                         {"repeat_penalty", repeat.name}}));
    }
    drop_probabilities();
    // Hooks at every call, the prompt's and each step's: attn_probs' buffer sized for the
    // largest (one sequence).
    attn::Hooks hooks(args().n_layers);
    std::vector<py::array_t<float>> held;
    std::vector<std::unique_ptr<float[]>> scratch;
    std::optional<attn::Attached> observed;
    if (!patch.is_none()) {
      const std::uint64_t keys = std::uint64_t(e_.filled) + ids.size() + std::uint64_t(steps);
      const std::uint64_t floats = attn::checked_product(
          {args().n_heads, std::max<std::int64_t>(std::int64_t(ids.size()), 1), std::int64_t(keys)},
          "patch");
      patches(patch, nullptr, floats, hooks, held, scratch);
      observed.emplace(e_.model, hooks.observer());
      hook_thread_ = std::this_thread::get_id();
    }
    timed(std::int64_t(ids.size()) + steps, e_.filled + std::int64_t(ids.size()) + steps, [&] {
      attn::generate(e_, ids, steps, sampling, *stops, true,
                     [&](const attn::Generated& t) { out.push_back(t.id); });
    });
    return out;
  }

  // Model.chat (chat.cpp): keeps the cache's common prefix with a turn's rendered ids
  // (engine/chat); the next generate continues after it. Returns how many positions are kept.
  std::size_t keep_prefix(std::span<const std::int32_t> ids) {
    auto lock = hold();
    return attn::keep_common_prefix(e_, ids);
  }

  // Model.chat's stream (chat.cpp): whether the cache holds exactly `ids` and their next logits
  // (no other call ran since the stream's last step); if so the next generate continues them.
  bool continue_after(std::span<const std::int32_t> ids) {
    auto lock = hold();
    const attn::Generation& g = e_.generation;
    if (g.logits.empty() || !std::equal(g.tokens.begin(), g.tokens.end(), ids.begin(), ids.end()))
      return false;
    e_.resume = true;
    return true;
  }

  void save_session(const std::string& path) {
    auto lock = hold();
    try {
      py::gil_scoped_release release;
      attn::stage_cache_session(e_, path).commit();
    } catch (attn::InputError& e) {  // "nothing to save": the fix is a call, not an argument
      if (e.setting == "save_session") e.setting.clear();
      throw;
    }
  }

  void load_session(const std::string& path) {
    auto lock = hold();
    py::gil_scoped_release release;
    attn::load_cache_session(e_, path);
  }

 private:
  // patch {hook name: array or function} as edits of the points: an array replaces the
  // activation (shape exactly the point's; not in generate, whose calls change shape); a
  // function f(activation, name) gets a copy and returns its replacement, or None when it edited
  // the copy in place. A point computed apart only to be read (hooks.hpp's patchable) takes a
  // function returning None. probs_floats: the most attn_probs floats a call writes.
  void patches(py::handle patch, const attn::HookCall* call, std::uint64_t probs_floats,
               attn::Hooks& hooks, std::vector<py::array_t<float>>& held,
               std::vector<std::unique_ptr<float[]>>& scratch) {
    if (!py::isinstance<py::dict>(patch))
      throw py::type_error("patch: expected a dict {hook name: array or function}, got " +
                           type_name(patch));
    const attn::ModelArgs& a = args();
    for (const auto& [key, value] : py::reinterpret_borrow<py::dict>(patch)) {
      const attn::HookPoint p = named_point(a, e_.model.ends, key, "patch");
      const std::string name = text_arg(key, "patch");
      const std::string where = "patch['" + name + "']";
      float* probs = nullptr;
      if (p.site == attn::Site::attn_probs) {
        scratch.push_back(std::make_unique<float[]>(probs_floats));
        probs = scratch.back().get();
      }
      if (PyCallable_Check(value.ptr())) {
        hooks.patch(p, call_edit(py::reinterpret_borrow<py::object>(value), name, where), probs);
        continue;
      }
      if (!attn::patchable(p.site))
        throw py::value_error(where +
                              ": this point is computed apart only to be read: give a "
                              "function returning None, not an array");
      if (!call)
        throw py::type_error(where +
                             ": generate's calls change shape every step: give a "
                             "function, not an array");
      const std::vector<std::int64_t> shape = attn::hook_shape(a, p.site, *call);
      const std::uint64_t n = attn::hook_bytes(a, {p}, *call, "patch") / sizeof(float);
      held.push_back(replacement(value, where, shape));
      const float* src = held.back().data();
      hooks.patch(
          p,
          [src, n](const attn::Observation& o) {
            std::memcpy(o.edit, src, std::size_t(n) * sizeof(float));
          },
          probs);
    }
  }

  // The edit of a patch function, run on the engine's thread: with the GIL, on a copy of the
  // call's tensor (its shape the Observation's: generate's steps differ).
  attn::Hooks::Edit call_edit(py::object fn, std::string name, std::string where) {
    return [this, fn, name, where](const attn::Observation& o) {
      py::gil_scoped_acquire gil;
      const std::vector<std::int64_t> shape(o.shape, o.shape + o.ndim);
      std::int64_t n = 1;
      for (std::int64_t d : shape) n *= d;
      py::array_t<float> act(std::vector<py::ssize_t>(shape.begin(), shape.end()));
      std::memcpy(act.mutable_data(), o.data, std::size_t(n) * sizeof(float));
      in_hook_ = true;
      struct Done {
        bool& flag;
        ~Done() { flag = false; }
      } done{in_hook_};
      try {
        const py::object r = fn(act, name);
        if (!o.edit) {  // read only
          if (!r.is_none())
            throw py::value_error(where +
                                  ": this point is computed apart only to be read: "
                                  "its function must return None");
          return;
        }
        const py::array_t<float> out = r.is_none() ? act : replacement(r, where, shape);
        std::memcpy(o.edit, out.data(), std::size_t(n) * sizeof(float));
      } catch (py::error_already_set& e) {
        e.restore();
        throw PythonRaised{};
      } catch (const py::builtin_exception& e) {
        e.set_error();
        throw PythonRaised{};
      }
    };
  }

  // A weight by Meta's name (weight()'s kinds): a matrix and its shape, or a norm's vector.
  struct WeightView {
    attn::Matrix m;
    const float* vec = nullptr;
    std::int64_t rows = 0, cols = 0;
  };
  std::optional<WeightView> find_weight(const std::string& kind, py::handle layer_arg) const {
    const attn::ModelArgs& a = args();
    const attn::TransformerWeights& w = e_.model.weights;
    const std::int64_t hd = a.head_dim(), H = a.n_heads, KV = a.n_kv_heads;
    const std::int64_t hidden = a.ffn_hidden(), dim = a.dim;
    std::optional<WeightView> found;
    if (kind == "tok_embeddings" || kind == "output" || kind == "norm") {
      if (kind == "norm"
              ? !w.tokens.norm
              : !(kind == "output" ? w.tokens.output.data : w.tokens.tok_embeddings.data))
        throw py::value_error("kind: this model holds no " + kind + " (not a token model)");
      if (kind == "norm")
        found = WeightView{{}, w.tokens.norm, dim, 0};
      else
        found = WeightView{kind == "output" ? w.tokens.output : w.tokens.tok_embeddings, nullptr,
                           a.vocab_size, dim};
    } else {
      const std::int64_t layer = int_arg(layer_arg, "layer");
      if (layer < 0 || layer >= a.n_layers)
        throw py::index_error("layer: " + std::to_string(layer) + " out of range 0.." +
                              std::to_string(a.n_layers - 1));
      const attn::LayerWeights& l = w.layers[std::size_t(layer)];
      const std::pair<const char*, WeightView> table[] = {
          {"wq", {l.wq, nullptr, H * hd, dim}},  {"wk", {l.wk, nullptr, KV * hd, dim}},
          {"wv", {l.wv, nullptr, KV * hd, dim}}, {"wo", {l.wo, nullptr, dim, H * hd}},
          {"w1", {l.w1, nullptr, hidden, dim}},  {"w2", {l.w2, nullptr, dim, hidden}},
          {"w3", {l.w3, nullptr, hidden, dim}},  {"attention_norm", {{}, l.attention_norm, dim, 0}},
          {"ffn_norm", {{}, l.ffn_norm, dim, 0}}};
      for (const auto& [name, shape] : table)
        if (kind == name) found = shape;
      if (!found)
        throw py::value_error(
            "kind: expected tok_embeddings, output, norm, wq, wk, wv, wo, w1, "
            "w2, w3, attention_norm or ffn_norm, got '" +
            kind + "'");
      if (!found->m.data && !found->vec)
        throw py::value_error("kind: this model's blocks have no " + kind);
    }
    return found;
  }

  // The engine for this call: waited for with the GIL released, so that the thread running the
  // engine (which released it) can take it back.
  std::unique_lock<std::mutex> hold() {
    if (in_hook_ && std::this_thread::get_id() == hook_thread_)
      throw std::runtime_error("a patch function cannot call its Model: the forward is running");
    std::unique_lock<std::mutex> lock(*mutex_, std::defer_lock);
    py::gil_scoped_release release;
    lock.lock();
    return lock;
  }

  // A setting given under our name or transformers' (both: a TypeError naming both).
  struct Either {
    py::handle value;
    const char* name;
  };
  static Either either(py::handle ours, const char* our_name, py::handle theirs,
                       const char* their_name) {
    if (!ours.is_none() && !theirs.is_none())
      throw py::type_error(std::string(our_name) + " and " + their_name +
                           " are the same setting: give one");
    return theirs.is_none() ? Either{ours, our_name} : Either{theirs, their_name};
  }

  // An engine error naming a setting, with the setting as the caller named it.
  static std::string as_given(const attn::InputError& e,
                              std::initializer_list<std::pair<const char*, const char*>> names) {
    std::string what = e.what(), setting = e.setting;
    for (const auto& [engine, given] : names) {
      if (e.setting != engine) continue;
      setting = given;
      if (what.rfind(engine, 0) == 0) what = given + what.substr(std::strlen(engine));
    }
    return setting.empty() ? what : what + " (set with " + setting + "=)";
  }

  static std::string short_text(py::handle v) { return py::str(py::repr(v)); }

  std::vector<std::int32_t> prompt_ids(py::handle prompt) const {
    if (PyUnicode_Check(prompt.ptr())) {
      if (!e_.tokenizer)
        throw py::value_error(
            "prompt: text needs a tokenizer (Model.from_pretrained finds "
            "tokenizer.json beside config.json); give ids instead");
      attn::EncodeOptions o;
      o.bos = attn::prompt_bos(e_.resume);
      return attn::encode(*e_.tokenizer, text_arg(prompt, "prompt"), o);
    }
    if (!py::isinstance<py::iterable>(prompt) || PyBytes_Check(prompt.ptr()))
      throw py::type_error("prompt: expected a str or token ids (a list of ints), got " +
                           type_name(prompt));
    return ids_arg(prompt, "prompt", args().vocab_size);
  }

  void check_dim(const Floats& in) const {
    if (in.info.shape[2] != args().dim)
      throw py::value_error("x: expected shape [batch, seqlen, " + std::to_string(args().dim) +
                            "], got dim " + std::to_string(in.info.shape[2]));
  }

  // attention_mask [batch, seqlen] (1 = a real position, 0 = padding) for the positions this
  // call writes, read as float32.
  void padding(py::handle mask, std::int64_t B, std::int64_t T, std::int64_t start_pos) {
    if (mask.is_none()) return attn::set_padding(e_, nullptr, B, T, start_pos);
    const py::array_t<float> m = float_array(mask, "attention_mask", 2);
    if (m.ndim() != 2 || m.shape(0) != B || m.shape(1) != T)
      throw py::value_error("attention_mask: expected shape [" + std::to_string(B) + ", " +
                            std::to_string(T) + "]");
    attn::set_padding(e_, m.data(), B, T, start_pos);
  }

  py::array_t<float> run(const Floats& in, std::int64_t B, std::int64_t T, std::int64_t start_pos) {
    py::array_t<float> out({py::ssize_t(B), py::ssize_t(T), py::ssize_t(args().dim)});
    keep_probabilities(B, T, start_pos);
    float* y = out.mutable_data();
    last_input_ = reinterpret_cast<std::uintptr_t>(in.data());
    timed(B * T, start_pos + T, [&] { attn::forward_hidden(e_, in.data(), B, T, start_pos, y); });
    return out;
  }

  void keep_probabilities(std::int64_t B, std::int64_t T, std::int64_t start_pos) {
    if (!keep_probs_) return;
    const attn::ModelArgs& a = args();
    drop_probabilities();
    // The forward asks from its own thread, the GIL released: raw pointers, checked for size.
    for (std::int64_t l = 0; l < a.n_layers; ++l) {
      probs_.emplace_back(std::vector<py::ssize_t>{B, a.n_heads, T, start_pos + T});
      kept_.set(l, probs_.back().mutable_data(), B * a.n_heads * T * (start_pos + T));
    }
    attached_.emplace(e_.model, kept_.observer());
  }

  // Generation keeps no probabilities: its calls' shapes change every step.
  void drop_probabilities() {
    attached_.reset();
    probs_.clear();
    kept_.clear();
  }

  // Roughly a call's floating-point operations: what decides whether Ctrl-C is watched for.
  double call_flops(std::int64_t rows, std::int64_t keys) const {
    const attn::ModelArgs& a = args();
    const double params = double(e_.model.weights.bytes) / 2;  // at least: BF16 or wider
    return 2 * double(rows) * params +
           4 * double(rows) * double(keys) * double(a.n_heads * a.head_dim() * a.n_layers);
  }

  // The engine runs on this thread with the GIL released. For a long call, SIGINT is caught for
  // its duration by a handler that only sets g_cancel (async-signal-safe), so Ctrl-C stops the
  // engine between blocks; the call then raises KeyboardInterrupt and Python's handler is back.
  // A worker thread instead would cost a prefill its hand-off and wake-ups (docs/perf/README.md),
  // and a short call (a decode step) skips the handler swap too.
  template <class Call>
  void timed(std::int64_t rows, std::int64_t keys, Call call) {
    g_cancel.store(false);
    const bool watch = call_flops(rows, keys) >= kInlineFlops;
    struct sigaction ours {
    }, theirs{};
    if (watch) {
      ours.sa_handler = [](int) { g_cancel.store(true); };
      sigemptyset(&ours.sa_mask);
      ::sigaction(SIGINT, &ours, &theirs);
    }
    e_.model.cancel = &g_cancel;
    std::exception_ptr error;
    const auto t0 = std::chrono::steady_clock::now();
    {
      py::gil_scoped_release release;
      try {
        call();
      } catch (...) {
        error = std::current_exception();
      }
    }
    last_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (watch) ::sigaction(SIGINT, &theirs, nullptr);
    if (!error) return;
    try {
      std::rethrow_exception(error);
    } catch (const attn::Interrupted&) {
      PyErr_SetNone(PyExc_KeyboardInterrupt);
      throw py::error_already_set();
    } catch (const PythonRaised&) {  // a patch function's exception, its indicator set
      throw py::error_already_set();
    }
  }

  static constexpr double kInlineFlops = 2e9;  // long enough to be worth a handler swap

  attn::Session e_;
  bool keep_probs_ = false;
  std::vector<py::array_t<float>> probs_;
  attn::KeptProbabilities kept_;            // into probs_ (attention_weights=True)
  std::optional<attn::Attached> attached_;  // kept_ attached to the model, after a call
  std::uintptr_t last_input_ = 0;
  double last_seconds_ = 0;
  bool in_hook_ = false;         // a patch function runs (on hook_thread_, with the GIL)
  std::thread::id hook_thread_;  // the thread of the last hooked call
  std::unique_ptr<std::mutex> mutex_ = std::make_unique<std::mutex>();
};

}  // namespace attn_py
