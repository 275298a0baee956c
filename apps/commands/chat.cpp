// attn-cli chat: a conversation on stdin and stdout. Each line is a user turn; the whole
// conversation is rendered by the chat template every turn and only what the cache does not
// hold already is prefilled (engine/chat's keep_common_prefix).
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>

#include <signal.h>
#include <unistd.h>

#include "attn/engine/chat.hpp"
#include "attn/engine/prompt.hpp"
#include "attn/engine/session.hpp"
#include "attn/error.hpp"
#include "attn/io/output.hpp"
#include "attn/io/text.hpp"
#include "attn/text/chat_template.hpp"
#include "attn/text/tokenizer.hpp"
#include "commands/commands.hpp"
#include "commands/setup.hpp"
#include "flags.hpp"
#include "text_input.hpp"

namespace cli {

using namespace attn;  // the engine's names; this file is its front

namespace {

volatile std::sig_atomic_t g_interrupted = 0;

// The positions one prefill call takes: the activations are sized for this many rows, not for the
// whole context (a 128K context would need gigabytes); a longer turn is prefilled in pieces.
constexpr std::int64_t kRows = 512;

void on_interrupt(int) {
  g_interrupted = 1;
}

// While a reply is generated, Ctrl-C stops the reply (the conversation goes on); between
// replies it ends the process as signals.cpp's handler does.
class InterruptReply {
 public:
  InterruptReply() {
    g_interrupted = 0;
    struct sigaction stop {};
    stop.sa_handler = on_interrupt;
    stop.sa_flags = SA_RESTART;  // a write blocked on a paused terminal (Ctrl-S) goes on after
    sigemptyset(&stop.sa_mask);
    ::sigaction(SIGINT, &stop, &old_);
  }
  ~InterruptReply() { ::sigaction(SIGINT, &old_, nullptr); }
  InterruptReply(const InterruptReply&) = delete;
  InterruptReply& operator=(const InterruptReply&) = delete;

