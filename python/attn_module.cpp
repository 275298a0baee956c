// `import attn`: the engine from Python, as the notebooks use their classes. ModelArgs with the
// CLI's validation, Model.prefill / decode over the KV cache, cache views, attention weights;
// for a token model Model.forward(tokens) -> logits and Model.generate, and Tokenizer;
// run_with_cache and forward(patch=) keep and patch activations under TransformerLens's hook
// names (model/hooks.hpp does it; this file names the points and owns the arrays).
// Inputs are read in place (buffer protocol, or numpy.asarray for PyTorch CPU tensors); outputs
// are NumPy arrays the engine writes into. The GIL is released while the engine runs, and
// Ctrl-C (SIGINT) stops a long forward call between blocks.
#include <pybind11/eval.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attn/engine/session.hpp"
#include "attn/error.hpp"
#include "attn/model/config.hpp"
#include "attn/text/tokenizer.hpp"
#include "attn/version.hpp"
#include "chat.hpp"
#include "convert.hpp"
#include "hooked_py.hpp"  // generated from hooked.py
#include "model.hpp"
#include "tokens.hpp"

namespace py = pybind11;
using namespace attn_py;  // the module's own conversions and Model
namespace s = attn_py::shown;
template <class Shown>
using A = Arg<Shown>;  // an argument converted by convert.hpp, shown to help() as Shown

