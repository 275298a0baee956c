// Every input a fuzz harness (fuzz/) ever crashed on, or that the hand-made attacks
// found, kept in fuzz/regressions/<harness>/ and run through the same entry point here: each must
// be accepted or refused with InputError, nothing else (the ASan build catches memory errors).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "attn/engine/run.hpp"
#include "attn/engine/session.hpp"
#include "attn/error.hpp"
#include "attn/io/checkpoint.hpp"
#include "attn/io/safetensors.hpp"
#include "attn/model/config.hpp"
#include "attn/text/chat_template.hpp"
#include "attn/text/tokenizer.hpp"
#include "test_support.hpp"
#include "text_input.hpp"

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> regressions(const std::string& harness) {
  std::vector<fs::path> out;
  for (const auto& e :
       fs::directory_iterator(test::source_dir() / "fuzz" / "regressions" / harness))
    if (e.is_regular_file()) out.push_back(e.path());
  return out;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Accepted, or refused as bad input: both fine. Anything else fails the test.
template <class F>
void accepted_or_refused(const fs::path& p, F f) {
  CAPTURE(p.filename().string());
  try {
    f();
  } catch (const attn::InputError&) {
  } catch (const std::exception& e) {
    FAIL_CHECK("not an InputError: " << e.what());
  }
}

}  // namespace

TEST_CASE("fuzz regressions: the config parser") {
  const auto files = regressions("config");
  CHECK(!files.empty());
  for (const fs::path& p : files)
    accepted_or_refused(p, [&] { attn::parse_config(slurp(p), p.string()); });
}

TEST_CASE("fuzz regressions: the safetensors parser") {
  const auto files = regressions("safetensors");
  CHECK(!files.empty());
  for (const fs::path& p : files) {
    const std::string bytes = slurp(p);
    accepted_or_refused(p, [&] {
      attn::parse_safetensors({reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()},
                              p.string());
    });
  }
}

TEST_CASE("fuzz regressions: the input reader") {
  const auto files = regressions("input");
  CHECK(!files.empty());
  for (const fs::path& p : files) {
    attn::RunOptions opts{1, 3, 2};
    accepted_or_refused(p, [&] { attn::load_input(p, attn::seed_args(), opts, false); });
  }
}

TEST_CASE("fuzz regressions: the Hugging Face index") {
  const auto files = regressions("index");
  CHECK(!files.empty());
  for (const fs::path& p : files)
    accepted_or_refused(p, [&] {
      attn::Checkpoint c = attn::parse_index(slurp(p), "/nonexistent/model.safetensors.index.json");
      if (!c.weight_map.empty()) c.info(c.weight_map.begin()->first);
    });
}

TEST_CASE("fuzz regressions: Hugging Face config.json and the overrides") {
  const auto files = regressions("hf_config");
  CHECK(!files.empty());
  for (const fs::path& p : files) {
    const std::string bytes = slurp(p);  // a pick byte (fuzz_hf_config.cpp), then the file
    REQUIRE(!bytes.empty());
    accepted_or_refused(p, [&] {
      attn::ModelArgs a = attn::parse_config(bytes.substr(1), "config.json");
      attn::ConfigOverrides o;
      o.max_seq_len = bytes[0] & 1 ? 64 : 0;
      o.model_parallel_size = (bytes[0] >> 1) & 3;
      attn::apply_overrides(a, o);
    });
  }
}

TEST_CASE("fuzz regressions: tokenizer.json and a text through it") {
  const auto files = regressions("tokenizer");
  CHECK(!files.empty());
  for (const fs::path& p : files) {
    const std::string bytes = slurp(p);  // the file, then after a NUL the text (fuzz_tokenizer.cpp)
    const std::size_t nul = bytes.find('\0');
    accepted_or_refused(p, [&] {
      const attn::Tokenizer t = attn::parse_tokenizer(bytes.substr(0, nul), "tokenizer.json");
      const std::vector<std::int32_t> ids =
          attn::encode(t, nul == std::string::npos ? "Hello world" : bytes.substr(nul + 1));
      attn::decode(t, ids);
    });
  }
}

TEST_CASE("fuzz regressions: token ids as text or JSON") {
  const auto files = regressions("tokens");
  CHECK(!files.empty());
  for (const fs::path& p : files) {
    cli::TextInput t;
    t.tokens = slurp(p);
    accepted_or_refused(p, [&] { cli::prompt_sequences(t, nullptr, 1000); });
    // Nesting this deep is refused by the structure check, before any value is built.
    if (p.filename().string().find("deep") != std::string::npos)
      CHECK_THROWS_WITH_AS(cli::prompt_sequences(t, nullptr, 1000),
                           doctest::Contains("nest deeper than"), attn::InputError);
  }
}

TEST_CASE("fuzz regressions: cache session files") {
  const auto files = regressions("session");
  CHECK(!files.empty());
  // fuzz_session's model: drawn from seed 42 with the config its seed sessions are saved with.
  attn::ModelSpec spec;
  spec.config = (test::source_dir() / "fuzz" / "seeds" / "session" / "config.json").string();
  spec.seed = 42;
  spec.threads = 1;
  attn::Session e = attn::open_session(spec, {1, 0, 1});
  for (const fs::path& p : files) {
    accepted_or_refused(p, [&] {
      attn::load_cache_session(e, p);
      attn::generate(e, {}, 1, {}, {}, false, [](const attn::Generated&) {});
    });
    // Each was accepted before, a value wrapped, rounded or passed on as NaN: now refused.
    CHECK_THROWS_AS(attn::load_cache_session(e, p), attn::InputError);
    CHECK(e.filled == 0);  // nothing of a refused file stays
  }
}

TEST_CASE("fuzz regressions: chat templates, read and rendered") {
  const auto files = regressions("chat_template");
  CHECK(!files.empty());
  const std::vector<attn::ChatMessage> messages = {{"system", "Be brief."}, {"user", "Hi"}};
  for (const fs::path& p : files)
    accepted_or_refused(p, [&] {
      const attn::ChatTemplate t(slurp(p), p.string());
      attn::ChatOptions options;
      options.now = 0;
      t.render(messages, options);
    });
  // Float literals past the double range read as Python reads them (python3-jinja2 prints this).
  const attn::ChatTemplate t(slurp(test::source_dir() / "fuzz" / "regressions" / "chat_template" /
                                   "float-literals-past-double.jinja"),
                             "floats.jinja");
  attn::ChatOptions options;
  options.now = 0;
  CHECK(t.render(messages, options) == "inf|-inf|0.0|2.5e-07");
}
