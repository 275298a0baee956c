#include "attn/engine/run.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <optional>

#include "attn/error.hpp"
#include "attn/io/files.hpp"
#include "attn/io/safetensors.hpp"
#include "attn/kernels/ops.hpp"
#include "attn/model/finite.hpp"
#include "attn/model/kept_probabilities.hpp"

namespace attn {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Copies x[:, t0:t0+seqlen] of x [B, T, dim] into dst [B, seqlen, dim].
void slice_positions(float* dst, const std::vector<float>& x, std::int64_t B, std::int64_t T,
                     std::int64_t dim, std::int64_t t0, std::int64_t seqlen) {
  for (std::int64_t b = 0; b < B; ++b)
    std::memcpy(dst + b * seqlen * dim, x.data() + (b * T + t0) * dim,
                std::size_t(seqlen * dim) * sizeof(float));
}

// probs: the call's kept probabilities, per layer, or null.
Event make_event(const Transformer& m, Event::Kind kind, std::int64_t B, std::int64_t start_pos,
                 std::int64_t seqlen, const std::vector<std::vector<float>>* probs) {
  const ModelArgs& a = m.args;
  const Shape cache = {B, a.n_kv_heads, start_pos + seqlen, a.head_dim()};
  const Shape io = {B, seqlen, a.dim};
  const Shape local = {B, m.local.n_kv_heads, start_pos + seqlen, a.head_dim()};
  Event e{kind, 0, start_pos, seqlen, io, io, cache, cache, {}, {}, 0, local, local};
  for (std::int64_t b = 0; b < B; ++b) {
    std::int64_t n = start_pos + seqlen;
    if (m.mask.keep)
      n = std::count(m.mask.keep + b * m.mask.ld, m.mask.keep + b * m.mask.ld + n, 1);
    e.unmasked.push_back(n);
  }
  if (probs)
    for (const std::vector<float>& p : *probs) e.attn.push_back(p.data());
  return e;
}

// L buffers of n floats, each made in place: assign(L, vector(n)) would hold a temporary copy
// beside them.
void make_layers(std::vector<std::vector<float>>& layers, std::size_t L, std::int64_t n) {
  layers.resize(L);
  for (std::vector<float>& v : layers) v.resize(std::size_t(n));
}

// Allocates the probabilities a run keeps, before any work.
void make_attention_outputs(const ModelArgs& a, const RunOptions& o, RunOutputs& out) {
  const std::int64_t B = o.batch, P = o.prefill, H = a.n_heads;
  const auto L = std::size_t(a.n_layers);
  make_layers(out.attn_prefill, L, B * H * P * P);  // [B, n_heads, P, P] per layer
  out.attn_decode.resize(std::size_t(o.steps));
  for (std::int64_t i = 1; i <= o.steps; ++i)  // [B, n_heads, 1, P + i] per layer
    make_layers(out.attn_decode[std::size_t(i - 1)], L, B * H * (P + i));
}

// Allocates every block's lens logits a run keeps for the dump, before any work.
void make_lens_outputs(const ModelArgs& a, const RunOptions& o, RunOutputs& out) {
  const std::int64_t B = o.batch, P = o.prefill, V = a.vocab_size;
  const auto L = std::size_t(a.n_layers);
  make_layers(out.lens_prefill, L, B * P * V);  // [B, P, vocab_size] per block
  out.lens_decode.resize(std::size_t(o.steps));
  for (std::vector<std::vector<float>>& step : out.lens_decode)
    make_layers(step, L, B * V);  // [B, 1, vocab_size] per block
}

// The recorders a run attaches to its model for its duration (after those the caller attached,
// which see what they asked for): the probabilities it keeps (each call's layer l into
// (*probs)[l], allocated before any work by make_attention_outputs), the logit lens (each block's
// logits copied into the call's kept ones when the dump keeps them) and the activations kept for
// the dump (into their tensors, activations.hpp).
struct RunRecorders {
  std::optional<KeptProbabilities> probs;
  std::optional<LensRecorder> lens;
  std::optional<ActivationRecorder> activations;
  KeptActivations* kept = nullptr;
  std::array<std::optional<Attached>, 3> attached;  // detached first: declared last

