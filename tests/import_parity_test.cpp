// The same stories260K weights from llama2.c, GGUF and HF folders (F32, BF16) give the same model.
#include <gtest/gtest.h>

#include "formats/import.h"
#include "runtime/generate.h"
#include "reference/load_reference.h"
#include "reference/reference_session.h"
#include "test_util.h"

namespace kiln {
namespace {

std::vector<std::vector<float>> all_logits(const std::string& path, const std::vector<int>& tokens) {
  auto imp = import_model(path);
  EXPECT_TRUE(imp) << imp.status().message();
  if (!imp) return {};
  auto model = ReferenceModel::create(std::move(imp->model));
  EXPECT_TRUE(model) << model.status().message();
  auto s = ReferenceSession::create(*model, 0);
  std::vector<std::vector<float>> out;
  for (int t : tokens) {
    auto l = (*s)->forward(t);
    EXPECT_TRUE(l);
    out.emplace_back(l->begin(), l->end());
  }
  return out;
}

const std::vector<int> kTokens = {1, 403, 407, 261, 378, 429, 271, 280, 300, 416, 259, 73, 89, 115, 17, 450};

TEST(ImportParity, GgufAndHfMatchLlama2cLogits) {
  auto ref = all_logits(test::shipped_model(), kTokens);
  ASSERT_EQ(ref.size(), kTokens.size());
  for (const char* other : {"stories260K-gguf/stories260K.gguf", "stories260K-hf"}) {
    auto got = all_logits(test::data_path(other), kTokens);
    ASSERT_EQ(got.size(), ref.size()) << other;
    for (size_t i = 0; i < ref.size(); ++i)
      EXPECT_LT(test::relative_error(got[i].data(), ref[i].data(), ref[i].size()), 1e-5) << other << " position " << i;
  }
}

TEST(ImportParity, Bf16WithinItsRounding) {
  auto ref = all_logits(test::shipped_model(), kTokens);
  auto got = all_logits(test::data_path("stories260K-hf-bf16"), kTokens);
  ASSERT_EQ(got.size(), ref.size());
  // bfloat16 keeps 8 bits of mantissa (relative rounding 2^-9 per weight); through five layers
  // that stays within a few percent of the logit range.
  for (size_t i = 0; i < ref.size(); ++i)
    EXPECT_LT(test::relative_error(got[i].data(), ref[i].data(), ref[i].size()), 3e-2) << "position " << i;
}

std::string greedy(const std::string& path, const std::string& prompt, int n) {
  auto lm = load_reference(path);
  EXPECT_TRUE(lm) << lm.status().message();
  if (!lm) return {};
  auto s = ReferenceSession::create(lm->model, 0);
  SamplerParams sp;
  sp.temperature = 0;
  Sampler sampler(sp, lm->model->config().vocab_size);
  auto ids = lm->tokenizer->encode(prompt, true);
  EXPECT_TRUE(ids);
  std::string out;
  auto st = generate(**s, sampler, *lm->tokenizer, *ids, n, [&](std::string_view t) { out += t; });
  EXPECT_TRUE(st) << st.status().message();
  return out;
}

TEST(ImportParity, SameGreedyTextFromEveryFormat) {
  for (const char* prompt : {"", "Once upon a time", "The little dog"}) {
    const std::string ref = greedy(test::shipped_model(), prompt, 120);
    EXPECT_FALSE(ref.empty());
    EXPECT_EQ(greedy(test::data_path("stories260K-gguf/stories260K.gguf"), prompt, 120), ref) << prompt;
    EXPECT_EQ(greedy(test::data_path("stories260K-hf"), prompt, 120), ref) << prompt;
  }
}

// GGUF v2 (stories260K-v2.gguf, written by gguf-py 0.4.4 from the v3 file's keys and tensors)
// runs exactly as v3: the same bytes of weights give bit-identical logits and the same text.
TEST(ImportParity, GgufV2SameAsV3) {
  const std::string v2 = test::data_path("stories260K-gguf/stories260K-v2.gguf");
  const std::string v3 = test::data_path("stories260K-gguf/stories260K.gguf");
  auto ref = all_logits(v3, kTokens);
  auto got = all_logits(v2, kTokens);
  ASSERT_EQ(ref.size(), kTokens.size());
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_EQ(got[i], ref[i]) << "position " << i;
  for (const char* prompt : {"", "Once upon a time", "The little dog"}) {
    const std::string text = greedy(v3, prompt, 120);
    EXPECT_FALSE(text.empty());
    EXPECT_EQ(greedy(v2, prompt, 120), text) << prompt;
  }
}

TEST(ImportParity, HfWeightsAreMappedNotCopied) {
  auto imp = import_model(test::data_path("stories260K-hf"));
  ASSERT_TRUE(imp);
  auto model = ReferenceModel::create(std::move(imp->model));
  ASSERT_TRUE(model);
  EXPECT_EQ((*model)->converted_weight_bytes(), 0u);
  EXPECT_GT((*model)->mapped_weight_bytes(), 0u);
}

}  // namespace
}  // namespace kiln
