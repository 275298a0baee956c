// Chat from Python. Messages are transformers' (a list of dicts, passed to the template through
// JSON, so any field reaches it), tools and documents None. Model.chat renders the conversation
// with the generation prompt, keeps the cache's common prefix with it (engine/chat, as attn-cli
// chat does), generates until the template's end-of-turn token and returns the reply's text.
#include "chat.hpp"

#include <pybind11/stl.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "attn/engine/chat.hpp"
#include "attn/engine/prompt.hpp"
#include "attn/text/chat_template.hpp"
#include "attn/text/tokenizer.hpp"
#include "convert.hpp"
#include "model.hpp"

namespace attn_py {

namespace {

namespace s = shown;
struct Messages {
  static constexpr auto name = py::detail::const_name("list[dict[str, Any]]");
};

// messages: a list (or tuple) of dicts; anything else a TypeError naming the argument.
py::object messages_arg(py::handle v) {
  if (!py::isinstance<py::list>(v) && !py::isinstance<py::tuple>(v))
    throw py::type_error("messages: expected a list of {'role': ..., 'content': ...} dicts, got " +
                         type_name(v));
  return py::reinterpret_borrow<py::object>(v);
}

// The template chosen by chat_template: one of the tokenizer's by name, else a template's text;
// None: the tokenizer's default.
attn::ChatTemplate chosen_template(const attn::Tokenizer& t, py::handle chat_template) {
  if (chat_template.is_none()) return attn::chat_template_for(t, "");
  const std::string choice = text_arg(chat_template, "chat_template");
  for (const auto& [name, source] : t.chat_templates)
    if (name == choice) return {source, t.source + ": chat template " + name};
  return {choice, "chat_template"};
}

std::string render(const attn::ChatTemplate& chat, const attn::Tokenizer& t,
                   const py::object& messages, bool add_generation_prompt) {
  const attn::ChatOptions o = attn::chat_options(t, add_generation_prompt);
  py::dict vars;
  vars["messages"] = messages;
  vars["tools"] = py::none();
  vars["documents"] = py::none();
  vars["add_generation_prompt"] = add_generation_prompt;
  vars["bos_token"] = o.bos_token;
  vars["eos_token"] = o.eos_token;
  std::string json;
  try {
    json = py::module_::import("json").attr("dumps")(vars).cast<std::string>();
  } catch (const py::error_already_set& e) {
    throw py::type_error("messages: " + std::string(py::str(e.value())));
  }
  return chat.render_json(json);
}

// The rendered text's ids as apply_chat_template(tokenize=True) encodes them: the template
// writes the special tokens, none added.
std::vector<std::int32_t> chat_ids(const attn::Tokenizer& t, const std::string& text) {
  attn::EncodeOptions eo;
  eo.add_special_tokens = false;
  return attn::encode(t, text, eo);
}

py::object apply_chat_template(const attn::Tokenizer& t, py::handle messages,
                               py::handle add_generation_prompt, py::handle tokenize,
                               py::handle chat_template) {
  const py::object given = messages_arg(messages);
  const bool prompt = bool_arg(add_generation_prompt, "add_generation_prompt");
  const bool ids = bool_arg(tokenize, "tokenize");
  const std::string text = render(chosen_template(t, chat_template), t, given, prompt);
  if (!ids) return py::str(text);
  return py::cast(chat_ids(t, text));
}

// Text from a file's bytes, for showing: invalid UTF-8 replaced, not refused.
py::str shown_text(const std::string& bytes) {
  return py::reinterpret_steal<py::str>(
      PyUnicode_DecodeUTF8(bytes.data(), py::ssize_t(bytes.size()), "replace"));
}

py::dict named_templates(const attn::Tokenizer& t) {
  py::dict named;
  for (const auto& [name, source] : t.chat_templates) named[shown_text(name)] = shown_text(source);
  return named;
}

// Model.chat's sampling arguments, held for a stream's later steps.
struct Sampling {
  py::object max_new_tokens, temperature, do_sample, top_k, top_p, min_p, seed;
  py::object repetition_penalty, repeat_penalty, repeat_last_n, presence_penalty, frequency_penalty;
};

// One turn: the rendered conversation's ids, the ids that end the turn and the most to generate.
struct Turn {
  std::vector<std::int32_t> ids, stop;
  std::int64_t steps = 0;
};

Turn prepare(Model& m, py::handle messages, py::handle chat_template, const Sampling& s) {
  const attn::Tokenizer& t = m.text_tokenizer("chat");
  const py::object given = messages_arg(messages);
  Turn turn;
  turn.ids = chat_ids(t, render(chosen_template(t, chat_template), t, given, true));
  const std::int64_t max = m.args().max_seq_len;
  if (turn.ids.empty()) throw py::value_error("messages: the conversation renders to no tokens");
  if (std::int64_t(turn.ids.size()) >= max)
    throw py::value_error("messages: the conversation is " + std::to_string(turn.ids.size()) +
                          " tokens, and the context holds " + std::to_string(max) +
                          " positions (set with max_seq_len= in Model.from_pretrained)");
  for (const std::int32_t id : attn::chat_stop_ids(t))
    if (id < m.args().vocab_size) turn.stop.push_back(id);
  // Until the end of the turn or of the context, unless max_new_tokens says fewer.
  const std::int64_t room = max - std::int64_t(turn.ids.size());
  turn.steps = s.max_new_tokens.is_none()
                   ? room
                   : std::min(int_arg(s.max_new_tokens, "max_new_tokens", 0, INT64_MAX), room);
  return turn;
}

// generate(prompt, steps) with the chat's sampling; a refused or stopped call leaves no
// conversation to continue (the next generate starts afresh, not after a kept prefix).
std::vector<std::int32_t> generate(Model& m, const std::vector<std::int32_t>& prompt,
                                   std::int64_t steps, const Turn& turn, const Sampling& s) {
  try {
    return m.generate(py::cast(prompt), py::int_(steps), py::none(), s.top_k, s.top_p, s.min_p,
                      s.seed, py::cast(turn.stop), py::none(), s.temperature, s.do_sample,
                      {s.repetition_penalty, s.repeat_penalty, s.repeat_last_n, s.presence_penalty,
                       s.frequency_penalty});
  } catch (...) {
    m.keep_prefix({});
    throw;
  }
}

bool ends_turn(const Turn& turn, std::int32_t id) {
  return std::find(turn.stop.begin(), turn.stop.end(), id) != turn.stop.end();
}

// The ids after the cache's common prefix with the rendered conversation, which the cache then
// continues.
std::vector<std::int32_t> fresh_ids(Model& m, const Turn& turn) {
  const std::size_t kept = m.keep_prefix(turn.ids);
  return {turn.ids.begin() + std::ptrdiff_t(kept), turn.ids.end()};
}

// Model.chat(stream=True): the reply's text piece by piece, one generate step per token (the
// draws are by position, so the pieces join to chat's reply); the first step prefills.
class ChatStream {
 public:
  ChatStream(py::object model, Turn turn, Sampling sampling)
      : model_(std::move(model)),
        turn_(std::move(turn)),
        s_(std::move(sampling)),
        text_(model_.cast<Model&>().text_tokenizer("chat"), turn_.ids) {}

