#pragma once
// A control vector from prompt pairs, as llama.cpp's llama-cvector-generator makes one
// (tools/cvector-generator): each pair tokenized (BOS as the vocabulary says, special tokens
// read), the shorter padded with the last id of " " to the longer's length; the residual after
// each block but the last (llama.cpp's l_out: its last layer keeps only the positions it outputs)
// at every position of both; their difference, rows that are <= 1e-6 everywhere dropped (as its
// filter_nonzero_rows compares, without abs), all pairs' rows stacked per layer; then per layer
// the mean row (method mean) or the first principal direction of the uncentred rows (method pca,
// power iteration on D^T D), normalised to length 1. The output of block l becomes direction.l+1:
// llama.cpp's own off-by-one, kept so that its files and ours mean the same.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace attn {

struct Session;
class OutputFile;

enum class CvectorMethod { pca, mean };

struct CvectorOptions {
  CvectorMethod method = CvectorMethod::pca;
  std::int64_t pca_iterations = 1000;  // llama.cpp's --pca-iter
  // The power iteration's start: llama.cpp draws it from the time; a seed makes a run repeatable.
  std::uint64_t seed = 42;
};

// A prompt file as llama-cvector-generator reads one: a prompt per line, empty lines skipped,
// escapes (\n, \t, \\, \", \', \xNN) processed. InputError naming the file.
std::vector<std::string> read_prompt_file(const std::filesystem::path& path);

// The directions [n_layers - 1][dim]: row i is direction.(i+1). Refuses (InputError) prompt lists
// of different lengths or none, and a layer where the pairs' hidden states do not differ.
std::vector<std::vector<float>> make_control_vector(Session& e,
                                                    const std::vector<std::string>& positive,
                                                    const std::vector<std::string>& negative,
                                                    const CvectorOptions& o);

// The file as llama-cvector-generator's export_gguf writes it: general.architecture
// "controlvector", controlvector.model_hint (the model's architecture), controlvector.layer_count,
// tensors direction.1 .. direction.N.
void write_control_vector(OutputFile& out, const std::vector<std::vector<float>>& directions,
                          const std::string& model_hint);

}  // namespace attn
