#include "test_support.hpp"

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
