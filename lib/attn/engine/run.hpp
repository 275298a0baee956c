#pragma once
// A run as the CLI makes it, for any caller: a request (the config, the shape, the files),
// checked whole by plan_run before any work; then a session that reads the input and weights,
// runs a prefill of P positions and N decode steps of one position, reports each as an Event,
// and writes the dump.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <vector>

#include "attn/engine/activations.hpp"
#include "attn/engine/lens.hpp"
#include "attn/engine/open.hpp"
#include "attn/engine/session.hpp"
#include "attn/io/output.hpp"
#include "attn/model/input.hpp"
#include "attn/model/memory.hpp"
#include "attn/model/model.hpp"
#include "attn/model/parallel.hpp"
#include "attn/model/weights.hpp"

namespace attn {

// What a run looks at beyond its outputs: a ragged batch's padding mask, and whether to keep the
// attention probabilities (--attention-weights).
struct Inspect {
  std::vector<std::uint8_t> attention_mask;  // [B, P+N], 1 = real position; empty: all real
  bool attention_weights = false;
  bool all_logits = false;                 // every prefill position's logits, not the last
  std::vector<std::int64_t> last_prefill;  // [B]: each sequence's last real prefill position
  int logit_lens = 0;                      // top tokens of each block's lens (0: no lens)
  bool lens_logits = false;                // keep every block's lens logits (the dump)
  ActivationNames activations;             // kept for the dump (activations.hpp)
};

// What the loop reports after the prefill and after each decode step, with the shapes the
// notebooks print.
using Shape = std::vector<std::int64_t>;

struct Event {
  enum class Kind { prefill, decode };
  Kind kind;
  std::int64_t step = 0;  // decode step, 1-based
  std::int64_t start_pos = 0;
  std::int64_t seqlen = 0;
  Shape input, output, cache_k, cache_v;
  std::vector<std::int64_t> unmasked;  // [B]: filled key positions the padding mask keeps
  std::vector<const float*> attn;      // per layer [B, n_heads, seqlen, start_pos+seqlen], or empty
  double seconds = 0;
  Shape local_cache_k, local_cache_v;  // one rank's: [batch, n_kv_heads / K, filled, head_dim]
  const float* logits = nullptr;       // a token run's: [B, vocab] of each last position
  std::int64_t vocab = 0;
  const LogitLens* lens = nullptr;  // with a logit lens: this call's (lens.hpp), every block's
};

struct RunOutputs {
  std::vector<float> prefill_output;  // [B, P, dim]
  std::vector<float> decode_output;   // [N, B, dim]: step i's [B, 1, dim] at i-1
  double prefill_seconds = 0;
  std::vector<double> decode_seconds;  // [N]
  // With attention_weights: per layer [B, n_heads, P, P], and per step and layer
  // [B, n_heads, 1, P+i].
  std::vector<std::vector<float>> attn_prefill;
  std::vector<std::vector<std::vector<float>>> attn_decode;
  // A token run whose model has the output head (ends.logits_out): the logits of each sequence's
  // last prefill position [B, vocab_size] (with all_logits every prefill position,
  // [B, P, vocab_size]), and of each decode step [N, B, vocab_size].
  std::vector<float> prefill_logits, decode_logits;
  // With a logit lens kept for the dump: per block [B, P, vocab_size], and per step and block
  // [B, 1, vocab_size].
  std::vector<std::vector<float>> lens_prefill;
  std::vector<std::vector<std::vector<float>>> lens_decode;
  // With inspect.activations: every kept tensor, in forward order, under its dump name.
  KeptActivations activations;
};

// What --attention-weights stores may not exceed this: refused before any work.
inline constexpr std::int64_t kAttentionWeightsLimit = std::int64_t{1} << 30;

// Bytes of the probabilities a run keeps: n_layers * B * n_heads * (P*P + sum (P+i)) floats.
double attention_weights_bytes(const ModelArgs& args, const RunOptions& opts);

// Refuses (InputError) attention weights over kAttentionWeightsLimit, if they are asked for.
void check_attention_weights(const ModelArgs& args, const RunOptions& opts, const Inspect& inspect);

// Bytes of the logit lens's logits a run keeps for the dump: n_layers * B * (P + N) * vocab_size
// floats; refused (InputError, setting "logit_lens") over the same limit as attention weights.
double lens_logits_bytes(const ModelArgs& args, const RunOptions& opts);
void check_lens_logits(const ModelArgs& args, const RunOptions& opts);

// The prefill and decode steps of x [B, P+N, dim]. The observers attached to m see every forward
// call; with inspect.attention_weights (the probabilities kept), inspect.logit_lens (each call's
// lens in its Event, its logits kept with lens_logits) or inspect.activations (kept for the dump)
// the run attaches recorders of its own after them until it returns.
RunOutputs run(Transformer& m, const std::vector<float>& x, const RunOptions& opts,
               const std::function<void(const Event&)>& on_event, const Inspect& inspect = {});

// Writes the dump (CONTRACT §5) into a temporary file beside `path`, with attention_weights the
// attn.{l}.* probabilities too, and out.activations under their hook names, and returns it
// uncommitted (output.hpp): the caller renames it into place once everything else the run had to do
// has succeeded. Model parallel: every rank calls it, rank 0 gathers the caches and writes; the
// others get nothing.
std::optional<OutputFile> stage_dump(const std::filesystem::path& path, const Transformer& m,
                                     const std::vector<float>& x, const RunOptions& opts,
                                     const RunOutputs& out, bool attention_weights = false);

struct Run;

// One file a run writes besides its trace: its path checked before any work, staged after the
// run into a temporary file beside it, and committed with the others once everything has
// succeeded, so that a failed run leaves no file behind.
struct RunWriter {
  std::string what;  // "dump", "PNG": named in messages
  std::filesystem::path path;
  std::function<std::optional<OutputFile>(const Run&)> stage;  // none: nothing on this rank
};

// Everything a run needs, as data: what the CLI's flags say, or what a library user sets.
struct RunRequest {
  ModelArgs args;           // the config, overrides applied
  RunOptions opts;          // B, P, N
  bool batch_given = true;  // false: B is the input file's
  // The weights (a file, an index or a folder; empty: drawn from model.seed, which draws the
  // input too), the threads, compute and this rank: the model as the engine opens it.
  ModelSpec model;
  std::filesystem::path input;          // safetensors with x [B, T, dim]; empty: drawn from seed
  std::filesystem::path dump;           // empty: no dump
  bool attention_weights = false;       // keep the probabilities (to print or draw them)
  bool dump_attention_weights = false;  // and write them to the dump
  // Activations for the dump by hook names (parse_activation_names: "all", "hook_resid_post",
  // "blocks.0.attn.hook_pattern", ...); empty: none.
  std::string dump_activations;
  // Token input (instead of `input`): B sequences of ids, ragged ones right-padded with the
  // padding mask, so each real token keeps its position. The embeddings apply if the layers
  // start at 0, the output head if they end at the last.
  std::vector<std::vector<std::int32_t>> tokens;
  bool all_logits = false;  // every prefill position's logits
  bool logits = false;      // the head after a slice of layers that stops short of the last
  // The logit lens (lens.hpp): this many top tokens per position and block in each Event (0:
  // none); with a dump, every block's lens logits in it (lens.{l}.prefill, lens.{l}.decode.{i}).
  int logit_lens = 0;
  std::vector<RunWriter> writers;  // files beyond the dump (a front's picture, ...)
  // What the front allocates besides for the run's final args, ends and shape (view's
  // probabilities and lens): counted in the pre-flight too.
  std::function<std::vector<MemoryPart>(const ModelArgs&, const ModelEnds&, const RunOptions&)>
      front_parts = {};
};

// A request checked whole: its batch resolved, its memory counted with the weights' headers read
// and nothing mapped.
struct RunPlan {
  RunRequest request;
  ModelPlan model;   // the args, the shape (with the token model's ends), the weights' headers
  ModelFiles files;  // what the request's model names
};

// Checks everything a run can be refused for before any work (the shard, the cache's capacity,
// the dump's path, the attention weights' bound, the activations' names and bound, the memory
// the run needs on this rank), in that order (the logit lens's with the attention weights');
// throws InputError naming the file, key or setting.
// `model`: the request's model opened already (open_model), not opened again.
RunPlan plan_run(RunRequest request, std::optional<OpenedModel> model = std::nullopt);

// A run: its request and input, and the session it runs in (session.hpp: the model, the cache
// and where it stands, the recorders attached).
struct Run {
  RunRequest request;
  Inspect inspect;
  std::vector<float> x;  // [B, P+N, dim]: the input, or a token run's embeddings
  Session session;
  RunOutputs out;
};

// Reads the input (and its padding mask) and the weights, and builds the model.
Run open_run(RunPlan plan);

// Runs the prefill and the decode steps into s.out, calling on_event after each.
void run(Run& s, const std::function<void(const Event&)>& on_event);

// The run's files (the dump, then request.writers) staged, then `before_commit` (a front's last
// check, such as its trace having reached stdout), then all committed.
void write_outputs(
    const Run& s, const std::function<void()>& before_commit = [] {});

// write_outputs with no check before the commit.
inline void write_dump(const Run& s) {
  write_outputs(s);
}

}  // namespace attn
