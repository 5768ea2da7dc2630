// The runtime's pieces below the C API: the generation loop's cancel and stop strings, session
// snapshots, performance modes.
#include <gtest/gtest.h>

#include <atomic>

#include "engine/open_model.h"
#include "runtime/generate.h"
#include "runtime/perf_mode.h"
#include "runtime/program_session.h"
#include "runtime/session_snapshot.h"
#include "test_util.h"

namespace kiln {
namespace {

OpenedModel shipped() {
  auto m = open_model(test::shipped_model(), OpenOptions{});
  EXPECT_TRUE(m) << m.status().message();
  return std::move(m).value();
}

std::string greedy(ProgramSession& s, const Tokenizer& tok, std::span<const int> prompt, int n,
                   const GenerateOptions& o = {}, GenerationStats* stats = nullptr) {
  SamplerParams sp;
  sp.temperature = 0;
  Sampler sampler(sp, s.config().vocab_size);
  std::string out;
  auto st = generate(s, sampler, tok, prompt, n, [&](std::string_view t) { out += t; }, o);
  EXPECT_TRUE(st) << st.status().message();
  if (st && stats) *stats = *st;
  return out;
}

TEST(RuntimeGenerate, RaisedCancelStopsBeforeThePrefillAndLeavesTheSession) {
  OpenedModel m = shipped();
  auto s = ProgramSession::create(m.model, 256);
  ASSERT_TRUE(s);
  auto ids = m.tokenizer->encode("Once upon a time there was a girl", true);
  ASSERT_TRUE(ids);
  std::atomic<bool> cancel{true};
  GenerateOptions o;
  o.cancel = &cancel;
  GenerationStats st;
  EXPECT_EQ(greedy(**s, *m.tokenizer, *ids, 50, o, &st), "");
  EXPECT_EQ(st.stop, StopReason::kCancelled);
  EXPECT_EQ(st.generated_tokens, 0);
  EXPECT_EQ((*s)->position(), 0);
  // Lowered, the same session gives the text a fresh one does.
  cancel = false;
  const std::string text = greedy(**s, *m.tokenizer, *ids, 50, o);
  auto fresh = ProgramSession::create(m.model, 256);
  EXPECT_EQ(text, greedy(**fresh, *m.tokenizer, *ids, 50));
}

TEST(RuntimeGenerate, StopStringsAreCutAndHeldBack) {
  OpenedModel m = shipped();
  auto s = ProgramSession::create(m.model, 256);
  auto ids = m.tokenizer->encode("", true);
  const std::string full = greedy(**s, *m.tokenizer, *ids, 100);
  // Every cut point: a stop string made of the text at some place, spanning token pieces.
  for (size_t at : {size_t{10}, size_t{27}, size_t{55}}) {
    const std::string stop = full.substr(at, 7);
    const size_t first = full.find(stop);
    (*s)->reset();
    GenerateOptions o;
    o.stop_strings = {"never there", stop};
    GenerationStats st;
    EXPECT_EQ(greedy(**s, *m.tokenizer, *ids, 100, o, &st), full.substr(0, first)) << stop;
    EXPECT_EQ(st.stop, StopReason::kStopString);
  }
  // A stop string that never completes: all of its held-back prefix comes out at the end.
  (*s)->reset();
  GenerateOptions o;
  o.stop_strings = {full.substr(full.size() - 3) + "\x01"};
  EXPECT_EQ(greedy(**s, *m.tokenizer, *ids, 100, o), full);
}

TEST(RuntimeSnapshot, RoundTripRestoresTheCacheExactly) {
  OpenedModel m = shipped();
  auto a = ProgramSession::create(m.model, 128, 1, DType::kF16);
  auto ids = m.tokenizer->encode("Once upon a time", true);
  ASSERT_TRUE((*a)->decode(*ids));
  const std::string path = test::temp_dir() + "/s.snapshot";
  ASSERT_TRUE(save_session_snapshot(**a, *ids, path));
  auto b = ProgramSession::create(m.model, 128, 1, DType::kF16);
  auto tokens = load_session_snapshot(**b, path);
  ASSERT_TRUE(tokens) << tokens.status().message();
  EXPECT_EQ(*tokens, *ids);
  EXPECT_EQ((*b)->position(), static_cast<int>(ids->size()));
  std::vector<uint8_t> ka((*a)->kv_state_bytes((*a)->position())), kb(ka.size());
  (*a)->copy_kv_out((*a)->position(), ka.data());
  (*b)->copy_kv_out((*b)->position(), kb.data());
  EXPECT_EQ(ka, kb);
  const int next = 42;
  auto la = (*a)->decode(std::span<const int>(&next, 1));
  std::vector<float> wa(la->begin(), la->end());
  auto lb = (*b)->decode(std::span<const int>(&next, 1));
  EXPECT_EQ(wa, std::vector<float>(lb->begin(), lb->end()));
}

TEST(RuntimePerfMode, ModesChooseThreadsAndCores) {
  // A phone: 4 little (capacity 400), 3 big (1024), 1 prime (1024 here: same class).
  std::vector<CpuInfo> cpus;
  for (int i = 0; i < 4; ++i) cpus.push_back({i, 400});
  for (int i = 4; i < 8; ++i) cpus.push_back({i, 1024});
  ThreadPlan burst = plan_threads(PerfMode::kBurst, 0, cpus);
  EXPECT_EQ(burst.n_threads, 4);
  EXPECT_EQ(burst.pool.cpus, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_GT(burst.pool.spin_us, 100);
  EXPECT_EQ(plan_threads(PerfMode::kBalanced, 0, cpus).n_threads, 4);
  EXPECT_EQ(plan_threads(PerfMode::kSustained, 0, cpus).n_threads, 2);
  ThreadPlan saver = plan_threads(PerfMode::kPowerSaver, 0, cpus);
  EXPECT_EQ(saver.n_threads, 1);
  EXPECT_EQ(saver.pool.cpus, (std::vector<int>{0, 1, 2, 3}));
  // Asked for more threads than cores: never more than the cores.
  EXPECT_EQ(plan_threads(PerfMode::kBalanced, 64, cpus).n_threads, 8);
  // A uniform machine: no pinning.
  std::vector<CpuInfo> flat = {{0, 0}, {1, 0}};
  EXPECT_TRUE(plan_threads(PerfMode::kBurst, 0, flat).pool.cpus.empty());
  EXPECT_EQ(plan_threads(PerfMode::kBurst, 0, flat).n_threads, 2);
  EXPECT_TRUE(parse_perf_mode("sustained_high"));
  EXPECT_FALSE(parse_perf_mode("turbo"));
  EXPECT_FALSE(usable_cpus().empty());
}

}  // namespace
}  // namespace kiln
