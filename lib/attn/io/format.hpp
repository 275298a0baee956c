#pragma once
// What a file is, by its content and never its name: so that a file given where another is
// expected gets one message naming what it is and what was expected, instead of the wrong
// parser's complaint ("header length 14064895815 exceeds the limit").
#include <filesystem>
#include <initializer_list>
#include <span>
#include <string>

namespace attn {

enum class FileFormat {
  gguf,
  safetensors,
  safetensors_index,
  llama2c_checkpoint,
  tokenizer_json,
  llama2c_tokenizer,
  json,
  unknown
};

// The bytes detect_format reads from a file's start.
inline constexpr std::size_t kFormatHeadBytes = 4096;

// From the file's first bytes (up to kFormatHeadBytes) and its size. A file that cannot be read
// (missing, a directory, a FIFO) is unknown: the reader it is given to then says why.
FileFormat detect_format(std::span<const std::uint8_t> head, std::uint64_t size);
FileFormat detect_format(const std::filesystem::path& path);

// "a GGUF model file", "a llama2.c checkpoint", ...
const char* format_description(FileFormat f);

// What a file of unknown format looks like, for messages: "a llama2.c checkpoint whose header
// dim is -5", "an empty file", "text", "binary data starting 7f 45 4c 46"; empty when it may be
// a safetensors file with a damaged header (a small header length, or '{' after it), whose
// reader then says what is wrong.
std::string unknown_look(std::span<const std::uint8_t> head, std::uint64_t size);

// The "what is this file" step before a model's readers (-m and --weights, Python's
// from_pretrained): nothing for a model's format or what may be a safetensors file; otherwise an
// InputError naming the file, what it looks like and what is read:
// "x.bin: not a model file: it looks like a llama2.c checkpoint whose header dim is -5; GGUF,
// safetensors (or its index), a llama2.c checkpoint or a Hugging Face folder are read".
struct FileHead;
void check_model_format(const FileHead& head, FileFormat f);
// The same step before a config's reader: binary data of no format is named ("x.bin: not a
// config: it looks like a llama2.c checkpoint whose header dim is -5; ..."); text is left to the
// JSON parser, which says where it is wrong.
void check_config_format(const FileHead& head, FileFormat f);

// Nothing when `path` is one of `wanted` or of unknown format (the reader then says what is
// wrong with it); otherwise an InputError naming the file, what it is and `what` was expected:
// "x.json: a tokenizer.json file, not model weights (safetensors, GGUF or a llama2.c
// checkpoint)".
void expect_format(const std::filesystem::path& path, std::initializer_list<FileFormat> wanted,
                   const std::string& what);
// The same for a format told already; `source` names the file (escaped).
void expect_format(FileFormat f, const std::string& source,
                   std::initializer_list<FileFormat> wanted, const std::string& what);

}  // namespace attn
