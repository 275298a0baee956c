// Model parallelism without running ranks (any build): what each rank holds, read from a whole
// file or a per-rank file or drawn from the seed, against the whole model's tensors; the
// committed per-rank fixtures (tools/export_weights.py) against the whole file they were split
// from; and the refusals that need no second rank.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "attn/error.hpp"
#include "attn/model/detail/slice.hpp"
#include "attn/model/parallel.hpp"
#include "attn/model/weights.hpp"
#include "test_support.hpp"

namespace {

// Every tensor rank `shard` holds equals its block of the whole model's tensor, element for
// element.
void check_slices(const attn::ModelArgs& a, const attn::TransformerWeights& whole,
                  const attn::TransformerWeights& part, const attn::Shard& shard) {
  // tensor_specs fills scratch layers; each slot's offset in them finds the view in ours.
  std::vector<attn::LayerWeights> wl, pl;
  const std::vector<attn::TensorSpec> ws = attn::tensor_specs(a, wl);
  const std::vector<attn::TensorSpec> ps = attn::tensor_specs(a, pl, shard);
  auto view = [](const attn::TensorSpec& s, const std::vector<attn::LayerWeights>& scratch,
                 const attn::TransformerWeights& w) {
    auto at = [&](const void* slot) {
      const auto offset =
          static_cast<const char*>(slot) - reinterpret_cast<const char*>(scratch.data());
      return reinterpret_cast<const char*>(w.layers.data()) + offset;
    };
    if (s.slot.matrix) return *reinterpret_cast<const attn::Matrix*>(at(s.slot.matrix));
    return attn::Matrix(*reinterpret_cast<const float* const*>(at(s.slot.vector)));
  };
  REQUIRE(ws.size() == ps.size());
  std::int64_t sliced = 0;
  for (std::size_t t = 0; t < ws.size(); ++t) {
    CAPTURE(ps[t].name);
    REQUIRE(ws[t].name == ps[t].name);
    const attn::Matrix w = view(ws[t], wl, whole);
    const attn::Matrix p = view(ps[t], pl, part);
    REQUIRE(p.data != nullptr);
    const std::int64_t rows = ps[t].shape[0], cols = ps[t].shape.size() == 2 ? ps[t].shape[1] : 1;
    if (!ps[t].full.empty()) {
      CHECK(ps[t].full == ws[t].shape);
      ++sliced;
    }
    std::int64_t bad = 0;
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j) {
        const std::int64_t k = ps[t].full.empty() ? i * cols + j : attn::index_in_full(ps[t], i, j);
        bad += attn::element(p.row(i, cols), j) != attn::element(w, k);
      }
    CHECK(bad == 0);
  }
  CHECK(sliced > 0);
}

attn::ModelArgs config_of(const std::string& name) {
  return attn::load_config(test::golden_dir() / name / "config.json");
}

}  // namespace

TEST_CASE("parallel: each rank's heads, KV heads and FFN rows, as the notebook splits them") {
  attn::ModelArgs a = attn::seed_args();
  a.model_parallel_size = 2;
  const attn::ModelArgs l = attn::local_args(a, {1, 2});
  CHECK(l.n_heads == 3);
  CHECK(l.n_kv_heads == 1);
  CHECK(l.head_dim() == 3);
  CHECK(l.n_rep() == 3);
  CHECK(l.ffn_hidden() == a.ffn_hidden() / 2);
  CHECK(attn::split_text(a) ==
        "rank 0: query heads 0-2, kv head 0; rank 1: query heads 3-5, kv head 1");
  a.model_parallel_size = 1;
  CHECK(attn::split_text(a) == "rank 0: query heads 0-5, kv heads 0-1");
}

TEST_CASE("parallel: a rank's slice of the whole file is its block of every split tensor") {
  // F32 in place (rows) and repacked (columns), F16 converted, biases, several layers.
  for (const char* name :
       {"gqa_llama_interleaved_b2", "attention_bias_interleaved", "llama_3layers_ffnmult_half",
        "f16_llama_gqa_interleaved", "mha_attention_half"}) {
    CAPTURE(name);
    const attn::ModelArgs a = config_of(name);
    const auto file = test::golden_dir() / name / "weights.safetensors";
    const attn::TransformerWeights whole = attn::load_weights(a, file);
    for (int K : {2, 3}) {
      if (a.n_kv_heads % K || a.n_heads % K ||
          (a.block == attn::Block::llama && a.ffn_hidden() % K))
        continue;
      for (int r = 0; r < K; ++r) {
        CAPTURE(K);
        CAPTURE(r);
        const attn::TransformerWeights part = attn::load_weights(a, file, {r, K});
        check_slices(a, whole, part, {r, K});
      }
    }
  }
}

TEST_CASE("parallel: seeded weights on K ranks are the blocks of the one seeded model") {
  for (const char* name : {"gqa_llama_interleaved_b2", "attention_bias_interleaved"}) {
    CAPTURE(name);
    const attn::ModelArgs a = config_of(name);
    const attn::TransformerWeights whole = attn::seeded_weights(a, 7);
    for (int r = 0; r < 2; ++r) check_slices(a, whole, attn::seeded_weights(a, 7, {r, 2}), {r, 2});
  }
}

