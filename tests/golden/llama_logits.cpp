// llama.cpp's logits on a GGUF file, through libllama: the second reference of tests/model/check_archs.py.
// F32 KV cache, flash attention off, one sequence, the prompt in one ubatch.
//
//   llama_logits MODEL N_CTX N_PROMPT GREEDY OUT TOKEN...
//
// Prefills the first N_PROMPT tokens in one batch (logits of every position), decodes the remaining
// given tokens one at a time (teacher forcing: the same chain as the reference's), then GREEDY steps
// of its own argmax. OUT receives the logits as float32 rows (one per position, n_vocab each);
// stdout gets "n_vocab N" and "greedy ID..." lines.
// Built by check_archs.py with g++ against the cached build (it is not part of attn-cli's build).
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "llama.h"

static void quiet(ggml_log_level level, const char* text, void*) {
  if (level >= GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

static bool decode(llama_context* ctx, std::vector<llama_token> tokens, llama_pos pos0, bool all_logits) {
  llama_batch batch = llama_batch_init(static_cast<int32_t>(tokens.size()), 0, 1);
  for (size_t i = 0; i < tokens.size(); ++i) {
    batch.token[i] = tokens[i];
    batch.pos[i] = pos0 + static_cast<llama_pos>(i);
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = all_logits || i + 1 == tokens.size();
  }
  batch.n_tokens = static_cast<int32_t>(tokens.size());
  const bool ok = llama_decode(ctx, batch) == 0;
  llama_batch_free(batch);
  return ok;
}

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: %s MODEL N_CTX N_PROMPT GREEDY OUT TOKEN...\n", argv[0]);
    return 2;
  }
  const int n_ctx = std::atoi(argv[2]), n_prompt = std::atoi(argv[3]), greedy = std::atoi(argv[4]);
  std::vector<llama_token> tokens;
  for (int i = 6; i < argc; ++i) tokens.push_back(std::atoi(argv[i]));
  if (n_prompt < 1 || n_prompt > static_cast<int>(tokens.size())) return 2;

  llama_log_set(quiet, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  mp.progress_callback = [](float, void*) { return true; };  // no loading dots on stderr
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 1;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(n_ctx);
  cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(n_prompt);  // the prompt in one ubatch
  cp.n_seq_max = 1;
  cp.n_threads = cp.n_threads_batch = 1;  // tiny models: a second thread only spins
  cp.type_k = cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.swa_full = true;  // keep every key: the mask, not eviction, applies the window
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return 1;
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

  FILE* out = std::fopen(argv[5], "wb");
  if (!out) return 1;
  auto emit = [&](int32_t i) {
    const float* logits = llama_get_logits_ith(ctx, i);
    std::fwrite(logits, sizeof(float), static_cast<size_t>(n_vocab), out);
    int best = 0;
    for (int v = 1; v < n_vocab; ++v)
      if (logits[v] > logits[best]) best = v;
    return best;
  };
  if (!decode(ctx, {tokens.begin(), tokens.begin() + n_prompt}, 0, true)) return 1;
  int next = 0;
  for (int i = 0; i < n_prompt; ++i) next = emit(i);
  llama_pos pos = n_prompt;
  for (size_t i = static_cast<size_t>(n_prompt); i < tokens.size(); ++i, ++pos) {
    if (!decode(ctx, {tokens[i]}, pos, false)) return 1;
    next = emit(-1);
  }
  std::printf("n_vocab %d\ngreedy", n_vocab);
  for (int s = 0; s < greedy; ++s, ++pos) {
    std::printf(" %d", next);
    if (!decode(ctx, {next}, pos, false)) return 1;
    next = emit(-1);
  }
  std::printf("\n");
  std::fclose(out);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
