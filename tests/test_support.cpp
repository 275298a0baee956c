#include "test_support.hpp"

#include <doctest/doctest.h>
#include <stdlib.h>

#include <algorithm>

#include "attn/io/safetensors.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
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

Diff compare_files(const std::filesystem::path& got_path,
                   const std::filesystem::path& expected_path, Tolerance tol) {
  const attn::SafetensorsFile got = attn::open_safetensors(got_path);
  const attn::SafetensorsFile expected = attn::open_safetensors(expected_path);
  CHECK(got.header.tensors.size() >= expected.header.tensors.size());
  Diff worst;
  for (const auto& [name_, info] : expected.header.tensors) {
    const auto& name = name_;  // clang 14 lambdas (doctest INFO) cannot capture a binding
    CAPTURE(name);
    REQUIRE(got.header.tensors.count(name) == 1);
    REQUIRE(got.info(name).shape == info.shape);
    std::vector<float> g, e;
    const Diff d = compare(attn::tensor_as_f32(got, name, g),
                           attn::tensor_as_f32(expected, name, e), info.numel(), tol);
    INFO(name << ": worst |error| " << d.worst_abs << ", " << d.worst_ratio << " of tolerance");
    CHECK(d.failures == 0);
    worst.worst_abs = std::max(worst.worst_abs, d.worst_abs);
    worst.worst_ratio = std::max(worst.worst_ratio, d.worst_ratio);
  }
  return worst;
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

std::vector<std::int32_t> i32_tensor(const std::filesystem::path& file, const std::string& name) {
  const attn::SafetensorsFile f = attn::open_safetensors(file);
  const attn::TensorInfo& t = f.info(name);
  REQUIRE(t.dtype == attn::Dtype::I32);
  std::vector<std::int32_t> v(std::size_t(t.end - t.begin) / 4);
  std::memcpy(v.data(), f.bytes(t), v.size() * 4);
  return v;
}

}  // namespace test
