// The library and the process's signals (issue 46): opening models of every kind, mapping files
// and writing outputs leave every disposition as the program set it (a Python interpreter's
// SIGINT is KeyboardInterrupt); the registry a front's handler reads (attn/io/signals.hpp)
// knows the live mappings and temporary files. attn-cli's handlers: apps/test_cli_signals.cpp.
#include <doctest/doctest.h>

#include <signal.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "attn/engine/session.hpp"
#include "attn/io/files.hpp"
#include "attn/io/output.hpp"
#include "attn/io/safetensors.hpp"
#include "attn/io/signals.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

namespace {

using test::TempDir;

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGBUS, SIGXFSZ, SIGSEGV};

// Each signal's handler (or SIG_DFL / SIG_IGN) and flags, as sigaction reports them.
std::vector<std::string> dispositions() {
  std::vector<std::string> out;
  for (int sig : kSignals) {
    struct sigaction now {};
    REQUIRE(::sigaction(sig, nullptr, &now) == 0);
    const void* handler = (now.sa_flags & SA_SIGINFO) ? reinterpret_cast<void*>(now.sa_sigaction)
                                                      : reinterpret_cast<void*>(now.sa_handler);
    out.push_back(std::string(strsignal(sig)) + ": " +
                  std::to_string(reinterpret_cast<std::uintptr_t>(handler)) + " flags " +
                  std::to_string(now.sa_flags));
  }
  return out;
}

}  // namespace

TEST_CASE("signals: opening models, mapping files and writing outputs install no handler") {
  // A program's own choice, which the library must keep as it finds it: SIGINT's default and
  // SIGPIPE ignored here, then the reverse.
  for (const bool flip : {false, true}) {
    CAPTURE(flip);
    struct sigaction ign {
    }, dfl{}, old_int{}, old_pipe{};
    ign.sa_handler = SIG_IGN;
    dfl.sa_handler = SIG_DFL;
    ::sigaction(SIGINT, flip ? &ign : &dfl, &old_int);
    ::sigaction(SIGPIPE, flip ? &dfl : &ign, &old_pipe);
    const std::vector<std::string> before = dispositions();
    {
      const fs::path stories = test::source_dir() / "weights";
      attn::Session gguf =
          attn::open_session(test::spec_of(stories / "stories260K.gguf"), {1, 8, 4});
      attn::Session llama2c = attn::open_session(
          test::spec_of(stories / "stories260K.bin", stories / "tok512.bin"), {1, 8, 4});
      attn::Session hf =
          attn::open_session(test::spec_of(test::model_dir("hf_untied_f32") / "model.safetensors"));
      const attn::SafetensorsFile f =
          attn::open_safetensors(test::golden_dir() / "seed_gqa" / "weights.safetensors");
      const auto m = attn::map_file(stories / "tok512.bin", "tokenizer");
      TempDir dir;
      attn::OutputFile out(dir.path / "out", "dump");
      out.write("abc", 3);
      CHECK(dispositions() == before);
      out.commit();
      attn::write_safetensors(dir.path / "t.safetensors", {});
      attn::OutputFile dropped(dir.path / "dropped", "dump");
    }
    CHECK(dispositions() == before);
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGPIPE, &old_pipe, nullptr);
  }
}

TEST_CASE("signals: mapped_file_at names the live mapping holding an address") {
  TempDir dir;
  const fs::path w = dir.path / "w.safetensors";
  fs::copy_file(test::golden_dir() / "seed_gqa" / "weights.safetensors", w);
  const std::uint8_t* base = nullptr;
  std::uint64_t size = 0;
  {
    const attn::SafetensorsFile f = attn::open_safetensors(w);
    base = f.base;
    size = f.size;
    REQUIRE(attn::mapped_file_at(f.base) != nullptr);
    CHECK(std::string(attn::mapped_file_at(f.base)) == w.string());
    CHECK(std::string(attn::mapped_file_at(f.base + f.size - 1)) == w.string());
    CHECK(attn::mapped_file_at(f.base + f.size) == nullptr);
    int local = 0;
    CHECK(attn::mapped_file_at(&local) == nullptr);
    const auto m = attn::map_file(w, "weights");
    CHECK(std::string(attn::mapped_file_at(m->bytes.data() + 8)) == w.string());
  }
  CHECK(attn::mapped_file_at(base) == nullptr);  // unmapped: forgotten
  CHECK(attn::mapped_file_at(base + size / 2) == nullptr);
}

TEST_CASE("signals: remove_temp_files removes the files being written, not committed ones") {
  TempDir dir;
  attn::OutputFile done(dir.path / "done", "dump");
  done.write("abc", 3);
  done.commit();
  {
    attn::OutputFile a(dir.path / "a", "dump"), b(dir.path / "b", "PNG");
    a.write("partial", 7);
    CHECK(dir.names().size() == 3);  // done and two temporary files
    attn::remove_temp_files();       // what a handler calls before ending the process
    CHECK(dir.names() == std::vector<std::string>{"done"});
  }  // their own cleanup then finds nothing to remove
  CHECK(dir.names() == std::vector<std::string>{"done"});
  attn::OutputFile c(dir.path / "c", "dump");
  c.write("x", 1);
  c.commit();
  attn::remove_temp_files();
  CHECK(dir.names() == std::vector<std::string>{"c", "done"});
}
