// Gemma 3 (Gemma3ForCausalLM, gemma3_text): the embedding scaled by sqrt(dim), (1 + w) norms, a
// norm after attention and after the FFN, q/k norms, GELU-tanh gating, queries scaled by
// query_pre_attn_scalar^-0.5, five sliding-window layers (their own RoPE base) then a global one
// (its base and linear scaling). The tiny model of tests/data/hf-tiny/gemma3/
// (tests/gen/make_hf_tiny_gemma3.py: transformers' logits and greedy tokens, and the GGUF
// llama.cpp's converter makes of it, with transformers' logits of what that file means to
// llama.cpp) through the FP32 reference pass and the compiled program (fused or not, in steps of
// several tokens, on the CPU and the reference back ends); bad configs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "backends/api/activation_math.h"
#include "backends/ref/ref_backend.h"
#include "artifact/kiln_image_reader.h"
#include "compiler/driver.h"
#include "compiler/kiln_writer.h"
#include "formats/hf_config.h"
#include "formats/hf_folder.h"
#include "formats/import.h"
#include "quant/overrides.h"
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

std::string folder() { return test::data_path("hf-tiny/gemma3"); }
std::string gguf() { return test::data_path("hf-tiny/gemma3/model.gguf"); }
// What each file means: the folder transformers' model, the GGUF what llama.cpp runs of it
// (queries scaled by head_dim^-0.5, as the GGUF has no key for query_pre_attn_scalar).
json reference_for(const std::string& path) { return test::reference_of(folder(), path); }

CompileOptions options(bool fuse = true, const char* scheme = "f32") { return test::tiny_model_options(fuse, scheme); }

TEST(Gemma3, ConfigFromFolderAndGguf) {
  for (const std::string& path : {folder(), gguf()}) {
    SCOPED_TRACE(path);
    auto imp = import_model(path);
    ASSERT_TRUE(imp) << imp.status().message();
    const ModelConfig& c = imp->model.config;
    EXPECT_EQ(c.arch, Arch::kGemma3);
    EXPECT_TRUE(c.qk_norm);
    EXPECT_TRUE(c.tie_embeddings);
    EXPECT_EQ(c.head_dim, 32);
    EXPECT_EQ(c.rope_style, RopeStyle::kHalfSplit);
    EXPECT_EQ(c.sliding_window, 4);
    EXPECT_EQ(c.sliding_layers, (std::vector<uint8_t>{1, 1, 1, 1, 1, 0}));
    EXPECT_FLOAT_EQ(c.rope_theta, 1e6f);
    EXPECT_FLOAT_EQ(c.rope_theta_local, 1e4f);
    EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLinear);
    EXPECT_FLOAT_EQ(c.rope_scaling.factor, 2.0f);
    // The folder's own scalar; the GGUF's as llama.cpp takes it (head_dim).
    EXPECT_FLOAT_EQ(c.query_pre_attn_scalar, path == gguf() ? 32.0f : 24.0f);
    EXPECT_EQ(imp->model.tensors.at("blk.5.post_ffw_norm.weight").shape, std::vector<int64_t>{64});
  }
}

// The folder's norms are stored as w of (1 + w); once imported they are 1 + w, as the GGUF's are.
TEST(Gemma3, NormsFromTheFolderHaveTheOneFoldedIn) {
  auto hf = import_model(folder());
  auto gg = import_model(gguf());
  ASSERT_TRUE(hf && gg);
  for (const char* name : {"blk.0.attn_norm.weight", "blk.3.post_attention_norm.weight", "blk.5.ffn_norm.weight",
                           "blk.2.post_ffw_norm.weight", "blk.1.attn_q_norm.weight", "output_norm.weight"}) {
    const TensorSource& a = hf->model.tensors.at(name);
    const TensorSource& b = gg->model.tensors.at(name);
    ASSERT_EQ(a.dtype, DType::kF32) << name;
    ASSERT_EQ(a.bytes.size(), b.bytes.size()) << name;
    EXPECT_TRUE(std::equal(a.bytes.begin(), a.bytes.end(), b.bytes.begin())) << name;
  }
}

TEST(Gemma3, ReferencePassMatchesTransformers) {
  test::expect_reference_pass_matches("gemma3", {folder(), gguf()}, reference_for);
}

TEST(Gemma3, CompiledProgramMatchesTransformers) {
  test::expect_compiled_matches("gemma3", {folder(), gguf()}, reference_for, [](bool fuse) { return options(fuse); });
}

TEST(Gemma3, CompiledProgramMatchesReferencePass) { test::expect_back_ends_match_reference_pass(folder(), options()); }

