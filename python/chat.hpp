#pragma once
// Chat from Python (chat.cpp): Tokenizer.apply_chat_template and Tokenizer.chat_templates as
// transformers has them, and Model.chat(messages) -> the assistant's reply, as transformers'
// text-generation pipeline or llama-cpp-python's create_chat_completion gives it.
#include <pybind11/pybind11.h>

namespace attn_py {

namespace py = pybind11;

// Adds Tokenizer.apply_chat_template, Tokenizer.chat_templates and Model.chat to the module's
// classes (defined by attn_module.cpp first).
void bind_chat(py::module_& mod);

}  // namespace attn_py
