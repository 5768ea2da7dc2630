// Architectures stories260K does not exercise, against logits from Hugging Face transformers itself
// (tests/gen/make_hf_tiny.py made the models and tests/data/hf-tiny/*/reference.json).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "formats/import.h"
#include "reference/reference_session.h"
#include "test_util.h"

namespace kiln {
namespace {

struct Case {
  const char* reference;  // folder holding reference.json
  const char* model;      // what to import, relative to tests/data/hf-tiny
};

class HfReference : public ::testing::TestWithParam<Case> {};

TEST_P(HfReference, LogitsMatchTransformers) {
  const Case c = GetParam();
  const std::string dir = test::data_path(std::string("hf-tiny/") + c.reference);
  auto ref = nlohmann::json::parse(test::read_file(dir + "/reference.json"));
  auto imp = import_model(test::data_path(std::string("hf-tiny/") + c.model));
  ASSERT_TRUE(imp) << imp.status().message();
  auto model = ReferenceModel::create(std::move(imp->model));
  ASSERT_TRUE(model) << model.status().message();
  const auto& prompts = ref["prompts"];
  const auto& logits = ref["logits"];
  ASSERT_EQ(prompts.size(), logits.size());
  for (size_t p = 0; p < prompts.size(); ++p) {
    auto s = ReferenceSession::create(*model, 0);
    ASSERT_TRUE(s);
    for (size_t i = 0; i < prompts[p].size(); ++i) {
      auto got = (*s)->forward(prompts[p][i].get<int>());
      ASSERT_TRUE(got) << got.status().message();
      std::vector<float> want = logits[p][i].get<std::vector<float>>();
      ASSERT_EQ(want.size(), got->size());
      EXPECT_LT(test::relative_error(got->data(), want.data(), want.size()), 1e-4)
          << c.model << " prompt " << p << " position " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, HfReference,
    ::testing::Values(Case{"qwen2", "qwen2"}, Case{"qwen2", "qwen2/model.gguf"}, Case{"llama32", "llama32"},
                      Case{"llama-unshared", "llama-unshared"}, Case{"llama-unshared", "llama-unshared/llama2c.bin"},
                      Case{"mistral", "mistral"}, Case{"llama3-f16-sharded", "llama3-f16-sharded"},
                      Case{"llama-bf16", "llama-bf16"}),
    [](const auto& info) {
      std::string n = info.param.model;
      for (char& ch : n)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return n;
    });

}  // namespace
}  // namespace kiln
