// MiniCPM (MiniCPMForCausalLM, GGUF minicpm): Llama with the embedding times scale_emb, each
// residual branch times scale_depth / sqrt(layers) and the logits' input divided by
// hidden_size / dim_model_base; the last two folded into the weights on import. The tiny model of
// tests/data/hf-tiny/minicpm (tests/gen/make_minicpm_llamacpp.py: the same weights as a folder and
// as the GGUF llama.cpp's converter writes; llama.cpp's own logits of that GGUF as the reference,
// since transformers has no MiniCPM class) through the FP32 reference pass and the compiled
// program, logits and greedy text; bad scales named.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "artifact/kiln_image_reader.h"
#include "backends/ref/ref_backend.h"
#include "compiler/driver.h"
#include "compiler/kiln_writer.h"
#include "formats/import.h"
#include "model_paths.h"
#include "test_util.h"

namespace kiln {
namespace {

using nlohmann::json;

std::string folder() { return test::data_path("hf-tiny/minicpm"); }
std::string gguf() { return test::data_path("hf-tiny/minicpm/model.gguf"); }
// Both files hold the same weights: one reference, llama.cpp's.
json reference(const std::string& = "") { return json::parse(test::read_file(folder() + "/reference.json")); }
CompileOptions options(bool fuse = true) { return test::tiny_model_options(fuse); }

TEST(MiniCPM, ConfigFromFolderAndGguf) {
  for (const std::string& path : {folder(), gguf()}) {
    SCOPED_TRACE(path);
    auto imp = import_model(path);
    ASSERT_TRUE(imp) << imp.status().message();
    const ModelConfig& c = imp->model.config;
    EXPECT_EQ(c.arch, Arch::kMiniCPM);
    EXPECT_TRUE(c.tie_embeddings);
    EXPECT_FLOAT_EQ(c.embed_scale, 12.0f);
    EXPECT_FLOAT_EQ(c.embedding_multiplier(), 12.0f);
    EXPECT_EQ(c.residual_scale, 0.0f);  // folded into the weights
    EXPECT_EQ(c.logit_scale, 0.0f);
    EXPECT_EQ(c.rope_style, path == gguf() ? RopeStyle::kAdjacentPairs : RopeStyle::kHalfSplit);
  }
  // The folder's ffn_down is the file's times 1.4 / sqrt(2); the final norm's times 16 / 64.
  auto imp = import_model(folder());
  ASSERT_TRUE(imp);
  const TensorSource& down = imp->model.tensors.at("blk.1.ffn_down.weight");
  const TensorSource& norm = imp->model.tensors.at("output_norm.weight");
  ASSERT_EQ(down.dtype, DType::kF32);
  float folded, stored;
  std::memcpy(&folded, down.bytes.data(), 4);
  auto st = import_model(gguf());
  ASSERT_TRUE(st);
  std::memcpy(&stored, st->model.tensors.at("blk.1.ffn_down.weight").bytes.data(), 4);  // the same weight, folded alike
  EXPECT_EQ(folded, stored);
  float n0;
  std::memcpy(&n0, norm.bytes.data(), 4);
  EXPECT_GT(std::fabs(n0), 0.1f);
  EXPECT_LT(std::fabs(n0), 0.5f);  // ~ (1 + 0.1 N) / 4
}

TEST(MiniCPM, LogitsMatchLlamaCpp) {
  test::expect_reference_pass_matches("minicpm", {folder(), gguf()}, reference);
  test::expect_compiled_matches("minicpm", {folder(), gguf()}, reference, [](bool fuse) { return options(fuse); });
}

// llama.cpp's greedy text of the GGUF (greedy.json: 40 tokens after each of three prompts, made by
// tests/gen/llama_logits.c --greedy) from the reference pass and the compiled program (CPU tables, and the
// reference back end alone), from the GGUF and from the folder of the same weights.
TEST(MiniCPM, GreedyTokensEqualLlamaCpp) {
  const json g = json::parse(test::read_file(folder() + "/greedy.json"));
  ASSERT_EQ(g["paths"].size(), 3u);
  RefBackend rb;
  CompileOptions only_ref = options();
  only_ref.backends = {&rb};
  const Backend* bind[] = {&rb};
  for (const std::string& path : {gguf(), folder()}) {
    auto rm = test::reference_model(path);
    ASSERT_TRUE(rm);
    const auto programs = {test::compiled(path, options()), test::compiled(path, only_ref, bind)};
    for (const json& p : g["paths"]) {
      const auto prompt = p["prompt"].get<std::vector<int>>();
      const auto want = p["tokens"].get<std::vector<int>>();
      ASSERT_EQ(want.size(), 40u);
      auto s = ReferenceSession::create(rm, 0);
      ASSERT_TRUE(s);
      EXPECT_EQ(test::greedy(**s, prompt, want.size()), want) << "reference pass, " << path;
      for (const auto& m : programs) {
        ASSERT_TRUE(m);
        auto ps = Session::create(m, 0);
        ASSERT_TRUE(ps);
        EXPECT_EQ(test::greedy(**ps, prompt, want.size()), want) << "compiled program, " << path;
      }
    }
  }
}

TEST(MiniCPM, BackEndsMatchTheReferencePass) { test::expect_back_ends_match_reference_pass(folder(), options()); }

TEST(MiniCPM, KilnFileKeepsTheEmbeddingScale) {
  auto imp = import_model(folder());
  ASSERT_TRUE(imp);
  CompileReport r;
  auto img = compile_model(*imp, options(), &r);
  ASSERT_TRUE(img) << img.status().message();
  auto k = test::through_kiln_file(*img, r, "minicpm.kiln");
  ASSERT_TRUE(k) << k.status().message();
  EXPECT_EQ(k->image.config.arch, Arch::kMiniCPM);
  EXPECT_EQ(k->image.config.embed_scale, 12.0f);
  auto from_file = Model::create(std::move(k->image));
  ASSERT_TRUE(from_file) << from_file.status().message();
  const std::vector<int> tokens = {5, 17, 200, 3, 99, 42, 7};
  EXPECT_EQ(test::program_logits(*from_file, tokens, 3), test::program_logits(test::compiled(folder(), options()), tokens, 3));
}

TEST(MiniCPM, BadScalesAreNamed) {
  const std::string base = test::read_file(folder() + "/config.json");
  test::expect_error(test::config_with(base, "scale_emb", -12.0), "scale_emb must be a positive number");
  test::expect_error(test::config_with(base, "dim_model_base", 0), "dim_model_base must be a positive number");
  test::expect_error(test::config_with(base, "scale_depth", "1.4"), "scale_depth");
  auto defaults = test::config_with(base, "scale_emb", json(json::value_t::discarded));
  ASSERT_TRUE(defaults) << defaults.status().message();
  EXPECT_EQ(defaults->embed_scale, 1.0f);  // MiniCPMConfig's default

  // The GGUF's logit scale made negative.
  test::expect_error(import_model(test::gguf_with_float(gguf(), "minicpm.logit_scale", -4.0f, "minicpm-bad.gguf")),
                     "minicpm.logit_scale must be a positive number");
}

}  // namespace
}  // namespace kiln