  RunRecorders(Transformer& m, bool keep_probs, int lens_k, KeptActivations* k,
               const ActivationNames& names)
      : kept(k) {
    if (keep_probs) probs.emplace(m.args.n_layers);
    if (lens_k > 0) lens.emplace(m, lens_k);
    if (kept) activations.emplace(*kept, names);
  }
  // Attached in this order: the kept probabilities hand the forward their buffer before the
  // activations' (which then copy them).
  void attach(Transformer& m) {
    if (probs) attached[0].emplace(m, probs->observer());
    if (lens) attached[1].emplace(m, lens->observer());
    if (activations) attached[2].emplace(m, activations->observer());
  }
  // Where the next call's probabilities and lens logits go (null: none kept), and which call it
  // is for the activations (0 the prefill, i decode step i).
  void point(std::vector<std::vector<float>>* p, std::vector<std::vector<float>>* l,
             std::int64_t c) {
    if (probs)
      for (std::size_t i = 0; i < p->size(); ++i)
        probs->set(std::int64_t(i), (*p)[i].data(), std::int64_t((*p)[i].size()));
    if (lens) lens->copy_to(l);
    if (kept) kept->call = c;
  }
};

// The final norm of h [rows, dim] into call c's ln_final.hook_normalized, if kept: the run takes
// its logits through output_logits, which norms only the rows the head reads, so the kept
// tensor is normed here, row by row as the model's norm (the same bits).
void keep_final_norm(Transformer& m, KeptActivations& kept, std::int64_t c, const float* h,
                     std::int64_t rows) {
  KeptActivation* t = kept.find(c, m.args.n_layers, Site::final_norm);
  if (!t) return;
  rmsnorm(m.rt, t->data.data(), h, m.weights.tokens.norm, rows, m.args.dim, float(m.args.norm_eps));
}

// forward, with the step named when a NaN or Inf appears.
void forward_named(Transformer& m, const float* x, std::int64_t B, std::int64_t seqlen,
                   std::int64_t start_pos, float* out, const std::string& step) {
  try {
    forward(m, x, B, seqlen, start_pos, out);
  } catch (const NonFiniteError& e) {
    throw NonFiniteError(step + ": " + e.what());
  }
}

// Each sequence's last real prefill position, [B, dim], gathered into rows for the head.
void last_rows(const std::vector<float>& h, const Inspect& inspect, std::int64_t B, std::int64_t P,
               std::int64_t dim, float* rows) {
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t t =
        inspect.last_prefill.empty() ? P - 1 : inspect.last_prefill[std::size_t(b)];
    std::memcpy(rows + b * dim, h.data() + (b * P + t) * dim, std::size_t(dim) * sizeof(float));
  }
}

void prefill_logits(Transformer& m, const Inspect& inspect, std::int64_t B, std::int64_t P,
                    RunOutputs& out, std::vector<float>& rows) {
  const std::int64_t V = m.args.vocab_size;
  if (inspect.all_logits) {
    out.prefill_logits.resize(std::size_t(B * P * V));
    output_logits(m, out.prefill_output.data(), B * P, out.prefill_logits.data());
    return;
  }
  out.prefill_logits.resize(std::size_t(B * V));
  last_rows(out.prefill_output, inspect, B, P, m.args.dim, rows.data());
  output_logits(m, rows.data(), B, out.prefill_logits.data());
}

}  // namespace

double attention_weights_bytes(const ModelArgs& a, const RunOptions& o) {
  // In double: a config at every cap (2^24) would overflow 64 bits; exact below 2^53.
  const double P = double(o.prefill), N = double(o.steps);
  const double per_head = P * P + N * P + N * (N + 1) / 2;
  return 4 * double(a.n_layers) * double(o.batch) * double(a.n_heads) * per_head;
}

