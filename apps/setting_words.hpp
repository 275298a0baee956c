// attn-cli's words for the library's settings: an attn::InputError names the config key or engine
// option that fixes it (error.hpp), and the CLI says which of its flags sets that.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace cli {

// The flag that sets `setting`, or "" where no flag of attn-cli sets it.
inline std::string cli_flag_for(std::string_view setting) {
  static constexpr std::pair<std::string_view, std::string_view> kFlags[] = {
      {"max_seq_len", "--max-seq-len"},
      {"max_batch_size", "--max-batch"},
      {"model_parallel_size", "--model-parallel"},
      {"layers", "--layers"},
      {"threads", "--threads"},
      {"compute", "--compute"},
      {"mask", "--mask"},
      {"seed", "--seed"},
      {"batch", "--batch"},
      {"prefill", "--prefill"},
      {"steps", "--steps"},
      {"config", "--config"},
      {"weights", "--weights"},
      {"input", "--input"},
      {"prompt", "--prompt"},
      {"tokens", "--tokens"},
      {"tokens_file", "--tokens-file"},
      {"tokenizer", "--tokenizer"},
      {"attention_weights", "--attention-weights"},
      {"logit_lens", "--logit-lens"},
      {"dump_activations", "--dump-activations"},
      {"save_session", "--save-session"},
      {"load_session", "--load-session"},
      {"weight_types", "--weight-types"},
      {"heads", "--heads"},
      {"positions", "--positions"},
      {"max_size", "--max-size"},
      {"batch_row", "--batch-row"},
  };
  for (const auto& [name, flag] : kFlags)
    if (name == setting) return std::string(flag);
  return "";
}

}  // namespace cli
