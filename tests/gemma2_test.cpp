// Gemma 2 (Gemma2ForCausalLM, gemma2): Gemma 3's block without q/k norms and with soft-capping,
// cap * tanh(x / cap), of the scaled attention scores (before the mask) and of the logits; the
// even layers through the sliding window, the odd ones global. The tiny model of
// tests/data/hf-tiny/gemma2/ (tests/gen/make_hf_tiny_gemma2.py: caps 5 and 3, which move its
// logits by 2.4 and 3.9; transformers' logits and greedy tokens, and the GGUF llama.cpp's
// converter makes of it with transformers' logits of what that file means to llama.cpp) through
// the FP32 reference pass and the compiled program (fused or not, in steps of several tokens, on
// the CPU and the reference back ends); the .kiln round trip; bad configs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "artifact/kiln_image_reader.h"
#include "backends/api/activation_math.h"
#include "backends/ref/ref_backend.h"
#include "compiler/driver.h"
#include "compiler/kiln_writer.h"
#include "formats/hf_config.h"
#include "formats/import.h"
#include "reference/reference_session.h"
#include "runtime/model.h"
#include "runtime/session.h"
#include "model_paths.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::compiled;
using test::greedy;
using test::program_logits;
using test::reference_logits;
using test::reference_model;
using nlohmann::json;

std::string folder() { return test::data_path("hf-tiny/gemma2"); }
std::string gguf() { return test::data_path("hf-tiny/gemma2/model.gguf"); }
// The folder is transformers' model; the GGUF what llama.cpp runs of it (queries scaled by
// head_dim^-0.5: a gemma2 GGUF has no key for query_pre_attn_scalar).
json reference_for(const std::string& path) { return test::reference_of(folder(), path); }

CompileOptions options(bool fuse = true, const char* scheme = "f32") { return test::tiny_model_options(fuse, scheme); }

TEST(Gemma2, ConfigFromFolderAndGguf) {
  for (const std::string& path : {folder(), gguf()}) {
    SCOPED_TRACE(path);
    auto imp = import_model(path);
    ASSERT_TRUE(imp) << imp.status().message();
    const ModelConfig& c = imp->model.config;
    EXPECT_EQ(c.arch, Arch::kGemma2);
    EXPECT_TRUE(c.gemma_block());
    EXPECT_FALSE(c.qk_norm);
    EXPECT_TRUE(c.tie_embeddings);
    EXPECT_EQ(c.head_dim, 16);
    EXPECT_EQ(c.rope_style, RopeStyle::kHalfSplit);
    EXPECT_EQ(c.sliding_window, 4);
    EXPECT_EQ(c.sliding_layers, (std::vector<uint8_t>{1, 0, 1}));
    EXPECT_FLOAT_EQ(c.rope_theta, 1e4f);
    EXPECT_EQ(c.rope_theta_local, 0.0f);
    EXPECT_FLOAT_EQ(c.attn_softcap, 5.0f);
    EXPECT_FLOAT_EQ(c.final_softcap, 3.0f);
    EXPECT_FLOAT_EQ(c.query_pre_attn_scalar, path == gguf() ? 16.0f : 24.0f);
    EXPECT_EQ(imp->model.tensors.count("blk.0.attn_q_norm.weight"), 0u);
    EXPECT_EQ(imp->model.tensors.at("blk.2.post_ffw_norm.weight").shape, std::vector<int64_t>{64});
  }
}

TEST(Gemma2, ReferencePassMatchesTransformers) {
  test::expect_reference_pass_matches("gemma2", {folder(), gguf()}, reference_for);
}

TEST(Gemma2, CompiledProgramMatchesTransformers) {
  test::expect_compiled_matches("gemma2", {folder(), gguf()}, reference_for, [](bool fuse) { return options(fuse); });
}

TEST(Gemma2, CompiledProgramMatchesReferencePass) { test::expect_back_ends_match_reference_pass(folder(), options()); }

TEST(Gemma2, GreedyTokensEqualTransformersOnEveryPath) {
  test::expect_greedy_matches({folder(), gguf()}, reference_for, options());
}