void check_attention_weights(const ModelArgs& a, const RunOptions& o, const Inspect& inspect) {
  if (!inspect.attention_weights) return;
  const double bytes = attention_weights_bytes(a, o);
  if (bytes > double(kAttentionWeightsLimit))
    throw InputError(
        "the attention weights would keep " + std::to_string(std::int64_t(bytes / (1 << 20))) +
            " MiB of probabilities (n_layers x batch x n_heads x (P*P + decode keys) "
            "floats), over the limit of 1 GiB: use fewer positions, layers or a smaller "
            "batch",
        "attention_weights");
}

double lens_logits_bytes(const ModelArgs& a, const RunOptions& o) {
  // In double, as attention_weights_bytes: exact below 2^53.
  return 4 * double(a.n_layers) * double(o.batch) * double(o.prefill + o.steps) *
         double(a.vocab_size);
}

void check_lens_logits(const ModelArgs& a, const RunOptions& o) {
  const double bytes = lens_logits_bytes(a, o);
  if (bytes > double(kAttentionWeightsLimit))
    throw InputError("the logit lens would keep " +
                         std::to_string(std::int64_t(bytes / (1 << 20))) +
                         " MiB of logits for the dump (n_layers x batch x (P + N) x vocab_size "
                         "floats), over the limit of 1 GiB: use fewer positions, layers or a "
                         "smaller batch, or no dump",
                     "logit_lens");
}

RunOutputs run(Transformer& m, const std::vector<float>& x, const RunOptions& o,
               const std::function<void(const Event&)>& on_event, const Inspect& inspect) {
  const std::int64_t B = o.batch, P = o.prefill, N = o.steps, T = P + N, dim = m.args.dim;
  RunOutputs out;
  out.prefill_output.resize(std::size_t(B * P * dim));
  out.decode_output.resize(std::size_t(N * B * dim));
  out.decode_seconds.resize(std::size_t(N));
  std::vector<float> xin(std::size_t(B * std::max<std::int64_t>(P, 1) * dim));  // [B, P, dim]
  const bool logits = m.ends.logits_out;
  if (logits) out.decode_logits.resize(std::size_t(N * B * m.args.vocab_size));
  const bool keep_probs = inspect.attention_weights;
  if (keep_probs) make_attention_outputs(m.args, o, out);
  const bool keep_lens = inspect.logit_lens > 0 && inspect.lens_logits;
  if (keep_lens) make_lens_outputs(m.args, o, out);
  const bool keep_activations = !inspect.activations.empty();
  if (keep_activations) out.activations = make_kept_activations(m.args, o, inspect.activations);
  RunRecorders observer(m, keep_probs, inspect.logit_lens,
                        keep_activations ? &out.activations : nullptr, inspect.activations);
  observer.attach(m);
  const LogitLens* lens = observer.lens ? &observer.lens->lens() : nullptr;
  m.mask.keep = inspect.attention_mask.empty() ? nullptr : inspect.attention_mask.data();
  m.mask.ld = T;
  if (P > 0) {
    slice_positions(xin.data(), x, B, T, dim, 0, P);
    observer.point(&out.attn_prefill, keep_lens ? &out.lens_prefill : nullptr, 0);
    const auto t0 = std::chrono::steady_clock::now();
    forward_named(m, xin.data(), B, P, 0, out.prefill_output.data(), "prefill");
    out.prefill_seconds = seconds_since(t0);
    if (keep_activations && logits)
      keep_final_norm(m, out.activations, 0, out.prefill_output.data(), B * P);
    if (logits) prefill_logits(m, inspect, B, P, out, xin);
    Event e =
        make_event(m, Event::Kind::prefill, B, 0, P, keep_probs ? &out.attn_prefill : nullptr);
    e.lens = lens;
    if (logits && !inspect.all_logits)
      e.logits = out.prefill_logits.data(), e.vocab = m.args.vocab_size;
    e.seconds = out.prefill_seconds;
    on_event(e);
  }
  for (std::int64_t i = 1; i <= N; ++i) {
    const std::int64_t start_pos = P + i - 1;
    slice_positions(xin.data(), x, B, T, dim, start_pos, 1);
    const auto step = std::size_t(i - 1);
    auto* kept = keep_probs ? &out.attn_decode[step] : nullptr;
    observer.point(kept, keep_lens ? &out.lens_decode[step] : nullptr, i);
    const auto t0 = std::chrono::steady_clock::now();
    forward_named(m, xin.data(), B, 1, start_pos, out.decode_output.data() + (i - 1) * B * dim,
                  "decode step " + std::to_string(i));
    out.decode_seconds[std::size_t(i - 1)] = seconds_since(t0);
    if (keep_activations && logits)
      keep_final_norm(m, out.activations, i, out.decode_output.data() + (i - 1) * B * dim, B);
    if (logits)
      output_logits(m, out.decode_output.data() + (i - 1) * B * dim, B,
                    out.decode_logits.data() + (i - 1) * B * m.args.vocab_size);
    Event e = make_event(m, Event::Kind::decode, B, start_pos, 1, kept);
    e.lens = lens;
    if (logits)
      e.logits = out.decode_logits.data() + (i - 1) * B * m.args.vocab_size,
      e.vocab = m.args.vocab_size;
    e.step = i;
    e.seconds = out.decode_seconds[std::size_t(i - 1)];
    on_event(e);
  }
  m.mask.keep = nullptr;
  return out;
}

