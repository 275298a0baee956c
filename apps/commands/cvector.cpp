// attn-cli cvector: llama-cvector-generator's control vector from prompt pairs
// (engine/cvector.hpp), written through the output rules (temporary file, then rename).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>

#include "attn/engine/cvector.hpp"
#include "attn/engine/prompt.hpp"
#include "attn/engine/session.hpp"
#include "attn/error.hpp"
#include "attn/io/output.hpp"
#include "attn/io/text.hpp"
#include "commands/commands.hpp"
#include "flags.hpp"

namespace cli {

int cvector_command(const Options& f) {
  spdlog::set_level(spdlog::level::from_str(f.log_level));
  if (f.weights.empty()) throw attn::InputError("cvector needs a model: -m FILE");
  if (f.pca_iterations % f.pca_batch != 0)
    throw attn::InputError("--pca-iter " + std::to_string(f.pca_iterations) +
                           " must be a multiple of --pca-batch " + std::to_string(f.pca_batch));
  const std::vector<std::string> pos = attn::read_prompt_file(f.positive_file),
                                 neg = attn::read_prompt_file(f.negative_file);
  attn::check_output(f.output, "control vector");
  const attn::ModelSpec spec = generate_spec(f);
  attn::OpenedModel model = attn::open_model(spec);
  const attn::ModelArgs a = attn::model_args(spec, model, nullptr);
  std::optional<attn::Tokenizer> tok = attn::open_tokenizer(model);
  if (!tok) throw attn::InputError("cvector needs a tokenizer with text (--tokenizer)");
  std::int64_t longest = 1;  // the session's largest call: the longest prompt
  for (const auto* list : {&pos, &neg})
    for (const std::string& p : *list)
      longest = std::max(longest, std::int64_t(attn::encode(*tok, p).size()));
  attn::Session e =
      attn::open_session(std::move(model), spec, {1, std::min(longest, a.max_seq_len), 0, 0, {}},
                         std::nullopt, std::move(tok));
  attn::require_token_model(e.model.args, "cvector");
  attn::CvectorOptions o;
  o.method = f.cvector_method == "mean" ? attn::CvectorMethod::mean : attn::CvectorMethod::pca;
  o.pca_iterations = f.pca_iterations;
  o.seed = f.seed;
  const auto directions = attn::make_control_vector(e, pos, neg, o);
  attn::OutputFile out(f.output, "control vector");
  attn::write_control_vector(out, directions, a.arch.empty() ? "llama" : a.arch);
  out.commit();
  std::cerr << "cvector: " << directions.size() << " directions (" << f.cvector_method << ", "
            << pos.size() << " prompt pairs) written to " << attn::escape(f.output) << "\n";
  return 0;
}

}  // namespace cli
