// llama.cpp's own tokenizer on a corpus: built against the llama.cpp that bench/llama_cpp.sh
// builds (its include/ and libllama.so) by make_llama_tokens.py, never by CMake. For one GGUF
// vocabulary and a corpus file (each item: its byte count on a line, then its bytes), prints one
// JSON line per item:
//   {"ids": llama_tokenize(text, add_special false, parse_special false)   (test-tokenizer-0)
//    "ids_special": llama_tokenize(text, add_special true, parse_special true)
//    "text": llama_detokenize(ids_special, remove_special false, unparse_special true)
//    "text_skip": llama_detokenize(ids_special, remove_special true, unparse_special false)}
// (texts in hex), then one line {"pieces": FNV-1a 64 of every token's llama_token_to_piece
// (special true), "pieces_plain": the same with special false, "n_tokens": ...}.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

namespace {

std::string hex(const std::string& s) {
  std::string out;
  char b[3];
  for (const unsigned char c : s) {
    std::snprintf(b, sizeof b, "%02x", c);
    out += b;
  }
  return out;
}

std::vector<llama_token> tokenize(const llama_vocab* v, const std::string& text, bool add,
                                  bool parse) {
  std::vector<llama_token> ids(text.size() + 8);
  int n = llama_tokenize(v, text.data(), int(text.size()), ids.data(), int(ids.size()), add, parse);
  if (n < 0) {
    ids.resize(std::size_t(-n));
    n = llama_tokenize(v, text.data(), int(text.size()), ids.data(), int(ids.size()), add, parse);
  }
  ids.resize(std::size_t(n));
  return ids;
}

std::string detokenize(const llama_vocab* v, const std::vector<llama_token>& ids, bool remove,
                       bool unparse) {
  std::string text(ids.size() * 16 + 16, '\0');
  int n = llama_detokenize(v, ids.data(), int(ids.size()), text.data(), int(text.size()), remove,
                           unparse);
  if (n < 0) {
    text.resize(std::size_t(-n));
    n = llama_detokenize(v, ids.data(), int(ids.size()), text.data(), int(text.size()), remove,
                         unparse);
  }
  text.resize(std::size_t(n));
  return text;
}

std::string piece(const llama_vocab* v, llama_token id, bool special) {
  std::string s(64, '\0');
  int n = llama_token_to_piece(v, id, s.data(), int(s.size()), 0, special);
  if (n < 0) {
    s.resize(std::size_t(-n));
    n = llama_token_to_piece(v, id, s.data(), int(s.size()), 0, special);
  }
  s.resize(std::size_t(n));
  return s;
}

void fnv(std::uint64_t& h, const std::string& s) {
  const auto mix = [&](unsigned char c) {
    h ^= c;
    h *= 1099511628211ull;
  };
  const std::uint32_t n = std::uint32_t(s.size());
  for (int k = 0; k < 4; ++k) mix((unsigned char)(n >> (8 * k)));
  for (const unsigned char c : s) mix(c);
}

void print_ids(const std::vector<llama_token>& ids) {
  std::printf("[");
  for (std::size_t i = 0; i < ids.size(); ++i) std::printf(i ? ",%d" : "%d", ids[i]);
  std::printf("]");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s VOCAB.gguf CORPUS\n", argv[0]);
    return 2;
  }
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 1;
  const llama_vocab* v = llama_model_get_vocab(model);
  std::ifstream in(argv[2], std::ios::binary);
  std::string line;
  while (std::getline(in, line)) {
    std::string text(std::stoul(line), '\0');
    in.read(text.data(), std::streamsize(text.size()));
    const auto ids = tokenize(v, text, false, false);
    const auto ids_special = tokenize(v, text, true, true);
    std::printf("{\"ids\":");
    print_ids(ids);
    std::printf(",\"ids_special\":");
    print_ids(ids_special);
    std::printf(",\"text\":\"%s\",\"text_skip\":\"%s\"}\n",
                hex(detokenize(v, ids_special, false, true)).c_str(),
                hex(detokenize(v, ids_special, true, false)).c_str());
  }
  std::uint64_t h = 14695981039346656037ull, h_plain = h;
  const int n = llama_vocab_n_tokens(v);
  for (int id = 0; id < n; ++id) {
    fnv(h, piece(v, id, true));
    fnv(h_plain, piece(v, id, false));
  }
  std::printf("{\"pieces\":\"%016" PRIx64 "\",\"pieces_plain\":\"%016" PRIx64
              "\",\"n_tokens\":%d}\n",
              h, h_plain, n);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
