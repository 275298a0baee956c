// One rule set for every file the tool writes (attn/io/output.hpp): each rule below runs against
// each writer (the dump of `run`, the PNG of `heatmap`). Refusals come before any work (nothing
// on stdout), a failed run leaves nothing behind, and a file appears only once the run has
// succeeded.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "attn/io/output.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

namespace {

using test::TempDir;

struct Writer {
  std::string name;
  std::string command;  // attn-cli arguments before the output path
};

const std::vector<Writer>& writers() {
  static const std::vector<Writer> w = {{"dump", "run --dump "}, {"PNG", "heatmap --out "}};
  return w;
}

// Paths go through /bin/sh: single-quote them (test paths hold no single quote).
std::string q(const fs::path& p) {
  std::string s = "'";
  s.append(p.string()).append("'");
  return s;
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

// Exit 2 before any work (no trace on stdout), one short line naming the path and the reason.
void refused(const Writer& w, const std::string& path_arg,
             const std::vector<std::string>& needles) {
  const test::CliResult r = test::run_cli(w.command + path_arg + " --steps 1");
  INFO(w.name, ": ", path_arg, "\nstderr: ", r.err.substr(0, 2000));
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err.rfind("attn-cli: error: ", 0) == 0);
  CHECK(r.err.size() < 600);
  for (const std::string& n : needles) CHECK_MESSAGE(r.err.find(n) != std::string::npos, n);
}

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

}  // namespace

TEST_CASE("outputs: devices, FIFOs, directories, empty and missing paths are refused before work") {
  for (const Writer& w : writers()) {
    CAPTURE(w.name);
    TempDir dir;
    const fs::path fifo = dir.path / "fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    refused(w, "/dev/null", {"/dev/null", "character device", w.name});
    refused(w, q(fifo), {fifo.string(), "a FIFO"});
    refused(w, q(dir.path), {"directory"});
    refused(w, q(dir.path / "no_dir" / "f"), {"does not exist"});
    refused(w, "''", {"empty"});
    CHECK(fs::is_fifo(fifo));
    CHECK(fs::is_character_file("/dev/null"));
    CHECK(dir.names() == std::vector<std::string>{"fifo"});
  }
}

TEST_CASE("outputs: a symlink is written through, an existing file keeps its mode") {
  for (const Writer& w : writers()) {
    CAPTURE(w.name);
    TempDir dir;
    const fs::path target = dir.path / "target", link = dir.path / "link";
    write_text(target, "old");
    REQUIRE(::chmod(target.c_str(), 0600) == 0);
    fs::create_symlink(target, link);
    const fs::path dangling = dir.path / "dangling", later = dir.path / "later";
    fs::create_symlink("later", dangling);  // relative, to a file not there yet
    for (const fs::path& p : {link, dangling}) {
      const test::CliResult r = test::run_cli(w.command + q(p));
      INFO(r.err);
      REQUIRE(r.status == 0);
      CHECK(fs::is_symlink(p));
    }
    CHECK(fs::file_size(target) > 3);
    CHECK(mode_of(target) == 0600);
    CHECK(fs::exists(later));
    const mode_t mask = ::umask(0);
    ::umask(mask);
    CHECK(mode_of(later) == (0666 & ~mask));  // a new file: as any new file
    CHECK(dir.names() == std::vector<std::string>{"dangling", "later", "link", "target"});
  }
}

TEST_CASE("outputs: names up to NAME_MAX work, longer ones are refused before work") {
  for (const Writer& w : writers()) {
    CAPTURE(w.name);
    TempDir dir;
    const fs::path ok = dir.path / std::string(255, 'd');
    const test::CliResult r = test::run_cli(w.command + q(ok));
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(fs::exists(ok));
    refused(w, q(dir.path / std::string(256, 'e')), {"NAME_MAX"});
    refused(w, q(dir.path / std::string(300, 'e')), {"NAME_MAX", "..."});  // the path cut short
    CHECK(dir.names().size() == 1);
    // A relative name, from the directory it lands in.
    const std::string rel(255, 'r');
    const test::CliResult rr =
        test::run_shell("cd " + q(dir.path) + " && " + ATTN_CLI + " " + w.command + rel);
    CHECK(rr.status == 0);
    CHECK(fs::exists(dir.path / rel));
  }
}

TEST_CASE("outputs: a closed stdout, a file-size limit or a failed run leave nothing behind") {
  for (const Writer& w : writers()) {
    CAPTURE(w.name);
    TempDir dir;
    const fs::path out = dir.path / "out", err = dir.path / "err";
    // stdout closed: refused before work, exit 1 (the environment, not the input).
    std::string cmd = "(";
    cmd.append(ATTN_CLI).append(" ").append(w.command).append(q(out));
    cmd.append(" >&- 2>").append(q(err)).append("; echo status $? >&2)");
    test::CliResult r = test::run_shell(cmd);
    CHECK(r.err.find("status 1") != std::string::npos);
    std::ifstream in(err);
    const std::string msg((std::istreambuf_iterator<char>(in)), {});
    CHECK(msg.find("stdout is closed") != std::string::npos);
    fs::remove(err);
    CHECK(dir.names().empty());
    // A 2 KiB file-size limit (dash counts 512-byte blocks): the write fails with EFBIG (not a
    // SIGXFSZ kill), exit 1.
    r = test::run_shell("(ulimit -f 4; exec " + std::string(ATTN_CLI) + " " + w.command + q(out) +
                        " --attention-weights --prefill 7 --steps 10 >/dev/null)");
    INFO(r.err);
    CHECK(r.status == 1);
    CHECK(r.err.find("File too large") != std::string::npos);
    CHECK(dir.names().empty());
    // The same limit on stdout: the trace cannot be written, exit 1, no output.
    r = test::run_shell("(ulimit -f 4; exec " + std::string(ATTN_CLI) + " " + w.command + q(out) +
                        " --print-attention --prefill 7 --steps 10 >" + q(dir.path / "trace") +
                        ")");
    CHECK(r.status == 1);
    CHECK(r.err.find("stdout") != std::string::npos);
    fs::remove(dir.path / "trace");
    CHECK(dir.names().empty());
    // A run refused after the output was checked: no output.
    r = test::run_cli(w.command + q(out) + " --prefill 7 --steps 11");  // past max_seq_len 17
    CHECK(r.status == 2);
    CHECK(dir.names().empty());
  }
  // heatmap writes two files: a bad PNG path refuses the run before its dump exists.
  TempDir dir;
  const test::CliResult r =
      test::run_cli("heatmap --dump " + q(dir.path / "d") + " --out " + q(dir.path / "x" / "p"));
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(dir.names().empty());
}

// On SIGINT, SIGTERM, SIGHUP and SIGPIPE attn-cli's handlers remove the file being written:
// apps/test_cli_signals.cpp.

TEST_CASE("outputs: OutputFile shows nothing until commit and removes its file when dropped") {
  TempDir dir;
  const fs::path p = dir.path / "f";
  {
    attn::OutputFile f(p, "dump");
    f.write("abc", 3);
    CHECK_FALSE(fs::exists(p));
    CHECK(dir.names().size() == 1);  // the temporary file
    attn::OutputFile moved(std::move(f));
    moved.commit();
  }
  CHECK(fs::file_size(p) == 3);
  {
    attn::OutputFile f(p, "dump");
    f.write("abcdef", 6);
  }
  CHECK(fs::file_size(p) == 3);
  CHECK(dir.names() == std::vector<std::string>{"f"});
}