std::optional<OutputFile> stage_dump(const std::filesystem::path& path, const Transformer& m,
                                     const std::vector<float>& x, const RunOptions& o,
                                     const RunOutputs& out, bool attention_weights) {
  const ModelArgs& a = m.args;
  const std::int64_t B = o.batch, P = o.prefill, N = o.steps, T = P + N;
  std::vector<OutTensor> tensors = {{"input", {B, T, a.dim}, x.data()}};
  tensors.push_back({"prefill.output", {B, P, a.dim}, out.prefill_output.data()});
  for (std::int64_t i = 1; i <= N; ++i)
    tensors.push_back({"decode." + std::to_string(i) + ".output",
                       {B, 1, a.dim},
                       out.decode_output.data() + (i - 1) * B * a.dim});
  std::vector<std::vector<float>> caches;  // the filled part, [B, n_kv_heads, T, head_dim]
  // Model parallel: each rank holds its KV heads; rank 0 gathers them all, and writes alone.
  for (std::int64_t l = 0; l < a.n_layers; ++l) {
    caches.push_back(gather_heads(m.shard, filled_k(m.cache, l, B, T), B));
    caches.push_back(gather_heads(m.shard, filled_v(m.cache, l, B, T), B));
  }
  if (m.shard.rank != 0) return std::nullopt;
  const Shape cache_shape = {B, a.n_kv_heads, T, a.head_dim()};
  for (std::int64_t l = 0; l < a.n_layers; ++l) {
    tensors.push_back(
        {"cache." + std::to_string(l) + ".k", cache_shape, caches[std::size_t(2 * l)].data()});
    tensors.push_back(
        {"cache." + std::to_string(l) + ".v", cache_shape, caches[std::size_t(2 * l + 1)].data()});
  }
  for (std::int64_t l = 0; l < a.n_layers && attention_weights; ++l) {
    const std::string p = "attn." + std::to_string(l);
    tensors.push_back(
        {p + ".prefill", {B, a.n_heads, P, P}, out.attn_prefill[std::size_t(l)].data()});
    for (std::int64_t i = 1; i <= N; ++i)
      tensors.push_back({p + ".decode." + std::to_string(i),
                         {B, a.n_heads, 1, P + i},
                         out.attn_decode[std::size_t(i - 1)][std::size_t(l)].data()});
  }
  if (!out.prefill_logits.empty())
    tensors.push_back(
        {"prefill.logits",
         {B, std::int64_t(out.prefill_logits.size()) / (B * a.vocab_size), a.vocab_size},
         out.prefill_logits.data()});
  for (std::int64_t i = 1; i <= N && !out.decode_logits.empty(); ++i)
    tensors.push_back({"decode." + std::to_string(i) + ".logits",
                       {B, 1, a.vocab_size},
                       out.decode_logits.data() + (i - 1) * B * a.vocab_size});
  for (std::size_t l = 0; l < out.lens_prefill.size(); ++l) {
    const std::string p = "lens." + std::to_string(l);
    tensors.push_back({p + ".prefill", {B, P, a.vocab_size}, out.lens_prefill[l].data()});
    for (std::int64_t i = 1; i <= N; ++i)
      tensors.push_back({p + ".decode." + std::to_string(i),
                         {B, 1, a.vocab_size},
                         out.lens_decode[std::size_t(i - 1)][l].data()});
  }
  for (const KeptActivation& t : out.activations.tensors)
    tensors.push_back({t.name, t.shape, t.data.data()});
  OutputFile file(path, "dump");
  write_safetensors(file, tensors);
  return file;
}

