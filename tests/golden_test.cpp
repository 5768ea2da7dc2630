// End to end: the shipped model, greedy, must print exactly what llama2.c's own test expects.
#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/generate.h"
#include "reference/load_reference.h"
#include "reference/reference_session.h"
#include "test_util.h"

namespace kiln {
namespace {

using test::data_path;

const std::string& golden() {
  static const std::string g = test::read_file(data_path("golden/stories260K_greedy200.txt"));
  return g;
}

TEST(Golden, CliGreedyTextMatchesLlama2c) {
  auto r = test::run_kiln("run " + test::shell_quote(test::shipped_model()) + " --echo -p '' --temp 0 -n 200");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_FALSE(golden().empty());
  ASSERT_GE(r.out.size(), golden().size());
  EXPECT_EQ(r.out.substr(0, golden().size()), golden());
  // stderr carries the timings, stdout nothing but the text.
  EXPECT_NE(r.err.find("tok/s"), std::string::npos);
}

TEST(Golden, CliWithoutModelRunsShippedModel) {
  auto r = test::run_kiln("run --temp 0 -n 200");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, golden().size()), golden());
}

TEST(Golden, EchoPrintsPromptFirst) {
  auto r = test::run_kiln("run --temp 0 -n 20 --echo -p 'Once upon a time'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Once upon a time", 0), 0u) << r.out;
  auto plain = test::run_kiln("run --temp 0 -n 20 -p 'Once upon a time'");
  ASSERT_EQ(plain.exit_code, 0);
  EXPECT_EQ(r.out, "Once upon a time" + plain.out);
}

TEST(Golden, SameSeedSameText) {
  auto a = test::run_kiln("run -n 60 --temp 1.0 --seed 42 -p 'Lily'");
  auto b = test::run_kiln("run -n 60 --temp 1.0 --seed 42 -p 'Lily'");
  auto c = test::run_kiln("run -n 60 --temp 1.0 --seed 7 -p 'Lily'");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
}

// ---- sampling flags through the CLI ----

// stdout of a run that must succeed.
std::string run_text(const std::string& args) {
  auto r = test::run_kiln("run " + args);
  EXPECT_EQ(r.exit_code, 0) << args << ": " << r.err;
  return r.out;
}

const std::string kPrompt = "-p 'Lily and Ben' -n 80";

TEST(CliSampling, TopK1IsGreedy) {
  const std::string greedy = run_text(kPrompt + " --temp 0");
  ASSERT_FALSE(greedy.empty());
  // At temperature 1 the same seed samples something else, so top-k 1 is what makes it greedy.
  EXPECT_NE(run_text(kPrompt + " --temp 1 --seed 11"), greedy);
  EXPECT_EQ(run_text(kPrompt + " --temp 1 --seed 11 --top-k 1"), greedy);
}

TEST(CliSampling, TinyTopPAndFullMinPAreGreedy) {
  const std::string greedy = run_text(kPrompt + " --temp 0");
  // top-p keeps the fewest tokens whose probabilities reach p: one, for a tiny p; min-p 1 keeps
  // only the tokens as likely as the top one.
  EXPECT_EQ(run_text(kPrompt + " --temp 1 --seed 11 --top-p 0.000001"), greedy);
  EXPECT_EQ(run_text(kPrompt + " --temp 1 --seed 11 --min-p 1"), greedy);
  // Loose values leave room to sample: the seed then decides.
  EXPECT_NE(run_text(kPrompt + " --temp 1 --seed 11 --top-p 0.99 --min-p 0.01"), greedy);
}

TEST(CliSampling, RepeatPenaltyChangesGreedyTextAndIsRepeatable) {
  const std::string greedy = run_text(kPrompt + " --temp 0");
  const std::string penalized = run_text(kPrompt + " --temp 0 --repeat-penalty 1.5");
  EXPECT_NE(penalized, greedy);
  // 1 is off, and so is an empty window.
  EXPECT_EQ(run_text(kPrompt + " --temp 0 --repeat-penalty 1"), greedy);
  EXPECT_EQ(run_text(kPrompt + " --temp 0 --repeat-penalty 1.5 --repeat-last-n 0"), greedy);
  const std::string a = run_text(kPrompt + " --temp 0.8 --seed 5 --repeat-penalty 1.3");
  EXPECT_EQ(run_text(kPrompt + " --temp 0.8 --seed 5 --repeat-penalty 1.3"), a);
  EXPECT_NE(run_text(kPrompt + " --temp 0.8 --seed 5"), a);
}

TEST(CliSampling, ThreadsGiveTheSameText) {
  const std::string one = run_text("-p '' -n 200 --temp 0 --threads 1");
  EXPECT_EQ(one.substr(0, golden().size()), golden());
  EXPECT_EQ(run_text("-p '' -n 200 --temp 0 --threads 2"), one);
  EXPECT_EQ(run_text(kPrompt + " --temp 0.8 --seed 3 --threads 2"), run_text(kPrompt + " --temp 0.8 --seed 3 --threads 1"));
}