PYBIND11_MODULE(attn, mod) {
  mod.doc() = "attn-cli's engine: LLaMA-style transformer blocks on the CPU, with the KV cache.";
  mod.attr("__version__") = ATTN_VERSION;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const attn::MemoryLimitError& e) {
      PyErr_SetString(PyExc_MemoryError, with_setting(e).c_str());
    } catch (const attn::InputError& e) {
      PyErr_SetString(PyExc_ValueError, with_setting(e).c_str());
    }
  });
  py::class_<attn::ModelArgs>(mod, "ModelArgs")
      .def(py::init([](const py::args& given, const py::kwargs& k) {
             if (!given.empty())
               throw py::type_error("ModelArgs: takes keyword arguments only (dim=..., ...), got " +
                                    std::to_string(given.size()) + " positional");
             return make_args(k);
           }),
           "ModelArgs(dim=18, n_heads=6, n_kv_heads=2, ...): the notebook's defaults, any key of "
           "the config contract replaced, validated as a config file is (ValueError)")
      .def_static(
          "from_file",
          [](A<s::Path> path, A<s::Int> max_seq_len, A<s::Int> max_batch_size) {
            attn::ModelSpec s;
            s.config = path_arg(path, "path");
            s.overrides.max_seq_len = int_arg(max_seq_len, "max_seq_len");
            s.overrides.max_batch_size = int_arg(max_batch_size, "max_batch_size");
            return attn::model_args(s, attn::OpenedModel{{{}, s.config, {}}, nullptr}, nullptr);
          },
          py::arg("path"), py::arg("max_seq_len") = 0, py::arg("max_batch_size") = 0,
          "a Meta params.json-style or Hugging Face config.json file, or a GGUF or llama2.c "
          "checkpoint's own config; max_seq_len and "
          "max_batch_size (0: the file's) size the cache as --max-seq-len and --max-batch do")
      .def("to_dict", &args_dict)
      .def("__repr__",
           [](const attn::ModelArgs& a) {
             return "ModelArgs(" + std::string(py::str(args_dict(a))) + ")";
           })
      .def_property_readonly("head_dim", &attn::ModelArgs::head_dim)
      .def_property_readonly("n_rep", &attn::ModelArgs::n_rep)
      .def_property_readonly("ffn_hidden", &attn::ModelArgs::ffn_hidden)
      .def_readonly("dim", &attn::ModelArgs::dim)
      .def_readonly("n_layers", &attn::ModelArgs::n_layers)
      .def_readonly("n_heads", &attn::ModelArgs::n_heads)
      .def_readonly("n_kv_heads", &attn::ModelArgs::n_kv_heads)
      .def_readonly("max_batch_size", &attn::ModelArgs::max_batch_size)
      .def_readonly("max_seq_len", &attn::ModelArgs::max_seq_len)
      .def_readonly("norm_eps", &attn::ModelArgs::norm_eps)
      .def_readonly("rope_theta", &attn::ModelArgs::rope_theta)
      .def_readonly("vocab_size", &attn::ModelArgs::vocab_size);
  py::class_<attn::Tokenizer>(mod, "Tokenizer")
      .def(py::init([](A<s::Path> path) { return attn::load_tokenizer(path_arg(path, "path")); }),
           py::arg("path"),
           "a tokenizer file, told by its content: a Hugging Face tokenizer.json (with "
           "tokenizer_config.json and generation_config.json beside it, if there), a GGUF file "
           "(its tokenizer) or llama2.c's tokenizer.bin")
      .def(
          "encode",
          [](const attn::Tokenizer& t, A<s::Text> text, A<s::Bool> add, A<s::OptBool> bos) {
            return encode_text(t, text, add, bos);
          },
          py::arg("text"), py::arg("add_special_tokens") = true, py::arg("bos") = py::none(),
          "the ids of text; bos True/False puts BOS first or leaves it out whatever the file says")
      .def(
          "__call__",
          [](const attn::Tokenizer& t, A<s::Texts> text, A<s::Bool> add) {
            return call_tokenizer(t, text, add);
          },
          py::arg("text"), py::arg("add_special_tokens") = true,
          "encode(text) as a list of ids (a list of lists for a list of texts): transformers' "
          "input_ids, without the dict around them")
      .def(
          "decode",
          [](const attn::Tokenizer& t, A<s::Ids> ids, A<s::Bool> skip, A<s::OptBool> clean) {
            return decode_ids(t, ids, skip, clean);
          },
          py::arg("ids"), py::arg("skip_special_tokens") = false,
          py::arg("clean_up_tokenization_spaces") = py::none(),
          "the text of ids; skip_special_tokens drops special tokens first, as transformers does")
      .def(
          "convert_ids_to_tokens",
          [](const attn::Tokenizer& t, A<s::IdOrIds> ids) { return ids_to_tokens(t, ids); },
          py::arg("ids"),
          "the vocabulary's piece of an id ('\u2581Hello'), or a list of them for a list of ids")
      .def(
          "token_bytes",
          [](const attn::Tokenizer& t, A<s::Id> id) {
            return py::bytes(attn::token_bytes(t, id_arg(id, "id", t.vocab_size())));
          },
          py::arg("id"),
          "one token's text as bytes (a split character's byte, not U+FFFD); IndexError for an "
          "id outside the vocabulary")
      .def_property_readonly("vocab_size", &attn::Tokenizer::vocab_size)
      .def_readonly("bos_id", &attn::Tokenizer::bos)
      .def_readonly("eos_ids", &attn::Tokenizer::eos)
      .def_readonly("pieces", &attn::Tokenizer::pieces);
  py::class_<Model>(mod, "Model", py::dynamic_attr())
      .def(py::init([](A<s::Args> args, A<s::OptPath> weights, A<s::Int> seed, A<s::Int> threads,
                       A<s::Bool> attention_weights, A<s::Text> compute) {
             return Model::from_args(args, weights, seed, threads, attention_weights, compute);
           }),
           py::arg("args"), py::arg("weights") = py::none(), py::arg("seed") = 42,
           py::arg("threads") = 0, py::arg("attention_weights") = false, py::arg("compute") = "f32",
           "weights: a safetensors file, a Hugging Face index or a folder holding one (None: "
           "drawn from seed as attn-cli does); threads 0: the machine's cores; compute 'f32' "
           "(exact) or 'bf16' (BF16 weights times activations rounded to BF16). Checked against "
           "the memory available before anything is allocated (MemoryError)")
      .def_static(
          "from_pretrained",
          [](A<s::Path> path, A<s::OptPath> config, A<s::OptPath> tokenizer, A<s::Int> max_seq_len,
             A<s::Int> max_batch_size, A<s::Int> threads, A<s::Text> compute,
             A<s::Bool> attention_weights) {
            return Model::from_pretrained(path, config, tokenizer, max_seq_len, max_batch_size,
                                          threads, compute, attention_weights);
          },
          py::arg("path"), py::arg("config") = py::none(), py::arg("tokenizer") = py::none(),
          py::arg("max_seq_len") = 0, py::arg("max_batch_size") = 1, py::arg("threads") = 0,
          py::arg("compute") = "f32", py::arg("attention_weights") = false,
          "a checkpoint as attn-cli -m opens it: a safetensors file, a Hugging Face index "
          "or a folder holding one, with config.json and tokenizer.json found beside it; "
          "a GGUF (its own config and tokenizer) or a llama2.c checkpoint (its own config; "
          "tokenizer: its tokenizer.bin); "
          "max_seq_len 0: the config's (capped as attn-cli caps it)")
      .def(
          "save_session", [](Model& m, A<s::Path> path) { m.save_session(path_arg(path, "path")); },
          py::arg("path"),
          "the cache session file attn-cli generate --save-session writes: the filled cache, its "
          "tokens and the next logits (after generate)")
      .def(
          "load_session", [](Model& m, A<s::Path> path) { m.load_session(path_arg(path, "path")); },
          py::arg("path"),
          "reads a cache session file (from attn-cli or save_session): the next generate "
          "continues after its tokens")
      .def_property_readonly(
          "tokenizer",
          [](py::object self) -> py::object {
            const auto& t = self.cast<Model&>().tokenizer();
            return t ? py::cast(&*t, py::return_value_policy::reference_internal, self)
                     : py::none();
          },
          "the Tokenizer found beside the config, or None")
      .def(
          "prefill",
          [](Model& m, A<s::Array> x, A<s::Int> start_pos, A<s::OptText> mask,
             A<s::OptArray> attention_mask) {
            return m.prefill(x, start_pos, mask, attention_mask);
          },
          py::arg("x"), py::arg("start_pos") = 0, py::arg("mask") = py::none(),
          py::arg("attention_mask") = py::none(),
          "x [batch, seqlen, dim] float32 at positions start_pos..: the output [batch, seqlen, "
          "dim]; mask 'causal' or 'none' (None: the config's); attention_mask [batch, seqlen], "
          "1 = real, 0 = padding")
      .def(
          "decode",
          [](Model& m, A<s::Array> x, A<s::OptArray> attention_mask) {
            return m.decode(x, attention_mask);
          },
          py::arg("x"), py::arg("attention_mask") = py::none(),
          "x [batch, 1, dim] at the next position: the output [batch, 1, dim]; attention_mask "
          "[batch, 1] for that position (default 1)")
      .def(
          "cache_k",
          [](py::object self, A<s::Int> l) { return self.cast<Model&>().cache(l, false, self); },
          py::arg("layer") = 0)
      .def(
          "cache_v",
          [](py::object self, A<s::Int> l) { return self.cast<Model&>().cache(l, true, self); },
          py::arg("layer") = 0)
      .def(
          "attention_weights",
          [](const Model& m, A<s::Int> layer) { return m.attention_weights(layer); },
          py::arg("layer") = 0)
      .def("reset", &Model::reset, "forget the cache's positions (the next call starts at 0)")
      .def(
          "steer",
          [](Model& m, A<s::SteerVector> v, A<s::Float> scale, A<s::Layers> layers) {
            m.steer(v, scale, layers);
          },
          py::arg("vector_or_file"), py::arg("scale") = 1.0, py::arg("layers") = py::none(),
          "llama.cpp's control vector (--control-vector): a GGUF file of direction.N tensors, "
          "or an array [dim] (added after every layer of the range) or [n_layers, dim] (row N "
          "after block N), times scale, added to the residual stream after each block from the "
          "next call on (forward, run_with_cache, generate). layers: None (llama.cpp's default, "
          "1 to n_layers: block 0 never gets one), an int, (start, end) both inclusive as "
          "--control-vector-layer-range, or a range. Replaces the last; None clears it")
      .def(
          "forward",
          [](Model& m, A<s::Tokens> tokens, A<s::Int> start_pos, A<s::Bool> all_positions,
             A<s::Patch> patch) {
            const bool all = bool_arg(all_positions, "all_positions");
            attn::require_token_model(m.args(), "forward(tokens)");  // before its ids are read
            if (patch.is_none())
              return m.forward_tokens(token_rows(tokens, m.args().vocab_size),
                                      m.position(start_pos), all);
            return m.run_hooked(tokens, false, py::none(), start_pos, all, patch, py::none()).first;
          },
          py::arg("tokens"), py::arg("start_pos") = 0, py::arg("all_positions") = false,
          py::arg("patch") = py::none(),
          "Meta's Transformer.forward(tokens, start_pos): ids [batch, seqlen] (or [seqlen]) -> "
          "logits [batch, 1, vocab_size] of the last position ([batch, seqlen, vocab_size] with "
          "all_positions); the cache keeps them, as prefill does. patch {hook name: array or "
          "function(activation, name) -> array or None}: the activation replaced for the rest "
          "of the pass (TransformerLens's hooks; None: the function edited its copy in place)")
      .def(
          "run_with_cache",
          [](Model& m, A<s::Tokens> tokens, A<s::Names> names, A<s::Int> start_pos,
             A<s::Bool> all_positions, A<s::Patch> patch, A<s::OptInt> max_bytes) {
            return m.run_hooked(tokens, true, names, start_pos,
                                bool_arg(all_positions, "all_positions"), patch, max_bytes);
          },
          py::arg("tokens"), py::arg("names") = py::none(), py::arg("start_pos") = 0,
          py::arg("all_positions") = true, py::arg("patch") = py::none(),
          py::arg("max_bytes") = py::none(),
          "TransformerLens's run_with_cache: (logits, {hook name: activation}) of forward(tokens, "
          "start_pos), logits of every position unless all_positions=False; names None (every "
          "point), a hook name, a list of them or a function name -> bool; only those kept, "
          "their bytes checked before the run against max_bytes (None: the memory available; "
          "MemoryError). K and V per KV head. patch as forward's (kept values are the patched)")
      .def(
          "generate",
          [](Model& m, A<s::Prompt> prompt, A<s::OptInt> steps, A<s::OptFloat> temp,
             A<s::Int> top_k, A<s::Float> top_p, A<s::Float> min_p, A<s::Int> seed, A<s::Stop> stop,
             A<s::OptInt> max_new_tokens, A<s::OptFloat> temperature, A<s::OptBool> do_sample,
             A<s::OptFloat> repetition_penalty, A<s::OptFloat> repeat_penalty,
             A<s::Int> repeat_last_n, A<s::Float> presence_penalty, A<s::Float> frequency_penalty,
             A<s::Patch> patch) {
            return m.generate(prompt, steps, temp, top_k, top_p, min_p, seed, stop, max_new_tokens,
                              temperature, do_sample,
                              {repetition_penalty, repeat_penalty, repeat_last_n, presence_penalty,
                               frequency_penalty},
                              patch);
          },
          py::arg("prompt"), py::arg("steps") = py::none(), py::arg("temp") = py::none(),
          py::arg("top_k") = 40, py::arg("top_p") = 0.95, py::arg("min_p") = 0.05,
          py::arg("seed") = 42, py::arg("stop") = py::none(),
          py::arg("max_new_tokens") = py::none(), py::arg("temperature") = py::none(),
          py::arg("do_sample") = py::none(), py::arg("repetition_penalty") = py::none(),
          py::arg("repeat_penalty") = py::none(), py::arg("repeat_last_n") = 64,
          py::arg("presence_penalty") = 0.0, py::arg("frequency_penalty") = 0.0,
          py::arg("patch") = py::none(),
          "ids generated after the prompt (ids, or text with a tokenizer), as attn-cli generate "
          "chooses them: steps (or max_new_tokens) ids, 32 when neither is given; greedy unless "
          "temp (or temperature) > 0; do_sample=False greedy whatever the temperature, "
          "do_sample=True sampling at temperature (1.0 when not given), as transformers; "
          "stopping after an id in stop (None: the tokenizer's end-of-sequence ids); after "
          "load_session, continues the session. repeat_penalty (transformers' "
          "repetition_penalty; 1: off), repeat_last_n (-1: the whole context, 0: none), "
          "presence_penalty and frequency_penalty are llama.cpp's penalties; patch {hook name: "
          "function} as forward's, called at every call (the prompt's and each step's), and the "
          "hooks of hooks()/add_hook")
      .def(
          "to_tokens",
          [](const Model& m, A<s::Texts> input, A<s::Bool> prepend_bos) {
            return to_tokens(m.text_tokenizer("to_tokens"), input, prepend_bos);
          },
          py::arg("input"), py::arg("prepend_bos") = true,
          "TransformerLens's to_tokens: the ids of a str (or of a list of strs encoding to the "
          "same length) as an int64 array [batch, pos], BOS first unless prepend_bos=False")
      .def(
          "to_string",
          [](const Model& m, A<s::Tokens> tokens) {
            return to_string(m.text_tokenizer("to_string"), tokens);
          },
          py::arg("tokens"),
          "TransformerLens's to_string: the text of ids [pos] (a list of texts for [batch, pos]), "
          "special tokens shown")
      .def(
          "to_str_tokens",
          [](const Model& m, A<s::TextOrIds> input, A<s::Bool> prepend_bos) {
            return to_str_tokens(m.text_tokenizer("to_str_tokens"), input, prepend_bos);
          },
          py::arg("input"), py::arg("prepend_bos") = true,
          "TransformerLens's to_str_tokens: each token of a str (encoded as to_tokens does) or "
          "of ids [pos] (or [1, pos]) decoded alone, as a list of str")
      .def_property_readonly("hook_names", &Model::hook_names,
                             "every hook point of this model, in forward order")
      .def(
          "weight",
          [](py::object self, A<s::Text> kind, A<s::Int> layer, A<s::Bool> widen,
             A<s::OptIds> rows) {
            return self.cast<const Model&>().weight(kind, layer, widen, rows, self);
          },
          py::arg("kind"), py::arg("layer") = 0, py::arg("widen") = false,
          py::arg("rows") = py::none(),
          "one weight as stored, [rows, cols] ([dim] for a norm), by Meta's name (tok_embeddings, "
          "output, norm; per layer wq, wk, wv, wo, w1, w2, w3, attention_norm, ffn_norm): a "
          "read-only view of an F32 tensor; another type only with widen=True, as a float32 "
          "copy, its bytes checked against the memory available first (MemoryError); rows "
          "(ids): only those rows, widened to a float32 copy whatever the type")
      .def(
          "_logit_lens",
          [](Model& m, A<s::Tokens> tokens, A<s::Int> start_pos) {
            return m.logit_lens(tokens, start_pos);
          },
          py::arg("tokens"), py::arg("start_pos") = 0)
      .def_property_readonly("args", &Model::args)
      .def_property_readonly("filled", &Model::filled)
      .def_property_readonly("threads", &Model::threads)
      .def_property_readonly("last_seconds", &Model::last_seconds,
                             "the engine's own time in the last call (forward, GIL released)")
      .def_property_readonly("last_input_address", &Model::last_input_address,
                             "the address of the x the engine read last (zero-copy checks)");
  bind_chat(mod);
  // The TransformerLens layer in Python (hooks(), run_with_hooks, ActivationCache, W_Q...):
  // python/hooked.py, run in this module's namespace.
  py::exec(kHookedPy, mod.attr("__dict__"));
}
