// Phi-3 (Phi3ForCausalLM): the Llama decoder with q, k and v fused in one matrix and gate and up in
// another, and sliding-window attention on every layer. The tiny model of tests/data/hf-tiny/phi3/
// (tests/gen/make_hf_tiny_phi3.py: transformers' logits and greedy tokens, and the GGUF as llama.cpp's
// converter writes it, the fused tensors kept) through the FP32 reference pass and the compiled
// program; the fused tensors imported as views of their rows; bad shapes and what kiln lacks.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "backends/ref/ref_backend.h"
#include "formats/fused_projections.h"
#include "formats/hf_config.h"
#include "model_paths.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::compiled;
using test::greedy;
using test::program_logits;
using test::reference_logits;
using test::reference_model;

std::string folder() { return test::data_path("hf-tiny/phi3"); }
std::string gguf() { return test::data_path("hf-tiny/phi3/model.gguf"); }
json reference() { return json::parse(test::read_file(folder() + "/reference.json")); }

TEST(Phi3, ConfigFromFolderAndGguf) {
  for (const std::string& path : {folder(), gguf()}) {
    SCOPED_TRACE(path);
    auto imp = import_model(path);
    ASSERT_TRUE(imp) << imp.status().message();
    const ModelConfig& c = imp->model.config;
    EXPECT_EQ(c.arch, Arch::kPhi3);
    EXPECT_EQ(c.sliding_window, 5);
    EXPECT_TRUE(c.sliding_layers.empty());  // every layer
    EXPECT_EQ(c.rope_style, RopeStyle::kHalfSplit);
    EXPECT_FALSE(c.tie_embeddings);
    EXPECT_EQ(c.n_kv_heads, 2);
    // The fused tensors are gone, their parts views of the same file's bytes, no copy.
    const auto& t = imp->model.tensors;
    EXPECT_EQ(t.count("blk.0.attn_qkv.weight"), 0u);
    EXPECT_EQ(t.count("blk.0.ffn_gate_up.weight"), 0u);
    const TensorSource &q = t.at("blk.1.attn_q.weight"), &k = t.at("blk.1.attn_k.weight"), &v = t.at("blk.1.attn_v.weight");
    EXPECT_EQ(q.shape, (std::vector<int64_t>{64, 64}));
    EXPECT_EQ(k.shape, (std::vector<int64_t>{32, 64}));
    EXPECT_EQ(v.shape, (std::vector<int64_t>{32, 64}));
    EXPECT_EQ(q.bytes.data() + q.bytes.size(), k.bytes.data());
    EXPECT_EQ(k.bytes.data() + k.bytes.size(), v.bytes.data());
    const TensorSource &g = t.at("blk.2.ffn_gate.weight"), &u = t.at("blk.2.ffn_up.weight");
    EXPECT_EQ(g.shape, (std::vector<int64_t>{96, 64}));
    EXPECT_EQ(g.bytes.data() + g.bytes.size(), u.bytes.data());
  }
}

TEST(Phi3, ReferencePassMatchesTransformers) {
  for (const std::string& path : {folder(), gguf()}) {
    auto m = reference_model(path);
    ASSERT_TRUE(m);
    const double worst = test::worst_against(reference(), [&](const std::vector<int>& t) { return reference_logits(m, t); });
    std::printf("phi3 reference pass from %s: max relative logit error %.3g\n", fs::path(path).filename().c_str(), worst);
    EXPECT_LT(worst, 1e-4) << path;
  }
}

TEST(Phi3, CompiledProgramMatchesTransformers) {
  for (const std::string& path : {folder(), gguf()})
    for (bool fuse : {false, true}) {
      auto m = compiled(path, test::tiny_model_options(fuse));
      ASSERT_TRUE(m);
      for (size_t chunk : {size_t{1}, size_t{4}, size_t{64}}) {
        const double worst =
            test::worst_against(reference(), [&](const std::vector<int>& t) { return program_logits(m, t, chunk); });
        std::printf("phi3 compiled f32 from %s, fuse %d, %zu tokens a step: max relative logit error %.3g\n",
                    fs::path(path).filename().c_str(), fuse, chunk, worst);
        EXPECT_LT(worst, 1e-4) << path << " fuse " << fuse << " chunk " << chunk;
      }
    }
}

