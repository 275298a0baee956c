// tokenizer_compare TOKENIZER.json CORPUS.jsonl REFERENCE.jsonl: attn-cli's tokenizer against the
// reference's ids and decoded text (reference.mjs, Hugging Face's tokenizers.js) on every corpus
// item. Prints the counts compared and the first differences; exit 1 on any difference.
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "attn/text/tokenizer.hpp"

namespace {

using json = nlohmann::json;

std::string base64(const std::string& in) {
  std::string out;
  int bits = 0, value = 0;
  for (const char c : in) {
    int v = c >= 'A' && c <= 'Z'   ? c - 'A'
            : c >= 'a' && c <= 'z' ? c - 'a' + 26
            : c >= '0' && c <= '9' ? c - '0' + 52
            : c == '+'             ? 62
            : c == '/'             ? 63
                                   : -1;
    if (v < 0) continue;
    value = (value << 6) | v;
    if ((bits += 6) >= 8) {
      bits -= 8;
      out += char((value >> bits) & 0xFF);
    }
  }
  return out;
}

struct Counts {
  std::size_t strings = 0, bytes = 0, ids = 0, differences = 0;
  double encode_seconds = 0;
};

void differ(Counts& c, const std::string& name, const std::string& what, const json& got,
            const json& want) {
  if (++c.differences <= 10)
    std::cerr << "DIFF " << name << " " << what << "\n  got:  "
              << got.dump(-1, ' ', true, json::error_handler_t::replace).substr(0, 400)
              << "\n  want: "
              << want.dump(-1, ' ', true, json::error_handler_t::replace).substr(0, 400) << "\n";
}

void compare_item(const attn::Tokenizer& t, const json& item, const json& ref, Counts& c) {
  const std::string name = item["name"], text = base64(item["b64"]);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::int32_t> ids = attn::encode(t, text);
  c.encode_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::vector<std::int32_t> plain = attn::encode(t, text, {false, {}});
  ++c.strings;
  c.bytes += text.size();
  c.ids += ids.size();
  if (json(ids) != ref["ids"]) differ(c, name, "ids", ids, ref["ids"]);
  if (json(plain) != ref["no_special_ids"])
    differ(c, name, "no_special_ids", plain, ref["no_special_ids"]);
  if (ref.contains("decode_error")) return;  // tokenizers.js cannot decode [] (the empty string)
  const std::vector<std::int32_t> want = ref["ids"].get<std::vector<std::int32_t>>();
  const std::string decoded = attn::decode(t, want), raw = attn::decode(t, want, {false, false}),
                    skip = attn::decode(t, want, {true, false});
  if (decoded != ref["decoded"].get<std::string>())
    differ(c, name, "decoded", decoded, ref["decoded"]);
  if (raw != ref["decoded_raw"].get<std::string>())
    differ(c, name, "decoded_raw", raw, ref["decoded_raw"]);
  if (skip != ref["decoded_skip"].get<std::string>())
    differ(c, name, "decoded_skip", skip, ref["decoded_skip"]);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: tokenizer_compare TOKENIZER.json CORPUS.jsonl REFERENCE.jsonl\n";
    return 2;
  }
  try {
    const attn::Tokenizer t = attn::load_tokenizer(argv[1]);
    std::ifstream corpus(argv[2]), reference(argv[3]);
    Counts c;
    for (std::string a, b; std::getline(corpus, a) && std::getline(reference, b);) {
      const json item = json::parse(a), ref = json::parse(b);
      if (item["name"] != ref["name"]) {
        std::cerr << "corpus and reference are out of step at " << item["name"] << "\n";
        return 1;
      }
      compare_item(t, item, ref, c);
    }
    std::printf(
        "%s: %zu strings, %zu bytes, %zu ids compared (and decoded 3 ways): %zu differences; "
        "encoding %.1f MB/s\n",
        argv[1], c.strings, c.bytes, c.ids, c.differences,
        double(c.bytes) / c.encode_seconds / 1e6);
    return c.strings > 0 && c.differences == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "tokenizer_compare: " << e.what() << "\n";
    return 1;
  }
}
