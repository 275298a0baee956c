#pragma once
// The tokenizer's Python surface (tokens.cpp): encode and decode with each argument converted by
// convert.hpp, and the names transformers and TransformerLens give the same operations.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "attn/text/tokenizer.hpp"

namespace attn_py {

namespace py = pybind11;

// Tokenizer.encode(text, add_special_tokens=True, bos=None).
std::vector<std::int32_t> encode_text(const attn::Tokenizer& t, py::handle text,
                                      py::handle add_special_tokens, py::handle bos);

// tokenizer(text): encode's ids, a list of them for a list of texts (transformers' input_ids,
// without the dict around them).
py::object call_tokenizer(const attn::Tokenizer& t, py::handle text, py::handle add_special_tokens);

// Tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=None), the ids
// given to argument `name`.
std::string decode_ids(const attn::Tokenizer& t, py::handle ids, py::handle skip_special_tokens,
                       py::handle clean_up, const char* name = "ids");

// transformers' convert_ids_to_tokens: the vocabulary's piece of an id, or a list of them.
py::object ids_to_tokens(const attn::Tokenizer& t, py::handle ids);

// TransformerLens's Model.to_tokens / to_string / to_str_tokens over the model's tokenizer.
py::object to_tokens(const attn::Tokenizer& t, py::handle input, py::handle prepend_bos);
py::object to_string(const attn::Tokenizer& t, py::handle tokens);
py::list to_str_tokens(const attn::Tokenizer& t, py::handle input, py::handle prepend_bos);

}  // namespace attn_py
