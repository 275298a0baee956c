// attn-cli diff and --dump-activations (issue 38): a weight perturbed in layer k is named at layer
// k's first output and nothing before it; identical runs are equal; our dump against the float64
// PyTorch reference saved under TransformerLens's names (tests/golden/make_diff_dumps.py) within
// the golden tolerance, in F32 and in F64/F16/BF16; the allclose test, NaN and infinities, shapes,
// names in one file, hand-made F16/BF16 bits; the forward order; bad files and flags (exit 2); the
// activations' names, shapes, bound and bits.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "attn/error.hpp"
#include "attn/io/safetensors.hpp"
#include "test_support.hpp"
#include "workloads/dump_diff.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Shape = std::vector<std::int64_t>;

std::string q(const fs::path& p) {
  return "'" + p.string() + "'";
}

const fs::path kModel = test::model_dir("meta_f32");
// The golden case's prompt and greedy ids 0..2 (tests/golden/model/meta_f32/expected): a prefill
// of 7 and 3 decode steps, as make_observer.py runs its reference.
constexpr const char* kTokens = "22,48,85,50,105,47,46,124,50,48";

// Runs the golden model (weights: its file or a changed copy beside a copy of its config) with
// every activation in the dump.
void run_dump(const fs::path& weights, const fs::path& dump, const std::string& extra = "") {
  const test::CliResult r =
      test::run_cli("run -t 1 -m " + q(weights) + " --tokens " + kTokens +
                    " -n 3 --all-logits --dump " + q(dump) + " --dump-activations all " + extra);
  REQUIRE_MESSAGE(r.status == 0, r.err);
}

// A copy of the golden model with `tensor`[0] + delta, its config beside it.
fs::path perturbed(const std::string& tensor, float delta, const std::string& dir_name) {
  const fs::path dir = test::temp_path(dir_name);
  fs::create_directories(dir);
  fs::copy_file(kModel / "config.json", dir / "config.json", fs::copy_options::overwrite_existing);
  const attn::SafetensorsFile f = attn::open_safetensors(kModel / "weights.safetensors");
  std::vector<std::vector<float>> values;
  std::vector<attn::OutTensor> out;
  for (const auto& [name, info] : f.header.tensors) {
    REQUIRE(info.dtype == attn::Dtype::F32);
    std::vector<float>& v = values.emplace_back(std::size_t(info.numel()));
    std::memcpy(v.data(), f.bytes(info), v.size() * sizeof(float));
    if (name == tensor) v[0] += delta;
  }
  std::size_t i = 0;
  for (const auto& [name, info] : f.header.tensors)
    out.push_back({name, info.shape, values[i++].data()});
  attn::write_safetensors(dir / "weights.safetensors", out);
  return dir / "weights.safetensors";
}

json diff_json(const fs::path& a, const fs::path& b, const std::string& extra, int status) {
  const test::CliResult r = test::run_cli("diff --json " + q(a) + " " + q(b) + " " + extra);
  REQUIRE_MESSAGE(r.status == status, r.err, r.out);
  return json::parse(r.out);
}

// The block a dump name belongs to ("blocks.1.attn.hook_v", "decode.2.blocks.0.hook_resid_pre",
// "cache.1.k", "attn.0.prefill"), or -1.
int block_of(std::string name) {
  if (name.starts_with("decode.")) name = name.substr(name.find('.', 7) + 1);
  for (const char* prefix : {"blocks.", "cache.", "attn."})
    if (name.starts_with(prefix)) return std::stoi(name.substr(std::strlen(prefix)));
  return -1;
}

const fs::path& reference_dump() {
  static const fs::path p = [] {
    const fs::path d = test::temp_path("reference_run.safetensors");
    run_dump(kModel / "weights.safetensors", d);
    return d;
  }();
  return p;
}

// ---- A hand-made safetensors file of any dtype, bytes as given ----

struct RawTensor {
  std::string name, dtype;
  Shape shape;
  std::string bytes;
};

void write_raw(const fs::path& path, const std::vector<RawTensor>& tensors) {
  json header = json::object();
  std::string data;
  for (const RawTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary);
  const std::uint64_t n = h.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << h << data;
}

template <typename T>
std::string bytes_of(std::initializer_list<T> values) {
  std::string s;
  for (T v : values) s.append(reinterpret_cast<const char*>(&v), sizeof v);
  return s;
}

