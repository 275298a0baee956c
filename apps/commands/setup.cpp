#include "commands/setup.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <string_view>

#include "attn/error.hpp"
#include "attn/io/text.hpp"
#include "flags.hpp"

namespace cli {

namespace {

// "A:B" -> [A, B): a range of the checkpoint's layers, both written out and not negative.
void parse_layers(const std::string& text, attn::ConfigOverrides& o) {
  if (text.empty()) return;
  auto number = [&](std::string_view part, std::int64_t& out) {
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
    return ec == std::errc() && end == part.data() + part.size() && out >= 0;
  };
  const std::size_t colon = text.find(':');
  const std::string_view t = text;
  if (colon == std::string::npos || !number(t.substr(0, colon), o.layer_begin) ||
      !number(t.substr(colon + 1), o.layer_end))
    throw attn::InputError("--layers: expected A:B with 0 <= A < B (layers A to B-1), got " +
                           attn::quoted(text, 60));
}

}  // namespace

attn::ModelSpec model_spec(const Options& f, const attn::Shard& shard) {
  attn::ModelSpec s;
  s.weights = f.weights;
  s.config = f.config;
  s.tokenizer = f.text.tokenizer;
  s.overrides = f.overrides;
  parse_layers(f.layers, s.overrides);
  if (!f.mask.empty()) s.mask = attn::parse_mask(f.mask, "--mask");
  s.seed = f.seed;
  s.threads = f.threads;
  s.compute = attn::parse_compute(f.compute);
  s.shard = shard;
  return s;
}

// Model parallel: rank 0 logs, prints the trace and writes the dump; the others stay quiet.
void quiet_other_ranks(const attn::Shard& shard) {
  if (shard.rank != 0 && spdlog::get_level() < spdlog::level::err)
    spdlog::set_level(spdlog::level::err);
}

void set_run_shape(const Options& f, attn::RunRequest& r) {
  r.opts = f.run;
  std::int64_t longest = 0;
  for (const auto& t : r.tokens) longest = std::max(longest, std::int64_t(t.size()));
  if (!r.tokens.empty() && f.batch_given && f.run.batch != std::int64_t(r.tokens.size()))
    throw attn::InputError("--batch " + std::to_string(f.run.batch) +
                           ": token input's batch is its " + std::to_string(r.tokens.size()) +
                           " sequence(s)");
  if (!r.tokens.empty() && !f.prefill_given)
    r.opts.prefill = std::max<std::int64_t>(0, longest - r.opts.steps);
  r.batch_given = f.input.empty() || f.batch_given;
  r.input = f.input;
}

}  // namespace cli
