// attn-cli's signal handlers (apps/signals.cpp) over the library's registry: each case runs in a
// child that installs them as attn-cli's main does, so the test program's own dispositions stay
// as doctest set them. The library alone installs nothing (io/test_signals.cpp).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "attn/io/output.hpp"
#include "attn/io/safetensors.hpp"
#include "signals.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

namespace {

using test::TempDir;

// Runs f in a child with attn-cli's handlers installed; returns its wait status and what it
// wrote on stderr.
template <class F>
std::pair<int, std::string> in_cli_child(const fs::path& err_file, F f) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int fd = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, STDERR_FILENO);
    const struct rlimit no_core {};
    ::setrlimit(RLIMIT_CORE, &no_core);  // a default SIGBUS dumps core otherwise
    cli::install_signal_handlers();
    f();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::ifstream in(err_file);
  return {status, std::string(std::istreambuf_iterator<char>(in), {})};
}

}  // namespace

TEST_CASE("cli signals: a file being written is removed on SIGINT, SIGTERM, SIGHUP and SIGPIPE") {
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) {
    CAPTURE(sig);
    TempDir dir, logs;
    const auto [status, err] = in_cli_child(logs.path / "err", [&] {
      attn::OutputFile f(dir.path / "out", "dump");
      f.write("partial", 7);
      ::raise(sig);
      ::_exit(5);
    });
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == sig);  // ended as the signal would: the shell sees 128 + sig
    CHECK(dir.names().empty());
  }
}

TEST_CASE("cli signals: a signal ignored when attn-cli started (nohup) stays ignored") {
  TempDir dir, logs;
  const auto [status, err] = in_cli_child(logs.path / "err", [&] {
    ::signal(SIGHUP, SIG_IGN);  // as nohup leaves it before exec
    cli::install_signal_handlers();
    attn::OutputFile f(dir.path / "out", "dump");
    f.write("whole", 5);
    ::raise(SIGHUP);
    f.commit();
    ::_exit(5);
  });
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 5);
  CHECK(dir.names() == std::vector<std::string>{"out"});
}

TEST_CASE("cli signals: SIGXFSZ is ignored, so a write past a file-size limit is an error") {
  TempDir logs;
  const auto [status, err] = in_cli_child(logs.path / "err", [] {
    struct sigaction now {};
    ::sigaction(SIGXFSZ, nullptr, &now);
    ::_exit(now.sa_handler == SIG_IGN ? 0 : 6);
  });
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("cli signals: a mapped weights file that shrinks gives a message naming it and exit 1") {
  TempDir dir;
  const fs::path w = dir.path / "w.safetensors", err = dir.path / "stderr";
  fs::copy_file(test::golden_dir() / "seed_gqa" / "weights.safetensors", w);
  const auto [status, text_] = in_cli_child(err, [&] {
    const attn::SafetensorsFile f = attn::open_safetensors(w);
    if (::truncate(w.c_str(), 0) != 0) ::_exit(3);
    volatile std::uint8_t sink = 0;
    for (std::uint64_t i = 0; i < f.size; ++i) sink = sink + f.base[i];  // SIGBUS here
    ::_exit(4);
  });
  const std::string& text = text_;  // clang 14 lambdas (doctest INFO) cannot capture a binding
  INFO(text);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK(text == "attn-cli: error: " + w.string() +
                    ": the file shrank while the run had it mapped (truncated or rewritten under "
                    "it); the run cannot go on\n");
}

TEST_CASE("cli signals: a SIGBUS outside every mapped file keeps its default action") {
  TempDir dir;
  const auto [status, text] = in_cli_child(dir.path / "stderr", [] {
    ::raise(SIGBUS);
    ::_exit(4);
  });
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGBUS);
  CHECK(text.empty());
}

namespace {

// A signal's bit in /proc/PID/status's SigCgt (caught) or SigIgn (ignored) mask.
bool in_mask(pid_t pid, const char* mask, int sig) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(mask, 0) == 0)
      return (std::stoull(line.substr(std::strlen(mask)), nullptr, 16) >> (sig - 1)) & 1;
  return false;
}

// attn-cli printing a trace into a pipe nobody reads: it blocks on a full pipe, alive with its
// handlers installed, until the pipe is closed.
struct BlockedCli {
  pid_t pid = -1;
  int read_end = -1;

  explicit BlockedCli(bool hup_ignored) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    ::fcntl(fds[1], F_SETPIPE_SZ, 4096);  // the trace fills it many times over
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::dup2(fds[1], STDOUT_FILENO);
      ::close(fds[0]);
      ::close(fds[1]);
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, STDERR_FILENO);
      if (hup_ignored) ::signal(SIGHUP, SIG_IGN);  // as nohup execs it
      ::execl(ATTN_CLI, ATTN_CLI, "run", "--print-attention", "--prefill", "7", "--steps", "10",
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(fds[1]);
    read_end = fds[0];
  }

  // Waits until the handlers are in (SIGPIPE caught: this test program catches SIGTERM and
  // SIGINT, and so does its fork until the exec); false when attn-cli ended first.
  bool installed() const {
    for (int i = 0; i < 2000; ++i) {
      if (in_mask(pid, "SigCgt:", SIGPIPE)) return true;
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) return false;
      ::usleep(10000);
    }
    return false;
  }

  // Closes the pipe (a SIGPIPE at attn-cli's next write) and returns its wait status.
  int end() {
    ::close(std::exchange(read_end, -1));
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
  }
};

}  // namespace

TEST_CASE("cli signals: attn-cli installs its handlers, keeping a signal ignored at start") {
  for (const bool hup_ignored : {false, true}) {
    CAPTURE(hup_ignored);
    BlockedCli cli(hup_ignored);
    REQUIRE(cli.installed());
    for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGBUS}) CHECK(in_mask(cli.pid, "SigCgt:", sig));
    CHECK(in_mask(cli.pid, "SigCgt:", SIGHUP) == !hup_ignored);
    CHECK(in_mask(cli.pid, "SigIgn:", SIGHUP) == hup_ignored);
    CHECK(in_mask(cli.pid, "SigIgn:", SIGXFSZ));
    const int status = cli.end();
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGPIPE);  // the handler ends it as the signal would
  }
}