namespace {

// A token run's request: the batch from the sequences, the ids checked against the vocabulary;
// returns the model's ends it applies.
ModelEnds plan_tokens(RunRequest& r) {
  const ModelArgs& a = r.args;
  if (a.vocab_size <= 0)
    throw InputError(a.source +
                     ": token input needs a token model (vocab_size > 0, with "
                     "tok_embeddings, norm and output); this config has vocab_size " +
                     std::to_string(a.vocab_size));
  if (!r.input.empty())
    throw InputError("an input file and token input: give one of them", "input");
  if (r.model.shard.size > 1)
    throw InputError("token input runs on one process (model_parallel_size 1)",
                     "model_parallel_size");
  if (!a.has_first_layer())
    throw InputError("layers " + std::to_string(a.first_layer) + ":" +
                     std::to_string(a.first_layer + a.n_layers) +
                     ": token input needs the embeddings, which feed layer 0");
  r.opts.batch = std::int64_t(r.tokens.size());
  std::size_t longest = 0;
  for (std::size_t b = 0; b < r.tokens.size(); ++b) {
    if (r.tokens[b].empty()) throw InputError("token sequence " + std::to_string(b) + " is empty");
    longest = std::max(longest, r.tokens[b].size());
    check_token_ids(r.tokens[b], a.vocab_size,
                    a.source + (r.tokens.size() > 1 ? ": sequence " + std::to_string(b) : ""));
  }
  if (r.opts.prefill + r.opts.steps > std::int64_t(longest))
    throw InputError("the prompt has " + std::to_string(longest) + " tokens: prefill " +
                     std::to_string(r.opts.prefill) + " + steps " + std::to_string(r.opts.steps) +
                     " need more");
  return token_ends(a, r.logits);
}

}  // namespace

RunPlan plan_run(RunRequest r, std::optional<OpenedModel> opened) {
  RunOptions& o = r.opts;
  const Shard& shard = r.model.shard;
  check_shard(r.args, shard);
  const ModelEnds ends = r.tokens.empty() ? ModelEnds{} : plan_tokens(r);
  if (!r.input.empty() && !r.batch_given) o.batch = input_batch(r.input);
  // A Hugging Face config has no batch size: the cache holds the run's.
  if (r.args.batch_from_run && o.batch > r.args.max_batch_size && o.batch <= (1 << 24))
    r.args.max_batch_size = o.batch;
  check_capacity(r.args, o);
  if (shard.rank == 0 && !r.dump.empty()) check_output(r.dump, "dump");  // costs nothing
  for (const RunWriter& w : r.writers)
    if (shard.rank == 0) check_output(w.path, w.what.c_str());
  r.attention_weights = r.attention_weights || r.dump_attention_weights;
  if (r.attention_weights && shard.size > 1)
    throw InputError(
        "attention weights (kept, printed or drawn) need one process "
        "(model_parallel_size 1): each rank holds only its own heads' probabilities",
        "attention_weights");
  check_attention_weights(r.args, o, {{}, r.attention_weights, false, {}, 0, false, {}});
  if (r.logit_lens != 0) {
    check_logit_lens(r.args, ends, r.logit_lens);
    if (!r.dump.empty()) check_lens_logits(r.args, o);
  }
  ActivationNames activations;
  if (!r.dump_activations.empty()) {
    activations = parse_activation_names(r.dump_activations, r.args, ends);
    check_activations(r.args, o, activations, shard.size);
  }
  RunShape shape{o.batch, o.prefill, o.steps, o.batch * std::max<std::int64_t>(o.prefill, 1)};
  shape.ends = ends;
  shape.dump = !r.dump.empty();
  if (r.attention_weights)
    shape.attention_weights = std::uint64_t(attention_weights_bytes(r.args, o));
  shape.activations = activations_bytes(r.args, o, activations);
  shape.all_logits = r.all_logits;
  if (r.logit_lens != 0)  // its buffers for one call (the rows of the largest), and the dump's
    shape.logit_lens = logit_lens_bytes(r.args, shape.max_rows, r.logit_lens) +
                       (r.dump.empty() ? 0 : std::uint64_t(lens_logits_bytes(r.args, o)));
  r.model.drawn = {WeightType::f32};
  std::vector<MemoryPart> front;
  if (r.front_parts) front = r.front_parts(r.args, ends, o);
  if (!opened) opened = open_model(r.model);
  ModelPlan model = plan_model(r.args, r.model, *opened, shape, std::move(front));
  return {std::move(r), std::move(model), std::move(opened->files)};
}

