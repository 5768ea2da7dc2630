#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "runtime/sampler.h"
#include "test_util.h"

namespace kiln {
namespace {

std::vector<float> logits_of(std::initializer_list<float> l) { return std::vector<float>(l); }

TEST(Sampler, GreedyIsArgmax) {
  SamplerParams p;
  p.temperature = 0;
  Sampler s(p, 5);
  auto l = logits_of({0.1f, 2.0f, -1.0f, 1.9f, 0.0f});
  EXPECT_EQ(s.sample(l, {}), 1);
}

TEST(Sampler, GreedyTiesGoToLowestId) {
  SamplerParams p;
  p.temperature = 0;
  Sampler s(p, 3);
  auto l = logits_of({1.0f, 3.0f, 3.0f});
  EXPECT_EQ(s.sample(l, {}), 1);
}

TEST(Sampler, SameSeedSameSequence) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0;
  p.seed = 1234;
  Sampler a(p, 8), b(p, 8);
  p.seed = 99;
  Sampler c(p, 8);
  auto l = logits_of({0, 0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f});
  std::vector<int> sa, sb, sc;
  for (int i = 0; i < 64; ++i) {
    sa.push_back(a.sample(l, {}));
    sb.push_back(b.sample(l, {}));
    sc.push_back(c.sample(l, {}));
  }
  EXPECT_EQ(sa, sb);
  EXPECT_NE(sa, sc);
}

TEST(Sampler, TopKOneIsGreedy) {
  SamplerParams p;
  p.temperature = 5.0f;
  p.top_k = 1;
  Sampler s(p, 4);
  auto l = logits_of({0.5f, 0.4f, 0.6f, 0.1f});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(l, {}), 2);
}

TEST(Sampler, TopKKeepsOnlyTheBest) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 2;
  p.top_p = 1.0f;
  p.min_p = 0;
  Sampler s(p, 4);
  auto l = logits_of({1.0f, 1.0f, 0.9f, 0.0f});
  for (int i = 0; i < 200; ++i) {
    int t = s.sample(l, {});
    EXPECT_TRUE(t == 0 || t == 1) << t;
  }
}

TEST(Sampler, TopPCutsTheTail) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 0.5f;
  p.min_p = 0;
  Sampler s(p, 3);
  // probabilities ~ 0.665, 0.245, 0.090: the first alone reaches 0.5
  auto l = logits_of({2.0f, 1.0f, 0.0f});
  for (int i = 0; i < 100; ++i) EXPECT_EQ(s.sample(l, {}), 0);
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.5f;
  Sampler s(p, 3);
  // p ~ 0.47, 0.47, 0.06: the third is below half the top
  auto l = logits_of({2.0f, 2.0f, 0.0f});
  std::map<int, int> seen;
  for (int i = 0; i < 300; ++i) seen[s.sample(l, {})]++;
  EXPECT_EQ(seen.count(2), 0u);
  EXPECT_GT(seen[0], 50);
  EXPECT_GT(seen[1], 50);
}

TEST(Sampler, TemperatureFollowsSoftmax) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0;
  p.seed = 5;
  Sampler s(p, 2);
  auto l = logits_of({0.0f, std::log(3.0f)});  // p = 0.25, 0.75
  int ones = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ones += s.sample(l, {});
  EXPECT_NEAR(ones / static_cast<double>(n), 0.75, 0.02);
}

TEST(Sampler, RepetitionPenaltyDemotesRecentTokens) {
  SamplerParams p;
  p.temperature = 0;
  p.repeat_penalty = 2.0f;
  Sampler s(p, 3);
  auto l = logits_of({1.0f, 1.5f, 0.5f});
  std::vector<int> hist = {1, 1, 1};  // penalised once, not three times: 1.5 / 2 = 0.75 < 1.0
  EXPECT_EQ(s.sample(l, hist), 0);
  auto neg = logits_of({-1.0f, -0.6f, -2.0f});
  std::vector<int> h2 = {1};  // negative logits are multiplied: -1.2 < -1.0
  EXPECT_EQ(s.sample(neg, h2), 0);
}

TEST(Sampler, RepetitionWindowIsHonoured) {
  SamplerParams p;
  p.temperature = 0;
  p.repeat_penalty = 10.0f;
  p.repeat_last_n = 1;
  Sampler s(p, 3);
  auto l = logits_of({1.0f, 1.5f, 0.5f});
  std::vector<int> hist = {1, 2};  // only the last token (2) is penalised
  EXPECT_EQ(s.sample(l, hist), 1);
}

