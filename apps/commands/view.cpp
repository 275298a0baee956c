// attn-cli view: one self-contained HTML page of the attention of every shown layer x head. One
// prompt of a token model is generated from (the prompt's prefill, then -n tokens chosen and fed
// one per decode call); anything else (drawn or --input x, several prompts) runs as `run` does.
// The page's bound is printed and checked before any work; the model always runs whole.
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <utility>

#include "attn/engine/lens.hpp"
#include "attn/engine/run.hpp"
#include "attn/engine/session.hpp"
#include "attn/error.hpp"
#include "attn/io/files.hpp"
#include "attn/io/safetensors.hpp"
#include "attn/io/text.hpp"
#include "commands/commands.hpp"
#include "commands/setup.hpp"
#include "flags.hpp"
#include "text_input.hpp"
#include "workloads/view.hpp"

namespace cli {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// The longest token's bytes: what one position's text can take in META.
std::int64_t longest_token(const std::optional<attn::Tokenizer>& tok) {
  std::int64_t n = 24;  // an index, or an id without text
  if (tok)
    for (const std::string& p : tok->pieces) n = std::max(n, std::int64_t(p.size()));
  return n;
}

std::string page_title(const Options& f) {
  if (!f.weights.empty()) return fs::path(f.weights).filename().string();
  if (!f.config.empty()) return fs::path(f.config).filename().string();
  return "seeded model";
}

json token_json(const std::optional<attn::Tokenizer>& tok, std::int32_t id) {
  return {{"id", id}, {"text", tok ? attn::token_bytes(*tok, id) : std::to_string(id)}};
}

// The bound printed, then checked; before any work.
void announce(const ViewShape& v, std::int64_t bound, const ViewSettings& s,
              std::int64_t lens_vocab) {
  std::fprintf(stderr, "%s\n", view_estimate(v, bound).c_str());
  check_view_bound(v, bound, s.max_size, lens_vocab);
}

// The lens panel's K: --logit-lens K, else 5 where the run has the output head (a prompt to a
// token model), else none. `ends` as the run will build them. An asked-for lens the run cannot
// have is refused (check_logit_lens).
int lens_k(const Options& f, const attn::ModelArgs& a, const attn::ModelEnds& ends) {
  if (f.no_logit_lens && f.logit_lens > 0)
    throw attn::InputError("--logit-lens and --no-logit-lens: one or the other");
  if (f.no_logit_lens) return 0;
  if (f.logit_lens > 0) {
    attn::check_logit_lens(a, ends, f.logit_lens);
    return f.logit_lens;
  }
  return a.vocab_size > 0 && ends.logits_out ? 5 : 0;
}

// Writes the page (and --json's figures), then says what it wrote; `other`: --compare's
// corrupted run.
void finish(const Options& f, const ViewRecorder& rec, json meta,
            const ViewRecorder* other = nullptr) {
  if (f.json) {
    json out = {{"layers", meta["layers"]}, {"heads", meta["heads"]}, {"stats", meta["stats"]}};
    if (other) out["compare"] = {{"stats", meta["compare"]["stats"]}};
    std::cout << out.dump() << '\n';
    std::cout.flush();
    if (!std::cout) throw std::runtime_error("cannot write the figures to stdout");
  }
  attn::OutputFile out = stage_view_page(f.png, std::move(meta), rec, other);
  out.commit();
  std::error_code ec;
  const auto size = fs::file_size(f.png, ec);
  std::fprintf(stderr, "view: wrote %s (%s MB)\n", attn::escape(f.png).c_str(),
               megabytes(ec ? 0.0 : double(size)).c_str());
}

// One prompt of a token model: the engine's generate, every decode call recorded. Two (--compare
// CLEAN CORRUPTED, of one length): each generated from in turn on the same session, neither
// stopping at an end-of-sequence token, so that both hold P + N positions to compare.
int view_generated(const Options& f, const ViewSettings& s, attn::ModelSpec spec,
                   attn::OpenedModel model, const attn::ModelArgs& a, PromptTokens& pt) {
  const std::vector<std::int32_t> prompt = pt.sequences[0];
  const bool compare = pt.sequences.size() == 2;
  const auto P = std::int64_t(prompt.size());
  const std::int64_t N = f.run.steps;
  if (P == 0) throw attn::InputError("view needs a prompt of at least one token", "prompt");
  if (compare && pt.sequences[1].size() != prompt.size())
    throw attn::InputError("--compare: the clean prompt is " + std::to_string(P) +
                               " tokens, the corrupted one " +
                               std::to_string(pt.sequences[1].size()) +
                               ": their patterns are compared position by position, so the "
                               "two must be of one length",
                           "compare");
  // A prompt generated from is its own prefill and batch; x is its embeddings.
  if (f.prefill_given || f.batch_given || !f.input.empty())
    throw attn::InputError(
        "view of one prompt: its prefill is the prompt, its batch 1 and its input the tokens' "
        "embeddings (--prefill, --batch and --input are for drawn input or several prompts)");
  attn::check_generation_fits(a, 0, P, N);
  attn::Sampling sampling = f.sampling;
  sampling.seed = f.seed;
  const ViewShape v = plan_view(a, {1, P, N}, s);
  attn::ModelEnds whole;  // the engine opens the token model with its head
  whole.logits_out = a.vocab_size > 0;
  const int k = lens_k(f, a, whole);
  std::int64_t bound = view_page_bound(v, longest_token(pt.tokenizer), k);
  if (compare && __builtin_mul_overflow(bound, 2, &bound))
    throw attn::InputError("--compare: the page's bound overflows", "compare");
  announce(v, bound, s, k > 0 ? a.vocab_size : 0);

  spec.overrides.max_batch_size = 1;
  std::vector<attn::MemoryPart> memory = view_memory(v, a, k);
  if (compare)
    for (attn::MemoryPart part : view_memory(v, a, 0)) {
      part.name += " (corrupted run)";
      memory.push_back(std::move(part));
    }
  attn::Session e = attn::open_session(std::move(model), spec, {1, P, N, 0, std::move(memory)},
                                       std::nullopt, std::move(pt.tokenizer));
  attn::require_token_model(e.model.args, "view");
  apply_control_vectors(f, e);
  const std::vector<std::int32_t> stops =
      compare ? std::vector<std::int32_t>{} : attn::stop_ids(e, f.ignore_eos);
  // One prompt's run into r: its tokens and the token chosen next as META writes them.
  const auto record = [&](ViewRecorder& r, const std::vector<std::int32_t>& ids) {
    attn::check_generation(e, ids, N, sampling);
    r.set_tokens(ids);
    {
      const attn::Attached recording(e.model, r.observer());
      attn::generate(e, ids, N, sampling, stops, true,
                     [&r](const attn::Generated& g) { r.add_token(g.id); });
    }
    const std::int32_t next = attn::next_token(e, sampling);
    json tokens = json::array();
    for (std::size_t t = 0; t < std::size_t(r.positions_seen()); ++t)
      tokens.push_back(token_json(e.tokenizer, e.generation.tokens[t]));
    return std::pair{std::move(tokens), token_json(e.tokenizer, next)};
  };
  ViewRecorder rec(v);
  if (k > 0) rec.record_lens(e.model, k);
  auto [tokens, chosen] = record(rec, prompt);
  json meta = view_meta(e.model.args, rec, page_title(f), e.tokenizer ? &*e.tokenizer : nullptr);
  meta["tokens"] = std::move(tokens);
  meta["chosen"] = std::move(chosen);
  // Said on the page: a reader of a page made from a seed must not take its heads for a model's.
  if (spec.weights.empty()) meta["drawn"] = {{"weights", true}, {"input", false}};
  std::optional<ViewRecorder> other;
  if (compare) {
    other.emplace(v);
    auto [b_tokens, b_chosen] = record(*other, pt.sequences[1]);
    meta["compare"] = {{"tokens", std::move(b_tokens)},
                       {"chosen", std::move(b_chosen)},
                       {"stats", view_stats_json(*other)},
                       {"value_norms", value_norms_json(*other)}};
  }
  finish(f, rec, std::move(meta), other ? &*other : nullptr);
  return 0;
}

// Drawn or --input x, or several prompts (teacher forcing): a run as `run` makes it.
int view_run(const Options& f, const ViewSettings& s, const attn::ModelSpec& spec,
             attn::OpenedModel model, const attn::ModelArgs& a, PromptTokens& pt) {
  attn::RunRequest r;
  r.model = spec;
  r.args = a;
  r.tokens = pt.sequences;
  set_run_shape(f, r);
  // The page planned for the run's final args and shape, inside plan_run: its buffers join the
  // memory pre-flight.
  ViewShape v;
  int k = 0;
  r.front_parts = [&](const attn::ModelArgs& args, const attn::ModelEnds& ends,
                      const attn::RunOptions& o) {
    v = plan_view(args, o, s);
    k = lens_k(f, args, ends);
    announce(v, view_page_bound(v, longest_token(pt.tokenizer), k), s, k > 0 ? a.vocab_size : 0);
    return view_memory(v, args, k);
  };
  attn::RunPlan plan = attn::plan_run(std::move(r), std::move(model));
  plan.request.front_parts = nullptr;  // its references end with this function

  attn::Run se = attn::open_run(std::move(plan));
  apply_control_vectors(f, se.session);
  const std::int64_t T = v.positions();
  ViewRecorder rec(v);
  if (!pt.sequences.empty()) rec.set_tokens(pt.sequences[std::size_t(v.batch_row)]);
  if (!se.inspect.attention_mask.empty()) {
    const auto row = se.inspect.attention_mask.begin() + v.batch_row * T;
    rec.set_keep({row, row + T});
  }
  if (k > 0) rec.record_lens(se.session.model, k);
  {
    const attn::Attached recording(se.session.model, rec.observer());
    attn::run(se, [](const attn::Event&) {});
  }

  json meta =
      view_meta(se.request.args, rec, page_title(f), pt.tokenizer ? &*pt.tokenizer : nullptr);
  // Said on the page: a reader of a page made from a seed must not take its heads for a model's.
  const bool drawn_weights = spec.weights.empty(),
             drawn_input = pt.sequences.empty() && f.input.empty();
  if (drawn_weights || drawn_input)
    meta["drawn"] = {{"weights", drawn_weights}, {"input", drawn_input}};
  json tokens = json::array();
  const std::vector<std::int32_t>* ids =
      pt.sequences.empty() ? nullptr : &pt.sequences[std::size_t(v.batch_row)];
  for (std::int64_t t = 0; t < T; ++t) {
    if (!ids)
      tokens.push_back({{"id", nullptr}, {"text", std::to_string(t)}});
    else if (t < std::int64_t(ids->size()))
      tokens.push_back(token_json(pt.tokenizer, (*ids)[std::size_t(t)]));
    else
      tokens.push_back({{"id", nullptr}, {"text", ""}});  // padding
  }
  meta["tokens"] = std::move(tokens);
  meta["chosen"] = nullptr;
  finish(f, rec, std::move(meta));
  return 0;
}

// A dump's F32 tensor, copied out (a safetensors offset need not be aligned for floats).
std::vector<float> dump_floats(const attn::SafetensorsFile& d, const std::string& name,
                               const std::vector<std::int64_t>& shape) {
  const attn::TensorInfo& t = d.info(name);
  if (t.dtype != attn::Dtype::F32 || t.shape != shape)
    throw attn::InputError(d.path + ": " + name + " is not F32 of the first dump's shape",
                           "compare");
  std::vector<float> out(std::size_t(t.numel()));
  std::memcpy(out.data(), d.bytes(t), out.size() * sizeof(float));
  return out;
}

// --compare A.safetensors B.safetensors: two dumps of `run --attention-weights` (attn.{l}.prefill
// [B, H, P, P], attn.{l}.decode.{i} [B, H, 1, P+i], cache.{l}.v), fed to a recorder each as the
// forward would report them; no model runs. Positions are labelled by index.
int view_dumps(const Options& f, const ViewSettings& s) {
  const attn::SafetensorsFile da = attn::open_safetensors(f.compare[0]);
  const attn::SafetensorsFile db = attn::open_safetensors(f.compare[1]);
  if (!da.contains("attn.0.prefill"))
    throw attn::InputError(da.path + ": no attn.0.prefill (dump with --attention-weights)",
                           "compare");
  const std::vector<std::int64_t> shape = da.info("attn.0.prefill").shape;  // [B, H, P, P]
  if (shape.size() != 4 || shape[2] != shape[3] || shape[2] < 1)
    throw attn::InputError(da.path + ": attn.0.prefill is not [B, n_heads, P, P]", "compare");
  attn::ModelArgs a;
  a.n_layers = 0;
  while (da.contains("attn." + std::to_string(a.n_layers) + ".prefill")) ++a.n_layers;
  std::int64_t N = 0;
  while (da.contains("attn.0.decode." + std::to_string(N + 1))) ++N;
  const std::int64_t B = shape[0], H = shape[1], P = shape[2];
  a.n_heads = H;
  a.n_kv_heads = H;
  std::int64_t hd = 1;
  if (da.contains("cache.0.v")) {  // [B, n_kv_heads, P + N, head_dim]
    const std::vector<std::int64_t>& v = da.info("cache.0.v").shape;
    if (v.size() == 4 && v[1] > 0 && H % v[1] == 0) a.n_kv_heads = v[1], hd = v[3];
  }
  a.dim = H * hd;
  a.head_dim_set = hd;
  a.max_seq_len = P + N;
  // No mask: a prefill row sees keys past itself.
  const std::vector<float> p0 = dump_floats(da, "attn.0.prefill", shape);
  a.mask = attn::Mask::causal;
  for (std::int64_t t = 0; t + 1 < P && a.mask == attn::Mask::causal; ++t)
    if (p0[std::size_t(t * P + t + 1)] != 0) a.mask = attn::Mask::none;
  const ViewShape v = plan_view(a, {B, P, N}, s);
  std::int64_t bound = view_page_bound(v, 24, 0);
  if (__builtin_mul_overflow(bound, 2, &bound))
    throw attn::InputError("--compare: the page's bound overflows", "compare");
  announce(v, bound, s, 0);
  const auto feed = [&](const attn::SafetensorsFile& d, ViewRecorder& r) {
    const attn::Observer& o = r.observer();
    for (std::int64_t l = 0; l < a.n_layers; ++l) {
      const std::string cache = "cache." + std::to_string(l) + ".v";
      if (d.contains(
              cache)) {  // [B, kv, T, hd] as the v site's [B, T, kv, hd], position by position
        const std::int64_t kv = a.n_kv_heads;
        const std::vector<float> c = dump_floats(d, cache, {B, kv, P + N, hd});
        std::vector<float> x(std::size_t(B * kv * hd));
        for (std::int64_t t = 0; t < P + N; ++t) {
          for (std::int64_t b = 0; b < B; ++b)
            for (std::int64_t k = 0; k < kv; ++k)
              std::copy_n(c.begin() + ((b * kv + k) * (P + N) + t) * hd, hd,
                          x.begin() + (b * kv + k) * hd);
          o.on_tensor({attn::Site::v, l, t, x.data(), {B, 1, kv, hd}, 4});
        }
      }
      for (std::int64_t i = 0; i <= N; ++i) {
        const std::int64_t rows = i == 0 ? P : 1, keys = i == 0 ? P : P + i;
        const std::string name =
            "attn." + std::to_string(l) + (i == 0 ? ".prefill" : ".decode." + std::to_string(i));
        const std::vector<float> p = dump_floats(d, name, {B, H, rows, keys});
        float* buf = o.probs(l, B, H, rows, keys);
        if (!buf) continue;
        std::copy(p.begin(), p.end(), buf);
        o.on_tensor(
            {attn::Site::attn_probs, l, i == 0 ? 0 : P + i - 1, buf, {B, H, rows, keys}, 4});
      }
    }
  };
  ViewRecorder rec(v), other(v);
  feed(da, rec);
  feed(db, other);
  const std::string title = fs::path(f.compare[0]).filename().string() + " vs " +
                            fs::path(f.compare[1]).filename().string();
  json meta = view_meta(a, rec, title, nullptr);
  json tokens = json::array();
  for (std::int64_t t = 0; t < P + N; ++t)
    tokens.push_back({{"id", nullptr}, {"text", std::to_string(t)}});
  meta["tokens"] = tokens;
  meta["chosen"] = nullptr;
  meta["compare"] = {{"tokens", std::move(tokens)},
                     {"chosen", nullptr},
                     {"stats", view_stats_json(other)},
                     {"value_norms", value_norms_json(other)}};
  finish(f, rec, std::move(meta), &other);
  return 0;
}

// Both of --compare's arguments name .safetensors files: two dumps, not two prompts.
bool compare_dumps(const Options& f) {
  return f.compare.size() == 2 &&
         std::all_of(f.compare.begin(), f.compare.end(), [](const std::string& p) {
           return p.ends_with(".safetensors") && fs::is_regular_file(p);
         });
}

}  // namespace

