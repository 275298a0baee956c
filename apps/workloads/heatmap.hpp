#pragma once
// The attention heatmap: one PNG, a panel per query head (queries down: the prefill positions,
// then one row per decode step; keys across), a colour scale and labels. Drawn into an RGB
// buffer here; encoded by stb_image_write (Debian's libstb).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "attn/engine/run.hpp"
#include "attn/io/output.hpp"
#include "attn/model/config.hpp"

namespace cli {

// Where things are in the picture, so tests can look at one panel.
struct HeatmapLayout {
  int width = 0, height = 0;
  int cell = 0;                       // pixels per query x key cell
  int panel = 0;                      // panel side: positions * cell
  int columns = 0;                    // panels per row of the grid
  int label_room = 0;                 // token labels' room left of and below each panel
  std::vector<int> panel_x, panel_y;  // [n_heads]: each panel's top-left corner
};

enum class HeatmapScale { linear, sqrt, log };

// What a heatmap shows beyond the probabilities: which sequence, the colour scale, the token of
// each position (a prompt's pieces: its axes' labels), the padding, the checkpoint's layer index.
struct HeatmapOptions {
  std::int64_t batch_row = 0;
  HeatmapScale scale = HeatmapScale::linear;
  std::vector<std::string> labels;  // [P+N]: the token at each position, or none
  std::vector<std::uint8_t> keep;   // [P+N]: batch_row's padding mask (1: real), or none
  std::int64_t first_layer = 0;     // --layers A:B's A: drawn layer l is the checkpoint's A + l
};

// The scale a run of `positions` is drawn in unless --scale says: linear up to 16 positions,
// sqrt up to 64, log past it (probabilities near 1/positions are not all dark).
HeatmapScale default_scale(std::int64_t positions);
HeatmapScale parse_scale(const std::string& name);  // linear, sqrt, log; InputError otherwise

HeatmapLayout heatmap_layout(const attn::ModelArgs& a, std::int64_t positions,
                             const HeatmapOptions& o = {});

struct Image {
  int width = 0, height = 0;
  std::vector<std::uint8_t> rgb;  // [height, width, 3]
};

// The probabilities of `layer`, batch row o.batch_row, from a run that kept them (Inspect's
// attention_weights). Keys a query does not see are drawn apart from small weights: light grey
// where the causal mask hides them, pink where they are padding.
Image render_heatmap(const attn::ModelArgs& a, const attn::RunOptions& o,
                     const attn::RunOutputs& out, std::int64_t layer,
                     const HeatmapOptions& opts = {});

// Most positions (prefill + steps) a heatmap draws: a panel stays within 512 x 512 pixels.
inline constexpr std::int64_t kHeatmapPositions = 512;

// Refuses (InputError) a --layer or --batch-row out of range or more than kHeatmapPositions,
// before any work.
void check_heatmap(const attn::ModelArgs& a, const attn::RunOptions& o, std::int64_t layer,
                   std::int64_t batch_row = 0);

// Encodes as PNG into a temporary file beside `path` (attn/io/output.hpp), uncommitted: the
// caller renames it into place when the whole run has succeeded.
attn::OutputFile stage_png(const std::filesystem::path& path, const Image& img);

}  // namespace cli
