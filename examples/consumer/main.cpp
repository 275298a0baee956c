// Loads a config and its weights, runs a prefill of 7 positions and one decode step, and prints
// the KV cache's shape as the notebooks do: consumer configs/gqa.json weights/gqa.safetensors
#include <attn/model/model.hpp>
#include <attn/version.hpp>

#include <cstdio>
#include <exception>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s CONFIG.json WEIGHTS.safetensors\n", argv[0]);
    return 2;
  }
  try {
    const attn::ModelArgs args = attn::load_config(argv[1]);
    const std::int64_t prefill = 7;
    attn::Transformer m =
        attn::make_transformer(args, attn::load_weights(args, argv[2]), /*max_rows=*/prefill);
    std::vector<float> x(std::size_t((prefill + 1) * args.dim), 0.5f);  // [1, 8, dim]
    std::vector<float> out(x.size());
    attn::forward(m, x.data(), 1, prefill, 0, out.data());
    attn::forward(m, x.data() + prefill * args.dim, 1, 1, prefill, out.data());
    const long long filled = prefill + 1, h = args.n_kv_heads, d = args.head_dim();
    std::printf(
        "attn %s: kv cache shape: key: [1, %lld, %lld, %lld], value: [1, %lld, %lld, %lld]\n",
        ATTN_VERSION, h, filled, d, h, filled, d);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
