#include "attn/model/hook_names.hpp"

#include <charconv>

#include "attn/error.hpp"
#include "attn/io/text.hpp"

namespace attn {

std::string hook_name(Site s, std::int64_t layer) {
  const std::string_view hook = kHookNames[std::size_t(s)];
  if (model_site(s)) return std::string(hook);
  return "blocks." + std::to_string(layer) + "." + std::string(hook);
}

namespace {

[[noreturn]] void unknown(std::string_view name, const std::string& why) {
  throw InputError("hook name " + quoted(name) + ": " + why);
}

}  // namespace

HookPoint parse_hook_name(std::string_view name, std::int64_t n_layers) {
  for (std::size_t i = 0; i < kSiteCount; ++i)
    if (model_site(Site(i)) && name == kHookNames[i]) return {Site(i), -1};
  constexpr std::string_view prefix = "blocks.";
  if (!name.starts_with(prefix))
    unknown(name, "expected blocks.{layer}.{hook} (such as blocks.0.attn.hook_pattern) or " +
                      std::string(kHookNames[std::size_t(Site::final_norm)]));
  const std::string_view rest = name.substr(prefix.size());
  std::int64_t layer = -1;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), layer);
  const std::size_t digits = std::size_t(end - rest.data());
  if (ec != std::errc() || digits == 0 || (digits > 1 && rest[0] == '0') || digits >= rest.size() ||
      rest[digits] != '.')
    unknown(name, "expected a layer number after 'blocks.'");
  if (layer < 0 || layer >= n_layers)
    unknown(name, "layer " + std::to_string(layer) + " is outside the model's " +
                      std::to_string(n_layers) + " layers");
  const std::string_view hook = rest.substr(digits + 1);
  std::string valid;
  for (std::size_t i = 0; i < kSiteCount; ++i) {
    if (model_site(Site(i))) continue;
    if (kHookNames[i] == hook) return {Site(i), layer};
    valid += (valid.empty() ? "" : ", ") + std::string(kHookNames[i]);
  }
  unknown(name, "the hooks of a block are " + valid);
}

}  // namespace attn
