// attn-cli heatmap: the PNG decoded again with the same library (stb), checked panel by panel.
#include <doctest/doctest.h>
#include <stb_image.h>

#include <array>
#include <cstring>
#include <fstream>

#include "attn/model/weights.hpp"
#include "test_support.hpp"
#include "workloads/heatmap.hpp"

namespace {

struct Png {
  int w = 0, h = 0;
  std::vector<std::uint8_t> rgb;
};

Png read_png(const std::filesystem::path& p) {
  Png png;
  int channels = 0;
  stbi_uc* data = stbi_load(p.c_str(), &png.w, &png.h, &channels, 3);
  REQUIRE(data != nullptr);
  png.rgb.assign(data, data + std::size_t(png.w) * std::size_t(png.h) * 3);
  stbi_image_free(data);
  return png;
}

// One panel's pixels.
std::vector<std::uint8_t> panel(const Png& png, const cli::HeatmapLayout& l, std::int64_t h) {
  std::vector<std::uint8_t> out;
  for (int y = 0; y < l.panel; ++y) {
    const auto row =
        png.rgb.begin() + (std::size_t(l.panel_y[std::size_t(h)] + y) * std::size_t(png.w) +
                           std::size_t(l.panel_x[std::size_t(h)])) *
                              3;
    out.insert(out.end(), row, row + l.panel * 3);
  }
  return out;
}

// The built-in GQA config's seeded weights, with query head 1 made a copy of head 0 (both read
// KV head 0): their panels must be equal, every other pair different.
std::filesystem::path weights_with_twin_heads(const attn::ModelArgs& a) {
  // seeded_weights keeps its tensors in `owned`, in the order of tensor_specs.
  attn::TransformerWeights w = attn::seeded_weights(a, 42);
  std::vector<attn::LayerWeights> layers;
  const std::vector<attn::TensorSpec> specs = attn::tensor_specs(a, layers);
  REQUIRE(specs.size() == w.owned.size());
  std::vector<attn::OutTensor> tensors;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].name == "layers.0.attention.wq.weight")
      std::memcpy(w.owned[i].data() + a.head_dim() * a.dim, w.owned[i].data(),
                  std::size_t(a.head_dim() * a.dim) * sizeof(float));
    tensors.push_back({specs[i].name, specs[i].shape, w.owned[i].data()});
  }
  const auto path = test::temp_path("attn_twin_heads.safetensors");
  attn::write_safetensors(path, tensors);
  return path;
}

}  // namespace

TEST_CASE("heatmap: the PNG has the layout's size and panels differ exactly where heads differ") {
  const attn::ModelArgs a = attn::seed_args();
  const auto weights = weights_with_twin_heads(a);
  const auto png_path = test::temp_path("attn_heatmap_test.png");
  const test::CliResult r = test::run_cli("heatmap --weights " + weights.string() +
                                          " --prefill 7 --steps 3 --out " + png_path.string());
  INFO(r.err);
  REQUIRE(r.status == 0);
  const Png png = read_png(png_path);
  const cli::HeatmapLayout l = cli::heatmap_layout(a, 10);
  CHECK(png.w == l.width);
  CHECK(png.h == l.height);
  REQUIRE(l.panel_x.size() == 6);
  for (std::int64_t i = 0; i < 6; ++i)
    for (std::int64_t j = i + 1; j < 6; ++j) {
      CAPTURE(i);
      CAPTURE(j);
      if (i == 0 && j == 1)
        CHECK(panel(png, l, i) == panel(png, l, j));
      else
        CHECK(panel(png, l, i) != panel(png, l, j));
    }
  std::filesystem::remove(png_path);
  std::filesystem::remove(weights);
}

