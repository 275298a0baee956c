// Every seed notebook's attention class, as the notebook calls it, against attn-cli: fixtures
// from tests/golden/make_notebooks.py, run through the CLI with --dump and compared tensor by
// tensor.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "attn/io/safetensors.hpp"
#include "test_support.hpp"

namespace {

std::filesystem::path notebooks_dir() {
  return test::golden_dir() / "notebooks";
}

nlohmann::json cases() {
  std::ifstream in(notebooks_dir() / "cases.json");
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

// Runs one case through the CLI on `threads` threads; returns the worst error over every tensor.
test::Diff run_case(const nlohmann::json& c, int threads) {
  const auto dir = notebooks_dir() / c.at("name").get<std::string>();
  const auto dump = test::temp_path("attn_nb_" + c.at("name").get<std::string>() + ".safetensors");
  const std::string args =
      "run --config " + (dir / "config.json").string() + " --weights " +
      (dir / "weights.safetensors").string() + " --input " + (dir / "input.safetensors").string() +
      " --prefill " + std::to_string(c.at("prefill").get<int>()) + " --steps " +
      std::to_string(c.at("steps").get<int>()) + " -t " + std::to_string(threads) +
      (c.at("attention_weights").get<bool>() ? " --attention-weights" : "") + " --dump " +
      dump.string();
  const test::CliResult r = test::run_cli(args);
  INFO(args);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const test::Tolerance tol{c.at("tolerance").at("rtol"), c.at("tolerance").at("atol")};
  const test::Diff worst = test::compare_files(dump, dir / "expected.safetensors", tol);
  std::filesystem::remove(dump);
  return worst;
}

}  // namespace

TEST_CASE("notebooks: every seed notebook class matches attn-cli's dump on 1 and 2 threads") {
  const nlohmann::json all = cases();
  REQUIRE(all.size() >= 12);
  for (const auto& c : all)
    for (int threads : {1, 2}) {
      CAPTURE(c.at("name").get<std::string>());
      const test::Diff d = run_case(c, threads);
      MESSAGE("notebook " << c.at("name").get<std::string>() << " ("
                          << c.at("call").get<std::string>() << ") threads " << threads
                          << ": worst |error| " << d.worst_abs << ", " << d.worst_ratio
                          << " of tolerance");
    }
}
