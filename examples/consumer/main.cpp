// Loads a config and its weights, runs a prefill of 7 positions and one decode step through the
// session the CLI runs, and prints the KV cache's shape after each as the notebooks do:
//   consumer configs/gqa.json weights/gqa.safetensors
#include <attn/engine/run.hpp>
#include <attn/version.hpp>

#include <cstdio>
#include <exception>

namespace {

void print_shape(const char* name, const attn::Shape& s) {
  std::printf("%s: [%lld, %lld, %lld, %lld]", name, (long long)s[0], (long long)s[1],
              (long long)s[2], (long long)s[3]);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s CONFIG.json WEIGHTS.safetensors\n", argv[0]);
    return 2;
  }
  try {
    attn::RunRequest request;
    request.args = attn::load_config(argv[1]);
    request.model.weights = argv[2];
    request.opts = {/*batch=*/1, /*prefill=*/7, /*steps=*/1};  // x drawn from request.model.seed
    attn::Run r = attn::open_run(attn::plan_run(request));
    attn::run(r, [](const attn::Event& e) {
      std::printf("attn %s: %s: kv cache shape: ", ATTN_VERSION,
                  e.kind == attn::Event::Kind::prefill ? "prefill" : "decode");
      print_shape("key", e.cache_k);
      print_shape(", value", e.cache_v);
      std::printf("\n");
    });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
