// attn-cli view: the page's META and PROBS decoded here again (base64 by hand, raw inflate by
// zlib), its per-head figures against make_view.py's float64 PyTorch reference, its cells
// against the run's own float32 probabilities (attn-cli run --attention-weights --dump) within
// the code's step, over the shape space: GQA, MQA and MHA, causal and no mask, padding, row
// windows at the edges, 0 decode steps, one position; the bound refused before any work; text
// that must stay inside META's JSON.
#include <doctest/doctest.h>
#include <zlib.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

#include "attn/engine/head_stats.hpp"
#include "attn/io/safetensors.hpp"
#include "test_support.hpp"
#include "workloads/view.hpp"

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// RFC 4648 base64, decoded without the code under test.
std::string unbase64(const std::string& in) {
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (const char c : in) {
    int v = -1;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    if (c >= '0' && c <= '9') v = c - '0' + 52;
    if (c == '+') v = 62;
    if (c == '/') v = 63;
    if (c == '=') break;
    REQUIRE(v >= 0);
    acc = acc << 6 | std::uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += char(acc >> bits & 0xff);
    }
  }
  return out;
}

std::string inflate_raw(const std::string& in, std::size_t expected) {
  std::string out(expected + 1, '\0');  // one more: a longer stream shows as a size mismatch
  z_stream z{};
  REQUIRE(inflateInit2(&z, -15) == Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = uInt(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  const int rc = inflate(&z, Z_FINISH);
  const std::size_t n = out.size() - z.avail_out;
  inflateEnd(&z);
  CHECK(rc == Z_STREAM_END);
  out.resize(n);
  return out;
}

// The text between `open` and the next "</script" after it.
std::string element(const std::string& html, const std::string& open) {
  const std::size_t a = html.find(open);
  REQUIRE(a != std::string::npos);
  const std::size_t b = html.find("</script", a + open.size());
  REQUIRE(b != std::string::npos);
  return html.substr(a + open.size(), b - a - open.size());
}

struct Page {
  json meta;
  std::string cells;  // decoded PROBS
  std::string meta_text;
  int bits = 8;

  double cell(std::int64_t i) const {  // the probability a cell codes
    const auto* c = reinterpret_cast<const std::uint8_t*>(cells.data());
    if (bits == 8) return std::pow(double(c[i]) / 255, 2);
    return double(c[2 * i] | c[2 * i + 1] << 8) / 65535;
  }
};

Page read_page(const fs::path& p) {
  const std::string html = slurp(p);
  Page page;
  page.meta_text = element(html, "<script id=\"attn-meta\" type=\"application/json\">");
  page.meta = json::parse(page.meta_text);
  page.bits = page.meta["encoding"]["bits"].get<int>();
  const auto cells = page.meta["cells"].get<std::int64_t>();
  const std::string b64 =
      element(html, "<script id=\"attn-probs\" type=\"application/octet-stream\">");
  page.cells = inflate_raw(unbase64(b64), std::size_t(cells * page.bits / 8));
  REQUIRE(std::int64_t(page.cells.size()) == cells * page.bits / 8);
  return page;
}

// The run's float32 probabilities, from its dump: row t (prefill rows, then one per step) of
// layer l, batch row b, head h, over its keys.
struct Dump {
  attn::SafetensorsFile file;
  std::int64_t P = 0;
  std::vector<float> storage;

  const float* row(std::int64_t l, std::int64_t b, std::int64_t h, std::int64_t t,
                   std::int64_t& keys) {
    const std::string name =
        t < P ? "attn." + std::to_string(l) + ".prefill"
              : "attn." + std::to_string(l) + ".decode." + std::to_string(t - P + 1);
    const attn::TensorInfo& info = file.info(name);  // [B, H, seqlen, keys]
    const std::int64_t H = info.shape[1], seqlen = info.shape[2];
    keys = info.shape[3];
    const float* p = attn::tensor_as_f32(file, name, storage);
    return p + ((b * H + h) * seqlen + (t < P ? t : 0)) * keys;
  }
};

// Every cell of the page against the dump, within the code's step; and the figures against
// means computed here from the dump over the shown real rows.
void check_cells(const Page& page, const fs::path& dump_path) {
  Dump d{attn::open_safetensors(dump_path), page.meta["prefill"].get<std::int64_t>(), {}};
  const json& m = page.meta;
  const auto b = m["batch_row"].get<std::int64_t>();
  const auto r0 = m["rows"][0].get<std::int64_t>(), r1 = m["rows"][1].get<std::int64_t>();
  const double step = page.bits == 8 ? 0.5 / 255 : 0.5 / 65535;
  std::int64_t i = 0;
  double worst = 0;
  for (std::size_t li = 0; li < m["layers"].size(); ++li)
    for (std::size_t hi = 0; hi < m["heads"].size(); ++hi) {
      const auto l = m["layers"][li].get<std::int64_t>(), h = m["heads"][hi].get<std::int64_t>();
      double sums[4] = {0, 0, 0, 0};
      std::int64_t rows = 0, prev_rows = 0;
      for (std::int64_t t = r0; t < r1; ++t) {
        std::int64_t keys = 0;
        const float* p = d.row(l, b, h, t, keys);
        const auto n = m["row_keys"][std::size_t(t)].get<std::int64_t>();
        REQUIRE(n <= keys);
        for (std::int64_t j = 0; j < n; ++j, ++i) {
          const double got = page.cell(i), want = double(p[j]);
          const double err =
              page.bits == 8 ? std::fabs(std::sqrt(got) - std::sqrt(want)) : std::fabs(got - want);
          worst = std::max(worst, err);
        }
        for (std::int64_t j = n; j < keys; ++j) CHECK(p[j] == 0.0f);  // not stored: masked
        if (m["keep"][std::size_t(t)] == 0) continue;
        for (std::int64_t j = 0; j < n; ++j)
          if (p[j] > 0) sums[0] -= double(p[j]) * std::log(double(p[j]));
        sums[1] += p[0];
        if (t >= 1) sums[2] += p[t - 1], ++prev_rows;
        sums[3] += p[t];
        ++rows;
      }
      const json& got = m["stats"]["values"][li][hi];
      if (rows == 0) {
        CHECK(got[0].is_null());
        continue;
      }
      CHECK(got[0].get<double>() == doctest::Approx(sums[0] / double(rows)).epsilon(1e-12));
      CHECK(got[1].get<double>() == doctest::Approx(sums[1] / double(rows)).epsilon(1e-12));
      if (prev_rows)
        CHECK(got[2].get<double>() == doctest::Approx(sums[2] / double(prev_rows)).epsilon(1e-12));
      else
        CHECK(got[2].is_null());
      CHECK(got[3].get<double>() == doctest::Approx(sums[3] / double(rows)).epsilon(1e-12));
    }
  CHECK(i == m["cells"].get<std::int64_t>());
  INFO("worst error " << worst << ", step " << step);
  CHECK(worst <= step * (1 + 1e-6));
}

// view with `flags`, then run with `run_flags` keeping the probabilities: the page decoded and
// checked against the dump.
Page view_and_check(const std::string& flags, const std::string& run_flags) {
  const fs::path html = test::temp_path("view.html"),
                 dump = test::temp_path("view_run.safetensors");
  const test::CliResult v = test::run_cli("view " + flags + " --out " + html.string());
  INFO("view " << flags << "\n" << v.err);
  REQUIRE(v.status == 0);
  const test::CliResult r =
      test::run_cli("run " + run_flags + " --attention-weights --dump " + dump.string());
  INFO("run " << run_flags << "\n" << r.err);
  REQUIRE(r.status == 0);
  Page page = read_page(html);
  check_cells(page, dump);
  return page;
}

// A config of configs/, as a flag.
std::string config(const std::string& name) {
  return "--config " + (test::source_dir() / "configs" / name).string();
}

std::vector<std::int64_t> row_keys_of(const Page& p) {
  return p.meta["row_keys"].get<std::vector<std::int64_t>>();
}

// META's lens (on by default for a prompt): every layer, 5 per position; the last layer's top
// token after each generated position is the greedy chain's next id (make_model.py's), with
// the logit make_model's float64 reference gave it.
void check_lens(const json& m, const fs::path& model, const std::vector<std::int32_t>& greedy,
                std::size_t prompt) {
  const json& lens = m["lens"];
  REQUIRE(lens.is_object());
  CHECK(lens["k"] == 5);
  const auto n_layers = m["model"]["n_layers"].get<std::size_t>();
  REQUIRE(lens["layers"].size() == n_layers);
  REQUIRE(lens["top"].size() == n_layers);
  const json& last = lens["top"][n_layers - 1];
  REQUIRE(last.size() == m["tokens"].size());
  attn::SafetensorsFile expected = attn::open_safetensors(model / "expected.safetensors");
  const attn::TensorInfo& info = expected.info("greedy_logits");  // [B, 32, vocab]
  std::vector<float> storage;
  const float* logits = attn::tensor_as_f32(expected, "greedy_logits", storage);
  for (std::size_t i = 0; i < greedy.size(); ++i) {
    const json& top = last[prompt - 1 + i];
    REQUIRE(top.size() == 5);
    CHECK(top[0][0] == greedy[i]);
    const float want = logits[std::int64_t(i) * info.shape[2] + greedy[i]];
    CHECK(std::fabs(top[0][1].get<double>() - double(want)) <= 1e-4 + 1e-4 * std::fabs(want));
    for (const json& e : top) CHECK(lens["texts"].contains(std::to_string(e[0].get<int>())));
  }
}

}  // namespace

TEST_CASE("view: a cell's code, base64 and META's escaping, against their definitions") {
  CHECK(cli::code_cell(0.0f, 8) == 0);
  CHECK(cli::code_cell(1.0f, 8) == 255);
  CHECK(cli::code_cell(0.25f, 8) == 128);  // 255 * 0.5 = 127.5 rounds up
  CHECK(cli::code_cell(1e-6f, 8) == 0);    // 255 * 0.001 = 0.255
  CHECK(cli::code_cell(1.0f, 16) == 65535);
  CHECK(cli::code_cell(0.5f, 16) == 32768);
  CHECK(cli::code_cell(-0.0f, 16) == 0);
  CHECK(cli::code_cell(std::nanf(""), 8) == 0);
  CHECK(cli::code_cell(1.5f, 8) == 255);
  // RFC 4648 section 10's test vectors.
  const char* vectors[][2] = {{"", ""},
                              {"f", "Zg=="},
                              {"fo", "Zm8="},
                              {"foo", "Zm9v"},
                              {"foob", "Zm9vYg=="},
                              {"fooba", "Zm9vYmE="},
                              {"foobar", "Zm9vYmFy"}};
  for (const auto& v : vectors) CHECK(cli::base64(v[0]) == v[1]);
  std::string all;
  for (int c = 0; c < 256; ++c) all += char(c);
  CHECK(unbase64(cli::base64(all)) == all);

  const std::string hostile = "a</script><!--<script>\x1b\xe2\x80\xa8\xe2\x80\xa9\xff z";
  const std::string s = cli::script_json(json{{"text", hostile}});
  CHECK(s.find('<') == std::string::npos);  // no "</script", no "<!--"
  CHECK(s.find("\xe2\x80\xa8") == std::string::npos);
  CHECK(s.find("\xe2\x80\xa9") == std::string::npos);
  CHECK(s.find('\x1b') == std::string::npos);
  // The same text back, the byte that is not UTF-8 replaced by U+FFFD.
  CHECK(json::parse(s)["text"] ==
        "a</script><!--<script>\x1b\xe2\x80\xa8\xe2\x80\xa9\xef\xbf\xbd z");
}

TEST_CASE("view: head_stats' figures of rows worked by hand") {
  attn::HeadStats s;
  const float r0[] = {1.0f};
  const float r1[] = {0.5f, 0.5f};
  const float r2[] = {0.25f, 0.25f, 0.5f};
  attn::add_row(s, r0, 0);
  auto m = attn::head_means(s);
  CHECK(m[0] == 0.0);
  CHECK(m[1] == 1.0);
  CHECK(std::isnan(m[2]));  // no row with a previous token
  CHECK(m[3] == 1.0);
  attn::add_row(s, r1, 1);
  attn::add_row(s, r2, 2);
  m = attn::head_means(s);
  CHECK(m[0] == doctest::Approx((std::log(2.0) + 1.5 * std::log(2.0)) / 3));
  CHECK(m[1] == doctest::Approx((1.0 + 0.5 + 0.25) / 3));
  CHECK(m[2] == doctest::Approx((0.5 + 0.25) / 2));
  CHECK(m[3] == doctest::Approx((1.0 + 0.5 + 0.5) / 3));
}

TEST_CASE("view: TransformerLens's detector scores of rows worked by hand") {
  // Tokens A B A B: duplicate pattern D[2][0], D[3][1]; induction D[2][1], D[3][2] (the token
  // after an earlier copy); previous-token D[t][t-1]. Scores: sum(A * D) / sum(A).
  const std::int32_t ids[] = {7, 9, 7, 9};
  const float r0[] = {1.0f};
  const float r1[] = {0.5f, 0.5f};
  const float r2[] = {0.25f, 0.5f, 0.25f};
  const float r3[] = {0.125f, 0.25f, 0.5f, 0.125f};
  attn::HeadStats s;
  attn::add_row(s, r0, 0, ids);
  attn::add_row(s, r1, 1, ids);
  attn::add_row(s, r2, 2, ids);
  attn::add_row(s, r3, 3, ids);
  const auto m = attn::head_means(s);
  REQUIRE(attn::kHeadStatNames[4] == "previous_token_head");
  CHECK(m[4] == doctest::Approx((0.5 + 0.5 + 0.5) / 4));
  CHECK(m[5] == doctest::Approx((0.25 + 0.25) / 4));
  CHECK(m[6] == doctest::Approx((0.5 + 0.5) / 4));
  // Without tokens the token-based scores are NaN; the previous-token one is still defined.
  attn::HeadStats u;
  attn::add_row(u, r1, 1);
  const auto n = attn::head_means(u);
  CHECK(n[4] == doctest::Approx(0.5));
  CHECK(std::isnan(n[5]));
  CHECK(std::isnan(n[6]));
  // Keys past t (a prefill row without a mask) count for no pattern: TransformerLens's tril.
  attn::HeadStats w;
  const float r0w[] = {0.5f, 0.25f, 0.25f};
  attn::add_row(w, r0w, 0, ids);
  const auto q = attn::head_means(w);
  CHECK(q[5] == 0.0);
  CHECK(q[6] == 0.0);
}

TEST_CASE("view: the figures match make_view.py's float64 reference, the cells the run's") {
  const json golden = json::parse(slurp(test::golden_dir() / "view" / "cases.json"));
  const double tol = golden["tolerance"].get<double>();
  for (const json& c : golden["cases"]) {
    const std::string name = c["name"].get<std::string>();
    CAPTURE(name);
    // Meta's layout keeps weights.safetensors; Hugging Face's, a folder -m opens.
    const fs::path dir = test::golden_dir() / c["model"].get<std::string>();
    const fs::path weights =
        fs::exists(dir / "weights.safetensors") ? dir / "weights.safetensors" : dir;
    const std::vector<std::int32_t> prompt = c["tokens"], greedy = c["greedy"];
    std::string ids, fed;
    for (const std::int32_t id : prompt) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    fed = ids;
    for (std::size_t i = 0; i + 1 < greedy.size(); ++i) fed += "," + std::to_string(greedy[i]);
    const std::string steps = std::to_string(c["steps"].get<int>());
    for (const json& v : c["views"]) {
      std::string cut;
      for (const char* k : {"layers", "heads", "positions"})
        if (!v[k].get<std::string>().empty())
          cut += std::string(" --") + k + " " + v[k].get<std::string>();
      CAPTURE(cut);
      for (const std::string bits : {"8", "16"}) {
        CAPTURE(bits);
        const Page page =
            view_and_check("-m " + weights.string() + " --tokens " + ids + " -n " + steps +
                               " --bits " + bits + cut,
                           "-m " + weights.string() + " --tokens " + fed + " -n " + steps);
        const json& m = page.meta;
        // The ids generate chooses: the greedy chain, fed, and the next one named.
        std::vector<std::int32_t> tokens;
        for (const json& t : m["tokens"]) tokens.push_back(t["id"].get<std::int32_t>());
        CHECK(tokens.size() == prompt.size() + greedy.size() - 1);
        for (std::size_t i = 0; i < tokens.size(); ++i)
          CHECK(tokens[i] == (i < prompt.size() ? prompt[i] : greedy[i - prompt.size()]));
        CHECK(m["chosen"]["id"] == greedy.back());
        CHECK(m["prefill"] == prompt.size());
        CHECK(m["steps"] == c["steps"]);
        check_lens(m, dir, greedy, prompt.size());
        const json& want = v["stats"];
        REQUIRE(m["stats"]["values"].size() == want.size());
        for (std::size_t l = 0; l < want.size(); ++l) {
          REQUIRE(m["stats"]["values"][l].size() == want[l].size());
          for (std::size_t h = 0; h < want[l].size(); ++h)
            for (std::size_t k = 0; k < 4; ++k) {
              const json& got = m["stats"]["values"][l][h][k];
              if (want[l][h][k].is_null()) {
                CHECK(got.is_null());
                continue;
              }
              INFO("layer " << l << " head " << h << " figure " << k);
              CHECK(std::fabs(got.get<double>() - want[l][h][k].get<double>()) <= tol);
            }
        }
      }
    }
  }
}

TEST_CASE("view: --json prints the figures the page holds") {
  const fs::path html = test::temp_path("view_json.html");
  const test::CliResult r = test::run_cli("view " + config("mqa.json") +
                                          " -n 2 --heads 1:3 --json --out " + html.string());
  REQUIRE(r.status == 0);
  const json out = json::parse(r.out);
  const Page page = read_page(html);
  CHECK(out["layers"] == page.meta["layers"]);
  CHECK(out["heads"] == json{1, 2});
  CHECK(out["stats"] == page.meta["stats"]);
  CHECK(r.err.find("view: 1 layers x 2 heads x 9 positions") != std::string::npos);
  CHECK(r.err.find("view: wrote ") != std::string::npos);
}

TEST_CASE("view: GQA, MQA and MHA, causal and no mask, drawn input labelled by index") {
  for (const char* name : {"gqa.json", "mqa.json", "mha.json"})
    for (const char* mask : {"causal", "none"}) {
      CAPTURE(name);
      CAPTURE(mask);
      const std::string flags =
          config(name) + " --mask " + mask + " --prefill 5 -n 3 --log-level off";
      const Page p = view_and_check(flags, flags);
      const std::vector<std::int64_t> keys = row_keys_of(p);
      REQUIRE(keys.size() == 8);
      for (std::int64_t t = 0; t < 8; ++t)
        CHECK(keys[std::size_t(t)] == (std::string(mask) == "none" && t < 5 ? 5 : t + 1));
      CHECK(p.meta["model"]["mask"] == mask);
      CHECK(p.meta["tokens"][3] == json{{"id", nullptr}, {"text", "3"}});
      CHECK(p.meta["chosen"].is_null());
      CHECK(p.meta["lens"].is_null());  // hidden states: no head
      CHECK(p.meta["heads"].size() == p.meta["model"]["n_heads"]);
      // The page says its weights and input are drawn (view_page.js puts it before the summary).
      CHECK(p.meta["drawn"] == json{{"weights", true}, {"input", true}});
    }
}

TEST_CASE("view: --positions windows at the edges, 0 decode steps, one position") {
  const std::string model = config("gqa.json") + " --log-level off";
  struct Case {
    std::string flags, run;
    std::int64_t r0, r1, positions;
  };
  const Case cases[] = {
      {"--prefill 5 -n 3 --positions 0:1", "--prefill 5 -n 3", 0, 1, 8},
      {"--prefill 5 -n 3 --positions 7:8", "--prefill 5 -n 3", 7, 8, 8},
      {"--prefill 5 -n 3 --positions 4:6", "--prefill 5 -n 3", 4, 6, 8},  // prefill | decode
      {"--prefill 5 -n 3 --positions 4:6 --mask none", "--prefill 5 -n 3 --mask none", 4, 6, 8},
      {"--prefill 6 -n 0", "--prefill 6 -n 0", 0, 6, 6},
      {"--prefill 1 -n 0", "--prefill 1 -n 0", 0, 1, 1},
      {"--prefill 0 -n 2", "--prefill 0 -n 2", 0, 2, 2},
      {"--prefill 5 -n 3 --layers 0:1 --heads 5:6 --bits 16", "--prefill 5 -n 3", 0, 8, 8},
  };
  for (const Case& c : cases) {
    CAPTURE(c.flags);
    const Page p = view_and_check(model + " " + c.flags, model + " " + c.run);
    CHECK(p.meta["rows"] == json{c.r0, c.r1});
    CHECK(p.meta["positions"] == c.positions);
    CHECK(p.meta["tokens"].size() == std::size_t(c.positions));
  }
}

TEST_CASE("view: a ragged batch of prompts, its padding kept in META and out of the figures") {
  const std::string model = "-m " + (test::model_dir("meta_f32") / "weights.safetensors").string() +
                            " --max-batch 2 --tokens '22,48,85,50;105,47' -n 1 --log-level off";
  for (const std::string row : {"0", "1"}) {
    CAPTURE(row);
    const Page p = view_and_check(model + " --batch-row " + row, model);
    CHECK(p.meta["batch_row"] == std::stoi(row));
    if (row == "1") {
      CHECK(p.meta["keep"] == json{1, 1, 0, 0});
      CHECK(p.meta["tokens"][2] == json{{"id", nullptr}, {"text", ""}});
    } else {
      CHECK(p.meta["keep"] == json{1, 1, 1, 1});
      CHECK(p.meta["tokens"][3]["id"] == 50);
    }
  }
}

TEST_CASE("view: the bound is printed and refused before any work, naming what cuts it") {
  const test::TempDir dir;
  const fs::path html = dir.path / "big.html";
  // The 8B-shaped layer at 2,048 positions in 16 bits: 134 MB of cells.
  test::CliResult r = test::run_cli("view " + config("llama3-8b-layer.json") +
                                    " --prefill 2048 -n 0 --bits 16 --max-size 100 "
                                    "--out " +
                                    html.string());
  CHECK(r.status == 2);
  CHECK(r.err.find("view: 1 layers x 32 heads x 2048 positions: 134.3 MB of probabilities") !=
        std::string::npos);
  CHECK(r.err.find("--layers, --heads or --positions") != std::string::npos);
  CHECK(r.err.find("--max-size") != std::string::npos);
  CHECK(dir.names().empty());  // no page, no temporary file
  // Ranges out of the model, and a batch row out of the batch: exit 2 naming the flag.
  r = test::run_cli("view " + config("gqa.json") + " --layers 0:2 --out " + html.string());
  CHECK(r.status == 2);
  CHECK(r.err.find("(set with --layers)") != std::string::npos);
  r = test::run_cli("view " + config("gqa.json") + " --heads 3:3 --out " + html.string());
  CHECK(r.status == 2);
  CHECK(r.err.find("(set with --heads)") != std::string::npos);
  r = test::run_cli("view " + config("gqa.json") + " --positions 0:11 --out " + html.string());
  CHECK(r.status == 2);
  CHECK(r.err.find("(set with --positions)") != std::string::npos);
  r = test::run_cli("view " + config("gqa.json") + " --batch-row 1 --out " + html.string());
  CHECK(r.status == 2);
  CHECK(r.err.find("(set with --batch-row)") != std::string::npos);
  r = test::run_cli("view " + config("gqa.json") + " --logit-lens 3 --out " + html.string());
  CHECK(r.status == 2);
  CHECK(r.err.find("(set with --logit-lens)") != std::string::npos);
  r = test::run_cli("view -m " + (test::source_dir() / "weights" / "stories260K.gguf").string() +
                    " -p hi --prefill 3 --out " + html.string());
  CHECK(r.status == 2);  // one prompt is its own prefill
  r = test::run_cli("view " + config("gqa.json") + " --bits 12 --out " + html.string());
  CHECK(r.status == 2);
  r = test::run_cli("view " + config("gqa.json") + " --out /nonexistent-dir/v.html");
  CHECK(r.status == 2);
  CHECK(dir.names().empty());
}

TEST_CASE("view: a prompt's </script>, ESC and U+2028 stay inside META's JSON strings") {
  const fs::path prompt = test::temp_path("view_prompt.txt"), html = test::temp_path("esc.html");
  { std::ofstream(prompt, std::ios::binary) << "a</script><!-- b\x1b[31m c\xe2\x80\xa8 d"; }
  const test::CliResult r =
      test::run_cli("view -m " + (test::source_dir() / "weights" / "stories260K.gguf").string() +
                    " -f " + prompt.string() + " -n 2 --out " + html.string());
  INFO(r.err);
  REQUIRE(r.status == 0);
  const Page p = read_page(html);  // META ends at the first "</script" after it: it parsed
  CHECK(p.meta_text.find('<') == std::string::npos);
  CHECK(p.meta_text.find("\xe2\x80\xa8") == std::string::npos);
  CHECK(p.meta_text.find('\x1b') == std::string::npos);
  std::string text;
  for (const json& t : p.meta["tokens"]) text += t["text"].get<std::string>();
  CHECK(text.find("</script><!--") != std::string::npos);
  CHECK(text.find("\x1b[31m") != std::string::npos);
  // U+2028 has no piece of its own in stories260K's 512: three byte tokens, each not UTF-8 alone,
  // so each token's text holds U+FFFD (script_json's own test keeps a whole one escaped).
  CHECK(p.meta["title"] == "stories260K.gguf");
  CHECK(p.meta["lens"]["k"] == 5);
  CHECK_FALSE(p.meta.contains("drawn"));  // a trained model's weights and a prompt
  const test::CliResult off =
      test::run_cli("view -m " + (test::source_dir() / "weights" / "stories260K.gguf").string() +
                    " -p hi -n 1 --no-logit-lens --out " + html.string());
  REQUIRE(off.status == 0);
  CHECK(read_page(html).meta["lens"].is_null());
}

TEST_CASE("view --compare: two prompts of one length, refused otherwise naming --compare") {
  const std::string model =
      "view -m " + (test::source_dir() / "weights" / "stories260K.gguf").string();
  const fs::path html = test::temp_path("compare.html");
  // 14 tokens each ("ball" and "cat" are two tokens each in stories260K's vocabulary).
  const test::CliResult ok = test::run_cli(model +
                                           " --compare 'Tom had a red ball. Tom had a' 'Tom had a "
                                           "red cat. Tom had a' -n 2 --json --out " +
                                           html.string());
  REQUIRE(ok.status == 0);
  const auto p = read_page(html);
  CHECK(p.meta["compare"]["tokens"].size() == p.meta["tokens"].size());
  CHECK(p.meta["compare"]["tokens"] != p.meta["tokens"]);
  CHECK(json::parse(ok.out)["compare"]["stats"] == p.meta["compare"]["stats"]);
  CHECK(slurp(html).find("id=\"attn-probs-corrupted\"") != std::string::npos);
  const test::CliResult uneven =
      test::run_cli(model + " --compare 'Tom had a red ball.' 'Sam' --out " + html.string());
  CHECK(uneven.status == 2);
  CHECK(uneven.err.find("--compare") != std::string::npos);
  // Two dumps without --attention-weights: nothing to show, said naming the tensor.
  const fs::path dump = test::temp_path("compare_plain.safetensors");
  REQUIRE(test::run_cli("run -m " + (test::source_dir() / "weights" / "stories260K.gguf").string() +
                        " -p hi -n 1 --dump " + dump.string())
              .status == 0);
  const test::CliResult plain = test::run_cli("view --compare " + dump.string() + " " +
                                              dump.string() + " --out " + html.string());
  CHECK(plain.status == 2);
  CHECK(plain.err.find("attn.0.prefill") != std::string::npos);
  const test::CliResult both = test::run_cli(model + " --compare a b -p c --out " + html.string());
  CHECK(both.status == 2);
  CHECK(both.err.find("--compare") != std::string::npos);
}