TEST(Phi3, GreedyTokensEqualTransformersOnEveryPath) {
  const json ref = reference();
  const auto prompt = ref["greedy"]["prompt"].get<std::vector<int>>();
  const auto want = ref["greedy"]["tokens"].get<std::vector<int>>();
  ASSERT_EQ(want.size(), 20u);
  RefBackend rb;
  CompileOptions only_ref = test::tiny_model_options();
  only_ref.backends = {&rb};
  const Backend* bind[] = {&rb};
  for (const std::string& path : {folder(), gguf()}) {
    auto s = ReferenceSession::create(reference_model(path), 0);
    ASSERT_TRUE(s);
    EXPECT_EQ(greedy(**s, prompt, want.size()), want) << "reference pass, " << path;
    for (const auto& m : {compiled(path, test::tiny_model_options()), compiled(path, only_ref, bind)}) {
      auto p = Session::create(m, 0);
      ASSERT_TRUE(p);
      EXPECT_EQ(greedy(**p, prompt, want.size()), want) << "compiled program, " << path;
    }
  }
}

// A quantized compile reads the row views as any other weight.
TEST(Phi3, QuantizedCompileRuns) {
  auto q = compiled(folder(), test::tiny_model_options(true, "w8a16"));
  ASSERT_TRUE(q);
  const json ref = reference();
  const auto tokens = ref["prompts"][2].get<std::vector<int>>();
  const auto got = program_logits(q, tokens, tokens.size());
  ASSERT_EQ(got.size(), tokens.size());
  const auto want = ref["logits"][2][tokens.size() - 1].get<std::vector<float>>();
  EXPECT_LT(test::relative_error(got.back().data(), want.data(), want.size()), 0.05);
}

TEST(Phi3, BadShapesAndWhatKilnLacksAreClearErrors) {
  auto imp = import_model(folder());
  ASSERT_TRUE(imp);
  // A fused matrix one row short names itself and both shapes.
  ImportedModel m;
  m.path = "phi3";
  m.config = imp->model.config;
  m.config.n_layers = 1;
  TensorSource qkv = imp->model.tensors.at("blk.0.attn_q.weight");
  qkv.name = "model.layers.0.self_attn.qkv_proj.weight";
  qkv.shape = {127, 64};
  qkv.bytes = qkv.bytes.first(127 * 64 * 4);
  m.tensors["blk.0.attn_qkv.weight"] = qkv;
  auto bad = split_fused_projections(m, "attn_qkv.weight", "ffn_gate_up.weight");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("'model.layers.0.self_attn.qkv_proj.weight' has shape [127, 64], expected [128, 64]"),
            std::string::npos)
      << bad.message();
  m.tensors.clear();
  bad = split_fused_projections(m, "attn_qkv.weight", "ffn_gate_up.weight");
  EXPECT_NE(bad.message().find("missing tensor 'blk.0.attn_qkv.weight'"), std::string::npos) << bad.message();

  const std::string base = test::read_file(folder() + "/config.json");
  auto with_rope = [&](const json& rope) {
    json j = json::parse(base);
    j["rope_parameters"] = rope;
    return parse_hf_config(j.dump(), "", "config.json");
  };
  auto partial = with_rope({{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.75}});
  ASSERT_FALSE(partial);
  EXPECT_NE(partial.status().message().find("partial_rotary_factor"), std::string::npos) << partial.status().message();
  auto longrope = with_rope({{"rope_type", "longrope"}, {"rope_theta", 10000.0}});
  ASSERT_FALSE(longrope);
  EXPECT_NE(longrope.status().message().find("type 'longrope' is not supported"), std::string::npos)
      << longrope.status().message();
}

}  // namespace
}  // namespace kiln
