// A Tokenizer over a LlamaVocab: the options of encode and decode in llama.cpp's terms.
#include "attn/error.hpp"
#include "attn/text/llama_vocab.hpp"
#include "attn/text/unicode.hpp"

namespace attn {

Tokenizer tokenizer_from_vocab(std::shared_ptr<const LlamaVocab> v, const std::string& source) {
  Tokenizer t;
  t.source = source;
  t.pieces = v->pieces;
  t.special.resize(v->pieces.size());
  for (std::size_t i = 0; i < v->pieces.size(); ++i)
    t.special[i] = (v->attrs[i] & (token_attr::control | token_attr::unknown)) != 0;
  t.bos = v->bos;
  if (v->eos >= 0) t.eos.push_back(v->eos);
  for (const std::int32_t id : v->eog)
    if (id != v->eos) t.eos.push_back(id);
  t.add_bos = v->add_bos;
  t.add_eos = v->add_eos;
  t.llama = std::move(v);
  return t;
}

std::vector<std::int32_t> encode_llama(const Tokenizer& t, std::string_view text,
                                       const EncodeOptions& o) {
  const LlamaVocab& v = *t.llama;
  std::vector<std::int32_t> ids = llama_tokenize(v, text, false, o.parse_special);
  if (o.bos.value_or(o.add_special_tokens && v.add_bos) && v.bos >= 0)
    ids.insert(ids.begin(), v.bos);
  if (o.add_special_tokens && v.add_eos && v.eos >= 0) ids.push_back(v.eos);
  return ids;
}

std::string decode_llama(const Tokenizer& t, const std::vector<std::int32_t>& ids,
                         const DecodeOptions& o) {
  const LlamaVocab& v = *t.llama;
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= t.vocab_size())
      throw InputError("token id " + std::to_string(ids[i]) + " at index " + std::to_string(i) +
                       " is outside the vocabulary [0, " + std::to_string(t.vocab_size()) +
                       ") of " + t.source);
  const bool clean = o.clean_up_spaces.value_or(v.kind == LlamaVocab::Kind::bpe && v.clean_spaces);
  return valid_utf8(llama_detokenize(v, ids, o.skip_special_tokens, !o.skip_special_tokens, clean));
}

std::string token_bytes_llama(const Tokenizer& t, std::int32_t id) {
  return llama_token_to_piece(*t.llama, id, true);
}

}  // namespace attn
