#pragma once
// Control vectors in llama.cpp's format (common/common.cpp common_control_vector_load, and
// llama_adapter_cvec): a GGUF file of F32 tensors "direction.N", one per layer N >= 1, each of
// the model's dim, with general.architecture "controlvector" and controlvector.model_hint the
// model's architecture. Several files add up, each times its scale; a layer range keeps layers
// A..B (both inclusive). direction.N is added to the residual stream after block N (0-based, as
// llama.cpp's graph counts il): block 0 never gets one, and llama.cpp's default range is 1 to
// n_layers. The session holds the sum as one buffer [n_layers, dim] (Transformer::steering) that
// forward adds after each block: nothing is allocated per step.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "attn/model/config.hpp"

namespace attn {

struct Session;

struct ControlVectorFile {
  std::filesystem::path path;
  double scale = 1;
};

// Layers A..B both inclusive, in llama.cpp's numbering (the checkpoint's block index).
using LayerRange = std::pair<std::int64_t, std::int64_t>;

// llama.cpp's default range: 1 .. the checkpoint's layer count.
LayerRange default_layer_range(const ModelArgs& a);

// The sum of the files' directions times their scales, [a.n_layers, a.dim], row l for the
// model's block l (its checkpoint index first_layer + l), rows outside `range` zero. Refuses
// (InputError naming the file and the tensor) a file that is not a control vector, a tensor not
// named direction.N with 1 <= N < the checkpoint's layers, not F32, not 1-D, not of the model's
// dim, holding NaN or infinity, or a model_hint naming another architecture.
std::vector<float> load_control_vectors(std::span<const ControlVectorFile> files,
                                        const ModelArgs& a,
                                        std::optional<LayerRange> range = std::nullopt);

// One direction [dim] per layer of `range`, or per-layer rows [checkpoint layers, dim] (row N
// for block N, as direction.N) times scale, as the same buffer; `what` names the array in
// messages.
std::vector<float> steering_from(std::span<const float> values, std::int64_t rows, double scale,
                                 const ModelArgs& a, std::optional<LayerRange> range,
                                 const std::string& what);

// Makes `steering` ([n_layers, dim], or empty: none) what the session's forward adds after each
// block, from the next call on.
void set_steering(Session& e, std::vector<float> steering);

}  // namespace attn
