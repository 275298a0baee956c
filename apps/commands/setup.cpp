#include "commands/setup.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <string_view>

#include "attn/engine/control_vector.hpp"
#include "attn/engine/session.hpp"
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

// One --control-vector-scaled value: "F:SCALE" (llama.cpp's, split at the last colon) or, given
// as two words, F and SCALE.
attn::ControlVectorFile scaled_file(const std::string& file, std::string_view scale) {
  double v = 0;
  const auto [end, ec] = std::from_chars(scale.data(), scale.data() + scale.size(), v);
  if (file.empty() || ec != std::errc() || end != scale.data() + scale.size() || !std::isfinite(v))
    throw attn::InputError(
        "--control-vector-scaled: expected FNAME:SCALE or FNAME SCALE with a "
        "finite number, got " +
        attn::quoted(file + ":" + std::string(scale), 60));
  return {file, v};
}

std::vector<attn::ControlVectorFile> control_vector_files(const Options& f) {
  std::vector<attn::ControlVectorFile> files;
  for (const std::string& name : f.control_vectors) files.push_back({name, 1});
  for (const std::vector<std::string>& words : f.control_vectors_scaled) {
    if (words.size() == 2) {
      files.push_back(scaled_file(words[0], words[1]));
      continue;
    }
    std::string_view list = words.at(0);
    while (true) {  // a comma list of F:SCALE
      const std::size_t comma = list.find(',');
      const std::string_view item = list.substr(0, comma);
      const std::size_t colon = item.rfind(':');
      if (colon == std::string_view::npos) scaled_file(std::string(item), "");  // refused
      files.push_back(scaled_file(std::string(item.substr(0, colon)), item.substr(colon + 1)));
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
  }
  return files;
}

}  // namespace

void apply_control_vectors(const Options& f, attn::Session& e) {
  const std::vector<attn::ControlVectorFile> files = control_vector_files(f);
  if (files.empty()) {
    if (!f.control_vector_layer_range.empty())
      throw attn::InputError(
          "--control-vector-layer-range needs --control-vector or "
          "--control-vector-scaled");
    return;
  }
  std::optional<attn::LayerRange> range;
  if (f.control_vector_layer_range.size() == 2)
    range = attn::LayerRange{f.control_vector_layer_range[0], f.control_vector_layer_range[1]};
  attn::set_steering(e, attn::load_control_vectors(files, e.model.args, range));
}

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