TEST(Gemma3, GreedyTokensEqualTransformersOnEveryPath) {
  test::expect_greedy_matches({folder(), gguf()}, reference_for, options());
}

// The graph: GeGLU where the others have SwiGLU, a norm after each block, the scales on the
// embedding and the attention; a quantized compile keeps the norms f32 and still runs.
TEST(Gemma3, GraphAndAQuantizedCompile) {
  auto imp = import_model(folder());
  ASSERT_TRUE(imp);
  auto img = compile_model(*imp, options(), nullptr);
  ASSERT_TRUE(img) << img.status().message();
  const Graph& g = img->program.graph;
  int geglu = 0, swiglu = 0, norms = 0;
  for (const Node& n : g.nodes) {
    geglu += n.op == OpCode::kGeGLU;
    swiglu += n.op == OpCode::kSwiGLU || n.op == OpCode::kGateUpSwiGLU || n.op == OpCode::kRmsNormGateUpSwiGLU;
    norms += n.op == OpCode::kRmsNorm;
    if (n.op == OpCode::kEmbed) {
      EXPECT_FLOAT_EQ(n.scale, 8.0f);  // sqrt(64)
    }
    if (n.op == OpCode::kAttention) {
      EXPECT_FLOAT_EQ(n.scale, 1.0f / std::sqrt(24.0f));
    }
  }
  EXPECT_EQ(geglu, 6);
  EXPECT_EQ(swiglu, 0);
  EXPECT_GE(norms, 6 * 2);  // the post norms at least (the pre norms may be fused into matmuls)
  EXPECT_EQ(img->program.rope_inv_freq_local.size(), 16u);
  EXPECT_FLOAT_EQ(img->program.rope_inv_freq_local[1], std::pow(1e4f, -2.0f / 32.0f));
  EXPECT_FLOAT_EQ(img->program.rope_inv_freq[1], std::pow(1e6f, -2.0f / 32.0f) / 2.0f);

  auto q = compiled(folder(), options(true, "w8a16"));
  ASSERT_TRUE(q);
  for (const WeightDesc& w : q->program().graph.weights)
    if (w.name.find("norm") != std::string::npos) {
      EXPECT_EQ(w.scheme, Scheme::kF32) << w.name;
    }
  test::expect_quantized_close(q, reference_for(folder()));
}

// Through a .kiln file: the per-layer window, the local RoPE frequencies and the node scales
// survive the write and the read, and the file's logits are the in-memory program's, bit for bit.
TEST(Gemma3, KilnFileRunsAsTheInMemoryProgram) {
  auto imp = import_model(folder());
  ASSERT_TRUE(imp);
  CompileReport r;
  auto img = compile_model(*imp, options(), &r);
  ASSERT_TRUE(img) << img.status().message();
  auto k = test::through_kiln_file(*img, r, "gemma3.kiln");
  ASSERT_TRUE(k) << k.status().message();
  EXPECT_EQ(k->image.config.sliding_layers, img->config.sliding_layers);
  EXPECT_EQ(k->image.config.rope_theta_local, img->config.rope_theta_local);
  EXPECT_EQ(k->image.config.query_pre_attn_scalar, img->config.query_pre_attn_scalar);
  EXPECT_EQ(k->image.program.rope_inv_freq_local, img->program.rope_inv_freq_local);
  auto from_file = Model::create(std::move(k->image));
  ASSERT_TRUE(from_file) << from_file.status().message();
  const std::vector<int> tokens = {5, 17, 200, 3, 99, 42, 7, 250, 1, 11};
  EXPECT_EQ(program_logits(*from_file, tokens, 3), program_logits(compiled(folder(), options()), tokens, 3));
}

TEST(Gemma3, GeluTanhIsPyTorchs) {
  // torch.nn.functional.gelu(x, approximate="tanh") in float32.
  const std::pair<float, float> cases[] = {{0.0f, 0.0f},         {1.0f, 0.841192007f},    {-1.0f, -0.158807993f},
                                           {3.0f, 2.99636269f}, {-3.0f, -0.00363743305f}, {0.5f, 0.345714003f}};
  for (auto [x, want] : cases) EXPECT_NEAR(gelu_tanh(x), want, 2e-7f * std::max(1.0f, std::fabs(want))) << x;
}