TEST_CASE("heatmap: --layer out of range and an unwritable --out exit 2 and write nothing") {
  const auto png_path = test::temp_path("attn_heatmap_bad.png");
  test::CliResult r = test::run_cli("heatmap --layer 1 --out " + png_path.string());
  CHECK(r.status == 2);
  CHECK(r.err.find("--layer 1") != std::string::npos);
  r = test::run_cli("heatmap --layer -1 --out " + png_path.string());
  CHECK(r.status == 2);
  CHECK_FALSE(std::filesystem::exists(png_path));
  r = test::run_cli("heatmap --out /nonexistent-dir/x.png");
  CHECK(r.status == 2);
  CHECK(r.err.find("/nonexistent-dir/x.png") != std::string::npos);
  r = test::run_cli("heatmap");
  CHECK(r.status == 2);  // --out is required
  const auto cfg = test::temp_path("attn_heatmap_long.json");
  std::ofstream(cfg) << R"({"dim": 8, "n_heads": 2, "rope": "none", "max_seq_len": 600})";
  r = test::run_cli("heatmap --config " + cfg.string() + " --prefill 600 --steps 0 --out " +
                    png_path.string());
  CHECK(r.status == 2);
  CHECK(r.err.find("at most 512") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(png_path));
  std::filesystem::remove(cfg);
}

TEST_CASE("cli: --print-attention prints each step's weights after its trace line") {
  const test::CliResult r = test::run_cli("run --prefill 2 --steps 1 --print-attention");
  REQUIRE(r.status == 0);
  const auto prefill = r.out.find("prefill:"), decode = r.out.find("decode step 1:");
  const auto first =
      r.out.find("attention_weights layer 0, batch 0, head 0 (kv head 0):\n  [1.0000, 0.0000]\n");
  const auto last = r.out.rfind("attention_weights layer 0, batch 0, head 5 (kv head 1):\n  [");
  REQUIRE(first != std::string::npos);
  CHECK(prefill < first);
  CHECK(first < decode);
  CHECK(decode < last);
}

TEST_CASE("heatmap from token ids: labelled axes, --batch-row, --scale, the wrote line") {
  const std::filesystem::path dir = test::golden_dir() / "model" / "hf_tied_bf16";
  const std::string model =
      "--config " + (dir / "config.json").string() + " -m " + (dir / "model.safetensors").string();
  const auto png_path = test::temp_path("attn_heatmap_tokens.png");
  const test::CliResult r = test::run_cli("heatmap " + model +
                                          " --tokens '5,6,7,8,9,10,11,12,13;5,6,7' -n 1 "
                                          "--batch-row 1 --scale log --out " +
                                          png_path.string());
  INFO(r.err);
  REQUIRE(r.status == 0);
  const Png png = read_png(png_path);
  attn::ModelArgs a = attn::load_config(dir / "config.json");
  cli::HeatmapOptions o;
  for (int id = 5; id <= 13; ++id) o.labels.push_back(id <= 7 ? std::to_string(id) : "");
  const cli::HeatmapLayout labelled = cli::heatmap_layout(a, 9, o),
                           plain = cli::heatmap_layout(a, 9);
  CHECK(png.w == labelled.width);
  CHECK(png.h == labelled.height);
  CHECK(labelled.height > plain.height);  // room for the keys' labels below each panel
  CHECK(r.err.find("wrote " + png_path.string() + " (" + std::to_string(png.w) + " x " +
                   std::to_string(png.h) + ")") != std::string::npos);
  // Batch row 1 is 3 tokens of 9: its padded keys and queries are pink, the causal mask's grey.
  const auto pixel = [&](int x, int y) {
    const std::size_t at = (std::size_t(y) * std::size_t(png.w) + std::size_t(x)) * 3;
    return std::array<int, 3>{png.rgb[at], png.rgb[at + 1], png.rgb[at + 2]};
  };
  const int x0 = labelled.panel_x[0], y0 = labelled.panel_y[0], c = labelled.cell;
  CHECK(pixel(x0 + 8 * c + c / 2, y0 + c / 2) == std::array<int, 3>{250, 200, 200});  // padded key
  CHECK(pixel(x0 + 2 * c + c / 2, y0 + c / 2) == std::array<int, 3>{228, 228, 228});  // future key
  CHECK(pixel(x0 + c / 2, y0 + c / 2) != std::array<int, 3>{228, 228, 228});
  for (const char* bad : {"--batch-row 2", "--scale cubic"}) {
    const test::CliResult b = test::run_cli("heatmap " + model + " --tokens '5,6,7;5' -n 1 " + bad +
                                            " --out " + png_path.string() + ".x");
    CHECK_MESSAGE(b.status == 2, bad);
  }
}