 private:
  struct sigaction old_ {};
};

struct Interrupted {};  // thrown from the token callback: generate has no other way out

// One reply: the new ids prefilled after the kept prefix, tokens streamed until the template's
// end of turn, the reply's text returned. The context full: the reply stops, said on stderr.
std::string reply(const Options& f, Session& e, const std::vector<std::int32_t>& ids,
                  const std::vector<std::int32_t>& stop) {
  const std::int64_t max = e.model.args.max_seq_len;
  if (std::int64_t(ids.size()) >= max)
    throw InputError("chat: the conversation is " + std::to_string(ids.size()) +
                         " tokens, and the context holds " + std::to_string(max) +
                         " positions: start again with a larger one",
                     "max_seq_len");
  const std::size_t kept = keep_common_prefix(e, ids);
  const std::int64_t room = max - std::int64_t(ids.size());
  const std::int64_t steps = f.run.steps >= 0 ? std::min(f.run.steps, room) : room;
  std::span<const std::int32_t> fresh(ids.data() + kept, ids.size() - kept);
  const std::size_t rows = std::size_t(e.model.act.plan.max_rows);
  for (; fresh.size() > rows; fresh = fresh.subspan(rows)) {
    generate(e, fresh.first(rows), 0, f.sampling, stop, false, [](const Generated&) {});
    e.resume = true;
  }
  TextStream stream(*e.tokenizer, ids);
  std::string text;
  bool ended = false;
  const InterruptReply interrupt;
  try {
    generate(e, fresh, steps, f.sampling, stop, true, [&](const Generated& t) {
      ended = std::find(stop.begin(), stop.end(), t.id) != stop.end();
      const std::string piece = stream.next(t.id);
      text += piece;
      std::cout << (::isatty(STDOUT_FILENO) ? escape_controls(piece) : piece) << std::flush;
      if (g_interrupted) throw Interrupted{};
    });
  } catch (const Interrupted&) {
    e.filled = std::int64_t(e.generation.tokens.size());  // the cache holds what was fed
    e.resume = true;
    std::fputs("\n[reply stopped]\n", stderr);
    ended = true;
  }
  std::cout << '\n' << std::flush;
  if (!ended && steps == room)
    std::fprintf(stderr,
                 "attn-cli: the context is full (%lld positions): the reply stops here; the "
                 "next turn needs a larger --max-seq-len\n",
                 static_cast<long long>(max));
  return text;
}

// One line of standard input, without its newline; false at the end of input. A line is a user
// turn, so it is bounded like a prompt: an endless line is refused, not held in memory.
bool read_turn(std::istream& in, std::string& line) {
  constexpr std::size_t kMaxTurnBytes = std::size_t(1) << 20;
  line.clear();
  for (int c; (c = in.get()) != std::char_traits<char>::eof();) {
    if (c == '\n') return true;
    if (line.size() == kMaxTurnBytes)
      throw InputError("chat: a line of standard input is longer than 1 MiB; a turn is one line");
    line += char(c);
  }
  return !line.empty();
}

// The conversation as a session file keeps it: [{"role", "content"}, ...] (text that is not UTF-8
// replaced, as JSON holds only UTF-8).
std::string conversation_json(const std::vector<ChatMessage>& messages) {
  nlohmann::json list = nlohmann::json::array();
  for (const ChatMessage& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
  return list.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A loaded session's conversation: a chat's session holds one; a generate session none.
std::vector<ChatMessage> conversation_of(const std::string& json, const std::string& file) {
  const std::string where = escape(file) + ": metadata 'conversation'";
  if (json.empty())
    throw InputError(
        escape(file) + ": a session of generate, not of chat: it holds no conversation",
        "load_session");
  const nlohmann::json list = nlohmann::json::parse(json, nullptr, false);
  if (!list.is_array()) throw InputError(where + ": not a list of messages");
  std::vector<ChatMessage> messages;
  for (const nlohmann::json& m : list) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string())
      throw InputError(where + ": message " + std::to_string(messages.size()) +
                       " is not {\"role\": text, \"content\": text}");
    messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  return messages;
}

}  // namespace

int chat_command(const Options& f) {
  spdlog::set_level(spdlog::level::from_str(f.log_level));
  if (!std::cout) throw std::runtime_error("stdout is closed: the replies have nowhere to go");
  if (f.weights.empty()) throw InputError("chat needs a model: -m FILE (a GGUF file, or a folder)");
  const ModelSpec spec = generate_spec(f);
  OpenedModel model = open_model(spec);
  const ModelArgs a = model_args(spec, model, nullptr);
  require_tokenizer(f.text, model.files);
  std::optional<Tokenizer> tok = open_tokenizer(model);
  if (!tok) throw InputError("chat needs a tokenizer with text (--tokenizer)");
  const ChatTemplate chat = chat_template_for(*tok, f.chat_template);
  const std::int64_t vocab = token_vocab(a, tok);
  Session e = open_session(std::move(model), spec, {1, std::min(kRows, a.max_seq_len), 0, 0, {}},
                           std::nullopt, std::move(tok));
  require_token_model(e.model.args, "chat");
  if (!f.save_session.empty()) check_output(f.save_session, "session");
  apply_control_vectors(f, e);
  const std::vector<std::int32_t> stop = chat_stop_ids(*e.tokenizer);
  std::vector<ChatMessage> messages;
  if (!f.load_session.empty()) {
    std::string json;
    load_cache_session(e, f.load_session, &json);
    messages = conversation_of(json, f.load_session);
    if (!f.system_prompt.empty())
      throw InputError("the loaded session holds its conversation, its system message too",
                       "system_prompt");
  }
  if (!f.system_prompt.empty()) messages.push_back({"system", f.system_prompt});
  const bool terminal = ::isatty(STDIN_FILENO) != 0;
  for (std::string line;;) {
    if (terminal) std::cout << "> " << std::flush;
    if (!read_turn(std::cin, line)) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == "/exit") break;
    if (line.empty()) continue;
    const auto t0 = std::chrono::steady_clock::now();
    messages.push_back({"user", line});
    const std::vector<std::int32_t> ids = chat_prompt_ids(chat, *e.tokenizer, messages, vocab);
    messages.push_back({"assistant", reply(f, e, ids, stop)});
    print_timing(e.generation,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (!std::cout) throw std::runtime_error("cannot write the replies to stdout");
  if (!f.save_session.empty()) {
    stage_cache_session(e, f.save_session, conversation_json(messages)).commit();
    spdlog::info("session: {} ({} positions)", escape(f.save_session), e.filled);
  }
  return 0;
}

}  // namespace cli
