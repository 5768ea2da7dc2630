// The runtime's pieces below the C API: the generation loop's cancel and stop strings, session
// snapshots, performance modes.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>

#include "backends/cpu/kernels.h"
#include "core/cpu_features.h"
#include "engine/open_model.h"
#include "quant/overrides.h"
#include "runtime/generate.h"
#include "runtime/perf_mode.h"
#include "runtime/session.h"
#include "runtime/session_snapshot.h"
#include "test_util.h"

namespace kiln {
namespace {

OpenedModel shipped() {
  auto m = open_model(test::shipped_model(), OpenOptions{});
  EXPECT_TRUE(m) << m.status().message();
  return std::move(m).value();
}

std::string greedy(Session& s, const Tokenizer& tok, std::span<const int> prompt, int n,
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
  auto s = Session::create(m.model, 256);
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
  auto fresh = Session::create(m.model, 256);
  EXPECT_EQ(text, greedy(**fresh, *m.tokenizer, *ids, 50));
}

// Inside a step: a multi-token step watching a raised flag fails with kCancelled between its
// instructions, its position unchanged; a one-token step runs to its end (it may carry other
// sessions' rows). Lowered, the session decodes as a fresh one does.
TEST(RuntimeGenerate, CancelIsSeenInsideAPrefillStep) {
  OpenedModel m = shipped();
  auto s = Session::create(m.model, 256);
  ASSERT_TRUE(s);
  std::vector<int> prompt(40);
  for (int i = 0; i < 40; ++i) prompt[static_cast<size_t>(i)] = 1 + (i * 37) % 500;
  std::atomic<bool> cancel{true};
  (*s)->watch_cancel(&cancel);
  auto r = (*s)->decode(prompt);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled) << r.status().message();
  EXPECT_EQ((*s)->position(), 0);
  const int one[] = {1};
  EXPECT_TRUE((*s)->decode(one).is_ok());  // one token: not cut short
  (*s)->reset();
  cancel = false;
  auto got = (*s)->decode(prompt);
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  auto fresh = Session::create(m.model, 256);
  auto want = (*fresh)->decode(prompt);
  ASSERT_TRUE(want.is_ok());
  EXPECT_TRUE(std::equal(got->begin(), got->end(), want->begin(), want->end()));
  (*s)->watch_cancel(nullptr);
}

TEST(RuntimeGenerate, StopStringsAreCutAndHeldBack) {
  OpenedModel m = shipped();
  auto s = Session::create(m.model, 256);
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
  auto a = Session::create(m.model, 128, 1, DType::kF16);
  auto ids = m.tokenizer->encode("Once upon a time", true);
  ASSERT_TRUE((*a)->decode(*ids));
  const std::string path = test::temp_dir() + "/s.snapshot";
  ASSERT_TRUE(save_session_snapshot(**a, *ids, path));
  auto b = Session::create(m.model, 128, 1, DType::kF16);
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

// Three sessions' next tokens in one step: each row's logits are what the session computes alone,
// for every scheme's matmul kernels (a batch of rows against one row) and both KV element types.
TEST(RuntimeBatch, BatchedDecodeGivesEachSessionItsSoloLogits) {
  for (const char* scheme : {"f32", "w8a16", "w4a16", "w8a8", "w4a8"}) {
    for (DType kv : {DType::kF32, DType::kF16}) {
      SCOPED_TRACE(std::string(scheme) + (kv == DType::kF16 ? " f16 cache" : " f32 cache"));
      OpenOptions oo;
      oo.quant = *overrides_from_flags(scheme, 32, true, true);
      const bool a8 = quantizes_activations(oo.quant->defaults.scheme);
      // Whether this machine's table reads three tokens' rows of W4A16 or W8A16 digits.
      const cpu::ActivationFormat f =
          cpu::select_kernels(host_cpu_features()).activation_format(oo.quant->defaults.scheme, 3, 64);
      const bool digit_rows = f == cpu::ActivationFormat::kA16Rows || f == cpu::ActivationFormat::kDigits;
      auto m = open_model(test::shipped_model(), oo);
      ASSERT_TRUE(m) << m.status().message();
      const std::vector<std::string> prompts = {"Once upon a time", "The cat sat", "Tim"};
      auto exec = std::make_shared<StepExecutor>(2);
      std::vector<std::unique_ptr<Session>> batched, solo;
      std::vector<std::vector<int>> ids;
      for (const std::string& p : prompts) {
        ids.push_back(*m->tokenizer->encode(p, true));
        batched.push_back(std::move(*Session::create(m->model, 64, exec, kv)));
        solo.push_back(std::move(*Session::create(m->model, 64, 1, kv)));
        ASSERT_TRUE(batched.back()->decode(ids.back()));
        ASSERT_TRUE(solo.back()->decode(ids.back()));
      }
      double worst = 0;
      for (int round = 0; round < 3; ++round) {
        const int next[3] = {7 + round, 100 + round, 300 + round};
        // Sessions 1 and 2 wait in the queue; session 0's decode takes them into its step.
        DecodeRequest r1, r2;
        r1.session = batched[1].get(), r1.token = next[1];
        r2.session = batched[2].get(), r2.token = next[2];
        exec->enqueue(&r1);
        exec->enqueue(&r2);
        auto l0 = batched[0]->decode(std::span<const int>(&next[0], 1));
        ASSERT_TRUE(l0) << l0.status().message();
        ASSERT_TRUE(r1.done && r2.done);
        ASSERT_TRUE(r1.status && r2.status) << r1.status.message() << r2.status.message();
        const std::span<const float> got[3] = {*l0, r1.logits, r2.logits};
        for (int i = 0; i < 3; ++i) {
          auto want = solo[static_cast<size_t>(i)]->decode(std::span<const int>(&next[i], 1));
          ASSERT_TRUE(want);
          EXPECT_EQ(batched[static_cast<size_t>(i)]->position(), solo[static_cast<size_t>(i)]->position());
          // The matmul kernels of several rows may sum in another order than one row's (w8a16
          // does: measured 1e-7 relative); an f16 cache then rounds a few K/V elements to the next
          // half (measured 4.4e-4 on a logit). Positions, caches and attention are each row's own.
          const double err = test::relative_error(got[i].data(), want->data(), want->size());
          worst = std::max(worst, err);
          // The A8 schemes' kernels sum exact integers and scale them per token in one order:
          // the same bits, which their per-token int8 rounding needs (a last-bit difference
          // upstream changes a rounding, and then the token). So do W4A16's and W8A16's digit
          // kernels on tables that read a few tokens' rows as one token's (rows_max_tokens).
          if (a8 || digit_rows)
            EXPECT_EQ(std::vector<float>(got[i].begin(), got[i].end()), std::vector<float>(want->begin(), want->end()))
                << "session " << i;
          EXPECT_LT(err, kv == DType::kF16 ? 2e-3 : 1e-5) << "session " << i;
        }
      }
      std::printf("batched vs solo, %s %s cache: worst relative logit difference %.3g\n", scheme,
                  kv == DType::kF16 ? "f16" : "f32", worst);
    }
  }
}

// A prompt decoded in two steps, split anywhere, gives the logits of one step, bit for bit: a
// server that keeps a session's cached prefix and decodes only the rest of the next prompt (or a
// prompt longer than a step) must reply as a fresh session does. W4A8 and W8A8, whose per-token
// int8 rounding turns any last-bit difference upstream into another token; both KV caches. Before
// attention summed a decoding query's scores in its own order, the split at 14 here differed.
TEST(RuntimeSplit, PromptInTwoStepsGivesTheLogitsOfOne) {
  for (const char* scheme : {"w4a8", "w8a8"}) {
    for (DType kv : {DType::kF32, DType::kF16}) {
      SCOPED_TRACE(std::string(scheme) + (kv == DType::kF16 ? " f16 cache" : " f32 cache"));
      OpenOptions oo;
      oo.quant = *overrides_from_flags(scheme, 32, true, true);
      auto m = open_model(test::shipped_model(), oo);
      ASSERT_TRUE(m) << m.status().message();
      const auto ids = *m->tokenizer->encode("Once upon a time there was a little girl named Lily who liked to play", true);
      auto whole = Session::create(m->model, 64, 1, kv);
      ASSERT_TRUE(whole);
      auto lw = (*whole)->decode(ids);
      ASSERT_TRUE(lw) << lw.status().message();
      const std::vector<float> want(lw->begin(), lw->end());
      for (size_t cut = 1; cut < ids.size(); ++cut) {
        auto s = Session::create(m->model, 64, 1, kv);
        ASSERT_TRUE(s);
        ASSERT_TRUE((*s)->decode(std::span<const int>(ids.data(), cut)));
        auto l = (*s)->decode(std::span<const int>(ids.data() + cut, ids.size() - cut));
        ASSERT_TRUE(l) << l.status().message();
        EXPECT_EQ(std::vector<float>(l->begin(), l->end()), want) << "split at " << cut << " of " << ids.size();
      }
    }
  }
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
