#include "attn/model/arch.hpp"

#include "attn/error.hpp"

namespace attn {

namespace {

// The llama block's tensors under Meta's, Hugging Face's and llama.cpp's names. The tool's own
// blocks read the same attention and norms; the encoder's norm and FFN biases have Meta's names
// only (a lookup falls back to Meta's name where a naming has none).
constexpr TensorNames kLlamaLayer[] = {
    {"attention.wq.weight", "self_attn.q_proj.weight", "attn_q.weight"},
    {"attention.wk.weight", "self_attn.k_proj.weight", "attn_k.weight"},
    {"attention.wv.weight", "self_attn.v_proj.weight", "attn_v.weight"},
    {"attention.wo.weight", "self_attn.o_proj.weight", "attn_output.weight"},
    {"attention.wq.bias", "self_attn.q_proj.bias", "attn_q.bias"},
    {"attention.wk.bias", "self_attn.k_proj.bias", "attn_k.bias"},
    {"attention.wv.bias", "self_attn.v_proj.bias", "attn_v.bias"},
    {"attention.wo.bias", "self_attn.o_proj.bias", "attn_output.bias"},
    {"attention_norm.weight", "input_layernorm.weight", "attn_norm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight", "ffn_norm.weight"},
    {"feed_forward.w1.weight", "mlp.gate_proj.weight", "ffn_gate.weight"},
    {"feed_forward.w2.weight", "mlp.down_proj.weight", "ffn_down.weight"},
    {"feed_forward.w3.weight", "mlp.up_proj.weight", "ffn_up.weight"}};
constexpr TensorNames kLlamaToken[] = {
    {"tok_embeddings.weight", "model.embed_tokens.weight", "token_embd.weight"},
    {"norm.weight", "model.norm.weight", "output_norm.weight"},
    {"output.weight", "lm_head.weight", "output.weight"},
    // Llama 3.1's RoPE frequency factors: read by the GGUF config (rope_freq_factors), whole.
    {"rope_freqs.weight", nullptr, "rope_freqs.weight"}};
constexpr TensorTable kLlamaTensors{
    {"layers.", "model.layers.", "blk."}, kLlamaLayer, kLlamaToken, {}};

constexpr const char* kLlamaTypes[] = {"llama"};
constexpr const char* kLlamaClasses[] = {"LlamaForCausalLM"};
constexpr const char* kMistralTypes[] = {"mistral"};
constexpr const char* kMistralClasses[] = {"MistralForCausalLM"};
constexpr const char* kQwen2Types[] = {"qwen2"};
constexpr const char* kQwen2Classes[] = {"Qwen2ForCausalLM"};

// The first row with a Meta block name is that block's row for configs that name no
// architecture (architecture_of), so llama comes before the rows that share its block.
constexpr Architecture kArchitectures[] = {
    {"llama", true, true, kLlamaTypes, kLlamaClasses, Block::llama, Norm::rms, Rope::interleaved,
     Rope::half, Rope::interleaved, false, true, &kLlamaTensors},
    {"mistral", false, true, kMistralTypes, kMistralClasses, Block::llama, Norm::rms,
     Rope::interleaved, Rope::half, Rope::interleaved, false, true, &kLlamaTensors},
    // q, k and v biases, none on o; llama.cpp keeps Hugging Face's rows (NEOX).
    {"qwen2", false, true, kQwen2Types, kQwen2Classes, Block::llama, Norm::rms, Rope::interleaved,
     Rope::half, Rope::half, true, false, &kLlamaTensors},
    // The seed notebooks' blocks: attention alone, and torch's TransformerEncoderLayer (biases
    // and no RoPE unless the config says otherwise). Meta's keys only.
    {"attention",
     true,
     false,
     {},
     {},
     Block::attention,
     Norm::none,
     Rope::interleaved,
     Rope::interleaved,
     Rope::interleaved,
     false,
     true,
     &kLlamaTensors},
    {"encoder",
     true,
     false,
     {},
     {},
     Block::encoder,
     Norm::layer,
     Rope::none,
     Rope::none,
     Rope::none,
     true,
     true,
     &kLlamaTensors},
};

// The norm each block runs: a row claiming another would be run with its block's.
constexpr Norm block_norm(Block b) {
  return b == Block::llama ? Norm::rms : b == Block::encoder ? Norm::layer : Norm::none;
}

constexpr bool rows_consistent() {
  for (const Architecture& a : kArchitectures)
    if (a.norm != block_norm(a.block)) return false;
  return true;
}
static_assert(rows_consistent(), "an architecture's norm is its block's");

}  // namespace

std::span<const Architecture> architectures() {
  return kArchitectures;
}

const Architecture* find_architecture(std::string_view name) {
  for (const Architecture& a : kArchitectures)
    if (name == a.name) return &a;
  return nullptr;
}

const Architecture& architecture_of(const ModelArgs& args) {
  if (!args.arch.empty()) {
    if (const Architecture* a = find_architecture(args.arch)) return *a;
    throw InputError(args.source + ": architecture " + args.arch + " has no row");
  }
  for (const Architecture& a : kArchitectures)
    if (a.meta_block && a.block == args.block) return a;
  throw InputError(args.source + ": no architecture runs block " + block_name(args.block));
}

}  // namespace attn
