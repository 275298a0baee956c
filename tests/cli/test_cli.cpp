// The CLI as CI scripts use it (CONTRACT §3-§6): the --json trace's shapes for every shipped
// config, the text trace, determinism of the dump, and every error path's exit status 2 with a
// message naming the culprit and nothing left behind.
#include <doctest/doctest.h>

#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "attn/io/safetensors.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using Shape = std::vector<std::int64_t>;

namespace {

// ---- Files ----

using test::TempDir;

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE_MESSAGE(in, "cannot read ", p.string());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

void write_text(const fs::path& p, const std::string& text) {
  write_bytes(p, text);
}

// Paths go through /bin/sh: single-quote them (test paths hold no single quote).
std::string q(const fs::path& p) {
  std::string s = "'";
  s.append(p.string()).append("'");
  return s;
}

fs::path config_path(const std::string& name) {
  return test::source_dir() / "configs" / name;
}
fs::path golden(const std::string& file) {
  return test::golden_dir() / "seed_gqa" / file;
}

// A safetensors file taken apart: its header as editable JSON and its data section verbatim.
struct RawSafetensors {
  nlohmann::ordered_json header;
  std::string data;
};

std::string le64(std::uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[std::size_t(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

RawSafetensors read_raw(const fs::path& p) {
  const std::string bytes = read_bytes(p);
  REQUIRE(bytes.size() >= 8);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[std::size_t(i)]);
  REQUIRE(n <= bytes.size() - 8);
  return {nlohmann::ordered_json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
}

void write_raw(const fs::path& p, const RawSafetensors& f) {
  const std::string header = f.header.dump();
  write_bytes(p, le64(header.size()) + header + f.data);
}

// The seed_gqa golden weights, every tensor as f32.
struct NamedTensor {
  std::string name;
  Shape shape;
  std::vector<float> values;
};

std::vector<NamedTensor> golden_weights() {
  const attn::SafetensorsFile f = attn::open_safetensors(golden("weights.safetensors"));
  std::vector<NamedTensor> out;
  for (const auto& [name_, info] : f.header.tensors) {
    const auto& name = name_;  // clang 14 lambdas (doctest INFO) cannot capture a binding
    std::vector<float> storage;
    const float* p = attn::tensor_as_f32(f, name, storage);
    out.push_back({name, info.shape, std::vector<float>(p, p + info.numel())});
  }
  return out;
}

void write_tensors(const fs::path& p, const std::vector<NamedTensor>& tensors) {
  std::vector<attn::OutTensor> out;
  for (const NamedTensor& t : tensors) out.push_back({t.name, t.shape, t.values.data()});
  attn::write_safetensors(p, out);
}

// ---- Traces ----

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t nl = text.find('\n', at);
    if (nl == std::string::npos) {
      out.push_back(text.substr(at));
      break;
    }
    out.push_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  return out;
}

// Every stdout line must be one JSON object; the output ends with a newline.
std::vector<json> json_lines(const std::string& out) {
  CHECK_MESSAGE((!out.empty() && out.back() == '\n'), "stdout does not end with a newline");
  std::vector<json> events;
  for (const std::string& line : lines_of(out)) {
    json j;
    try {
      j = json::parse(line);
    } catch (const json::exception& e) {
      FAIL_CHECK("stdout line is not JSON: '" << line << "': " << e.what());
      continue;
    }
    CHECK_MESSAGE(j.is_object(), "stdout line is not a JSON object: ", line);
    CHECK_MESSAGE(j.contains("event"), "stdout line has no \"event\": ", line);
    events.push_back(j);
  }
  return events;
}

// The config's values as the contract defines them, computed from the file's JSON.
struct Expected {
  std::int64_t dim, n_layers, n_heads, n_kv_heads, head_dim, n_rep, ffn_hidden, max_batch_size,
      max_seq_len;
};

std::int64_t meta_ffn_hidden(std::int64_t dim, std::int64_t multiple_of, const json& mult) {
  std::int64_t h = 4 * dim;
  h = 2 * h / 3;
  if (!mult.is_null()) h = static_cast<std::int64_t>(mult.get<double>() * double(h));
  return multiple_of * ((h + multiple_of - 1) / multiple_of);
}

Expected expected_from(const json& c) {
  Expected e{};
  e.dim = c.at("dim");
  e.n_layers = c.value("n_layers", 1);
  e.n_heads = c.at("n_heads");
  e.n_kv_heads = c.contains("n_kv_heads") && !c.at("n_kv_heads").is_null()
                     ? c.at("n_kv_heads").get<std::int64_t>()
                     : e.n_heads;
  e.head_dim = e.dim / e.n_heads;
  e.n_rep = e.n_heads / e.n_kv_heads;
  e.ffn_hidden =
      meta_ffn_hidden(e.dim, c.value("multiple_of", 256),
                      c.contains("ffn_dim_multiplier") ? c.at("ffn_dim_multiplier") : json());
  e.max_batch_size = c.value("max_batch_size", 32);
  e.max_seq_len = c.value("max_seq_len", 2048);
  return e;
}

const Expected kSeed{18, 1, 6, 2, 3, 3, 50, 2, 17};

// Checks a whole --json trace of a run with batch B, prefill P and N decode steps: the config
// event, the prefill, each decode step growing the cache by one position, and the summary last.
void check_trace(const std::vector<json>& ev, const Expected& x, std::int64_t B, std::int64_t P,
                 std::int64_t N) {
  REQUIRE(ev.size() == std::size_t(N + 3));
  const json& c = ev.front();
  CHECK(c.at("event") == "config");
  CHECK(c.at("dim") == x.dim);
  CHECK(c.at("n_layers") == x.n_layers);
  CHECK(c.at("n_heads") == x.n_heads);
  CHECK(c.at("n_kv_heads") == x.n_kv_heads);
  CHECK(c.at("head_dim") == x.head_dim);
  CHECK(c.at("n_rep") == x.n_rep);
  CHECK(c.at("ffn_hidden") == x.ffn_hidden);
  CHECK(c.at("max_batch_size") == x.max_batch_size);
  CHECK(c.at("max_seq_len") == x.max_seq_len);
  CHECK(c.at("model_parallel_size") == 1);
  CHECK(c.at("cache_capacity").get<Shape>() ==
        Shape{x.max_batch_size, x.n_kv_heads, x.max_seq_len, x.head_dim});

  const json& p = ev[1];
  CHECK(p.at("event") == "prefill");
  CHECK(p.at("start_pos") == 0);
  CHECK(p.at("seqlen") == P);
  CHECK(p.at("input").get<Shape>() == Shape{B, P, x.dim});
  CHECK(p.at("output").get<Shape>() == Shape{B, P, x.dim});
  CHECK(p.at("cache_k").get<Shape>() == Shape{B, x.n_kv_heads, P, x.head_dim});
  CHECK(p.at("cache_v").get<Shape>() == Shape{B, x.n_kv_heads, P, x.head_dim});

  for (std::int64_t i = 1; i <= N; ++i) {
    CAPTURE(i);
    const json& d = ev[std::size_t(1 + i)];
    const json& before = ev[std::size_t(i)];
    CHECK(d.at("event") == "decode");
    CHECK(d.at("step") == i);
    CHECK(d.at("start_pos") == P + i - 1);
    CHECK(d.at("seqlen") == 1);
    CHECK(d.at("input").get<Shape>() == Shape{B, 1, x.dim});
    CHECK(d.at("output").get<Shape>() == Shape{B, 1, x.dim});
    CHECK(d.at("cache_k").get<Shape>() == Shape{B, x.n_kv_heads, P + i, x.head_dim});
    CHECK(d.at("cache_v").get<Shape>() == Shape{B, x.n_kv_heads, P + i, x.head_dim});
    CHECK(d.at("cache_k").at(2).get<std::int64_t>() ==
          before.at("cache_k").at(2).get<std::int64_t>() + 1);
  }
  CHECK(ev.back().at("event") == "summary");
}

std::vector<json> run_json(const std::string& args) {
  const test::CliResult r = test::run_cli(args);
  INFO("attn-cli " << args << "\nstderr: " << r.err);
  REQUIRE(r.status == 0);
  return json_lines(r.out);
}

// Events without their timings, for comparing two traces.
std::vector<json> without_timings(std::vector<json> ev) {
  ev.erase(std::remove_if(ev.begin(), ev.end(),
                          [](const json& e) { return e.value("event", "") == "summary"; }),
           ev.end());
  for (json& e : ev) e.erase("ms");
  return ev;
}

// ---- Refusals ----

// Whether `word` occurs in `text` with no identifier character glued to either side.
bool has_word(const std::string& text, const std::string& word) {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (std::size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const bool left = at == 0 || !ident(text[at - 1]);
    const bool right = at + word.size() == text.size() || !ident(text[at + word.size()]);
    if (left && right) return true;
  }
  return false;
}

std::string without_spaces(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
  return s;
}

struct Refusal {
  std::vector<std::string> words;        // each must appear in stderr as a whole word
  std::vector<std::string> shapes = {};  // each must appear in stderr, spaces ignored
  bool one_line = true;                  // the message is one line (CLI11's usage errors: two)
};

// Runs `args` with --dump into an empty directory and checks the refusal: exit status 2, nothing
// on stdout (the error comes before any work), stderr naming the culprit, and no dump and no
// temporary file left behind.
test::CliResult check_refusal(const std::string& args, const Refusal& want) {
  TempDir dump_dir;
  const std::string full = args + " --dump " + q(dump_dir.path / "out.safetensors");
  const test::CliResult r = test::run_cli(full);
  INFO("attn-cli " << full << "\nstatus " << r.status << "\nstdout: " << r.out
                   << "\nstderr: " << r.err);
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK_FALSE(r.err.empty());
  if (want.one_line) CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  for (const std::string& w : want.words) {
    CAPTURE(w);
    CHECK(has_word(r.err, w));
  }
  for (const std::string& s : want.shapes) {
    CAPTURE(s);
    CHECK(without_spaces(r.err).find(without_spaces(s)) != std::string::npos);
  }
  CHECK(names_in(dump_dir.path).empty());
  return r;
}

// Options that run the seed_gqa golden config with files in place of the seeded ones.
std::string golden_run(const fs::path& weights, const std::string& more = "") {
  return "run --config " + q(golden("config.json")) + " --weights " + q(weights) + " --input " +
         q(golden("input.safetensors")) + " --prefill 4 --steps 2" + more;
}

const std::string kWq = "layers.0.attention.wq.weight";
const std::string kWk = "layers.0.attention.wk.weight";
const std::string kWv = "layers.0.attention.wv.weight";
const std::string kWo = "layers.0.attention.wo.weight";

}  // namespace

// ---- Shapes ----

TEST_CASE("cli: --json shapes for every config in configs/ but the 8B layer") {
  std::set<std::string> seen;
  for (const auto& entry : fs::directory_iterator(test::source_dir() / "configs")) {
    const fs::path p = entry.path();
    if (p.extension() != ".json" || p.filename() == "llama3-8b-layer.json") continue;
    CAPTURE(p.string());
    seen.insert(p.filename().string());
    const Expected x = expected_from(json::parse(read_bytes(p)));
    const std::int64_t P = 5, N = 3;
    check_trace(run_json("run --config " + q(p) + " --prefill 5 --steps 3 --json"), x, 1, P, N);
    check_trace(run_json("decode --config " + q(p) + " --prefill 2 --steps 4 --json"), x, 1, 2, 4);
  }
  for (const char* name : {"gqa.json", "mha.json", "mqa.json", "llama-tiny.json"}) {
    CAPTURE(name);
    CHECK(seen.count(name) == 1);
  }
}

TEST_CASE("cli: the shipped configs hold the shapes they are named for") {
  // Independent of the files' own numbers: what each is meant to show.
  const std::vector<json> mha = run_json("run --config " + q(config_path("mha.json")) + " --json");
  CHECK(mha.front().at("n_rep") == 1);
  CHECK(mha.front().at("n_kv_heads") == mha.front().at("n_heads"));
  const std::vector<json> mqa = run_json("run --config " + q(config_path("mqa.json")) + " --json");
  CHECK(mqa.front().at("n_kv_heads") == 1);
  const std::vector<json> gqa = run_json("run --config " + q(config_path("gqa.json")) + " --json");
  CHECK(gqa.front().at("n_kv_heads") == 2);
  CHECK(gqa.front().at("n_rep") == 3);
}

TEST_CASE("cli: no --config runs the seed's ModelArgs with a prefill of 7") {
  const std::vector<json> ev = run_json("run --json");
  REQUIRE(ev.size() >= 4);  // config, prefill, at least one decode step, summary
  check_trace(ev, kSeed, 1, 7, std::int64_t(ev.size()) - 3);
  CHECK(ev[0].at("cache_capacity").get<Shape>() == Shape{2, 2, 17, 3});
  CHECK(ev[1].at("output").get<Shape>() == Shape{1, 7, 18});
  CHECK(ev[1].at("cache_k").get<Shape>() == Shape{1, 2, 7, 3});
  CHECK(ev[2].at("cache_k").get<Shape>() == Shape{1, 2, 8, 3});
}

TEST_CASE("cli: decode on configs/mha.json grows the cache one position per step") {
  const std::vector<json> ev =
      run_json("decode --config " + q(config_path("mha.json")) + " --prefill 10 --steps 4 --json");
  REQUIRE(ev.size() == 7);
  CHECK(ev[1].at("event") == "prefill");
  CHECK(ev[1].at("cache_k").get<Shape>() == Shape{1, 8, 10, 64});
  CHECK(ev[1].at("cache_v").get<Shape>() == Shape{1, 8, 10, 64});
  for (std::int64_t i = 1; i <= 4; ++i) {
    CAPTURE(i);
    CHECK(ev[std::size_t(1 + i)].at("cache_k").get<Shape>() == Shape{1, 8, 10 + i, 64});
    CHECK(ev[std::size_t(1 + i)].at("cache_v").get<Shape>() == Shape{1, 8, 10 + i, 64});
    CHECK(ev[std::size_t(1 + i)].at("start_pos") == 9 + i);
  }
  CHECK(ev[6].at("event") == "summary");
}

TEST_CASE("cli: configs/gqa.json gives exactly the trace of no --config") {
  const std::string gqa = " --config " + q(config_path("gqa.json"));
  for (const std::string& cmd : {std::string("run --json"), std::string("decode --steps 5 --json"),
                                 std::string("run --batch 2 --prefill 3 --steps 2 --json")}) {
    CAPTURE(cmd);
    const std::vector<json> seed = without_timings(run_json(cmd));
    const std::vector<json> file = without_timings(run_json(cmd + gqa));
    REQUIRE(seed.size() >= 3);
    CHECK(seed.size() == file.size());
    for (std::size_t i = 0; i < std::min(seed.size(), file.size()); ++i) {
      CAPTURE(i);
      CHECK(seed[i].dump() == file[i].dump());
    }
  }
}

TEST_CASE("cli: --json stdout holds only JSON lines, the summary last, logs on stderr") {
  TempDir dir;
  // An unknown key makes a warning; trace-level logging makes more: all of it must go to stderr.
  const fs::path cfg = dir.path / "extra_key.json";
  write_text(cfg, R"({"dim": 16, "n_heads": 4, "n_kv_heads": 2, "max_batch_size": 2,
    "max_seq_len": 16, "rope": "half", "block": "llama", "use_fancy_rope": true})");
  for (const std::string& cmd : {"run --json --log-level trace --config " + q(cfg),
                                 "decode --json --steps 2 --config " + q(cfg),
                                 std::string("run --json --log-level trace")}) {
    CAPTURE(cmd);
    const test::CliResult r = test::run_cli(cmd);
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    const std::vector<json> ev = json_lines(r.out);
    REQUIRE(ev.size() >= 3);
    CHECK(ev.front().at("event") == "config");
    CHECK(ev.back().at("event") == "summary");
    for (std::size_t i = 0; i + 1 < ev.size(); ++i) CHECK(ev[i].at("event") != "summary");
    if (cmd.find("extra_key") != std::string::npos)
      CHECK(r.err.find("use_fancy_rope") != std::string::npos);
  }
}

TEST_CASE("cli: decode --steps 2 prints the cache after each step as the notebook does") {
  const test::CliResult r = test::run_cli("decode --steps 2");
  INFO("stderr: " << r.err);
  REQUIRE(r.status == 0);
  std::vector<std::string> decode_lines;
  for (const std::string& line : lines_of(r.out))
    if (line.rfind("decode step", 0) == 0) decode_lines.push_back(line);
  CHECK(decode_lines ==
        std::vector<std::string>{
            "decode step 1: kv cache shape: key: [1, 2, 8, 3], value: [1, 2, 8, 3]",
            "decode step 2: kv cache shape: key: [1, 2, 9, 3], value: [1, 2, 9, 3]"});
  // A text trace is not JSON.
  CHECK(r.out.find('{') == std::string::npos);
}

TEST_CASE("cli: --batch 2 gives batch-2 shapes") {
  check_trace(run_json("run --batch 2 --prefill 7 --steps 3 --json"), kSeed, 2, 7, 3);
  const std::vector<json> ev =
      run_json("decode --batch 2 --config " + q(config_path("llama-tiny.json")) +
               " --prefill 4 -n 2 --json");
  const Expected x = expected_from(json::parse(read_bytes(config_path("llama-tiny.json"))));
  check_trace(ev, x, 2, 4, 2);
  CHECK(ev[1].at("input").at(0) == 2);
}

TEST_CASE("cli: short forms -n, -s and -t mean --steps, --seed and --threads") {
  TempDir dir;
  const fs::path a = dir.path / "a.safetensors", b = dir.path / "b.safetensors";
  const test::CliResult ra = test::run_cli("run -n 2 -s 9 -t 1 --json --dump " + q(a));
  const test::CliResult rb =
      test::run_cli("run --steps 2 --seed 9 --threads 1 --json --dump " + q(b));
  INFO(ra.err << rb.err);
  REQUIRE(ra.status == 0);
  REQUIRE(rb.status == 0);
  check_trace(json_lines(ra.out), kSeed, 1, 7, 2);
  CHECK(read_bytes(a) == read_bytes(b));
}

TEST_CASE("cli: --help and --version exit 0") {
  const test::CliResult help = test::run_cli("--help");
  CHECK(help.status == 0);
  CHECK(has_word(help.out, "run"));
  CHECK(has_word(help.out, "decode"));
  const test::CliResult version = test::run_cli("--version");
  CHECK(version.status == 0);
  CHECK(version.out.find("0.") != std::string::npos);
  CHECK(std::count(version.out.begin(), version.out.end(), '\n') == 1);
}

// ---- The dump ----

TEST_CASE("cli: the dump is deterministic in the seed and laid out as CONTRACT §5") {
  TempDir dir;
  const fs::path a = dir.path / "a.safetensors", b = dir.path / "b.safetensors",
                 c = dir.path / "c.safetensors";
  const std::string opts = "run --batch 2 --prefill 4 --steps 2 --threads 2 --dump ";
  const std::vector<std::pair<fs::path, int>> runs = {{a, 1}, {b, 1}, {c, 2}};
  for (const auto& [path, seed] : runs) {
    const test::CliResult r = test::run_cli(opts + q(path) + " --seed " + std::to_string(seed));
    INFO(r.err);
    REQUIRE(r.status == 0);
  }
  CHECK(names_in(dir.path) ==
        std::vector<std::string>{"a.safetensors", "b.safetensors", "c.safetensors"});
  const std::string bytes_a = read_bytes(a);
  CHECK(bytes_a == read_bytes(b));
  CHECK(bytes_a != read_bytes(c));

  const attn::SafetensorsFile f = attn::open_safetensors(a);
  const std::map<std::string, Shape> want = {
      {"input", {2, 6, 18}},           {"prefill.output", {2, 4, 18}},
      {"decode.1.output", {2, 1, 18}}, {"decode.2.output", {2, 1, 18}},
      {"cache.0.k", {2, 2, 6, 3}},     {"cache.0.v", {2, 2, 6, 3}}};
  std::map<std::string, Shape> got;
  for (const auto& [name_, info] : f.header.tensors) {
    const auto& name = name_;  // clang 14 lambdas (doctest INFO) cannot capture a binding
    CAPTURE(name);
    CHECK(info.dtype == attn::Dtype::F32);
    got[name] = info.shape;
  }
  CHECK(got == want);
  // Different seeds draw different inputs and weights: every tensor differs, not just one.
  const attn::SafetensorsFile fc = attn::open_safetensors(c);
  for (const auto& [name_, shape] : want) {
    const auto& name = name_;  // clang 14 lambdas (doctest INFO) cannot capture a binding
    CAPTURE(name);
    std::vector<float> sa, sc;
    const float* pa = attn::tensor_as_f32(f, name, sa);
    const float* pc = attn::tensor_as_f32(fc, name, sc);
    const std::int64_t n = f.info(name).numel();
    CHECK_FALSE(std::equal(pa, pa + n, pc));
  }
}

// ---- Errors (CONTRACT §6): exit status 2, one message naming the culprit ----

TEST_CASE("cli error: a config file that is not JSON") {
  TempDir dir;
  const fs::path cfg = dir.path / "broken_params.json";
  write_text(cfg, R"({"dim": 18, "n_heads": 6,)");
  check_refusal("run --config " + q(cfg), {{cfg.string()}});
}

TEST_CASE("cli error: invalid configs name the file and the key") {
  TempDir dir;
  struct Bad {
    const char* file;
    const char* text;
    std::vector<std::string> keys;  // one of them must be named
  };
  const Bad cases[] = {
      {"indivisible.json", R"({"dim": 20, "n_heads": 6, "rope": "none"})", {"n_heads", "dim"}},
      {"odd_head_dim.json",
       R"({"dim": 18, "n_heads": 6, "n_kv_heads": 2, "rope": "interleaved"})",
       {"rope", "head_dim"}},
      {"zero_seq.json",
       R"({"dim": 18, "n_heads": 6, "rope": "none", "max_seq_len": 0})",
       {"max_seq_len"}},
      {"zero_heads.json", R"({"dim": 18, "n_heads": 0, "rope": "none"})", {"n_heads"}},
      {"kv_indivisible.json",
       R"({"dim": 18, "n_heads": 6, "n_kv_heads": 4, "rope": "none"})",
       {"n_kv_heads", "n_heads"}},
      {"string_dim.json", R"({"dim": "18", "n_heads": 6, "rope": "none"})", {"dim"}},
      {"bad_block.json", R"({"dim": 18, "n_heads": 6, "rope": "none", "block": "mlp"})", {"block"}},
  };
  for (const Bad& c : cases) {
    CAPTURE(c.file);
    const fs::path cfg = dir.path / c.file;
    write_text(cfg, c.text);
    const test::CliResult r = check_refusal("run --config " + q(cfg), {{cfg.string()}});
    bool named = false;
    for (const std::string& k : c.keys) named = named || has_word(r.err, k);
    CHECK_MESSAGE(named, "stderr names none of the keys: ", r.err);
  }
}

TEST_CASE("cli error: a config file that does not exist") {
  TempDir dir;
  const fs::path cfg = dir.path / "no_such_params.json";
  check_refusal("run --config " + q(cfg), {{cfg.string()}});
  CHECK_FALSE(fs::exists(cfg));
}

TEST_CASE("cli error: a weights file with a tensor missing") {
  TempDir dir;
  const fs::path w = dir.path / "missing_wv.safetensors";
  std::vector<NamedTensor> tensors = golden_weights();
  REQUIRE(tensors.size() == 4);
  tensors.erase(std::remove_if(tensors.begin(), tensors.end(),
                               [](const NamedTensor& t) { return t.name == kWv; }),
                tensors.end());
  REQUIRE(tensors.size() == 3);
  write_tensors(w, tensors);
  check_refusal(golden_run(w), {{w.string(), kWv}});
}

TEST_CASE("cli error: a weights tensor with the wrong shape") {
  TempDir dir;
  const fs::path w = dir.path / "transposed_wk.safetensors";
  std::vector<NamedTensor> tensors = golden_weights();
  bool found = false;
  for (NamedTensor& t : tensors)
    if (t.name == kWk) {
      REQUIRE(t.shape == Shape{6, 18});
      t.shape = {18, 6};  // same size, transposed
      found = true;
    }
  REQUIRE(found);
  write_tensors(w, tensors);
  check_refusal(golden_run(w), {{w.string(), kWk, "expected"}, {"[6, 18]", "[18, 6]"}});
}

TEST_CASE("cli error: a weights tensor of dtype I32") {
  TempDir dir;
  const fs::path w = dir.path / "i32_wo.safetensors";
  RawSafetensors raw = read_raw(golden("weights.safetensors"));
  REQUIRE(raw.header.contains(kWo));
  raw.header[kWo]["dtype"] = "I32";  // 4 bytes as F32: the file stays well formed
  write_raw(w, raw);
  check_refusal(golden_run(w), {{w.string(), kWo, "I32"}});
}

TEST_CASE("cli error: a truncated weights file") {
  TempDir dir;
  const fs::path w = dir.path / "truncated.safetensors";
  const std::string bytes = read_bytes(golden("weights.safetensors"));
  REQUIRE(bytes.size() > 100);
  SUBCASE("data cut short") {
    write_bytes(w, bytes.substr(0, bytes.size() - 100));
  }
  SUBCASE("inside the header") {
    write_bytes(w, bytes.substr(0, 40));
  }
  SUBCASE("inside the length prefix") {
    write_bytes(w, bytes.substr(0, 5));
  }
  check_refusal(golden_run(w), {{w.string()}});
}

TEST_CASE("cli error: a weights file whose header length is absurd") {
  TempDir dir;
  const fs::path w = dir.path / "huge_header.safetensors";
  const std::string bytes = read_bytes(golden("weights.safetensors"));
  write_bytes(w, le64(std::uint64_t{1} << 40) + bytes.substr(8));
  check_refusal(golden_run(w), {{w.string()}});
}

TEST_CASE("cli error: weights data_offsets out of range") {
  TempDir dir;
  const fs::path w = dir.path / "bad_offsets.safetensors";
  RawSafetensors raw = read_raw(golden("weights.safetensors"));
  REQUIRE(raw.header.contains(kWo));
  const auto begin = raw.header[kWo]["data_offsets"][0].get<std::uint64_t>();
  const auto end = raw.header[kWo]["data_offsets"][1].get<std::uint64_t>();
  REQUIRE(end == raw.data.size());  // wo is the last tensor of the data section
  SUBCASE("past the end of the file") {
    raw.header[kWo]["data_offsets"] = {begin + 1000000, end + 1000000};
  }
  SUBCASE("end past the end of the file") {
    raw.header[kWo]["data_offsets"] = {begin, end + 4};
  }
  SUBCASE("end before begin") {
    raw.header[kWo]["data_offsets"] = {end, begin};
  }
  write_raw(w, raw);
  check_refusal(golden_run(w), {{w.string(), kWo}});
}

TEST_CASE("cli error: an input x with too few positions, the wrong dim or the wrong batch") {
  TempDir dir;
  const fs::path x = dir.path / "x.safetensors";
  const std::string cfg = " --config " + q(golden("config.json"));
  SUBCASE("too few positions") {
    const std::vector<float> v(5 * 18, 0.5f);
    attn::write_safetensors(x, {{"x", {1, 5, 18}, v.data()}});
    check_refusal("run --prefill 4 --steps 3 --input " + q(x) + cfg, {{x.string(), "x"}});
  }
  SUBCASE("wrong dim") {
    const std::vector<float> v(10 * 17, 0.5f);
    attn::write_safetensors(x, {{"x", {1, 10, 17}, v.data()}});
    check_refusal("run --prefill 4 --steps 3 --input " + q(x) + cfg,
                  {{x.string(), "x"}, {"[1, 10, 17]"}});
  }
  SUBCASE("not three axes") {
    const std::vector<float> v(10 * 18, 0.5f);
    attn::write_safetensors(x, {{"x", {10, 18}, v.data()}});
    check_refusal("run --prefill 4 --steps 3 --input " + q(x) + cfg, {{x.string(), "x"}});
  }
  SUBCASE("batch differs from --batch") {
    const std::vector<float> v(10 * 18, 0.5f);
    attn::write_safetensors(x, {{"x", {1, 10, 18}, v.data()}});
    check_refusal("run --batch 2 --prefill 4 --steps 3 --input " + q(x) + cfg, {{x.string(), "x"}});
  }
  SUBCASE("no tensor x") {
    const std::vector<float> v(10 * 18, 0.5f);
    attn::write_safetensors(x, {{"hidden", {1, 10, 18}, v.data()}});
    check_refusal("run --prefill 4 --steps 3 --input " + q(x) + cfg, {{x.string(), "x"}});
  }
}

TEST_CASE("cli error: more positions than max_seq_len, before any work") {
  const test::CliResult r = check_refusal("run --prefill 16 --steps 5", {{}});
  CHECK((r.err.find("cache is full") != std::string::npos || has_word(r.err, "max_seq_len")));
  const test::CliResult d = check_refusal("decode --prefill 0 --steps 18", {{}});
  CHECK((d.err.find("cache is full") != std::string::npos || has_word(d.err, "max_seq_len")));
  // Exactly max_seq_len positions fit.
  check_trace(run_json("run --prefill 12 --steps 5 --json"), kSeed, 1, 12, 5);
}

TEST_CASE("cli error: positions whose count overflows 64 bits are still over max_seq_len") {
  // P + N wraps around in int64: must be refused as too many positions, not run or crash.
  const test::CliResult r = check_refusal("run --prefill 9223372036854775807 --steps 1", {{}});
  CHECK((r.err.find("cache is full") != std::string::npos || has_word(r.err, "max_seq_len")));
  const test::CliResult s = check_refusal("run --prefill 2 --steps 9223372036854775807", {{}});
  CHECK((s.err.find("cache is full") != std::string::npos || has_word(s.err, "max_seq_len")));
}

TEST_CASE("cli error: a batch over max_batch_size") {
  const test::CliResult r = check_refusal("run --batch 3", {{"max_batch_size"}});
  CHECK(r.err.find('3') != std::string::npos);
  // The input file's batch counts as well.
  TempDir dir;
  const fs::path x = dir.path / "x3.safetensors";
  const std::vector<float> v(3 * 10 * 18, 0.5f);
  attn::write_safetensors(x, {{"x", {3, 10, 18}, v.data()}});
  check_refusal("run --prefill 4 --steps 3 --input " + q(x), {{"max_batch_size"}});
}

TEST_CASE("cli error: an unknown flag") {
  check_refusal("run --frobnicate 3", {{"--frobnicate"}, {}, false});
  check_refusal("decode --no-such-flag", {{"--no-such-flag"}, {}, false});
  const test::CliResult r = test::run_cli("--frobnicate");
  CHECK(r.status == 2);
  CHECK(r.out.empty());
}

TEST_CASE("cli error: a dump into a directory that does not exist") {
  TempDir dir;
  const fs::path missing = dir.path / "no_such_dir";
  const fs::path dump = missing / "sub" / "out.safetensors";
  const test::CliResult r = test::run_cli("run --dump " + q(dump));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find(dump.string()) != std::string::npos);
  CHECK_FALSE(fs::exists(missing));
  CHECK(names_in(dir.path).empty());
}

TEST_CASE("cli error: a dump path that is a directory") {
  TempDir dir;
  const fs::path target = dir.path / "out.safetensors";
  fs::create_directory(target);
  const test::CliResult r = test::run_cli("run --dump " + q(target));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.status == 2);  // bad usage, CONTRACT §6
  CHECK(r.err.find(target.string()) != std::string::npos);
  CHECK(fs::is_directory(target));
  CHECK(names_in(dir.path) == std::vector<std::string>{"out.safetensors"});
}
