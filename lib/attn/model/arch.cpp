#include "attn/model/arch.hpp"

#include <array>

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

// A row's layer tensors: llama's and its own.
template <std::size_t N, std::size_t M>
constexpr std::array<TensorNames, N + M> join(const TensorNames (&a)[N],
                                              const TensorNames (&b)[M]) {
  std::array<TensorNames, N + M> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = a[i];
  for (std::size_t i = 0; i < M; ++i) out[N + i] = b[i];
  return out;
}

// Each head's RMSNorm of q and k ([head_dim] weights).
constexpr TensorNames kQkNorms[] = {
    {"attention.q_norm.weight", "self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"attention.k_norm.weight", "self_attn.k_norm.weight", "attn_k_norm.weight"}};
constexpr auto kQwen3Layer = join(kLlamaLayer, kQkNorms);

// OLMo 2: llama's attention and FFN, q/k norms over all heads, norms after each (no pre-norms).
constexpr TensorNames kOlmo2Layer[] = {
    {"attention.wq.weight", "self_attn.q_proj.weight", "attn_q.weight"},
    {"attention.wk.weight", "self_attn.k_proj.weight", "attn_k.weight"},
    {"attention.wv.weight", "self_attn.v_proj.weight", "attn_v.weight"},
    {"attention.wo.weight", "self_attn.o_proj.weight", "attn_output.weight"},
    {"attention.q_norm.weight", "self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"attention.k_norm.weight", "self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"post_attention_norm.weight", "post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"post_ffn_norm.weight", "post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
    {"feed_forward.w1.weight", "mlp.gate_proj.weight", "ffn_gate.weight"},
    {"feed_forward.w2.weight", "mlp.down_proj.weight", "ffn_down.weight"},
    {"feed_forward.w3.weight", "mlp.up_proj.weight", "ffn_up.weight"}};
constexpr TensorTable kOlmo2Tensors{
    {"layers.", "model.layers.", "blk."}, kOlmo2Layer, kLlamaToken, {}};
// Gemma 2: llama's attention and FFN with norms before and after each; Hugging Face names its
// post-attention norm as llama's FFN norm is named there. Gemma 3 adds each head's q/k norms.
constexpr TensorNames kGemma2Layer[] = {
    {"attention.wq.weight", "self_attn.q_proj.weight", "attn_q.weight"},
    {"attention.wk.weight", "self_attn.k_proj.weight", "attn_k.weight"},
    {"attention.wv.weight", "self_attn.v_proj.weight", "attn_v.weight"},
    {"attention.wo.weight", "self_attn.o_proj.weight", "attn_output.weight"},
    {"attention_norm.weight", "input_layernorm.weight", "attn_norm.weight"},
    {"post_attention_norm.weight", "post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_ffn_norm.weight", "post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
    {"feed_forward.w1.weight", "mlp.gate_proj.weight", "ffn_gate.weight"},
    {"feed_forward.w2.weight", "mlp.down_proj.weight", "ffn_down.weight"},
    {"feed_forward.w3.weight", "mlp.up_proj.weight", "ffn_up.weight"}};
constexpr auto kGemma3Layer = join(kGemma2Layer, kQkNorms);
constexpr TensorTable kGemma2Tensors{
    {"layers.", "model.layers.", "blk."}, kGemma2Layer, kLlamaToken, {}};
constexpr TensorTable kGemma3Tensors{
    {"layers.", "model.layers.", "blk."}, kGemma3Layer, kLlamaToken, {}};
constexpr TensorTable kQwen3Tensors{
    {"layers.", "model.layers.", "blk."}, kQwen3Layer, kLlamaToken, {}};

// Phi-3: llama's block with q, k and v fused by rows into attn_qkv (q, k, v) and the FFN's gate
// and up into ffn_up (gate then up); the parts have no names of their own in its files. The
// LongRoPE factors are read by the GGUF config (rope_long_factors), whole.
constexpr TensorNames kPhi3Layer[] = {
    {"attention.wq.weight", nullptr, nullptr},
    {"attention.wk.weight", nullptr, nullptr},
    {"attention.wv.weight", nullptr, nullptr},
    {"attention.wo.weight", "self_attn.o_proj.weight", "attn_output.weight"},
    {"attention_norm.weight", "input_layernorm.weight", "attn_norm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight", "ffn_norm.weight"},
    {"feed_forward.w1.weight", nullptr, nullptr},
    {"feed_forward.w2.weight", "mlp.down_proj.weight", "ffn_down.weight"},
    {"feed_forward.w3.weight", nullptr, nullptr}};
constexpr TensorNames kPhi3Token[] = {
    {"tok_embeddings.weight", "model.embed_tokens.weight", "token_embd.weight"},
    {"norm.weight", "model.norm.weight", "output_norm.weight"},
    {"output.weight", "lm_head.weight", "output.weight"},
    {"rope_factors_long.weight", nullptr, "rope_factors_long.weight"},
    {"rope_factors_short.weight", nullptr, "rope_factors_short.weight"}};
constexpr const char* kPhi3Qkv[] = {"attention.wq.weight", "attention.wk.weight",
                                    "attention.wv.weight"};
constexpr const char* kPhi3GateUp[] = {"feed_forward.w1.weight", "feed_forward.w3.weight"};
constexpr FusedTensor kPhi3Fused[] = {
    {{"attention.wqkv.weight", "self_attn.qkv_proj.weight", "attn_qkv.weight"}, kPhi3Qkv},
    {{"feed_forward.w13.weight", "mlp.gate_up_proj.weight", "ffn_up.weight"}, kPhi3GateUp}};
constexpr TensorTable kPhi3Tensors{
    {"layers.", "model.layers.", "blk."}, kPhi3Layer, kPhi3Token, kPhi3Fused};

constexpr const char* kLlamaTypes[] = {"llama"};
constexpr const char* kLlamaClasses[] = {"LlamaForCausalLM"};
constexpr const char* kMistralTypes[] = {"mistral"};
constexpr const char* kMistralClasses[] = {"MistralForCausalLM"};
constexpr const char* kQwen2Types[] = {"qwen2"};
constexpr const char* kQwen2Classes[] = {"Qwen2ForCausalLM"};
constexpr const char* kGraniteTypes[] = {"granite"};
constexpr const char* kGraniteClasses[] = {"GraniteForCausalLM"};
constexpr const char* kOlmo2Types[] = {"olmo2"};
constexpr const char* kOlmo2Classes[] = {"Olmo2ForCausalLM"};
constexpr const char* kGemma2Types[] = {"gemma2"};
constexpr const char* kGemma2Classes[] = {"Gemma2ForCausalLM"};
constexpr const char* kGemma3Types[] = {"gemma3_text"};
constexpr const char* kGemma3Classes[] = {"Gemma3ForCausalLM"};
constexpr const char* kQwen3Types[] = {"qwen3"};
constexpr const char* kQwen3Classes[] = {"Qwen3ForCausalLM"};
constexpr const char* kPhi3Types[] = {"phi3"};
constexpr const char* kPhi3Classes[] = {"Phi3ForCausalLM"};

// The first row with a Meta block name is that block's row for configs that name no
// architecture (architecture_of), so llama comes before the rows that share its block.
constexpr Architecture kArchitectures[] = {
    {"llama", true, true, kLlamaTypes, kLlamaClasses, Block::llama, Norm::rms, Rope::interleaved,
     Rope::half, Rope::interleaved, false, true, &kLlamaTensors, false, QkNorm::none, true, false},
    {"mistral", false, true, kMistralTypes, kMistralClasses, Block::llama, Norm::rms,
     Rope::interleaved, Rope::half, Rope::interleaved, false, true, &kLlamaTensors, false,
     QkNorm::none, true, false},
    // q, k and v biases, none on o; llama.cpp keeps Hugging Face's rows (NEOX).
    {"qwen2", false, true, kQwen2Types, kQwen2Classes, Block::llama, Norm::rms, Rope::interleaved,
     Rope::half, Rope::half, true, false, &kLlamaTensors, false, QkNorm::none, true, false},
    // Each head's q and k RMSNormed before RoPE; no biases; halves as Hugging Face's.
    {"qwen3", false, true, kQwen3Types, kQwen3Classes, Block::llama, Norm::rms, Rope::interleaved,
     Rope::half, Rope::half, false, false, &kQwen3Tensors, false, QkNorm::per_head, true, false},
    // Norms after attention and FFN only, q and k RMSNormed whole; halves (llama.cpp's NEOX).
    {"olmo2", false, true, kOlmo2Types, kOlmo2Classes, Block::llama, Norm::rms, Rope::interleaved,
     Rope::half, Rope::half, false, false, &kOlmo2Tensors, true, QkNorm::whole, false, false},
    // Norms before and after attention and FFN, GeGLU, soft-capping, sliding layers; halves.
    {"gemma2", false, true, kGemma2Types, kGemma2Classes, Block::llama, Norm::rms,
     Rope::interleaved, Rope::half, Rope::half, false, false, &kGemma2Tensors, true, QkNorm::none,
     true, true},
    // Gemma 2's block with each head's q and k RMSNormed before RoPE, no attention soft-cap.
    {"gemma3", false, true, kGemma3Types, kGemma3Classes, Block::llama, Norm::rms,
     Rope::interleaved, Rope::half, Rope::half, false, false, &kGemma3Tensors, true,
     QkNorm::per_head, true, true},
    // Fused q/k/v and gate/up, LongRoPE factors, partial rotary; halves (llama.cpp's NEOX).
    {"phi3", false, true, kPhi3Types, kPhi3Classes, Block::llama, Norm::rms, Rope::interleaved,
     Rope::half, Rope::half, false, false, &kPhi3Tensors, false, QkNorm::none, true, false},
    // llama's block with four multipliers (ModelArgs' embedding_scale, ...); llama.cpp's
    // converter permutes q/k rows to pairs as for llama.
    {"granite", false, true, kGraniteTypes, kGraniteClasses, Block::llama, Norm::rms,
     Rope::interleaved, Rope::half, Rope::interleaved, false, false, &kLlamaTensors, false,
     QkNorm::none, true, false},
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
     &kLlamaTensors,
     false,
     QkNorm::none,
     true,
     false},
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
     &kLlamaTensors,
     false,
     QkNorm::none,
     true,
     false},
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