  std::string next() {
    Model& m = model_.cast<Model&>();
    for (;;) {
      if (done_ || std::int64_t(out_.size()) >= turn_.steps) throw py::stop_iteration();
      std::vector<std::int32_t> prompt;
      if (!started_) {
        prompt = fresh_ids(m, turn_);
        started_ = true;
      } else if (!m.continue_after(held())) {
        done_ = true;
        throw py::value_error(
            "chat stream: the model ran another call since this stream's last piece; call chat "
            "again to go on");
      }
      const std::vector<std::int32_t> one = generate(m, prompt, 1, turn_, s_);
      if (one.empty() || ends_turn(turn_, one[0])) {
        done_ = true;
        continue;
      }
      out_.push_back(one[0]);
      if (std::string piece = text_.next(one[0]); !piece.empty()) return piece;
    }
  }

 private:
  // The ids the cache holds after the steps so far: the conversation and the reply's ids.
  std::vector<std::int32_t> held() const {
    std::vector<std::int32_t> ids = turn_.ids;
    ids.insert(ids.end(), out_.begin(), out_.end());
    return ids;
  }

  py::object model_;  // keeps the Model alive while the stream is
  Turn turn_;
  Sampling s_;
  attn::TextStream text_;
  std::vector<std::int32_t> out_;
  bool started_ = false, done_ = false;
};

// Model.chat: one turn of the conversation `messages` (ending with the user's message), its
// reply as text, or a ChatStream of it.
py::object chat(py::object self, py::handle messages, py::handle chat_template, py::handle stream,
                Sampling s) {
  Model& m = self.cast<Model&>();
  const bool pieces = bool_arg(stream, "stream");
  Turn turn = prepare(m, messages, chat_template, s);
  if (pieces) return py::cast(ChatStream(std::move(self), std::move(turn), std::move(s)));
  const std::vector<std::int32_t> out = generate(m, fresh_ids(m, turn), turn.steps, turn, s);
  // The reply as the pipeline has it: the text past the prompt's, special tokens printing nothing.
  attn::TextStream text(m.text_tokenizer("chat"), turn.ids);
  std::string reply;
  for (const std::int32_t id : out)
    if (!ends_turn(turn, id)) reply += text.next(id);
  return py::str(reply);
}

}  // namespace

void bind_chat(py::module_& mod) {
  py::object tokenizer = mod.attr("Tokenizer");
  tokenizer.attr("apply_chat_template") = py::cpp_function(
      [](const attn::Tokenizer& t, Arg<Messages> messages, Arg<s::Bool> add_generation_prompt,
         Arg<s::Bool> tokenize, Arg<s::OptText> chat_template) {
        return apply_chat_template(t, messages, add_generation_prompt, tokenize, chat_template);
      },
      py::name("apply_chat_template"), py::is_method(tokenizer), py::arg("messages"),
      py::arg("add_generation_prompt") = false, py::arg("tokenize") = true,
      py::arg("chat_template") = py::none(),
      "the conversation rendered by the tokenizer's chat template as transformers renders it "
      "(chat_template: one of the tokenizer's template names, or a template's text), as ids "
      "(tokenize=True: special tokens read from the text, none added) or text");
  const py::object property = py::module_::import("builtins").attr("property");
  tokenizer.attr("chat_templates") = property(
      py::cpp_function(&named_templates), py::none(), py::none(),
      "the chat templates the file carries, {name: source}: 'default' (a GGUF's "
      "tokenizer.chat_template, tokenizer_config.json's chat_template) and the named ones "
      "(tokenizer.chat_template.NAME, a list of {name, template}); chat_template= takes a name");
  py::class_<ChatStream>(mod, "ChatStream",
                         "Model.chat(..., stream=True): the reply's text pieces as they are made")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", &ChatStream::next);
  py::object model = mod.attr("Model");
  model.attr("chat") = py::cpp_function(
      [](Model& m, Arg<Messages> messages, Arg<s::OptText> chat_template,
         Arg<s::OptInt> max_new_tokens, Arg<s::OptFloat> temperature, Arg<s::OptBool> do_sample,
         Arg<s::Int> top_k, Arg<s::Float> top_p, Arg<s::Float> min_p, Arg<s::Int> seed,
         Arg<s::OptFloat> repetition_penalty, Arg<s::OptFloat> repeat_penalty,
         Arg<s::Int> repeat_last_n, Arg<s::Float> presence_penalty, Arg<s::Float> frequency_penalty,
         Arg<s::Bool> stream) {
        const auto own = [](py::handle h) { return py::reinterpret_borrow<py::object>(h); };
        // The Python object of m, which a stream keeps alive (pybind11 finds the registered one).
        py::object self = py::cast(&m, py::return_value_policy::reference);
        return chat(std::move(self), messages, chat_template, stream,
                    {own(max_new_tokens), own(temperature), own(do_sample), own(top_k), own(top_p),
                     own(min_p), own(seed), own(repetition_penalty), own(repeat_penalty),
                     own(repeat_last_n), own(presence_penalty), own(frequency_penalty)});
      },
      py::name("chat"), py::is_method(model), py::arg("messages"), py::kw_only(),
      py::arg("chat_template") = py::none(), py::arg("max_new_tokens") = py::none(),
      py::arg("temperature") = py::none(), py::arg("do_sample") = py::none(), py::arg("top_k") = 40,
      py::arg("top_p") = 0.95, py::arg("min_p") = 0.05, py::arg("seed") = 42,
      py::arg("repetition_penalty") = py::none(), py::arg("repeat_penalty") = py::none(),
      py::arg("repeat_last_n") = 64, py::arg("presence_penalty") = 0.0,
      py::arg("frequency_penalty") = 0.0, py::arg("stream") = false,
      "the assistant's reply to messages ([{'role': 'user', 'content': ...}, ...]) as text: the "
      "conversation rendered by the chat template (chat_template: a name of "
      "tokenizer.chat_templates or a template's text; None: the tokenizer's default) with the "
      "generation prompt, and generated until the template's end-of-turn token, max_new_tokens, "
      "or the context's end. The cache keeps the conversation: the next call (the reply "
      "appended, then the next user message) prefills only its new tokens. Sampling as "
      "generate's (greedy unless temperature > 0). stream=True: an iterator of the reply's "
      "text pieces as they are made (llama-cpp-python's stream=True), joined the same text");
}

}  // namespace attn_py
