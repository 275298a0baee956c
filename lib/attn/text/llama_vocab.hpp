#pragma once
// A vocabulary as llama.cpp holds it: the pieces of a GGUF file's tokenizer.ggml.* keys (or of
// llama2.c's tokenizer.bin) with their scores and types, one of two models (SentencePiece merged
// by scores, or byte-level BPE with ranked merges after a pre-tokenizer's regular expressions),
// and llama.cpp's own rules around them (llama-vocab.cpp): which typed tokens are matched in the
// text first, the space prefix, BOS/EOS, and how ids become text again. A Tokenizer holding one
// (Tokenizer::llama) encodes and decodes through it instead of tokenizer.json's pipeline.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "attn/text/bpe.hpp"
#include "attn/text/spm.hpp"
#include "attn/text/tokenizer.hpp"

namespace attn {

class AddedTokenIndex;
class Regex;

// llama.cpp's llama_token_attr bits: a token's type (tokenizer.ggml.token_type 1..6 maps to
// normal, unknown, control, user_defined, unused, byte) and what llama.cpp adds to it.
namespace token_attr {
inline constexpr std::uint16_t unknown = 1 << 0, unused = 1 << 1, normal = 1 << 2, control = 1 << 3,
                               user_defined = 1 << 4, byte = 1 << 5, lstrip = 1 << 7,
                               rstrip = 1 << 8;
}

struct LlamaVocab {
  enum class Kind {
    spm,      // tokenizer.ggml.model "llama": " " -> "▁", merged by scores
    bpe,      // "gpt2": regex pre-tokenizer, bytes as printable characters, ranked merges
    llama2c,  // tokenizer.bin: scored pieces with real spaces, run.c's encode and decode
  };
  Kind kind = Kind::spm;
  std::vector<std::string> pieces;   // [vocab_size] id -> the piece's text
  std::vector<std::uint16_t> attrs;  // [vocab_size] token_attr bits
  Spm spm;                           // spm and llama2c: every piece, its score, byte tokens
  Bpe bpe;                           // bpe: pieces and merges
  std::vector<std::shared_ptr<const Regex>> splits;  // bpe: applied in turn, matches isolated
  std::string
      splits_where;  // the file and key naming them, escaped: for the regex budget's message
  // Typed tokens matched in the text before the model runs (control, user-defined, unknown),
  // longest first: control and unknown ones only when asked to (parse_special).
  std::vector<std::int32_t> specials;
  // Their matcher with parse_special (all of them) and without (the user-defined ones, in
  // `user_specials`), made by finish_llama_vocab; a match's index is into the list.
  std::vector<std::int32_t> user_specials;
  std::shared_ptr<const AddedTokenIndex> special_index, user_index;
  std::int32_t bos = -1, eos = -1, unk = -1;
  std::vector<std::int32_t> eog;  // the ids that end a generation (EOS, EOT, <|im_end|>, ...)
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = false;  // spm: " " before the text and after each matched token
  bool clean_spaces = false;      // bpe: detokenize drops " " before . , ! ? and such
};

// llama_tokenize(text, add_special, parse_special).
std::vector<std::int32_t> llama_tokenize(const LlamaVocab& v, std::string_view text,
                                         bool add_special, bool parse_special);

// llama_detokenize(ids, remove_special, unparse_special) with the vocabulary's clean-up of
// spaces or not; ids must be in range. The bytes as llama.cpp gives them (not made UTF-8).
std::string llama_detokenize(const LlamaVocab& v, const std::vector<std::int32_t>& ids,
                             bool remove_special, bool unparse_special, bool clean_spaces);

// llama_token_to_piece(id, lstrip 0, special): the token's bytes.
std::string llama_token_to_piece(const LlamaVocab& v, std::int32_t id, bool special);

// After pieces, attrs and scores are read (merges after it): the lookups, the special-token
// list, the EOG ids and the attributes llama.cpp sets by name (`model_name`: general.name).
void finish_llama_vocab(LlamaVocab& v, const std::string& model_name);

// The regular expressions llama.cpp's tokenizer.ggml.pre value selects, with the flags it sets;
// false for a value it does not know.
bool set_pre_tokenizer(LlamaVocab& v, std::string_view pre, bool& ignore_merges);

// A Tokenizer over `v` (its pieces, BOS, EOS and EOG ids); `source` names the file.
Tokenizer tokenizer_from_vocab(std::shared_ptr<const LlamaVocab> v, const std::string& source);

// encode, decode and token_bytes for a Tokenizer with a LlamaVocab.
std::vector<std::int32_t> encode_llama(const Tokenizer& t, std::string_view text,
                                       const EncodeOptions& o);
std::string decode_llama(const Tokenizer& t, const std::vector<std::int32_t>& ids,
                         const DecodeOptions& o);
std::string token_bytes_llama(const Tokenizer& t, std::int32_t id);

// A GGUF file's tokenizer (its tokenizer.ggml.* keys). Throws InputError naming the file and
// the key.
struct GgufFile;
Tokenizer tokenizer_from_gguf(const GgufFile& f);

// llama2.c's tokenizer.bin. Throws InputError naming the file and the token.
Tokenizer parse_llama2c_tokenizer(std::string_view bytes, const std::string& source);

}  // namespace attn