TEST_CASE("parallel: the committed per-rank files join back into the whole file") {
  // tools/export_weights.py --ranks K split these; a rank reading its per-rank file ('{rank}')
  // must hold exactly what it reads from the whole file.
  for (auto [name_, K] :
       {std::pair{"gqa_llama_interleaved_b2", 2}, std::pair{"attention_bias_interleaved", 2},
        std::pair{"mha_attention_half", 3}}) {
    const auto& name = name_;  // clang 14 lambdas (doctest INFO) cannot capture a binding
    CAPTURE(name);
    const attn::ModelArgs a = config_of(name);
    const auto dir = test::golden_dir() / name;
    const attn::TransformerWeights whole = attn::load_weights(a, dir / "weights.safetensors");
    for (int r = 0; r < K; ++r) {
      CAPTURE(r);
      const attn::TransformerWeights part =
          attn::load_weights(a, dir / "weights.rank{rank}.safetensors", {r, K});
      CHECK(part.tensors->source() ==
            (dir / ("weights.rank" + std::to_string(r) + ".safetensors")).string());
      check_slices(a, whole, part, {r, K});
    }
  }
}

TEST_CASE("parallel: a per-rank file with another rank's shapes is refused, naming it") {
  const attn::ModelArgs a = config_of("gqa_llama_interleaved_b2");
  const auto dir = test::golden_dir() / "gqa_llama_interleaved_b2";
  // The whole file where rank 1's slice is expected.
  try {
    attn::load_weights(a, dir / "weights{rank}.safetensors", {0, 1});  // rank 0 of 1: "weights0"
    FAIL("no InputError");
  } catch (const attn::InputError& e) {
    CHECK(std::string(e.what()).find("weights0.safetensors") != std::string::npos);
  }
  try {
    attn::load_weights(a, dir / "weights.rank0.safetensors", {1, 2});  // a whole-file path
    FAIL("no InputError");
  } catch (const attn::InputError& e) {
    const std::string m = e.what();
    CHECK(m.find("weights.rank0.safetensors") != std::string::npos);
    CHECK(m.find("layers.0.attention.wq.weight") != std::string::npos);
    CHECK(m.find("expected shape [48, 48]") != std::string::npos);
  }
  // The per-rank path of 3 ranks where the files were split for 2.
  attn::ModelArgs a3 = config_of("mha_attention_half");
  try {
    attn::load_weights(
        a3, test::golden_dir() / "gqa_llama_interleaved_b2" / "weights.rank{rank}.safetensors",
        {1, 3});
    FAIL("no InputError");
  } catch (const attn::InputError& e) {
    const std::string m = e.what();
    CHECK(m.find("weights.rank1.safetensors") != std::string::npos);
  }
}

TEST_CASE("parallel: model_parallel_size must equal the number of ranks") {
  attn::ModelArgs a = attn::seed_args();
  a.model_parallel_size = 2;
  CHECK_NOTHROW(attn::check_shard(a, {0, 2}));
  const char* other = attn::mpi_built() ? "started 3 ranks" : "built without MPI";
  CHECK_THROWS_WITH_AS(attn::check_shard(a, {0, 3}), doctest::Contains(other), attn::InputError);
  const char* alone = attn::mpi_built() ? "mpirun -np 2" : "built without MPI";
  CHECK_THROWS_WITH_AS(attn::check_shard(a, {0, 1}), doctest::Contains(alone), attn::InputError);
  a.model_parallel_size = 1;
  CHECK_NOTHROW(attn::check_shard(a, {0, 1}));
  CHECK_THROWS_AS(attn::check_shard(a, {0, 2}), attn::InputError);
}

TEST_CASE("parallel: model_parallel_size 2 outside mpirun exits 2 naming what is missing") {
  const auto cfg = test::golden_dir() / "gqa_llama_interleaved_b2" / "config.json";
  const auto tmp = std::filesystem::temp_directory_path() / "attn_parallel_mp2.json";
  {
    std::ifstream in(cfg);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    const std::size_t at = text.find("\"model_parallel_size\": 1");
    REQUIRE(at != std::string::npos);
    text.replace(at, 24, "\"model_parallel_size\": 2");
    std::ofstream(tmp) << text;
  }
  const auto dump = std::filesystem::temp_directory_path() / "attn_parallel_mp2.safetensors";
  const test::CliResult r =
      test::run_cli("run --config " + tmp.string() + " --dump " + dump.string());
  CHECK(r.status == 2);
  CHECK(r.err.find("model_parallel_size 2") != std::string::npos);
  CHECK(r.err.find(attn::mpi_built() ? "mpirun -np 2" : "built without MPI") != std::string::npos);
  CHECK(!std::filesystem::exists(dump));
  std::filesystem::remove(tmp);
}

TEST_CASE("parallel: what cannot be split is refused naming model_parallel_size") {
  auto refused = [](const std::string& json) {
    CAPTURE(json);
    CHECK_THROWS_WITH_AS(attn::parse_config(json, "c.json"),
                         doctest::Contains("model_parallel_size"), attn::InputError);
  };
  refused(R"({"dim": 32, "n_heads": 4, "block": "encoder", "model_parallel_size": 2})");
  refused(R"({"dim": 36, "n_heads": 6, "n_kv_heads": 3, "model_parallel_size": 2})");
  refused(R"({"dim": 32, "n_heads": 4, "ffn_hidden": 33, "model_parallel_size": 2})");
}
