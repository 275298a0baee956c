#include "commands/setup.hpp"

#include <spdlog/spdlog.h>

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

// The config file (or the built-in default), with the command line's overrides applied. A
// Hugging Face config.json has no model_parallel_size: mpirun's number of ranks is it.
attn::ModelArgs model_args(const Options& f, attn::ModelArgs (*fallback)(),
                           const attn::Shard& shard) {
  attn::ModelArgs args = f.config.empty() ? fallback() : attn::load_config(f.config);
  attn::ConfigOverrides o = f.overrides;
  parse_layers(f.layers, o);
  if (args.hugging_face && o.model_parallel_size == 0 && shard.size > 1)
    o.model_parallel_size = shard.size;
  attn::apply_overrides(args, o);
  return args;
}

// Model parallel: rank 0 logs, prints the trace and writes the dump; the others stay quiet.
void quiet_other_ranks(const attn::Shard& shard) {
  if (shard.rank != 0 && spdlog::get_level() < spdlog::level::err)
    spdlog::set_level(spdlog::level::err);
}

// The --weights file with its headers read and nothing mapped, for the memory estimate to count
// the matrices in their dtypes (shape.matrices); none for drawn weights, whose type the caller
// knows (`run` draws F32).
std::optional<attn::WeightsSource> open_weights(const Options& f, const attn::ModelArgs& args,
                                                const attn::Shard& shard, attn::RunShape& shape) {
  if (f.weights.empty()) return std::nullopt;
  attn::WeightsSource file = attn::open_weights(f.weights, shard);
  shape.matrices = attn::matrix_types(args, file);
  return file;
}

}  // namespace cli
