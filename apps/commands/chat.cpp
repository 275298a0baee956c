// attn-cli chat: a conversation on stdin and stdout. Each line is a user turn; the whole
// conversation is rendered by the chat template every turn and only what the cache does not
// hold already is prefilled (the rendered ids' common prefix with the cache is kept: a template
// that re-renders earlier turns differently is re-prefilled from the first differing position).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>

#include <signal.h>
#include <unistd.h>

#include "attn/engine/prompt.hpp"
#include "attn/engine/session.hpp"
#include "attn/error.hpp"
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

// The conversation rendered with the generation prompt, as transformers' apply_chat_template
// encodes it (the template writes the special tokens: none added).
std::vector<std::int32_t> render_ids(const ChatTemplate& chat, const Tokenizer& tok,
                                     const std::vector<ChatMessage>& messages, std::int64_t vocab) {
  EncodeOptions o;
  o.add_special_tokens = false;
  std::vector<std::int32_t> ids = encode(tok, chat.render(messages, chat_options(tok, true)), o);
  if (ids.empty()) throw InputError(chat.name() + ": the conversation renders to no tokens");
  for (const std::int32_t id : ids)
    if (id >= vocab)
      throw InputError("the chat prompt has token " + std::to_string(id) +
                       ", outside the model's vocabulary of " + std::to_string(vocab));
  return ids;
}

// Keeps the cache's positions that hold the rendered ids' common prefix (one short of the whole:
// a prefill needs a token), and returns how many are kept.
std::size_t keep_common_prefix(Session& e, const std::vector<std::int32_t>& ids) {
  std::vector<std::int32_t>& held = e.generation.tokens;
  const std::size_t n = std::min({held.size(), ids.size() - 1});
  std::size_t common = 0;
  while (common < n && held[common] == ids[common]) ++common;
  held.resize(common);
  e.filled = std::int64_t(common);
  e.resume = common > 0;
  Generation& g = e.generation;
  g.prompt_seconds = g.eval_seconds = 0;  // the timings are the turn's
  g.prompt_tokens = g.eval_tokens = 0;
  return common;
}

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
  apply_control_vectors(f, e);
  const std::vector<std::int32_t> stop = chat_stop_ids(*e.tokenizer);
  std::vector<ChatMessage> messages;
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
    const std::vector<std::int32_t> ids = render_ids(chat, *e.tokenizer, messages, vocab);
    messages.push_back({"assistant", reply(f, e, ids, stop)});
    print_timing(e.generation,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (!std::cout) throw std::runtime_error("cannot write the replies to stdout");
  return 0;
}

}  // namespace cli