int view_command(const Options& f) {
  spdlog::set_level(spdlog::level::from_str(f.log_level));
  if (f.json && !std::cout)
    throw std::runtime_error("stdout is closed: the figures have nowhere to go");
  attn::check_output(f.png, "page");
  const ViewSettings s{f.shown_layers, f.heads, f.positions, f.batch_row, f.bits, f.max_size};
  if (compare_dumps(f)) return view_dumps(f, s);
  const attn::ModelSpec spec = model_spec(f, attn::Shard{});
  attn::OpenedModel model = attn::open_model(spec);
  const attn::ModelArgs a = attn::model_args(spec, model, attn::seed_args);
  PromptTokens pt;
  if (!f.compare.empty()) {
    if (f.text.given())
      throw attn::InputError(
          "--compare takes the two prompts itself: not -p, -f, --tokens or --tokens-file too",
          "compare");
    if (a.vocab_size <= 0)
      throw attn::InputError("--compare needs a token model (a vocabulary) to read its prompts",
                             "compare");
    TextInput t = f.text;
    t.prompt = f.compare;
    pt = prompt_tokens(t, model, a.vocab_size);
    return view_generated(f, s, spec, std::move(model), a, pt);
  }
  if (f.text.given()) pt = prompt_tokens(f.text, model, std::max<std::int64_t>(0, a.vocab_size));
  if (pt.sequences.size() == 1 && a.vocab_size > 0)
    return view_generated(f, s, spec, std::move(model), a, pt);
  return view_run(f, s, spec, std::move(model), a, pt);
}

}  // namespace cli
