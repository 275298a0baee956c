// llama.cpp's control vectors in attn-cli generate, chat and view (--control-vector,
// --control-vector-scaled, --control-vector-layer-range) on stories260K: what changes the run and
// what is refused with exit 2 naming the file and the tensor. The logits against llama.cpp's with
// the same file are tests/model/check_cvec.py's (ctest model.cvector).
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "attn/io/gguf_write.hpp"
#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kDim = 64, kLayers = 5;  // stories260K

const std::string kModel = " -m " + (test::source_dir() / "weights/stories260K.gguf").string();

struct Direction {
  std::string name;
  std::vector<float> values;
};

// A control vector file as llama-cvector-generator writes one (general.architecture
// "controlvector", model_hint), with the tensors given.
fs::path vector_file(const std::string& name, const std::vector<Direction>& dirs,
                     const std::string& hint = "llama", const std::string& arch = "controlvector") {
  const fs::path path = test::temp_path(name);
  attn::OutputFile out(path, "control vector");
  std::vector<attn::GgufF32Tensor> tensors;
  for (const Direction& d : dirs)
    tensors.push_back({d.name, {std::int64_t(d.values.size())}, d.values});
  const std::vector<attn::GgufKeyValue> kv = {{"general.architecture", arch},
                                              {"controlvector.model_hint", hint}};
  attn::write_gguf(out, kv, tensors);
  out.commit();
  return path;
}

std::vector<float> ramp(std::int64_t n, float k) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[std::size_t(i)] = k * float((i * 7) % 13 - 6);
  return v;
}

fs::path good_vector() {
  std::vector<Direction> dirs;
  for (std::int64_t l = 1; l < kLayers; ++l)
    dirs.push_back({"direction." + std::to_string(l), ramp(kDim, 0.3f)});
  return vector_file("cv_good.gguf", dirs);
}

std::string generate(const std::string& flags) {
  const test::CliResult r =
      test::run_cli("generate" + kModel + " -p 'Once upon a time' -n 12 -t 1 " + flags);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  return r.out;
}

void refused(const std::string& cmd, const std::vector<std::string>& words) {
  const test::CliResult r = test::run_cli(cmd);
  CHECK_MESSAGE(r.status == 2, r.err);
  for (const std::string& w : words) CHECK_MESSAGE(r.err.find(w) != std::string::npos, r.err);
}

}  // namespace

TEST_CASE("control vectors: a vector changes generate's text, scale 0 and a range past it do not") {
  const std::string cv = good_vector().string();
  const std::string plain = generate("");
  CHECK(generate("--control-vector " + cv) != plain);
  CHECK(generate("--control-vector-scaled " + cv + ":0") == plain);
  CHECK(generate("--control-vector-scaled " + cv + " 0") == plain);  // the older two-word form
  // llama.cpp's layer 0 never gets one: a range of layer 0 alone adds nothing.
  CHECK(generate("--control-vector " + cv + " --control-vector-layer-range 0 0") == plain);
  // Two files and their scales add up: +1 and -1 of the same vector cancel exactly.
  CHECK(generate("--control-vector " + cv + " --control-vector-scaled " + cv + ":-1") == plain);
  CHECK(generate("--control-vector " + cv + "," + cv) ==
        generate("--control-vector-scaled " + cv + ":2"));
}

TEST_CASE("control vectors: view and chat take them") {
  const std::string cv = good_vector().string();
  const fs::path page = test::temp_path("cv_view.html");
  const test::CliResult v = test::run_cli("view" + kModel + " -p 'Once upon a time' -n 2 -t 1 " +
                                          "--control-vector " + cv + " --out " + page.string());
  CHECK_MESSAGE(v.status == 0, v.err);
  refused("view" + kModel + " -p 'Once' -n 1 --control-vector-scaled " + cv + ":x --out " +
              page.string(),
          {"--control-vector-scaled"});
  const fs::path tmpl = test::temp_path("cv_chat.jinja");
  std::ofstream(tmpl) << "{% for m in messages %}{{ m.content }}{% endfor %}";
  const std::string chat = "chat" + kModel + " -t 1 -n 4 --chat-template " + tmpl.string();
  const test::CliResult c = test::run_shell("echo 'Once upon' | " + std::string(ATTN_CLI) + " " +
                                            chat + " --control-vector " + cv);
  CHECK_MESSAGE(c.status == 0, c.err);
  refused(chat + " --control-vector " + test::temp_path("cv_none.gguf").string() + " < /dev/null",
          {"cv_none.gguf"});
}

TEST_CASE("control vectors: a wrong file is refused with exit 2 naming it and the tensor") {
  const std::string gen = "generate" + kModel + " -p 'Once' -n 1 ";
  const std::string wrong_dim =
      vector_file("cv_dim.gguf", {{"direction.1", ramp(kDim + 1, 1)}}).string();
  refused(gen + "--control-vector " + wrong_dim, {"cv_dim.gguf", "direction.1", "dim 64"});
  const std::string zero = vector_file("cv_zero.gguf", {{"direction.0", ramp(kDim, 1)}}).string();
  refused(gen + "--control-vector " + zero, {"cv_zero.gguf", "direction.0"});
  const std::string past = vector_file("cv_past.gguf", {{"direction.5", ramp(kDim, 1)}}).string();
  refused(gen + "--control-vector " + past, {"cv_past.gguf", "direction.5", "5 layers"});
  const std::string named = vector_file("cv_name.gguf", {{"direction.1x", ramp(kDim, 1)}}).string();
  refused(gen + "--control-vector " + named, {"cv_name.gguf", "direction.1x"});
  const std::string hint =
      vector_file("cv_hint.gguf", {{"direction.1", ramp(kDim, 1)}}, "gemma2").string();
  refused(gen + "--control-vector " + hint, {"cv_hint.gguf", "model_hint", "gemma2"});
  std::vector<float> nan = ramp(kDim, 1);
  nan[3] = std::numeric_limits<float>::quiet_NaN();
  const std::string bad = vector_file("cv_nan.gguf", {{"direction.2", nan}}).string();
  refused(gen + "--control-vector " + bad, {"cv_nan.gguf", "direction.2", "element 3"});
  // A model file is not a control vector.
  refused(gen + "--control-vector " + (test::source_dir() / "weights/stories260K.gguf").string(),
          {"stories260K.gguf", "general.architecture"});
  refused(gen + "--control-vector " + test::temp_path("cv_absent.gguf").string(),
          {"cv_absent.gguf"});
}

TEST_CASE("control vectors: bad flags are refused with exit 2 naming the flag") {
  const std::string gen = "generate" + kModel + " -p 'Once' -n 1 ";
  const std::string cv = good_vector().string();
  refused(gen + "--control-vector-scaled " + cv + ":nan",
          {"--control-vector-scaled", "finite number"});
  refused(gen + "--control-vector-scaled " + cv, {"--control-vector-scaled", "FNAME:SCALE"});
  refused(gen + "--control-vector-layer-range 1 2",
          {"--control-vector-layer-range needs --control-vector"});
  refused(gen + "--control-vector " + cv + " --control-vector-layer-range 3 1",
          {"--control-vector-layer-range", "A <= B"});
  refused(gen + "--control-vector " + cv + " --control-vector-layer-range -1 2",
          {"--control-vector-layer-range", "must not be negative"});
}