// An f16 KV cache rounds every key and value; on the shipped model greedy decoding still gives
// llama2.c's text (measured: the whole 200 tokens), and a type the cache cannot hold is refused.
TEST(CliSampling, F16KvCacheKeepsTheGreedyText) {
  EXPECT_EQ(run_text("-p '' -n 200 --temp 0 --kv-type f16"), run_text("-p '' -n 200 --temp 0"));
  EXPECT_EQ(run_text("-p '' -n 200 --temp 0 --kv-type f16 --threads 2").substr(0, golden().size()), golden());
  auto bad = test::run_kiln("run -n 4 --kv-type bf16");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("kv-type"), std::string::npos) << bad.err;
}

// The number after `label` in the CLI's stderr report ("prompt 5 tokens", "generated 12 tokens").
int reported(const std::string& err, const std::string& label) {
  const size_t at = err.find("kiln: " + label + " ");
  if (at == std::string::npos) return -1;
  return std::stoi(err.substr(at + label.size() + 7));
}

TEST(CliSampling, SmallContextStopsGeneration) {
  const int ctx = 16;
  auto r = test::run_kiln("run -p 'Once upon a time' -n 100 --temp 0 --ctx " + std::to_string(ctx));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("stopped: context full"), std::string::npos) << r.err;
  const int prompt = reported(r.err, "prompt");
  ASSERT_GT(prompt, 1) << r.err;
  // Every position holds a token; the last sampled one needs none, since nothing follows it.
  const int expected = ctx - prompt + 1;
  EXPECT_EQ(reported(r.err, "generated"), expected) << r.err;
  EXPECT_EQ(r.out, run_text("-p 'Once upon a time' --temp 0 -n " + std::to_string(expected)));
}

TEST(CliSampling, InvalidContextIsOneError) {
  // Larger than the model's 512 positions: rejected with exit 2 and one line (--no-cache: the
  // first start through the cache would say first that it compiles the model).
  auto big = test::run_kiln("run -n 4 --ctx 513 --no-cache");
  EXPECT_EQ(big.exit_code, 2) << big.err;
  EXPECT_TRUE(big.out.empty());
  EXPECT_EQ(std::count(big.err.begin(), big.err.end(), '\n'), 1) << big.err;
  EXPECT_EQ(big.err.rfind("kiln: error: ", 0), 0u) << big.err;
  EXPECT_NE(big.err.find("stories260K.bin: --ctx 513 exceeds the model's maximum context of 512 tokens"), std::string::npos)
      << big.err;
  // A prompt longer than the context: found once the model is loaded, so after the "loaded" line.
  auto small = test::run_kiln("run -n 4 --ctx 3 -p 'Once upon a time there was'");
  EXPECT_EQ(small.exit_code, 2) << small.err;
  EXPECT_TRUE(small.out.empty());
  const size_t error_at = small.err.find("kiln: error: ");
  ASSERT_NE(error_at, std::string::npos) << small.err;
  EXPECT_EQ(std::count(small.err.begin() + static_cast<std::ptrdiff_t>(error_at), small.err.end(), '\n'), 1) << small.err;
  EXPECT_NE(small.err.find("does not fit the context of 3", error_at), std::string::npos) << small.err;
  // A negative one is a usage error.
  auto neg = test::run_kiln("run -n 4 --ctx -1");
  EXPECT_EQ(neg.exit_code, 1) << neg.err;
  EXPECT_TRUE(neg.out.empty());
  EXPECT_NE(neg.err.find("--ctx"), std::string::npos) << neg.err;
}

TEST(CliSampling, StopsAtBosForLlama2cModels) {
  // Greedy from this prompt, the model ends its story with BOS after 217 tokens (see
  // StopTokens.ShippedModelStopsAtItsOwnBos); for the GGUF of the same weights BOS is no stop.
  auto r = test::run_kiln("run -p 'The little dog' -n 400 --temp 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("generated 217 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("stopped at an end token"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, run_text("-p 'The little dog' -n 217 --temp 0"));
  const std::string gguf = test::shell_quote(test::data_path("stories260K-gguf/stories260K.gguf"));
  auto g = test::run_kiln("run " + gguf + " -p 'The little dog' -n 230 --temp 0");
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(g.err.find("stopped at an end token"), std::string::npos) << g.err;
  ASSERT_GT(g.out.size(), r.out.size());
  EXPECT_EQ(g.out.substr(0, r.out.size()), r.out);
}

TEST(Golden, LibraryGreedyMatches) {
  auto lm = load_reference(test::shipped_model());
  ASSERT_TRUE(lm) << lm.status().message();
  auto s = ReferenceSession::create(lm->model, 0);
  ASSERT_TRUE(s);
  SamplerParams sp;
  sp.temperature = 0;
  Sampler sampler(sp, lm->model->config().vocab_size);
  auto prompt = lm->tokenizer->encode("", true);
  ASSERT_TRUE(prompt);
  std::string out;
  auto st = generate(**s, sampler, *lm->tokenizer, *prompt, 200, [&](std::string_view t) { out += t; });
  ASSERT_TRUE(st) << st.status().message();
  EXPECT_EQ(out.substr(0, golden().size()), golden());
}

}  // namespace
}  // namespace kiln
