#pragma once
// Text from files (names, keys, values, paths) on its way to a terminal: control characters
// escaped, long strings cut, long lists summarised, so a file can neither flood stderr nor
// forge a line of output.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

// Control characters (ESC and newlines included), DEL and bytes that are not UTF-8 as \xNN;
// code points a terminal interprets (C1 controls such as U+009B CSI, line separators, bidi
// overrides) as \uNNNN; other UTF-8 text as it is. More than max bytes cut with "...".
std::string escape(std::string_view s, std::size_t max = 200);

// Text meant to be read, such as a model's output, made safe for a terminal: C0 controls but
// newline and tab, DEL and bytes that are not UTF-8 as \xNN, C1 controls (U+0080..U+009F) as
// \uNNNN; everything else as it is, whatever its length.
std::string escape_controls(std::string_view s);

// escape(s) in single quotes.
std::string quoted(std::string_view s, std::size_t max = 200);

// "3 unused tensors, e.g. 'a', 'b', 'c'": the count and the first few names, escaped.
std::string summarise(const std::vector<std::string>& names, const std::string& what,
                      std::size_t shown = 3);

}  // namespace attn
