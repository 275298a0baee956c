#pragma once
// The attention heatmap: one PNG, a panel per query head (queries down: the prefill positions,
// then one row per decode step; keys across), a colour scale and labels. Drawn into an RGB
// buffer here; encoded by stb_image_write (Debian's libstb).
#include <cstdint>
#include <filesystem>
#include <vector>

#include "attn/io/output.hpp"
#include "attn/model/config.hpp"
#include "attn/model/session.hpp"

namespace attn {

// Where things are in the picture, so tests can look at one panel.
struct HeatmapLayout {
  int width = 0, height = 0;
  int cell = 0;                       // pixels per query x key cell
  int panel = 0;                      // panel side: positions * cell
  int columns = 0;                    // panels per row of the grid
  std::vector<int> panel_x, panel_y;  // [n_heads]: each panel's top-left corner
};

HeatmapLayout heatmap_layout(const ModelArgs& a, std::int64_t positions);

struct Image {
  int width = 0, height = 0;
  std::vector<std::uint8_t> rgb;  // [height, width, 3]
};

// The probabilities of `layer`, batch row 0, from a run that kept them (Inspect's
// attention_weights). Cells a query does not score (prefill rows past P) are grey.
Image render_heatmap(const ModelArgs& a, const RunOptions& o, const RunOutputs& out,
                     std::int64_t layer);

// Most positions (prefill + steps) a heatmap draws: a panel stays within 512 x 512 pixels.
inline constexpr std::int64_t kHeatmapPositions = 512;

// Refuses (InputError) a --layer out of range or more than kHeatmapPositions, before any work.
void check_heatmap(const ModelArgs& a, const RunOptions& o, std::int64_t layer);

// Encodes as PNG into a temporary file beside `path` (attn/io/output.hpp), uncommitted: the
// caller renames it into place when the whole run has succeeded.
OutputFile stage_png(const std::filesystem::path& path, const Image& img);

}  // namespace attn
