#pragma once
// What every refusal's message must be (issue 37): no raw control byte a terminal would act on
// (C0, DEL, C1 such as U+009B CSI, U+202E) and none of the JSON library's own text (unless the
// input itself holds those words, quoted back). A harness aborts on any other, so the fuzzer
// reports it as a finding.
#include <cstddef>
#include <cstdlib>
#include <string>
#include <string_view>

inline void require_escaped(const std::string& m, std::string_view input) {
  for (std::size_t i = 0; i < m.size(); ++i) {
    const auto c = static_cast<unsigned char>(m[i]);
    const bool c1 = c == 0xC2 && i + 1 < m.size() && static_cast<unsigned char>(m[i + 1]) < 0xA0;
    if (c < 0x20 || c == 0x7f || c1 || m.compare(i, 3, "\xE2\x80\xAE") == 0) std::abort();
  }
  if (m.find("json.exception") != std::string::npos &&
      input.find("json.exception") == std::string_view::npos)
    std::abort();
}
