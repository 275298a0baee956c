// The tokenizer's Python surface: encode and decode with each argument converted by convert.cpp,
// and the names transformers and TransformerLens give the same operations.
#include "tokens.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <optional>

#include "attn/text/llama_vocab.hpp"
#include "convert.hpp"

namespace attn_py {

std::vector<std::int32_t> encode_text(const attn::Tokenizer& t, py::handle text,
                                      py::handle add_special_tokens, py::handle bos) {
  attn::EncodeOptions o;
  o.add_special_tokens = bool_arg(add_special_tokens, "add_special_tokens");
  o.bos = optional_bool_arg(bos, "bos");
  return attn::encode(t, text_arg(text, "text"), o);
}

py::object call_tokenizer(const attn::Tokenizer& t, py::handle text,
                          py::handle add_special_tokens) {
  if (PyUnicode_Check(text.ptr()))
    return py::cast(encode_text(t, text, add_special_tokens, py::none()));
  if (!py::isinstance<py::list>(text) && !py::isinstance<py::tuple>(text))
    throw py::type_error("text: expected a str or a list of them, got " + type_name(text));
  py::list out;
  for (py::handle item : text)
    out.append(py::cast(encode_text(t, item, add_special_tokens, py::none())));
  return out;
}

std::string decode_ids(const attn::Tokenizer& t, py::handle ids, py::handle skip_special_tokens,
                       py::handle clean_up, const char* name) {
  std::vector<std::int32_t> v = ids_arg(ids, name, t.vocab_size());
  const bool skip = bool_arg(skip_special_tokens, "skip_special_tokens");
  const std::optional<bool> clean = optional_bool_arg(clean_up, "clean_up_tokenization_spaces");
  // transformers drops the special tokens before it decodes, so that a SentencePiece
  // vocabulary's first word loses its prefix space after a skipped BOS ("Hello", where
  // llama.cpp's detokenize keeps " Hello"). tokenizer.json files decode through their own
  // decoder already; llama2.c's tokenizer.bin keeps run.c's rule (no space after a BOS).
  if (skip && t.llama && t.llama->kind == attn::LlamaVocab::Kind::spm)
    std::erase_if(v, [&](std::int32_t id) { return t.special[std::size_t(id)]; });
  return attn::decode(t, v, {skip, clean});
}

py::object ids_to_tokens(const attn::Tokenizer& t, py::handle ids) {
  if (one_id(ids)) return py::str(t.pieces[std::size_t(id_arg(ids, "ids", t.vocab_size()))]);
  py::list out;
  for (std::int32_t id : ids_arg(ids, "ids", t.vocab_size()))
    out.append(py::str(t.pieces[std::size_t(id)]));
  return out;
}

py::object to_tokens(const attn::Tokenizer& t, py::handle input, py::handle prepend_bos) {
  attn::EncodeOptions o;  // TransformerLens: the text alone, then BOS if asked for
  o.add_special_tokens = false;
  o.bos = bool_arg(prepend_bos, "prepend_bos");
  std::vector<std::vector<std::int32_t>> rows;
  if (PyUnicode_Check(input.ptr())) {
    rows.push_back(attn::encode(t, text_arg(input, "input"), o));
  } else if (py::isinstance<py::list>(input) || py::isinstance<py::tuple>(input)) {
    for (py::handle item : input) rows.push_back(attn::encode(t, text_arg(item, "input"), o));
  } else {
    throw py::type_error("input: expected a str or a list of them, got " + type_name(input));
  }
  const std::size_t T = rows.empty() ? 0 : rows[0].size();
  for (const auto& r : rows)
    if (r.size() != T)
      throw py::value_error("input: the texts encode to different lengths (" + std::to_string(T) +
                            " and " + std::to_string(r.size()) + " tokens); give one at a time");
  py::array_t<std::int64_t> out({py::ssize_t(rows.size()), py::ssize_t(T)});
  std::int64_t* p = out.mutable_data();
  for (const auto& r : rows) p = std::copy(r.begin(), r.end(), p);
  return out;
}

py::object to_string(const attn::Tokenizer& t, py::handle tokens) {
  const auto text = [&](py::handle ids) {  // special tokens shown, no clean-up: TransformerLens's
    return py::str(decode_ids(t, ids, py::bool_(false), py::bool_(false), "tokens"));
  };
  // [batch, pos] (an array of two axes, or a list of lists): a text per row, one level only
  const bool batch = PyUnicode_Check(tokens.ptr()) ? false
                     : py::hasattr(tokens, "ndim")
                         ? int_arg(tokens.attr("ndim"), "tokens") == 2
                         : py::isinstance<py::list>(tokens) && py::len(tokens) > 0 &&
                               py::isinstance<py::list>(tokens.cast<py::list>()[0]);
  if (!batch) return text(tokens);
  py::list out;
  for (py::handle row : tokens) out.append(text(row));
  return out;
}

py::list to_str_tokens(const attn::Tokenizer& t, py::handle input, py::handle prepend_bos) {
  std::vector<std::int32_t> ids;
  if (PyUnicode_Check(input.ptr())) {
    attn::EncodeOptions o;
    o.add_special_tokens = false;
    o.bos = bool_arg(prepend_bos, "prepend_bos");
    ids = attn::encode(t, text_arg(input, "input"), o);
  } else {
    bool_arg(prepend_bos, "prepend_bos");  // checked, unused: ids are taken as given
    const auto rows = token_rows(input, t.vocab_size(), "input");
    if (rows.size() != 1)
      throw py::value_error("input: expected one sequence of ids, got a batch of " +
                            std::to_string(rows.size()));
    ids = rows[0];
  }
  py::list out;  // each id decoded alone, as TransformerLens's batch_decode of [pos, 1]
  for (std::int32_t id : ids) out.append(py::str(attn::decode(t, {id}, {false, false})));
  return out;
}

}  // namespace attn_py
