// kiln's logits against llama.cpp's saved ones (llama-perplexity --kl-divergence-base): the
// reader's checks, and the comparison on the F32 and Q4_0 stories260K files
// (tests/data/llamacpp-kld/README.md has the commands and llama.cpp's own figures).
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "engine/kl_divergence.h"
#include "formats/llama_logits.h"
#include "test_util.h"

namespace kiln {
namespace {

LlamaLogits base(const std::string& rel) {
  auto f = MappedFile::open(test::data_path(rel));
  EXPECT_TRUE(f.is_ok()) << f.status().message();
  auto l = read_llama_logits(*f);
  EXPECT_TRUE(l.is_ok()) << l.status().message();
  return *l;
}

OpenedModel model(const std::string& rel) {
  auto m = open_model(test::data_path(rel), OpenOptions{});
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return std::move(*m);
}

KlResult against(const std::string& model_rel, const std::string& base_rel) {
  PerplexityOptions o;
  o.threads = 2;
  auto r = kl_divergence_against(model(model_rel), base(base_rel), o);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r ? *r : KlResult{};
}

TEST(LlamaLogits, ReadsLlamaPerplexitysFile) {
  const LlamaLogits l = base("llamacpp-kld/stories260K-f32-c128.kld");
  EXPECT_EQ(l.n_ctx, 128);
  EXPECT_EQ(l.n_vocab, 512);
  EXPECT_EQ(l.n_chunk, 3);
  EXPECT_EQ(l.rows_per_chunk(), 63);
  // Each row is a distribution: its probabilities (those above e^-16 that the row keeps) sum to 1.
  std::vector<float> lp(512);
  for (size_t row = 0; row < 189; row += 47) {
    l.log_probs(row, lp.data());
    double sum = 0;
    for (float v : lp)
      if (v > -16) sum += std::exp(v);
    EXPECT_NEAR(sum, 1.0, 1e-3) << "row " << row;
  }
}

// The same F32 model: the same distributions, the same perplexity as llama-perplexity printed.
TEST(LlamaLogits, F32ModelAgreesWithLlamaCpp) {
  const KlResult r = against("stories260K-gguf/stories260K.gguf", "llamacpp-kld/stories260K-f32-c128.kld");
  EXPECT_EQ(r.scored, 189);
  EXPECT_LT(r.mean_kld, 1e-5);
  EXPECT_EQ(r.same_top, 1.0);
  std::printf("[ f32 ] log-probability NMSE %.3g\n", r.nmse);
  EXPECT_LT(r.nmse, 1e-6);  // 8.3e-8: about what the base's 16-bit rows keep of each log-probability
  EXPECT_NEAR(r.base_ppl, 3.4330, 5e-4);  // llama.cpp's "Final estimate: PPL = 3.4330", from the file
  EXPECT_NEAR(r.ppl / r.base_ppl, 1.0, 1e-4);
}

// The Q4_0 file against the F32 base loses what llama.cpp's run of it loses (llama.cpp: mean KLD
// 0.064137, same top 86.772 %), and against llama.cpp's own logits of that file it is close.
TEST(LlamaLogits, Q4_0FileLosesWhatLlamaCppsRunLoses) {
  const KlResult f32 = against("gguf-quant/stories260K-Q4_0.gguf", "llamacpp-kld/stories260K-f32-c128.kld");
  EXPECT_NEAR(f32.mean_kld, 0.064137, 0.1 * 0.064137);
  EXPECT_NEAR(f32.same_top, 0.86772, 0.03);
  const KlResult same = against("gguf-quant/stories260K-Q4_0.gguf", "llamacpp-kld/stories260K-q4_0-c128.kld");
  std::printf("[ q4_0 ] vs llama.cpp on the file: log-probability NMSE %.3g (vs f32: %.3g)\n", same.nmse, f32.nmse);
  EXPECT_LT(same.nmse, 0.1 * f32.nmse);  // far closer to llama.cpp's run of the file than to f32's
  EXPECT_LT(same.mean_kld, 2e-3);
  EXPECT_GT(same.same_top, 0.95);
  EXPECT_NEAR(same.ppl / same.base_ppl, 1.0, 0.01);
}

// The IQ4_NL file (its IQ4_NL tensors at W8A16, rounded once; llama.cpp reads the blocks and
// rounds activations to 8 bits): against the F32 base it loses what llama.cpp's run of it loses
// (mean KLD 0.053955, same top 89.418 %), and it is close to llama.cpp's own logits of the file.
TEST(LlamaLogits, Iq4NlFileLosesWhatLlamaCppsRunLoses) {
  const KlResult f32 = against("gguf-quant/stories260K-IQ4_NL.gguf", "llamacpp-kld/stories260K-f32-c128.kld");
  EXPECT_NEAR(f32.mean_kld, 0.053955, 0.1 * 0.053955);
  EXPECT_NEAR(f32.same_top, 0.89418, 0.03);
  const KlResult same = against("gguf-quant/stories260K-IQ4_NL.gguf", "llamacpp-kld/stories260K-iq4_nl-c128.kld");
  std::printf("[ iq4_nl ] vs f32: KLD %.6f same top %.4f; vs llama.cpp on the file: KLD %.6f same top %.4f\n",
              f32.mean_kld, f32.same_top, same.mean_kld, same.same_top);
  EXPECT_LT(same.mean_kld, 2e-3);
  EXPECT_GT(same.same_top, 0.95);
  EXPECT_NEAR(same.ppl / same.base_ppl, 1.0, 0.01);
}

Status read_bytes(std::vector<uint8_t> bytes) {
  return read_llama_logits(MappedFile::from_bytes(std::move(bytes), "x.kld")).status();
}

TEST(LlamaLogits, BadFilesAreNamedErrors) {
  const std::string good = test::read_file(test::data_path("llamacpp-kld/stories260K-f32-c128.kld"));
  std::vector<uint8_t> b(good.begin(), good.end());
  auto expect = [](Status s, const std::string& part) {
    EXPECT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find(part), std::string::npos) << s.message();
  };
  expect(read_bytes({}), "truncated reading the magic");
  auto magic = b;
  magic[0] = 'x';
  expect(read_bytes(magic), "no \"_logits_\" magic");
  auto cut = b;
  cut.resize(cut.size() - 2);
  expect(read_bytes(cut), "bytes of log-probabilities, not the");
  auto ctx = b;
  const int32_t huge = 1 << 30;
  std::memcpy(ctx.data() + 8, &huge, 4);
  expect(read_bytes(ctx), "n_ctx 1073741824 is out of range");
  auto tok = b;
  const int32_t bad = 999;
  std::memcpy(tok.data() + 20 + 4 * 5, &bad, 4);
  expect(read_bytes(tok), "token 5 is 999, outside the vocabulary of 512");
  // Another model's logits: the vocabularies differ (a random-weight Qwen2 with 640 pieces).
  const std::string dir = test::temp_dir() + "/tiny-qwen2";
  ASSERT_EQ(test::run_kiln("synth --preset tiny-qwen2 --force -o " + test::shell_quote(dir)).exit_code, 0);
  auto other = open_model(dir, OpenOptions{});
  ASSERT_TRUE(other.is_ok()) << other.status().message();
  auto r = kl_divergence_against(*other, base("llamacpp-kld/stories260K-f32-c128.kld"), PerplexityOptions{});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("llama.cpp's vocabulary has 512 entries, the model's 640"), std::string::npos)
      << r.status().message();
}

TEST(LlamaLogits, CliPrintsTheComparisonAndRefusesMixedFlags) {
  const std::string kld = test::shell_quote(test::data_path("llamacpp-kld/stories260K-f32-c128.kld"));
  const std::string gguf = test::shell_quote(test::data_path("stories260K-gguf/stories260K.gguf"));
  auto r = test::run_kiln("ppl " + gguf + " --kl-divergence " + kld + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tokens"], 189);
  EXPECT_EQ(j["same_top"], 1.0);
  auto both = test::run_kiln("ppl " + gguf + " --kl-divergence " + kld + " -f " + kld);
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_NE(both.err.find("-f is not used with it"), std::string::npos) << both.err;
  auto none = test::run_kiln("ppl " + gguf);
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("give the text to score with -f FILE"), std::string::npos) << none.err;
}

}  // namespace
}  // namespace kiln