namespace {

// x [B, P+N, dim]: each sequence's embeddings, right-padded with zeros; a ragged batch's padding
// mask, and each sequence's last real prefill position.
std::vector<float> embed_tokens(const Transformer& m, const RunRequest& r, Inspect& inspect) {
  const std::int64_t B = r.opts.batch, T = r.opts.prefill + r.opts.steps, dim = m.args.dim;
  std::vector<float> x(std::size_t(B * T * dim));
  bool ragged = false;
  for (std::int64_t b = 0; b < B; ++b) {
    const std::vector<std::int32_t>& t = r.tokens[std::size_t(b)];
    const std::int64_t n = std::min<std::int64_t>(T, std::int64_t(t.size()));
    embed(m, t.data(), n, x.data() + b * T * dim);
    ragged = ragged || n < T;
    inspect.last_prefill.push_back(std::max<std::int64_t>(0, std::min(n, r.opts.prefill) - 1));
  }
  if (ragged) {
    inspect.attention_mask.assign(std::size_t(B * T), 0);
    for (std::int64_t b = 0; b < B; ++b)
      std::fill_n(inspect.attention_mask.begin() + b * T,
                  std::min<std::int64_t>(T, std::int64_t(r.tokens[std::size_t(b)].size())), 1);
  }
  return x;
}

}  // namespace

Run open_run(RunPlan plan) {
  RunRequest& r = plan.request;
  Inspect inspect{{}, r.attention_weights, r.all_logits, {}, r.logit_lens, !r.dump.empty(), {}};
  if (!r.dump_activations.empty())
    inspect.activations = parse_activation_names(r.dump_activations, r.args, plan.model.shape.ends);
  std::vector<float> x;
  if (r.tokens.empty()) {
    x = r.input.empty() ? seeded_input(r.args, r.opts, r.model.seed)
                        : load_input(r.input, r.args, r.opts, r.batch_given);
    if (!r.input.empty()) inspect.attention_mask = load_attention_mask(r.input, r.opts);
  }
  Session session = open_session(plan.model, r.model, std::move(plan.files));
  if (!r.tokens.empty()) x = embed_tokens(session.model, r, inspect);
  return {std::move(r), std::move(inspect), std::move(x), std::move(session), {}};
}

void run(Run& s, const std::function<void(const Event&)>& on_event) {
  reset(s.session);
  s.out = run(s.session.model, s.x, s.request.opts, on_event, s.inspect);
  s.session.filled = s.request.opts.prefill + s.request.opts.steps;
  s.session.batch = s.request.opts.batch;
}

void write_outputs(const Run& s, const std::function<void()>& before_commit) {
  std::vector<OutputFile> staged;
  if (!s.request.dump.empty())
    if (std::optional<OutputFile> f =
            stage_dump(s.request.dump, s.session.model, s.x, s.request.opts, s.out,
                       s.request.dump_attention_weights))
      staged.push_back(std::move(*f));
  for (const RunWriter& w : s.request.writers)
    if (std::optional<OutputFile> f = w.stage(s)) staged.push_back(std::move(*f));
  before_commit();
  for (OutputFile& f : staged) f.commit();
}

}  // namespace attn