// What Gemma 3 has that kiln does not, and lists that do not fit, are clear errors.
TEST(Gemma3, BadConfigsAreClearErrors) {
  const std::string base = test::read_file(folder() + "/config.json");
  auto with = [&](const std::string& key, const json& value) { return test::config_with(base, key, value); };
  using test::expect_error;
  expect_error(with("final_logit_softcapping", 30.0), "final_logit_softcapping is not supported");
  expect_error(with("attn_logit_softcapping", 50.0), "attn_logit_softcapping is not supported");
  expect_error(with("hidden_activation", "gelu"), "hidden_activation 'gelu' is not supported");
  expect_error(with("layer_types", json::array({"sliding_attention", "full_attention"})), "layer_types must be a list of 6");
  expect_error(with("layer_types", json::array({"sliding_attention", "sliding_attention", "sliding_attention",
                                                "sliding_attention", "sliding_attention", "chunked_attention"})),
               "sliding_attention or full_attention");
  expect_error(with("query_pre_attn_scalar", -1.0), "query_pre_attn_scalar must be positive");
  expect_error(with("use_bidirectional_attention", true), "use_bidirectional_attention");
  // Without layer_types, transformers 4.x's sliding_window_pattern: every 6th layer global.
  auto old = with("layer_types", json(json::value_t::discarded));
  ASSERT_TRUE(old) << old.status().message();
  EXPECT_EQ(old->sliding_layers, (std::vector<uint8_t>{1, 1, 1, 1, 1, 0}));
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Gemma3ForConditionalGeneration (the published 4B/12B/27B): the language model of
// tests/data/hf-tiny/gemma3-multimodal (tests/gen/make_hf_tiny_gemma3_multimodal.py), its config
// nested under text_config and its tensors under language_model.model.*, runs as a
// Gemma3ForCausalLM; the vision tower and the projector beside it are not read.
std::string multimodal() { return test::data_path("hf-tiny/gemma3-multimodal"); }
json multimodal_reference(const std::string&) { return json::parse(test::read_file(multimodal() + "/reference.json")); }

TEST(Gemma3Multimodal, ImportsTheLanguageModel) {
  auto imp = import_model(multimodal());
  ASSERT_TRUE(imp) << imp.status().message();
  const ModelConfig& c = imp->model.config;
  EXPECT_EQ(c.arch, Arch::kGemma3);
  EXPECT_EQ(c.dim, 32);
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.n_kv_heads, 1);
  EXPECT_EQ(c.sliding_layers, (std::vector<uint8_t>{1, 0}));
  EXPECT_FLOAT_EQ(c.query_pre_attn_scalar, 16.0f);
  EXPECT_FLOAT_EQ(c.rope_theta_local, 1e4f);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_EQ(c.bos_id, 2);
  for (const auto& [name, t] : imp->model.tensors)
    EXPECT_TRUE(name.rfind("blk.", 0) == 0 || name == "token_embd.weight" || name == "output_norm.weight") << name;
  EXPECT_EQ(imp->model.tensors.size(), 2u + 2u * 13u);
  EXPECT_EQ(hf_to_canonical_name("model.language_model.layers.1.mlp.up_proj.weight", Arch::kGemma3), "blk.1.ffn_up.weight");
  EXPECT_EQ(hf_to_canonical_name("language_model.lm_head.weight", Arch::kGemma3), "output.weight");
  EXPECT_EQ(hf_to_canonical_name("vision_tower.embeddings.patch_embedding.weight", Arch::kGemma3), "");
  EXPECT_EQ(hf_to_canonical_name("multi_modal_projector.mm_soft_emb_norm.weight", Arch::kGemma3), "");
}

TEST(Gemma3Multimodal, LogitsMatchTransformers) {
  test::expect_reference_pass_matches("gemma3-multimodal", {multimodal()}, multimodal_reference);
  test::expect_compiled_matches("gemma3-multimodal", {multimodal()}, multimodal_reference, [](bool fuse) { return options(fuse); });
}

TEST(Gemma3Multimodal, BadTextConfigsAreNamed) {
  const std::string base = test::read_file(multimodal() + "/config.json");
  test::expect_error(test::config_with(base, "text_config", json(json::value_t::discarded)), "text_config must be an object");
  test::expect_error(test::config_with(base, "text_config", "gemma3_text"), "text_config must be an object");
  json text = json::parse(base)["text_config"];
  text["model_type"] = "gemma2";
  test::expect_error(test::config_with(base, "text_config", text), "text_config model_type 'gemma2' is not supported");
  text = json::parse(base)["text_config"];
  text["num_hidden_layers"] = 3;  // its layer_types lists 2
  test::expect_error(test::config_with(base, "text_config", text), "layer_types must be a list of 3");
}

}  // namespace
}  // namespace kiln
