// attn-cli capture: hook sites' activations over a corpus, streamed to sharded safetensors
// (engine/capture.hpp), with a progress line on stderr: tokens, tokens/s, ETA.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "attn/engine/capture.hpp"
#include "attn/engine/session.hpp"
#include "attn/error.hpp"
#include "attn/io/output.hpp"
#include "attn/io/text.hpp"
#include "commands/commands.hpp"
#include "flags.hpp"

namespace cli {

namespace {

std::vector<std::string> comma_list(const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t at = 0; at <= text.size();) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    if (comma > at) out.push_back(text.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

std::string clock_text(double seconds) {
  const long s = long(seconds);
  char text[32];
  std::snprintf(text, sizeof text, "%02ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  return text;
}

}  // namespace

int capture_command(const Options& f) {
  spdlog::set_level(spdlog::level::from_str(f.log_level));
  if (f.weights.empty()) throw attn::InputError("capture needs a model: -m FILE");
  attn::CaptureSpec s;
  s.hooks = comma_list(f.hooks);
  s.corpus = f.corpus;
  s.jsonl = f.jsonl || std::filesystem::path(f.corpus).extension() == ".jsonl";
  s.out = f.png;
  s.ctx = f.row_tokens;
  s.batch = std::max<std::int64_t>(1, f.run.batch);
  s.shard_bytes = attn::parse_size(f.shard_size, "shard_size");
  s.model = f.weights;
  std::error_code ec;
  if (!std::filesystem::is_directory(s.out, ec) && !std::filesystem::create_directory(s.out, ec))
    throw attn::InputError("--out " + attn::escape(f.png, 80) + ": cannot make the folder (" +
                           ec.message() + ")");
  attn::check_output(s.out / "manifest.json", "manifest");
  attn::ModelSpec spec = generate_spec(f);
  spec.overrides.max_batch_size = s.batch;
  spec.overrides.max_seq_len = s.ctx;
  attn::Session e = attn::open_session(spec, {s.batch, s.ctx, 0, 0, {}});
  attn::require_token_model(e.model.args, "capture");
  const bool terminal = ::isatty(STDERR_FILENO) != 0;
  double shown = -1;
  const attn::CaptureProgress p = attn::capture(e, s, [&](const attn::CaptureProgress& p) {
    if (!terminal && p.seconds - shown < 10 && p.fraction < 1) return;
    shown = p.seconds;
    const double rate = p.seconds > 0 ? double(p.tokens) / p.seconds : 0;
    const double eta = p.fraction > 0 ? p.seconds * (1 - p.fraction) / p.fraction : 0;
    std::cerr << (terminal ? "\r" : "") << "capture: " << p.tokens << " tokens, " << long(rate)
              << " tokens/s, ETA " << clock_text(eta) << " (" << int(p.fraction * 100) << "%)"
              << (terminal ? "" : "\n") << std::flush;
  });
  std::cerr << (terminal ? "\n" : "") << "capture: " << p.written << " positions in "
            << attn::escape(f.png, 80) << " (this run: " << p.tokens << " in " << p.seconds
            << " s, " << p.forward_seconds << " s in the forward calls)\n";
  return 0;
}

}  // namespace cli