// The caps in the graph (on each attention node; a soft-cap node after the classifier, in the
// tail), through a .kiln file and back: the file's logits are the in-memory program's, bit for bit.
TEST(Gemma2, SoftcapsInTheGraphAndTheKilnFile) {
  auto imp = import_model(folder());
  ASSERT_TRUE(imp);
  CompileReport r;
  auto img = compile_model(*imp, options(), &r);
  ASSERT_TRUE(img) << img.status().message();
  const Graph& g = img->program.graph;
  int attention = 0, caps = 0;
  for (const Node& n : g.nodes) {
    if (n.op == OpCode::kAttention) {
      ++attention;
      EXPECT_FLOAT_EQ(n.softcap, 5.0f);
      EXPECT_FLOAT_EQ(n.scale, 1.0f / std::sqrt(24.0f));
    }
    if (n.op == OpCode::kSoftcap) {
      ++caps;
      EXPECT_FLOAT_EQ(n.softcap, 3.0f);
      EXPECT_TRUE(n.tail);
      EXPECT_EQ(n.outputs, std::vector<int>{g.logits_output});
    }
    EXPECT_NE(n.op, OpCode::kSwiGLU);
  }
  EXPECT_EQ(attention, 3);
  EXPECT_EQ(caps, 1);
  EXPECT_TRUE(img->program.rope_inv_freq_local.empty());

  auto k = test::through_kiln_file(*img, r, "gemma2.kiln");
  ASSERT_TRUE(k) << k.status().message();
  EXPECT_EQ(k->image.config.arch, Arch::kGemma2);
  EXPECT_EQ(k->image.config.attn_softcap, 5.0f);
  EXPECT_EQ(k->image.config.final_softcap, 3.0f);
  EXPECT_EQ(k->image.config.sliding_layers, img->config.sliding_layers);
  for (size_t i = 0; i < g.nodes.size(); ++i) EXPECT_EQ(k->image.program.graph.nodes[i].softcap, g.nodes[i].softcap) << i;
  auto from_file = Model::create(std::move(k->image));
  ASSERT_TRUE(from_file) << from_file.status().message();
  const std::vector<int> tokens = {5, 17, 200, 3, 99, 42, 7, 250, 1, 11};
  EXPECT_EQ(program_logits(*from_file, tokens, 3), program_logits(compiled(folder(), options()), tokens, 3));
}

// A quantized compile runs and stays near transformers.
TEST(Gemma2, QuantizedCompileRuns) {
  test::expect_quantized_close(compiled(folder(), options(true, "w8a16")), reference_for(folder()));
}

TEST(Gemma2, SoftcapIsTransformers) {
  // torch.tanh(x / 3) * 3 in float32.
  const std::pair<float, float> cases[] = {{0.0f, 0.0f},          {1.0f, 0.964538276f}, {-2.5f, -2.04678535f},
                                           {7.0f, 2.94410419f},  {-40.0f, -3.0f},      {1e-3f, 0.00100000005f}};
  for (auto [x, want] : cases) EXPECT_NEAR(softcap(x, 3.0f), want, 2e-7f * std::max(1.0f, std::fabs(want))) << x;
}

// Bad soft-caps and layer lists name the field, from the config and from the GGUF; null caps are
// none, absent ones Gemma2Config's defaults (50, 30).
TEST(Gemma2, BadConfigsAreClearErrors) {
  const std::string base = test::read_file(folder() + "/config.json");
  auto with = [&](const std::string& key, const json& value) { return test::config_with(base, key, value); };
  using test::expect_error;
  expect_error(with("attn_logit_softcapping", -5.0), "attn_logit_softcapping must be a positive number or null");
  expect_error(with("final_logit_softcapping", 0.0), "final_logit_softcapping must be a positive number or null");
  expect_error(with("final_logit_softcapping", "30"), "final_logit_softcapping must be a positive number or null");
  expect_error(with("layer_types", json::array({"sliding_attention", "full_attention"})), "layer_types must be a list of 3");
  expect_error(with("hidden_activation", "gelu"), "hidden_activation 'gelu' is not supported");
  auto none = with("attn_logit_softcapping", nullptr);
  ASSERT_TRUE(none) << none.status().message();
  EXPECT_EQ(none->attn_softcap, 0.0f);
  auto defaults = with("final_logit_softcapping", json(json::value_t::discarded));
  ASSERT_TRUE(defaults) << defaults.status().message();
  EXPECT_EQ(defaults->final_softcap, 30.0f);
  // Without layer_types: the even layers slide, as Gemma2Config makes them.
  auto old = with("layer_types", json(json::value_t::discarded));
  ASSERT_TRUE(old) << old.status().message();
  EXPECT_EQ(old->sliding_layers, (std::vector<uint8_t>{1, 0, 1}));

  // The GGUF's attention cap made negative.
  test::expect_error(import_model(test::gguf_with_float(gguf(), "gemma2.attn_logit_softcapping", -5.0f, "gemma2-bad.gguf")),
                     "attn_logit_softcapping must be a finite non-negative number");
}

}  // namespace
}  // namespace kiln
