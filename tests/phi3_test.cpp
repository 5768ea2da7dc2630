// Phi-3 (Phi3ForCausalLM): the Llama decoder with q, k and v fused in one matrix and gate and up in
// another, and sliding-window attention on every layer; Phi-3-mini-128k and Phi-3.5 add LongRoPE.
// The tiny models of tests/data/hf-tiny/phi3/ and phi3-longrope/ (tests/gen/make_hf_tiny_phi3.py:
// transformers' logits and greedy tokens, and the GGUFs as llama.cpp's converter writes them, the
// fused tensors kept) through the FP32 reference pass and the compiled program; the fused tensors
// imported as views of their rows; bad shapes and what kiln lacks.
#include <gtest/gtest.h>

#include <cmath>
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
std::string longrope() { return test::data_path("hf-tiny/phi3-longrope"); }
std::string longrope_gguf() { return test::data_path("hf-tiny/phi3-longrope/model.gguf"); }
std::string partial() { return test::data_path("hf-tiny/phi3-partial"); }
std::string partial_gguf() { return test::data_path("hf-tiny/phi3-partial/model.gguf"); }
// Each file with the reference of its folder.
const std::vector<std::string> kPaths = {folder(), gguf(), longrope(), longrope_gguf(), partial(), partial_gguf()};
json reference_for(const std::string& path) {
  const std::string dir = path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0 ? fs::path(path).parent_path().string() : path;
  return json::parse(test::read_file(dir + "/reference.json"));
}
json reference() { return reference_for(folder()); }

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

TEST(Phi3, ReferencePassMatchesTransformers) { test::expect_reference_pass_matches("phi3", kPaths, reference_for); }

TEST(Phi3, CompiledProgramMatchesTransformers) {
  test::expect_compiled_matches("phi3", kPaths, reference_for, [](bool fuse) { return test::tiny_model_options(fuse); }, {1, 4, 64});
}

TEST(Phi3, GreedyTokensEqualTransformersOnEveryPath) {
  test::expect_greedy_matches(kPaths, reference_for, test::tiny_model_options());
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
  auto above = with_rope({{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 1.5}});
  ASSERT_FALSE(above);
  EXPECT_NE(above.status().message().find("partial_rotary_factor must be in (0, 1]"), std::string::npos) << above.status().message();
  auto three = with_rope({{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.1875}});
  ASSERT_FALSE(three);
  EXPECT_NE(three.status().message().find("turns 3 elements of a head of 16"), std::string::npos) << three.status().message();
  auto short_list = with_rope({{"rope_type", "longrope"}, {"rope_theta", 10000.0}, {"short_factor", {1.0, 2.0}},
                               {"long_factor", {1, 1, 1, 1, 1, 1, 1, 1}}});
  ASSERT_FALSE(short_list);
  EXPECT_NE(short_list.status().message().find("short_factor must be a list of 8 numbers (one per rotated pair of a head)"), std::string::npos)
      << short_list.status().message();
  auto yarn = with_rope({{"rope_type", "yarn"}, {"rope_theta", 10000.0}});
  ASSERT_FALSE(yarn);
  EXPECT_NE(yarn.status().message().find("type 'yarn' is not supported"), std::string::npos) << yarn.status().message();
}

// RoPE over half of each head (Phi-4-mini turns 3/4), from the folder and the GGUF, kept in a .kiln.
TEST(Phi3, PartialRotaryConfig) {
  for (const std::string& path : {partial(), partial_gguf()}) {
    SCOPED_TRACE(path);
    auto imp = import_model(path);
    ASSERT_TRUE(imp) << imp.status().message();
    EXPECT_EQ(imp->model.config.rotary_dim, 8);
    EXPECT_EQ(imp->model.config.head_dim, 16);
    EXPECT_TRUE(imp->model.config.tie_embeddings);
  }
  auto imp = import_model(partial());
  ASSERT_TRUE(imp);
  auto img = compile_model(*imp, test::tiny_model_options(), nullptr);
  ASSERT_TRUE(img) << img.status().message();
  EXPECT_EQ(img->program.rope_inv_freq.size(), 4u);
}

// LongRoPE from the folder and the GGUF: the short factors, the attention factor transformers
// derives (sqrt(1 + ln 4 / ln 64)), the context held to the original 64 positions (the long
// factors, for more, are not implemented), and a .kiln that keeps them.
TEST(Phi3, LongRopeConfigAndItsContext) {
  for (const std::string& path : {longrope(), longrope_gguf()}) {
    SCOPED_TRACE(path);
    auto imp = import_model(path);
    ASSERT_TRUE(imp) << imp.status().message();
    const RopeScaling& r = imp->model.config.rope_scaling;
    EXPECT_EQ(r.type, RopeScaling::Type::kLongRope);
    EXPECT_EQ(r.short_factor.size(), 8u);
    EXPECT_FLOAT_EQ(r.short_factor[1], 1.3823f);
    EXPECT_NEAR(r.attention_factor, std::sqrt(1.0 + std::log(4.0) / std::log(64.0)), 1e-6);
    EXPECT_EQ(r.original_max_position, 64);
    EXPECT_EQ(imp->model.config.max_seq_len, 64);
  }
  auto m = compiled(longrope(), test::tiny_model_options());
  ASSERT_TRUE(m);
  EXPECT_FALSE(Session::create(m, 65));
  EXPECT_TRUE(Session::create(m, 64));
}

}  // namespace
}  // namespace kiln
