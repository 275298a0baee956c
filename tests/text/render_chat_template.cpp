// Renders a chat template on a list of cases for tests/golden/check_chat_templates.py:
//   render_chat_template TEMPLATE CASES.json NOW
// CASES.json holds a JSON list of variable objects; the output is one JSON object:
// {"refused": message} when the template is refused at load, else {"results": [...]} with
// {"text": output} or {"error": message} per case. NOW is strftime_now's time (seconds).
#include <cstdint>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "attn/error.hpp"
#include "attn/text/chat_template.hpp"

namespace {

std::string read(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: render_chat_template TEMPLATE CASES.json NOW\n";
    return 2;
  }
  const auto cases = nlohmann::ordered_json::parse(read(argv[2]));
  const std::int64_t now = std::stoll(argv[3]);
  nlohmann::json out;
  try {
    const attn::ChatTemplate t(read(argv[1]), argv[1]);
    out["results"] = nlohmann::json::array();
    for (const auto& c : cases) {
      try {
        out["results"].push_back({{"text", t.render_json(c.dump(), now)}});
      } catch (const attn::InputError& e) {
        out["results"].push_back({{"error", e.what()}});
      }
    }
  } catch (const attn::InputError& e) {
    out["refused"] = e.what();
  }
  std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return 0;
}
