#pragma once
// A tokenizer read from Hugging Face's tokenizer.json (with tokenizer_config.json and
// generation_config.json beside it): the BPE families Llama-style models ship, SentencePiece-
// style (Llama 2, Mistral, TinyLlama: "▁" for spaces, <0xNN> byte fallback) and byte-level
// (Llama 3, Qwen2, GPT-2: a regex pre-tokenizer, bytes as printable characters). The pipeline
// is the file's own: added tokens split out first, then the normalizer, the pre-tokenizer, the
// BPE model and the post-processor's template; decoding runs the file's decoder.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attn/text/bpe.hpp"

namespace attn {

class AddedTokenIndex;
class Regex;
struct LlamaVocab;

struct AddedToken {
  std::string content;
  std::int32_t id = 0;
  bool special = false, lstrip = false, rstrip = false, single_word = false;
};

// One step of the normalizer, pre-tokenizer or decoder, as the file declares it.
struct TextStep {
  enum class Kind {
    prepend,
    replace,  // normalizers (replace is a decoder too)
    split,
    byte_level,
    metaspace,  // pre-tokenizers (byte_level, metaspace: decoders)
    byte_fallback,
    fuse,
    strip  // decoders
  };
  enum class Behavior { isolated, removed, merged_with_previous, merged_with_next, contiguous };
  enum class Scheme { always, first, never };  // Metaspace's prepend_scheme
  Kind kind;
  std::string text, content;           // prepend/replace: pattern -> content; metaspace: "▁"
  std::shared_ptr<const Regex> regex;  // split (a String pattern is compiled escaped)
  Behavior behavior = Behavior::isolated;
  bool invert = false;
  bool add_prefix_space = false, use_regex = true;  // byte_level
  Scheme scheme = Scheme::always;                   // metaspace
  bool split_words = true;                          // metaspace
  std::int64_t start = 0, stop = 0;                 // strip
  std::string where;  // "<file>: key 'pre_tokenizer.pretokenizers[0]'", escaped, for messages
};

struct Tokenizer {
  std::string source;  // tokenizer.json's path, escaped, for messages
  Bpe bpe;
  std::vector<std::string> pieces;  // [vocab_size]: id -> the vocabulary's string ("Ġworld")
  std::vector<AddedToken> added;    // longest first: how the text is split
  std::shared_ptr<const AddedTokenIndex> added_index;  // of `added`, made by the loader
  std::vector<bool> special;                           // [vocab_size]: a special added token
  std::vector<TextStep> normalizer, pre_tokenizer, decoder;
  std::vector<std::int32_t> prefix, suffix;  // the post-processor's ids around one sequence
  std::int32_t bos = -1;                     // tokenizer_config's bos_token, or -1
  std::vector<std::int32_t> eos;             // generation_config's eos_token_id(s), or eos_token
  bool clean_up_spaces = false;              // tokenizer_config's clean_up_tokenization_spaces
  // tokenizer_config's add_bos_token / add_eos_token where it says: BOS first and EOS last, or
  // neither, whatever the template does (as transformers' LlamaTokenizerFast rebuilds it).
  std::optional<bool> add_bos, add_eos;
  // SentencePiece-style files have no pre-tokenizer: a whole line is one BPE word. When no piece
  // of the vocabulary has this space mark after another character, no merge can cross into a run
  // of them, and the word is cut before each run with the same result (found at load; or empty).
  std::string word_start;
  // A GGUF file's or llama2.c's tokenizer.bin vocabulary: encode, decode and token_bytes follow
  // llama.cpp's rules through it (text/llama_vocab.hpp) instead of the pipeline above.
  std::shared_ptr<const LlamaVocab> llama;
  // The chat templates the file carries (Jinja sources, compiled when used: text/chat_template),
  // the default first as "default": a GGUF file's tokenizer.chat_template, tokenizer_config.json's
  // chat_template (a string, or a list of {name, template}).
  std::vector<std::pair<std::string, std::string>> chat_templates;

  std::int64_t vocab_size() const { return std::int64_t(pieces.size()); }
};

// The tokenizer of a file, told by its content: tokenizer.json, a GGUF file's tokenizer.ggml.*
// metadata, or llama2.c's tokenizer.bin. Throws InputError naming the file and what it is when
// it is another kind of file, or the key/field it cannot read or does not support.
Tokenizer load_tokenizer(const std::filesystem::path& path);

// Reads tokenizer.json and, if they exist beside it, tokenizer_config.json and
// generation_config.json. Throws InputError naming the file and the key for anything it cannot
// read or does not support.
Tokenizer load_tokenizer_json(const std::filesystem::path& path);

// tokenizer.json's text alone (no files beside it); `source` names it in messages.
Tokenizer parse_tokenizer(const std::string& json_text, const std::string& source);

struct EncodeOptions {
  bool add_special_tokens = true;  // the post-processor's template
  std::optional<bool> bos;         // true: BOS first even if the template has none; false: none
  // GGUF and tokenizer.bin vocabularies: their control tokens' text in the input is that token
  // (llama.cpp's parse_special); user-defined tokens are matched either way. tokenizer.json
  // matches its added tokens always.
  bool parse_special = true;
};

// The ids of `text` (bytes that are not UTF-8 replaced by U+FFFD first, as a browser would).
std::vector<std::int32_t> encode(const Tokenizer& t, std::string_view text,
                                 const EncodeOptions& o = {});

struct DecodeOptions {
  bool skip_special_tokens = false;
  std::optional<bool> clean_up_spaces;  // default: the file's clean_up_tokenization_spaces
};

// The text of `ids` (valid UTF-8). Throws InputError for an id outside the vocabulary.
std::string decode(const Tokenizer& t, const std::vector<std::int32_t>& ids,
                   const DecodeOptions& o = {});

// One token's text as its bytes, not made valid UTF-8: a byte token of a character split over
// several tokens shows its own byte (for labels, escaped by the caller), not U+FFFD. Throws
// InputError for an id outside the vocabulary.
std::string token_bytes(const Tokenizer& t, std::int32_t id);

}  // namespace attn
