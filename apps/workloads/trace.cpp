#include "workloads/trace.hpp"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>

#include "attn/engine/lens.hpp"
#include "attn/io/text.hpp"
#include "attn/model/parallel.hpp"

namespace cli {

using attn::activation_name;
using attn::Block;
using attn::block_name;
using attn::config_values;
using attn::Event;
using attn::mask_name;
using attn::ModelArgs;
using attn::rope_name;
using attn::Shape;
using attn::shape_text;
using attn::split_text;

using nlohmann::json;

namespace {

Shape cache_capacity(const ModelArgs& a) {
  return {a.max_batch_size, a.n_kv_heads, a.max_seq_len, a.head_dim()};
}

// One rank's cache buffer, [max_batch_size, n_kv_heads / K, max_seq_len, head_dim].
Shape local_cache_capacity(const ModelArgs& a) {
  return {a.max_batch_size, a.n_kv_heads / a.model_parallel_size, a.max_seq_len, a.head_dim()};
}

std::string cache_text(const Event& e) {
  return "kv cache shape: key: " + shape_text(e.cache_k) + ", value: " + shape_text(e.cache_v);
}

}  // namespace

void print_config_text(std::ostream& os, const ModelArgs& a) {
  os << "config: dim " << a.dim << ", n_layers " << a.n_layers << ", n_heads " << a.n_heads
     << ", n_kv_heads " << a.n_kv_heads << ", head_dim " << a.head_dim() << ", n_rep " << a.n_rep()
     << ", block " << block_name(a.block) << ", rope " << rope_name(a.rope) << ", mask "
     << mask_name(a.mask);
  if (a.block != Block::attention) os << ", ffn_hidden " << a.ffn_hidden();
  if (a.block == Block::encoder)
    os << ", activation " << activation_name(a.activation)
       << (a.norm_first ? ", norm_first" : ", post-norm");
  os << ", cache capacity " << shape_text(cache_capacity(a)) << "\n";
  if (a.model_parallel_size > 1)
    os << "model parallel: " << a.model_parallel_size << " ranks, each "
       << shape_text(local_cache_capacity(a)) << " of the cache; " << split_text(a) << "\n";
}

void print_event_text(std::ostream& os, const Event& e, bool decode_only) {
  if (e.kind == Event::Kind::prefill) {
    if (decode_only) {
      os << "prefill " << e.seqlen << ": " << cache_text(e) << "\n";
      return;
    }
    os << "prefill: start_pos " << e.start_pos << ", seqlen " << e.seqlen << ", input "
       << shape_text(e.input) << " -> output " << shape_text(e.output) << ", " << cache_text(e)
       << "\n";
    return;
  }
  os << "decode step " << e.step << ": ";
  if (!decode_only)
    os << "start_pos " << e.start_pos << ", input " << shape_text(e.input) << " -> output "
       << shape_text(e.output) << ", ";
  os << cache_text(e) << "\n";
}

void print_summary_text(std::ostream& os, const Summary& s) {
  const double per_step = s.decode_steps ? s.decode_ms_total / double(s.decode_steps) : 0;
  os << "prompt eval time = " << s.prefill_ms << " ms / " << s.prefill_positions << " positions ("
     << (s.prefill_ms > 0 ? 1e3 * double(s.prefill_positions) / s.prefill_ms : 0)
     << " positions per second)\n"
     << "       eval time = " << s.decode_ms_total << " ms / " << s.decode_steps << " steps ("
     << per_step << " ms per step, median " << s.decode_ms_median << ")\n"
     << "threads = " << s.threads << ", OpenBLAS core = " << s.blas_core << "\n";
}

json top_logits(const float* logits, std::int64_t vocab, int n) {
  std::vector<attn::TopLogit> best(std::size_t(std::clamp<std::int64_t>(n, 0, vocab)));
  attn::top_logits(logits, vocab, int(best.size()), best.data());
  json top = json::array();
  for (const attn::TopLogit& t : best) top.push_back({{"id", t.id}, {"logit", t.logit}});
  return top;
}

void print_lens_json(std::ostream& os, const attn::LogitLens& lens, const char* of,
                     std::int64_t step, std::int64_t first_layer) {
  for (std::int64_t l = 0; l < lens.n_layers; ++l) {
    if (!lens.fed[std::size_t(l)]) continue;
    json rows = json::array();
    for (std::int64_t b = 0; b < lens.bsz; ++b) {
      json positions = json::array();
      for (std::int64_t t = 0; t < lens.seqlen; ++t) {
        const attn::TopLogit* top = attn::lens_top(lens, l, b, t);
        json best = json::array();
        for (int j = 0; j < lens.k_used; ++j)
          best.push_back({{"id", top[j].id}, {"logit", top[j].logit}});
        positions.push_back(std::move(best));
      }
      rows.push_back(std::move(positions));
    }
    json j = {{"event", "lens"}, {"of", of}};
    if (std::string_view(of) == "decode") j["step"] = step;
    j["start_pos"] = lens.start_pos;
    j["layer"] = first_layer + l;
    j["top"] = std::move(rows);
    os << j.dump() << "\n";
  }
}

void print_lens_text(std::ostream& os, const attn::LogitLens& lens, const char* of,
                     std::int64_t step, std::int64_t first_layer, const attn::Tokenizer* tok) {
  for (std::int64_t l = 0; l < lens.n_layers; ++l) {
    if (!lens.fed[std::size_t(l)]) continue;
    for (std::int64_t b = 0; b < lens.bsz; ++b) {
      os << "lens " << of;
      if (std::string_view(of) == "decode") os << " " << step;
      os << " layer " << first_layer + l;
      if (lens.bsz > 1) os << " batch " << b;
      os << ":";
      for (std::int64_t t = 0; t < lens.seqlen; ++t) {
        const std::int32_t id = attn::lens_top(lens, l, b, t)[0].id;
        os << " " << (tok ? attn::quoted(attn::token_bytes(*tok, id), 40) : std::to_string(id));
      }
      os << "\n";
    }
  }
}

void print_config_json(std::ostream& os, const ModelArgs& a) {
  json j = {{"event", "config"},
            {"head_dim", a.head_dim()},
            {"n_rep", a.n_rep()},
            {"cache_capacity", cache_capacity(a)}};
  for (const auto& [key, value] : config_values(a)) j[key] = json::parse(value);
  j["n_local_heads"] = a.n_heads / a.model_parallel_size;
  j["n_local_kv_heads"] = a.n_kv_heads / a.model_parallel_size;
  j["local_cache_capacity"] = local_cache_capacity(a);
  os << j.dump() << "\n";
}

void print_event_json(std::ostream& os, const Event& e) {
  json j = {{"event", e.kind == Event::Kind::prefill ? "prefill" : "decode"}};
  if (e.kind == Event::Kind::decode) j["step"] = e.step;
  j["start_pos"] = e.start_pos;
  j["seqlen"] = e.seqlen;
  j["input"] = e.input;
  j["output"] = e.output;
  j["cache_k"] = e.cache_k;
  j["cache_v"] = e.cache_v;
  j["unmasked"] = e.unmasked;
  j["local_cache_k"] = e.local_cache_k;
  j["local_cache_v"] = e.local_cache_v;
  j["ms"] = e.seconds * 1e3;
  if (e.logits) {  // each sequence's next token, from its last position
    json next = json::array();
    for (std::int64_t b = 0; b < e.input[0]; ++b)
      next.push_back(top_logits(e.logits + b * e.vocab, e.vocab, 5));
    j["top_logits"] = std::move(next);
  }
  os << j.dump() << "\n";
}

void print_summary_json(std::ostream& os, const Summary& s) {
  json j = {{"event", "summary"},
            {"prefill_positions", s.prefill_positions},
            {"prefill_ms", s.prefill_ms},
            {"decode_steps", s.decode_steps},
            {"decode_ms_total", s.decode_ms_total},
            {"decode_ms_median", s.decode_ms_median},
            {"threads", s.threads},
            {"blas_core", s.blas_core}};
  os << j.dump() << "\n";
}

void print_attention_json(std::ostream& os, const ModelArgs& a, const Event& e) {
  const std::int64_t B = e.input[0], keys = e.start_pos + e.seqlen;
  for (std::size_t l = 0; l < e.attn.size(); ++l)
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < a.n_heads; ++h) {
        const float* p = e.attn[l] + (b * a.n_heads + h) * e.seqlen * keys;
        json rows = json::array();
        for (std::int64_t i = 0; i < e.seqlen; ++i)
          rows.push_back(std::vector<float>(p + i * keys, p + (i + 1) * keys));
        json j = {{"event", "attention_weights"},
                  {"of", e.kind == Event::Kind::prefill ? "prefill" : "decode"}};
        if (e.kind == Event::Kind::decode) j["step"] = e.step;
        j["layer"] = l;
        j["batch"] = b;
        j["head"] = h;
        j["kv_head"] = h / a.n_rep();
        j["weights"] = std::move(rows);  // [seqlen, start_pos + seqlen]
        os << j.dump() << "\n";
      }
}

void print_attention(std::ostream& os, const ModelArgs& a, const Event& e) {
  const std::int64_t B = e.input[0], keys = e.start_pos + e.seqlen;
  char num[32];
  for (std::size_t l = 0; l < e.attn.size(); ++l)
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < a.n_heads; ++h) {
        os << "attention_weights layer " << l << ", batch " << b << ", head " << h << " (kv head "
           << h / a.n_rep() << "):\n";
        const float* p = e.attn[l] + (b * a.n_heads + h) * e.seqlen * keys;
        for (std::int64_t i = 0; i < e.seqlen; ++i) {
          os << "  [";
          for (std::int64_t j = 0; j < keys; ++j) {
            std::snprintf(num, sizeof num, "%s%.4f", j ? ", " : "", double(p[i * keys + j]));
            os << num;
          }
          os << "]\n";
        }
      }
}

}  // namespace cli