// OpenAI's formula, logit -= presence * (count > 0) + frequency * count, over the sampled part of
// the history only (values exact in binary, so the expected logits are exact).
TEST(Sampler, FrequencyAndPresencePenaltiesCountTheSampledTokens) {
  SamplerParams p;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  Sampler s(p, 5);
  std::vector<float> l = {1.0f, 2.0f, 3.0f, -1.0f, 0.5f};
  // The prompt (4, 4, 4) does not count; then 2 three times, 0 and 3 once; -1 and 7 are no tokens.
  const std::vector<int> hist = {4, 4, 4, 2, 2, 0, 2, 3, -1, 7};
  s.apply_penalties(l, hist, 3);
  EXPECT_EQ(l, (std::vector<float>{1.0f - 0.75f, 2.0f, 3.0f - 1.75f, -1.0f - 0.75f, 0.5f}));

  // The counts are the call's own: the next call, with 1 sampled twice, leaves 2 alone.
  std::vector<float> l2 = {1.0f, 2.0f, 3.0f, -1.0f, 0.5f};
  s.apply_penalties(l2, std::vector<int>{2, 1, 1}, 1);
  EXPECT_EQ(l2, (std::vector<float>{1.0f, 2.0f - 1.25f, 3.0f, -1.0f, 0.5f}));

  // Nothing sampled yet: nothing changes.
  std::vector<float> l3 = {1.0f, 2.0f, 3.0f, -1.0f, 0.5f};
  s.apply_penalties(l3, std::vector<int>{2, 2, 2}, 3);
  EXPECT_EQ(l3, (std::vector<float>{1.0f, 2.0f, 3.0f, -1.0f, 0.5f}));
}

// llama.cpp's order: the repetition penalty first, then frequency and presence on its result.
TEST(Sampler, RepetitionPenaltyComesBeforeFrequencyAndPresence) {
  SamplerParams p;
  p.repeat_penalty = 2.0f;
  p.frequency_penalty = 1.0f;
  p.presence_penalty = 0.5f;
  Sampler s(p, 4);
  std::vector<float> l = {3.0f, -1.0f, 4.0f, 2.0f};
  // Prompt 0; sampled 1, 2, 1, 2. Repetition: 0 -> 1.5, 1 -> -2, 2 -> 2; then 1 and 2 lose 2.5.
  // (The other order would give -7 and 0.75.)
  s.apply_penalties(l, std::vector<int>{0, 1, 2, 1, 2}, 1);
  EXPECT_EQ(l, (std::vector<float>{1.5f, -4.5f, -0.5f, 2.0f}));
}

TEST(Sampler, PenaltiesChangeTheGreedyPick) {
  SamplerParams p;
  p.temperature = 0;
  p.frequency_penalty = 1.0f;
  Sampler s(p, 3);
  auto l = logits_of({1.0f, 1.8f, 0.0f});
  const std::vector<int> hist = {0, 1};  // prompt 0, then 1 sampled once: 1.8 - 1 < 1.0
  EXPECT_EQ(s.sample(l, hist, 1), 0);
  EXPECT_EQ(s.sample(l, hist, 2), 1);  // all of it prompt: no penalty

  p.frequency_penalty = 0;
  p.presence_penalty = -1.5f;  // negative: a sampled token is favoured, 0 + 1.5 > 1
  Sampler favour(p, 3);
  EXPECT_EQ(favour.sample(logits_of({1.0f, 0.5f, 0.0f}), std::vector<int>{2}, 0), 2);
}

TEST(Sampler, SampleAllocatesNothing) {
  SamplerParams p;
  p.temperature = 0.9f;
  p.repeat_penalty = 1.1f;
  p.frequency_penalty = 0.3f;
  p.presence_penalty = 0.2f;
  Sampler s(p, 1000);
  std::vector<float> l(1000);
  for (size_t i = 0; i < l.size(); ++i) l[i] = static_cast<float>((i * 7919) % 1000) / 100.0f;
  std::vector<int> hist = {1, 2, 3, 4, 4, 5};
  s.sample(l, hist, 3);
  const uint64_t before = test::allocation_count();
  for (int i = 0; i < 100; ++i) s.sample(l, hist, 3);
  EXPECT_EQ(test::allocation_count(), before);
}

}  // namespace
}  // namespace kiln
