// libFuzzer harness: a tokenizer.json and a text in one input, the file built from the input's
// first bytes (FuzzedDataProvider) so that it is always well-formed and the fuzzer's effort goes
// into the pipeline: added tokens with their flags, normalizer, pre-tokenizer (Split patterns from
// the input, ByteLevel, Metaspace), BPE with merges, template and decoder; the rest of the input
// is the text, encoded, decoded (both ways) and read back token by token. fuzz_tokenizer fuzzes
// the file's syntax; this one its meaning. A refusal (InputError) is expected, but its message
// must be escaped: a raw control byte or the JSON library's own text is a finding, as is a
// crash, a hang or a sanitizer report.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/text/tokenizer.hpp"
#include "attn/text/unicode.hpp"
#include "escaped_message.hpp"
#include "work_bound.hpp"

namespace {

using json = nlohmann::json;

std::string some_text(FuzzedDataProvider& in, std::size_t max) {
  return in.ConsumeRandomLengthString(max);
}

json added_tokens(FuzzedDataProvider& in, int first_id) {
  json list = json::array();
  const int n = in.ConsumeIntegralInRange(0, 6);
  for (int k = 0; k < n; ++k) {
    std::string content = some_text(in, 8);
    if (content.empty()) content = "<s>";
    list.push_back({{"id", first_id + k},
                    {"content", content},
                    {"special", in.ConsumeBool()},
                    {"lstrip", in.ConsumeBool()},
                    {"rstrip", in.ConsumeBool()},
                    {"single_word", in.ConsumeBool()}});
  }
  return list;
}

json split(FuzzedDataProvider& in) {
  static const char* behaviors[] = {"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext",
                                    "Contiguous"};
  const bool regex = in.ConsumeBool();
  return {{"type", "Split"},
          {"pattern", {{regex ? "Regex" : "String", some_text(in, 40)}}},
          {"behavior", behaviors[in.ConsumeIntegralInRange(0, 4)]},
          {"invert", in.ConsumeBool()}};
}

json metaspace(FuzzedDataProvider& in) {
  static const char* schemes[] = {"always", "first", "never"};
  return {{"type", "Metaspace"},
          {"replacement", in.ConsumeBool() ? "\xE2\x96\x81" : "_"},
          {"prepend_scheme", schemes[in.ConsumeIntegralInRange(0, 2)]},
          {"split", in.ConsumeBool()}};
}

json pre_tokenizer(FuzzedDataProvider& in, bool byte_level) {
  json steps = json::array();
  for (int k = in.ConsumeIntegralInRange(0, 2); k > 0; --k)
    steps.push_back(in.ConsumeBool() ? split(in) : metaspace(in));
  if (byte_level)
    steps.push_back({{"type", "ByteLevel"},
                     {"add_prefix_space", in.ConsumeBool()},
                     {"use_regex", in.ConsumeBool()}});
  if (steps.empty()) return nullptr;
  return {{"type", "Sequence"}, {"pretokenizers", steps}};
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const bool byte_level = in.ConsumeBool();
  json vocab = json::object();
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) {  // every byte: as GPT-2's printable map, or as <0xNN>
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    pieces.push_back(byte_level ? attn::byte_to_unicode(static_cast<unsigned char>(b)) : name);
  }
  if (!byte_level)
    for (const char* c : {"\xE2\x96\x81", "a", "b", " ", "\xC3\xA9"}) pieces.push_back(c);
  json merges = json::array();
  for (int k = in.ConsumeIntegralInRange(0, 8); k > 0; --k) {
    const std::string l = pieces[in.ConsumeIntegralInRange<std::size_t>(0, pieces.size() - 1)];
    const std::string r = pieces[in.ConsumeIntegralInRange<std::size_t>(0, pieces.size() - 1)];
    if (std::find(pieces.begin(), pieces.end(), l + r) == pieces.end()) pieces.push_back(l + r);
    merges.push_back(json::array({l, r}));
  }
  for (std::size_t i = 0; i < pieces.size(); ++i) vocab[pieces[i]] = i;
  const int first_added = int(pieces.size());
  json decoder = byte_level
                     ? json{{"type", "ByteLevel"}}
                     : json{{"type", "Sequence"},
                            {"decoders",
                             {{{"type", "Replace"},
                               {"pattern", {{"String", "\xE2\x96\x81"}}},
                               {"content", " "}},
                              {{"type", "ByteFallback"}},
                              {{"type", "Fuse"}},
                              {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  json normalizer = nullptr;
  if (!byte_level && in.ConsumeBool())
    normalizer = {
        {"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}}}};
  json post = nullptr;
  if (in.ConsumeBool())
    post = {{"type", "TemplateProcessing"},
            {"single", {{{"SpecialToken", {{"id", "B"}}}}, {{"Sequence", {{"id", "A"}}}}}},
            {"special_tokens", {{"B", {{"id", "B"}, {"ids", {0}}}}}}};
  const json file = {{"added_tokens", added_tokens(in, first_added)},
                     {"normalizer", normalizer},
                     {"pre_tokenizer", pre_tokenizer(in, byte_level)},
                     {"post_processor", post},
                     {"decoder", decoder},
                     {"model",
                      {{"type", "BPE"},
                       {"byte_fallback", !byte_level},
                       {"ignore_merges", in.ConsumeBool()},
                       {"vocab", vocab},
                       {"merges", merges}}}};
  const std::string text = in.ConsumeRemainingBytesAsString();
  const std::string json_text = dump(file);
  const WorkBound bound(json_text.size() + text.size());
  try {
    const attn::Tokenizer t = attn::parse_tokenizer(json_text, "fuzz/tokenizer.json");
    const std::vector<std::int32_t> ids = attn::encode(t, text);
    WorkBound::check_size(ids.size(), json_text.size() + text.size());
    WorkBound::check_decoded(t, ids, attn::decode(t, ids));
    WorkBound::check_decoded(t, ids, attn::decode(t, ids, {true, false}));
    for (const std::int32_t id : ids) WorkBound::check_decoded(t, {id}, attn::token_bytes(t, id));
    bound.check_work();
  } catch (const attn::InputError& e) {
    require_escaped(e.what(), std::string_view(reinterpret_cast<const char*>(data), size));
  }
  return 0;
}