RawTensor f32(const std::string& name, std::initializer_list<float> v) {
  return {name, "F32", {std::int64_t(v.size())}, bytes_of(v)};
}

const cli::TensorDiff& row(const cli::DumpDiff& d, const std::string& name) {
  for (const cli::TensorDiff& t : d.tensors)
    if (t.name == name) return t;
  FAIL("no row " << name);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE(
    "diff: a weight perturbed in layer k is named at layer k's first output, nothing before") {
  struct Case {
    std::string tensor, first;
    int layer;
  };
  for (const Case& c : {Case{"layers.1.attention.wv.weight", "blocks.1.attn.hook_v", 1},
                        Case{"layers.1.feed_forward.w1.weight", "blocks.1.hook_mlp_out", 1},
                        Case{"layers.0.attention.wv.weight", "blocks.0.attn.hook_v", 0}}) {
    CAPTURE(c.tensor);
    const fs::path w = perturbed(c.tensor, 0.25f, "perturbed_" + c.tensor);
    const fs::path dump = w.parent_path() / "dump.safetensors";
    run_dump(w, dump);
    const json j = diff_json(dump, reference_dump(), "", 1);
    CHECK(j["equal"] == false);
    CHECK(j["first"] == c.first);
    CHECK(j["only_in_a"].empty());
    CHECK(j["only_in_b"].empty());
    bool past_first = false;
    for (const json& t : j["tensors"]) {
      const std::string name = t["name"];
      past_first = past_first || name == c.first;
      CHECK_MESSAGE(t["status"] == (t["over"] == 0 ? "ok" : "values"), name);
      if (block_of(name) >= 0 && block_of(name) < c.layer)
        CHECK_MESSAGE(t["over"] == 0, name, " differs before layer ", c.layer);
      if (!past_first) CHECK_MESSAGE(t["max_abs"] == 0.0, name, " before ", c.first);
    }
    // The text names it on its last line.
    const test::CliResult r = test::run_cli("diff " + q(dump) + " " + q(reference_dump()));
    CHECK(r.status == 1);
    CHECK(r.out.find("\nfirst difference: " + c.first + ": ") != std::string::npos);
  }
}

TEST_CASE("diff: identical runs are equal, exit 0") {
  const fs::path again = test::temp_path("again.safetensors");
  run_dump(kModel / "weights.safetensors", again);
  const json j = diff_json(again, reference_dump(), "--rtol 0 --atol 0", 0);
  CHECK(j["equal"] == true);
  CHECK(j["first"].is_null());
  CHECK(j["tensors"].size() == 105);  // 4 calls x (2 blocks x 11 sites + final norm + output +
                                      // logits) + input + 4 caches
  const test::CliResult r = test::run_cli("diff " + q(again) + " " + q(reference_dump()));
  CHECK(r.status == 0);
  CHECK(r.out.ends_with("equal: 105 tensors within rtol 1e-05, atol 1e-08\n"));
}

TEST_CASE("diff: our dump against PyTorch's float64 reference under TransformerLens's names") {
  const fs::path dir = test::golden_dir() / "diff";
  // F32, and the same tensors saved as F64, F16 and BF16 in turn.
  const json j =
      diff_json(reference_dump(), dir / "meta_f32_tl.safetensors", "--rtol 1e-4 --atol 1e-5", 0);
  CHECK(j["tensors"].size() == 105);
  std::set<std::string> dtypes;
  const json mixed = diff_json(reference_dump(), dir / "meta_f32_tl_mixed.safetensors",
                               "--rtol 1e-2 --atol 1e-2", 0);
  for (const json& t : mixed["tensors"]) dtypes.insert(t["dtype_b"].get<std::string>());
  CHECK(dtypes == std::set<std::string>{"BF16", "F16", "F64"});
  // A tolerance tighter than float32's rounding finds the first rounding difference.
  const json tight =
      diff_json(reference_dump(), dir / "meta_f32_tl.safetensors", "--rtol 1e-9 --atol 0", 1);
  CHECK(!tight["first"].is_null());
  diff_json(reference_dump(), dir / "meta_f32_tl_mixed.safetensors", "", 1);
}

TEST_CASE("diff: the allclose test with B the reference, NaN and infinities") {
  const fs::path a = test::temp_path("tol_a.safetensors"), b = test::temp_path("tol_b.safetensors");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  write_raw(a, {f32("edge", {1.5f, 1.0f}), f32("nan_same", {nan, 1}), f32("nan_one", {nan, 1}),
                f32("inf_same", {inf, -inf}), f32("inf_sign", {inf, 0}), f32("zero_ref", {3, 1})});
  write_raw(b, {f32("edge", {1.0f, 2.0f}), f32("nan_same", {nan, 1}), f32("nan_one", {0, 1}),
                f32("inf_same", {inf, -inf}), f32("inf_sign", {-inf, 0}), f32("zero_ref", {0, 2})});
  // |1.5 - 1| = 0.5 <= 0.25 + 0.25 * 1 passes; |1 - 2| = 1 <= 0.25 + 0.25 * 2 does not: rtol
  // scales B's value, not A's.
  cli::DumpDiff d = cli::diff_dumps(a, b, {0.25, 0.25});
  CHECK(row(d, "edge").over == 1);
  CHECK(row(d, "edge").max_abs == 1.0);
  CHECK(row(d, "edge").max_rel == 0.5);
  d = cli::diff_dumps(b, a, {0.25, 0.25});  // swapped: |1 - 1.5| <= 0.625, |2 - 1| > 0.5
  CHECK(row(d, "edge").over == 1);
  d = cli::diff_dumps(a, b, {0.5, 0.25});
  CHECK(row(d, "edge").over == 0);
  CHECK(row(d, "nan_same").equal());
  CHECK(row(d, "nan_one").over == 1);
  CHECK(row(d, "nan_one").nonfinite == 1);
  CHECK(row(d, "nan_one").max_abs == 0);  // only the finite pairs
  CHECK(row(d, "inf_same").equal());
  CHECK(row(d, "inf_sign").nonfinite == 1);
  // Relative error where B is 0 is not defined: the absolute error stands for it.
  CHECK(row(d, "zero_ref").max_abs == 3);
  CHECK(row(d, "zero_ref").max_rel == 0.5);
  // Unknown names in forward order: last, by name; edge passes at rtol 0.5.
  CHECK(d.first == "inf_sign");
  CHECK(!d.equal());
}

TEST_CASE("diff: F16, BF16 and F64 bits read as IEEE and bfloat16 define them") {
  const fs::path a = test::temp_path("halves_a.safetensors");
  const fs::path b = test::temp_path("halves_b.safetensors");
  // F16 0x3C00 = 1, 0xC000 = -2, 0x3555 = 0.333251953125, 0x7C00 = +inf, 0x0001 = 2^-24;
  // BF16 0x3F80 = 1, 0x4049 = 3.140625, 0xFF80 = -inf.
  write_raw(a,
            {{"h", "F16", {5}, bytes_of<std::uint16_t>({0x3C00, 0xC000, 0x3555, 0x7C00, 0x0001})},
             {"bf", "BF16", {3}, bytes_of<std::uint16_t>({0x3F80, 0x4049, 0xFF80})},
             {"d", "F64", {2}, bytes_of<double>({0.1, -1e300})}});
  write_raw(b,
            {f32("h", {1, -2, 0.333251953125f, std::numeric_limits<float>::infinity(), 0x1p-24f}),
             {"bf", "F64", {3}, bytes_of<double>({1, 3.140625, -HUGE_VAL})},
             {"d", "F64", {2}, bytes_of<double>({0.1, -1e300})}});
  const cli::DumpDiff d = cli::diff_dumps(a, b, {0, 0});
  CHECK(d.equal());
  CHECK(row(d, "h").dtype_a == "F16");
  CHECK(row(d, "bf").dtype_b == "F64");
  // A float32 0.1 against a float64 one: compared in double, not rounded to the same float.
  write_raw(b, {f32("d", {0.1f, 0})});
  write_raw(a, {{"d", "F64", {2}, bytes_of<double>({0.1, 0})}});
  CHECK(cli::diff_dumps(a, b, {0, 0}).tensors[0].over == 1);
}

TEST_CASE("diff: shapes that differ and names in one file") {
  const fs::path a = test::temp_path("shape_a.safetensors");
  const fs::path b = test::temp_path("shape_b.safetensors");
  write_raw(a, {f32("input", {1, 2}),
                {"blocks.0.hook_resid_pre", "F32", {2, 1}, bytes_of<float>({1, 2})},
                f32("blocks.0.hook_resid_post", {5}),
                f32("extra_a", {1})});
  write_raw(b, {f32("input", {1, 2}),
                {"blocks.0.hook_resid_pre", "F32", {1, 2}, bytes_of<float>({1, 2})},
                f32("blocks.0.hook_resid_post", {6}),
                f32("extra_b", {1})});
  const cli::DumpDiff d = cli::diff_dumps(a, b);
  CHECK(d.first == "blocks.0.hook_resid_pre");  // before resid_post, whose value differs
  CHECK(!row(d, "blocks.0.hook_resid_pre").same_shape());
  CHECK(row(d, "extra_a").in_a);
  CHECK(!row(d, "extra_a").in_b);
  const test::CliResult r = test::run_cli("diff " + q(a) + " " + q(b));
  CHECK(r.status == 1);
  CHECK(r.out.ends_with(
      "first difference: blocks.0.hook_resid_pre: shape [2, 1] in A, [1, 2] in B\n"));
  const json j = diff_json(a, b, "", 1);
  CHECK(j["only_in_a"] == json::array({"extra_a"}));
  CHECK(j["only_in_b"] == json::array({"extra_b"}));
  // Names in one file only, the rest equal: still exit 1, said on the last line.
  write_raw(a, {f32("input", {1, 2}), f32("extra_a", {1})});
  write_raw(b, {f32("input", {1, 2})});
  const test::CliResult only = test::run_cli("diff " + q(a) + " " + q(b));
  CHECK(only.status == 1);
  CHECK(only.out.ends_with("agree within rtol 1e-05, atol 1e-08; 1 name(s) in one file only\n"));
  CHECK(diff_json(a, b, "", 1)["first"].is_null());
}

TEST_CASE("diff: forward order") {
  const std::vector<std::string> expected = {
      "input",
      "blocks.0.hook_resid_pre",
      "blocks.0.attn.hook_q",
      "blocks.0.attn.hook_k",
      "blocks.0.attn.hook_rot_q",
      "blocks.0.attn.hook_rot_k",
      "cache.0.k",
      "blocks.0.attn.hook_v",
      "cache.0.v",
      "attn.0.prefill",
      "blocks.0.attn.hook_pattern",
      "blocks.0.hook_attn_out",
      "blocks.0.hook_resid_mid",
      "blocks.0.hook_mlp_out",
      "blocks.0.hook_resid_post",
      "lens.0.prefill",
      "blocks.2.hook_resid_pre",
      "blocks.10.hook_resid_pre",  // by number, not by text
      "prefill.output",
      "ln_final.hook_normalized",
      "prefill.logits",
      "attn.0.decode.1",
      "decode.1.blocks.0.attn.hook_pattern",
      "decode.1.blocks.0.hook_resid_post",
      "lens.0.decode.1",
      "decode.1.output",
      "decode.1.logits",
      "decode.2.blocks.0.hook_resid_pre",
      "decode.10.blocks.0.hook_resid_pre",
      "blocks.0.hook_unknown",  // unknown: last, by name
      "decode.0.output",
      "x",
  };
  std::vector<std::string> names = expected;
  std::mt19937 rng(7);
  for (int i = 0; i < 5; ++i) {
    std::shuffle(names.begin(), names.end(), rng);
    cli::sort_forward(names);
    CHECK(names == expected);
  }
}

TEST_CASE("diff: bad files and flags are exit 2 naming the file, never a crash") {
  const fs::path good = test::temp_path("good.safetensors");
  write_raw(good, {f32("x", {1})});
  const fs::path text = test::temp_path("text.safetensors");
  std::ofstream(text) << "not a safetensors file";
  const fs::path ints = test::temp_path("ints.safetensors");
  write_raw(ints, {{"x", "I64", {1}, bytes_of<std::int64_t>({1})}});
  const fs::path truncated = test::temp_path("truncated.safetensors");
  write_raw(truncated, {f32("x", {1, 2})});
  fs::resize_file(truncated, fs::file_size(truncated) - 2);
  const fs::path missing = test::temp_path("missing.safetensors");
  for (const fs::path& bad : {text, ints, truncated, missing, test::temp_dir()}) {
    for (const std::string& args : {q(bad) + " " + q(good), q(good) + " " + q(bad)}) {
      const test::CliResult r = test::run_cli("diff " + args);
      CHECK_MESSAGE(r.status == 2, args, r.err);
      CHECK_MESSAGE(r.err.find(bad.filename().string()) != std::string::npos, r.err);
      CHECK(r.out.empty());
    }
  }
  CHECK(test::run_cli("diff " + q(ints) + " " + q(good)).err.find("'x'") != std::string::npos);
  for (const std::string flags : {"--rtol -1", "--atol nan", "--rtol inf", "--rtol x", ""}) {
    const std::string args =
        flags.empty() ? "diff " + q(good) : "diff " + q(good) + " " + q(good) + " " + flags;
    const test::CliResult r = test::run_cli(args);
    CHECK_MESSAGE(r.status == 2, args);
    CHECK(r.err.starts_with("attn-cli: error: "));
  }
}

// ---- --dump-activations ----

namespace {

std::map<std::string, Shape> shapes_in(const fs::path& dump) {
  std::map<std::string, Shape> out;
  const attn::SafetensorsFile f = attn::open_safetensors(dump);
  for (const auto& [name, info] : f.header.tensors) out[name] = info.shape;
  return out;
}

std::vector<float> values(const fs::path& dump, const std::string& name) {
  const attn::SafetensorsFile f = attn::open_safetensors(dump);
  const attn::TensorInfo& t = f.info(name);
  std::vector<float> v(std::size_t(t.numel()));
  std::memcpy(v.data(), f.bytes(t), v.size() * sizeof(float));
  return v;
}

}  // namespace

TEST_CASE("dump-activations: every site's shape, each call, batch and prefill 0") {
  // The seed notebook's block `attention` (dim 18, 6 heads, 2 KV heads, head_dim 3): no MLP.
  struct Shape3 {
    std::int64_t B, P, N;
  };
  for (const Shape3 s : {Shape3{2, 3, 2}, Shape3{1, 1, 1}, Shape3{2, 0, 2}, Shape3{1, 4, 0}}) {
    CAPTURE(s.B);
    CAPTURE(s.P);
    CAPTURE(s.N);
    const fs::path dump = test::temp_path("shapes.safetensors");
    const test::CliResult r = test::run_cli("run -t 1 -b " + std::to_string(s.B) + " --prefill " +
                                            std::to_string(s.P) + " -n " + std::to_string(s.N) +
                                            " --dump " + q(dump) + " --dump-activations all");
    REQUIRE_MESSAGE(r.status == 0, r.err);
    std::map<std::string, Shape> want;
    for (std::int64_t c = s.P > 0 ? 0 : 1; c <= s.N; ++c) {
      const std::string p = c == 0 ? "" : "decode." + std::to_string(c) + ".";
      const std::int64_t T = c == 0 ? s.P : 1, S = c == 0 ? s.P : s.P + c;
      for (const char* h : {"hook_resid_pre", "hook_attn_out", "hook_resid_post"})
        want[p + "blocks.0." + h] = {s.B, T, 18};
      for (const char* h : {"attn.hook_q", "attn.hook_rot_q"})
        want[p + "blocks.0." + h] = {s.B, T, 6, 3};
      for (const char* h : {"attn.hook_k", "attn.hook_rot_k", "attn.hook_v"})
        want[p + "blocks.0." + h] = {s.B, T, 2, 3};
      want[p + "blocks.0.attn.hook_pattern"] = {s.B, 6, T, S};
    }
    std::map<std::string, Shape> got;
    for (const auto& [name, shape] : shapes_in(dump))
      if (name.find("hook_") != std::string::npos) got[name] = shape;
    CHECK(got == want);
  }
}

TEST_CASE("dump-activations: a list of names keeps exactly those, with the outputs' bits") {
  const fs::path plain = test::temp_path("plain.safetensors");
  REQUIRE(test::run_cli("run -t 1 -m " + q(kModel / "weights.safetensors") + " --tokens " +
                        kTokens + " -n 3 --attention-weights --dump " + q(plain))
              .status == 0);
  const fs::path some = test::temp_path("some.safetensors");
  const test::CliResult r = test::run_cli(
      "run -t 1 -m " + q(kModel / "weights.safetensors") + " --tokens " + kTokens +
      " -n 3 --dump " + q(some) +
      " --dump-activations ' hook_resid_post,blocks.1.attn.hook_pattern,ln_final.hook_normalized'");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  std::set<std::string> hooks;
  for (const auto& [name, shape] : shapes_in(some))
    if (name.find("hook_") != std::string::npos) hooks.insert(name);
  std::set<std::string> want;
  for (const std::string p : {"", "decode.1.", "decode.2.", "decode.3."})
    want.insert({p + "blocks.0.hook_resid_post", p + "blocks.1.hook_resid_post",
                 p + "blocks.1.attn.hook_pattern", p + "ln_final.hook_normalized"});
  CHECK(hooks == want);
  // Observed, the run gives the same bits; the pattern written in place by the forward is the
  // one --attention-weights keeps.
  for (const std::string name :
       {"prefill.output", "decode.3.output", "prefill.logits", "cache.1.v"})
    CHECK_MESSAGE(values(some, name) == values(plain, name), name);
  CHECK(values(some, "blocks.1.attn.hook_pattern") == values(plain, "attn.1.prefill"));
  CHECK(values(some, "decode.2.blocks.1.attn.hook_pattern") == values(plain, "attn.1.decode.2"));
  // Both kept at once: the activations copy what the attention weights' buffers hold.
  const fs::path both = test::temp_path("both.safetensors");
  run_dump(kModel / "weights.safetensors", both, "--attention-weights");
  CHECK(values(both, "blocks.0.attn.hook_pattern") == values(both, "attn.0.prefill"));
  CHECK(values(both, "decode.1.blocks.1.attn.hook_pattern") == values(both, "attn.1.decode.1"));
  CHECK(values(both, "decode.1.blocks.1.attn.hook_pattern") ==
        values(reference_dump(), "decode.1.blocks.1.attn.hook_pattern"));
}

TEST_CASE("dump-activations: refused before any work, naming the flag") {
  const fs::path dump = test::temp_path("refused.safetensors");
  struct Bad {
    std::string args, says;
  };
  const std::string model = "-m " + q(kModel / "weights.safetensors") + " --tokens " + kTokens;
  for (const Bad& b : {
           Bad{"run --dump-activations all", "--dump-activations needs --dump"},
           Bad{"run --dump " + q(dump) + " --dump-activations hook_nothing",
               "'hook_nothing': expected all"},
           Bad{"run --dump " + q(dump) + " --dump-activations blocks.1.hook_resid_pre",
               "layer 1 is outside the model's 1 layers"},
           Bad{"run --dump " + q(dump) + " --dump-activations hook_mlp_out", "has no MLP"},
           Bad{"run --dump " + q(dump) + " --dump-activations ln_final.hook_normalized",
               "output head"},
           Bad{"run --dump " + q(dump) + " --dump-activations all,", "an empty name"},
           Bad{"run --dump " + q(dump) + " --dump-activations ''", "must not be empty"},
           Bad{"run " + model + " --dump " + q(dump) +
                   " --dump-activations ln_final.hook_normalized --layers 0:1",
               "output head"},
           // The pattern alone: 6 heads x 16000^2 floats, 6 GB.
           Bad{"run -c 16384 --prefill 16000 -n 0 --dump " + q(dump) +
                   " --dump-activations attn.hook_pattern",
               "over the limit of 1 GiB"},
       }) {
    CAPTURE(b.args);
    fs::remove(dump);
    const test::CliResult r = test::run_cli(b.args);
    CHECK(r.status == 2);
    CHECK_MESSAGE(r.err.find(b.says) != std::string::npos, r.err);
    CHECK(r.err.find("--dump-activations") != std::string::npos);
    CHECK(!fs::exists(dump));
  }
}

TEST_CASE("dump-activations: beside the logit lens and the attention weights, the same values") {
  const fs::path all = test::temp_path("with_lens.safetensors");
  run_dump(kModel / "weights.safetensors", all, "--logit-lens 3 --attention-weights");
  const json j = diff_json(all, reference_dump(), "--rtol 0 --atol 0", 1);
  CHECK(j["first"].is_null());  // every tensor in both equal; the lens and attn.* only in A
  CHECK(j["only_in_b"].empty());
  for (const json& name : j["only_in_a"]) {
    const std::string n = name;
    CHECK_MESSAGE((n.starts_with("lens.") || n.starts_with("attn.")), n);
  }
  // The last block's lens is the logits (every prefill position: --all-logits).
  CHECK(values(all, "lens.1.prefill") == values(all, "prefill.logits"));
}
