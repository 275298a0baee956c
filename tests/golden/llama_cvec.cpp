// llama.cpp's logits with a control vector applied, through libllama and libllama-common: the
// reference of tests/model/check_cvec.py (ctest model.cvector). The files are read by llama.cpp's
// own common_control_vector_load (so a file attn-cli cvector writes is checked readable by it) and
// applied with llama_set_adapter_cvec over the layer range, as common_init_from_params does.
// F32 KV cache, flash attention off, one sequence, the prompt in one ubatch.
//
//   llama_cvec MODEL OUT START END FILE:SCALE[,FILE:SCALE...] TOKEN...
//
// START END: the layer range (both inclusive; 0 0: llama.cpp's default, 1 to n_layer). OUT gets
// the logits of every position as float32 rows (n_vocab each); stdout "n_vocab N".
// Built by check_cvec.py with g++ against the cached build (not part of attn-cli's build).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common.h"
#include "llama.h"

static void quiet(ggml_log_level level, const char* text, void*) {
  if (level >= GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: %s MODEL OUT START END FILE:SCALE[,...] TOKEN...\n", argv[0]);
    return 2;
  }
  int start = std::atoi(argv[3]), end = std::atoi(argv[4]);
  std::vector<common_control_vector_load_info> files;
  std::string list = argv[5];
  for (size_t at = 0; at <= list.size();) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    const std::string item = list.substr(at, comma - at);
    const size_t colon = item.rfind(':');
    files.push_back({std::stof(item.substr(colon + 1)), item.substr(0, colon)});
    at = comma + 1;
  }
  std::vector<llama_token> tokens;
  for (int i = 6; i < argc; ++i) tokens.push_back(std::atoi(argv[i]));

  llama_log_set(quiet, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  mp.progress_callback = [](float, void*) { return true; };
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 1;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 256;
  cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(tokens.size());
  cp.n_seq_max = 1;
  cp.n_threads = cp.n_threads_batch = 1;
  cp.type_k = cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return 1;
  // common_init_from_params' defaults and call.
  if (start <= 0) start = 1;
  if (end <= 0) end = llama_model_n_layer(model);
  const common_control_vector_data cvec = common_control_vector_load(files);
  if (cvec.n_embd == -1) return 3;
  if (llama_set_adapter_cvec(ctx, cvec.data.data(), cvec.data.size(), cvec.n_embd, start, end))
    return 3;

  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  llama_batch batch = llama_batch_init(static_cast<int32_t>(tokens.size()), 0, 1);
  for (size_t i = 0; i < tokens.size(); ++i) {
    batch.token[i] = tokens[i];
    batch.pos[i] = static_cast<llama_pos>(i);
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = true;
  }
  batch.n_tokens = static_cast<int32_t>(tokens.size());
  if (llama_decode(ctx, batch) != 0) return 1;
  FILE* out = std::fopen(argv[2], "wb");
  if (!out) return 1;
  for (size_t i = 0; i < tokens.size(); ++i)
    std::fwrite(llama_get_logits_ith(ctx, static_cast<int32_t>(i)), sizeof(float),
                static_cast<size_t>(n_vocab), out);
  std::fclose(out);
  std::printf("n_vocab %d\n", n_vocab);
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
