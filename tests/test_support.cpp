#include "test_support.hpp"

#include <doctest/doctest.h>
#include <stdlib.h>

#include <algorithm>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace test {

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TempDir::TempDir() {
  std::string t = (std::filesystem::temp_directory_path() / "attn_test.XXXXXX").string();
  REQUIRE(::mkdtemp(t.data()) != nullptr);
  path = t;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

std::vector<std::string> TempDir::names() const {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(path))
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

CliResult run_cli(const std::string& args) {
  return run_shell(std::string(ATTN_CLI) + " " + args);
}

CliResult run_shell(const std::string& command) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("attn_cli_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto out = dir / "stdout", err = dir / "stderr";
  const std::string cmd = command + " >" + out.string() + " 2>" + err.string() + " </dev/null";
  const int raw = std::system(cmd.c_str());
  CliResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  r.out = slurp(out);
  r.err = slurp(err);
  std::filesystem::remove_all(dir);
  return r;
}

}  // namespace test
