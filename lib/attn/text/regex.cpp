#include "attn/text/regex.hpp"

#include <oniguruma.h>

#include <mutex>

#include "attn/error.hpp"
#include "attn/text/unicode.hpp"

namespace attn {

namespace {

std::string onig_message(int code, OnigErrorInfo* info) {
  OnigUChar buf[ONIG_MAX_ERROR_MESSAGE_LEN];
  const int n = info ? onig_error_code_to_str(buf, code, info) : onig_error_code_to_str(buf, code);
  return std::string(reinterpret_cast<const char*>(buf), std::size_t(n > 0 ? n : 0));
}

void initialise_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
}

}  // namespace

struct Regex::Impl {
  regex_t* re = nullptr;
  ~Impl() {
    if (re) onig_free(re);
  }
};

Regex::Regex(const std::string& pattern, const std::string& source, const std::string& what)
    : impl_(std::make_unique<Impl>()) {
  initialise_once();
  OnigErrorInfo info{};
  const auto* p = reinterpret_cast<const OnigUChar*>(pattern.data());
  const int r = onig_new(&impl_->re, p, p + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                         ONIG_SYNTAX_RUBY, &info);
  if (r != ONIG_NORMAL) {
    impl_->re = nullptr;
    throw InputError(source + ": " + what + ": " + onig_message(r, &info));
  }
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

std::vector<std::pair<std::size_t, std::size_t>> Regex::find_all(std::string_view s) const {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  OnigRegion* region = onig_region_new();
  const auto* str = reinterpret_cast<const OnigUChar*>(s.data());
  const OnigUChar* end = str + s.size();
  std::size_t at = 0;
  while (at <= s.size()) {
    const int r = onig_search(impl_->re, str, end, str + at, end, region, ONIG_OPTION_NONE);
    if (r < 0) break;  // ONIG_MISMATCH, or a limit Oniguruma enforces: no further splits
    const auto b = std::size_t(region->beg[0]), e = std::size_t(region->end[0]);
    if (e > b) {
      out.emplace_back(b, e);
      at = e;
    } else {
      if (b >= s.size()) break;
      at = b + code_point_bytes(s, b);
    }
  }
  onig_region_free(region, 1);
  return out;
}

}  // namespace attn
