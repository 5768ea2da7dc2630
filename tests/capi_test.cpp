// The C API (include/kiln/kiln.h) as an application uses it: the shipped model's greedy text,
// streaming, several sessions on several threads, cancel, save and restore, the memory budget,
// and every kind of bad input answered with a status and a message.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "core/byte_reader.h"
#include "core/utf8.h"
#include "engine/open_model.h"
#include "kiln/kiln.h"
#include "runtime/session.h"
#include "capi_test_util.h"
#include "test_util.h"

namespace {

using kiln::test::read_file;
using namespace kiln::test::capi;

TEST(CApi, GreedyTextIsTheGolden) {
  Runtime rt;
  kiln_model* m = load(rt.rt, kiln::test::shipped_model());
  kiln_session* s = session(m);
  kiln_generate_params g = kiln_generate_default_params();
  g.max_tokens = 200;
  Collected c;
  kiln_generate_result r;
  r.size = sizeof r;
  ASSERT_EQ(kiln_session_generate(s, "", &g, collect, &c, &r), KILN_OK) << kiln_last_error();
  EXPECT_EQ(c.text, read_file(kiln::test::data_path("golden/stories260K_greedy200.txt")));
  // Every piece is whole UTF-8 characters; the ids cover every generated token.
  for (const std::string& p : c.pieces) EXPECT_TRUE(kiln::is_valid_utf8(p)) << p;
  EXPECT_EQ(c.ids, static_cast<size_t>(r.generated_tokens));
  EXPECT_EQ(r.prompt_tokens, 1);  // BOS
  EXPECT_GT(r.time_to_first_token_ms, 0);
  EXPECT_GT(r.decode_tokens_per_second, 0);
  kiln_session_free(s);
  kiln_model_free(m);
}

TEST(CApi, InfoTokenizeDetokenize) {
  Runtime rt;
  kiln_model* m = load(rt.rt, kiln::test::shipped_model());
  kiln_model_info info;
  info.size = sizeof info;
  ASSERT_EQ(kiln_model_info_get(m, &info), KILN_OK) << kiln_last_error();
  EXPECT_STREQ(info.arch, "llama");
  EXPECT_STREQ(info.kind, "llama2c");
  EXPECT_EQ(info.vocab_size, 512);
  EXPECT_EQ(info.n_ctx_max, 512);
  EXPECT_EQ(info.bos_id, 1);
  EXPECT_GT(info.n_params, 200000);
  const char* text = "Once upon a time";
  int32_t ids[64];
  size_t n = 0;
  ASSERT_EQ(kiln_tokenize(m, text, std::strlen(text), KILN_TOKENIZE_ADD_BOS, ids, 64, &n), KILN_OK) << kiln_last_error();
  EXPECT_EQ(ids[0], 1);
  char buf[64];
  size_t len = 0;
  ASSERT_EQ(kiln_detokenize(m, ids, n, buf, sizeof buf, &len), KILN_OK) << kiln_last_error();
  EXPECT_EQ(std::string(buf, len), text);
  // Too small a buffer: the size needed, and an error.
  size_t need = 0;
  EXPECT_EQ(kiln_tokenize(m, text, std::strlen(text), 0, ids, 1, &need), KILN_E_BUFFER_TOO_SMALL);
  EXPECT_EQ(need, n - 1);
  EXPECT_STREQ(kiln_status_name(KILN_E_BUFFER_TOO_SMALL), "KILN_E_BUFFER_TOO_SMALL");
  EXPECT_EQ(kiln_tokenize(m, text, std::strlen(text), 0, nullptr, 0, &need), KILN_E_BUFFER_TOO_SMALL);
  EXPECT_EQ(kiln_detokenize(m, ids, n, nullptr, 0, &need), KILN_E_BUFFER_TOO_SMALL);
  EXPECT_EQ(need, std::strlen(text));
  const int32_t bad[] = {5, 512};
  EXPECT_EQ(kiln_detokenize(m, bad, 2, buf, sizeof buf, &len), KILN_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("token id 512"), std::string::npos) << kiln_last_error();
  EXPECT_EQ(kiln_tokenize(m, "\xff", 1, 0, ids, 64, &n), KILN_E_INVALID_ARGUMENT);
  kiln_model_free(m);
}

// Each call takes the whole text; a longer prompt that starts with the last call's tokens reuses them.
TEST(CApi, ContinuationReusesTheCache) {
  Runtime rt;
  kiln_model* m = load(rt.rt, kiln::test::shipped_model());
  kiln_session* s = session(m);
  const std::string first = generate(s, "Once upon a time", 20);
  kiln_generate_result r;
  r.size = sizeof r;
  const std::string second = generate(s, "Once upon a time" + first + " The end.", 20, &r);
  EXPECT_GT(r.reused_tokens, 5);
  kiln_session* fresh = session(m);
  EXPECT_EQ(generate(fresh, "Once upon a time" + first + " The end.", 20), second);
  kiln_session_free(fresh);
  kiln_session_free(s);
  kiln_model_free(m);
}

TEST(CApi, StopStringsAndCallbackStop) {
  Runtime rt;
  kiln_model* m = load(rt.rt, kiln::test::shipped_model());
  kiln_session* s = session(m);
  const std::string full = generate(s, "", 200);
  const std::string stop = "Lily";
  const size_t at = full.find(stop);
  ASSERT_NE(at, std::string::npos);
  kiln_generate_params g = kiln_generate_default_params();
  g.max_tokens = 200;
  const char* stops[] = {stop.c_str()};
  g.stop = stops;
  g.n_stop = 1;
  Collected c;
  kiln_generate_result r;
  r.size = sizeof r;
  kiln_session_reset(s);
  ASSERT_EQ(kiln_session_generate(s, "", &g, collect, &c, &r), KILN_OK) << kiln_last_error();
  EXPECT_EQ(c.text, full.substr(0, at));
  EXPECT_EQ(r.stop_reason, KILN_STOP_STRING);
  // A callback that returns non-zero stops after its first piece.
  auto once = [](void* u, const char*, size_t, const int32_t*, size_t) -> int {
    ++*static_cast<int*>(u);
    return 1;
  };
  int calls = 0;
  g.n_stop = 0;
  ASSERT_EQ(kiln_session_generate(s, "", &g, once, &calls, &r), KILN_OK);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(r.stop_reason, KILN_STOP_CALLBACK);
  kiln_session_free(s);
  kiln_model_free(m);
}

// A server gives each request its own sampling on a session that keeps its cache: after
// kiln_session_set_sampling the text equals a fresh session's with those params, and the prefix
// the session held is still reused.
TEST(CApi, SetSamplingKeepsTheCache) {
  Runtime rt;
  kiln_model* m = load(rt.rt, kiln::test::shipped_model());
  kiln_session* s = session(m, 0, 1);
  generate(s, "Once upon a time", 10);
  kiln_sampling_params p = kiln_sampling_default_params();
  p.temperature = 1.0f;
  p.seed = 42;
  ASSERT_EQ(kiln_session_set_sampling(s, &p), KILN_OK) << kiln_last_error();
  kiln_generate_result r;
  r.size = sizeof r;
  const std::string sampled = generate(s, "Once upon a time", 40, &r);
  EXPECT_GT(r.reused_tokens, 3);
  kiln_session* fresh = session(m, 1.0f, 42);
  EXPECT_EQ(generate(fresh, "Once upon a time", 40), sampled);
  // Back to greedy on the same session: the golden greedy text again.
  kiln_session* greedy = session(m, 0, 1);
  p.temperature = 0;
  ASSERT_EQ(kiln_session_set_sampling(s, &p), KILN_OK);
  EXPECT_EQ(generate(s, "Once upon a time", 40), generate(greedy, "Once upon a time", 40));
  p.top_p = 2;
  EXPECT_EQ(kiln_session_set_sampling(s, &p), KILN_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("top_p"), std::string::npos);
  EXPECT_EQ(kiln_session_set_sampling(nullptr, &p), KILN_E_INVALID_ARGUMENT);
  kiln_session_free(greedy);
  kiln_session_free(fresh);
  kiln_session_free(s);
  kiln_model_free(m);
}

// OpenAI's penalties written out here, on the model's own logits, one token at a time: each
// token's logit minus frequency * count + presence once the reply has it (the prompt does not
// count); the largest wins, the lowest id on a tie; the end token stops.
std::vector<int> penalized_greedy(const std::vector<int>& prompt, int n, float frequency, float presence) {
  auto m = kiln::open_model(kiln::test::shipped_model(), kiln::OpenOptions{});
  EXPECT_TRUE(m) << m.status().message();
  auto s = kiln::Session::create(m->model, 512);
  EXPECT_TRUE(s) << s.status().message();
  auto logits = (*s)->decode(prompt);
  const size_t vocab = static_cast<size_t>(m->model->config().vocab_size);
  std::vector<int> count(vocab, 0), out;
  while (logits && static_cast<int>(out.size()) < n) {
    int best = 0;
    float best_logit = 0;
    for (size_t t = 0; t < vocab; ++t) {
      float l = (*logits)[t];
      if (count[t] > 0) l -= static_cast<float>(count[t]) * frequency + presence;
      if (t == 0 || l > best_logit) best = static_cast<int>(t), best_logit = l;
    }
    if (best == m->tokenizer->eos_id()) break;
    out.push_back(best);
    ++count[static_cast<size_t>(best)];
    if (static_cast<int>(out.size()) < n) logits = (*s)->decode(std::span<const int>(&out.back(), 1));
  }
  EXPECT_TRUE(logits) << logits.status().message();
  return out;
}

TEST(CApi, FrequencyAndPresencePenaltiesAreOpenAis) {
  Runtime rt;
  kiln_model* m = load(rt.rt, kiln::test::shipped_model());
  const char* prompt = "1, 1, 1, 1, 1,";
  const std::vector<int> ids = prompt_ids(m, prompt);
  kiln_session* plain = session(m, 0, 1);
  const std::vector<int> unpenalized = generate_ids(plain, prompt, 40);
  EXPECT_EQ(unpenalized, penalized_greedy(ids, 40, 0, 0));

  struct Case {
    float frequency, presence;
  };
  for (const Case c : {Case{2, 0}, Case{0, 2}, Case{0.5f, 0.75f}, Case{-0.5f, 0}}) {
    kiln_session_params p = kiln_session_default_params();
    p.sampling.temperature = 0;
    p.sampling.frequency_penalty = c.frequency;
    p.sampling.presence_penalty = c.presence;
    kiln_session* s = nullptr;
    ASSERT_EQ(kiln_session_create(m, &p, &s), KILN_OK) << kiln_last_error();
    const std::vector<int> got = generate_ids(s, prompt, 40);
    EXPECT_EQ(got, penalized_greedy(ids, 40, c.frequency, c.presence)) << c.frequency << " " << c.presence;
    if (c.frequency > 0 || c.presence > 0) {
      EXPECT_NE(got, unpenalized) << c.frequency << " " << c.presence;
    }
    // The same through kiln_session_set_sampling on a session that had none.
    ASSERT_EQ(kiln_session_set_sampling(plain, &p.sampling), KILN_OK) << kiln_last_error();
    EXPECT_EQ(generate_ids(plain, prompt, 40), got);
    kiln_session_free(s);
  }

  // Out of OpenAI's -2..2 (or not a number): refused, naming the field.
  for (const float bad : {2.5f, -2.01f, std::nanf("")}) {
    kiln_session_params p = kiln_session_default_params();
    p.sampling.frequency_penalty = bad;
    kiln_session* s = nullptr;
    EXPECT_EQ(kiln_session_create(m, &p, &s), KILN_E_INVALID_ARGUMENT);
    EXPECT_NE(std::string(kiln_last_error()).find("frequency_penalty must be in -2..2"), std::string::npos)
        << kiln_last_error();
    EXPECT_EQ(kiln_session_set_sampling(plain, &p.sampling), KILN_E_INVALID_ARGUMENT);
    p = kiln_session_default_params();
    p.sampling.presence_penalty = bad;
    EXPECT_EQ(kiln_session_set_sampling(plain, &p.sampling), KILN_E_INVALID_ARGUMENT);
    EXPECT_NE(std::string(kiln_last_error()).find("presence_penalty must be in -2..2"), std::string::npos)
        << kiln_last_error();
  }

  // A caller whose sampling struct stops before the penalties (its `size` says so): whatever lies
  // past it, the penalties stay off.
  kiln_session_params old = kiln_session_default_params();
  old.sampling.temperature = 0;
  old.sampling.size = offsetof(kiln_sampling_params, frequency_penalty);
  old.sampling.frequency_penalty = 1.5f;
  old.sampling.presence_penalty = 1.5f;
  kiln_session* s = nullptr;
  ASSERT_EQ(kiln_session_create(m, &old, &s), KILN_OK) << kiln_last_error();
  EXPECT_EQ(generate_ids(s, prompt, 40), unpenalized);
  kiln_session_free(s);
  kiln_session_free(plain);
  kiln_model_free(m);
}

// kiln_session_stats_get's position is live: read from another thread at each token of one
// generate call (the two threads in step), it is the prompt plus the tokens decoded so far.
TEST(CApi, StatsPositionIsLiveDuringACall) {
  Runtime rt;
  kiln_model* m = load(rt.rt, kiln::test::shipped_model());
  kiln_session* s = session(m, 0, 1, 512);
  generate(s, "Once upon a time", 10);
  kiln_session_stats st;
  st.size = sizeof st;
  ASSERT_EQ(kiln_session_stats_get(s, &st), KILN_OK);
  const int first_end = st.position;
  EXPECT_EQ(first_end, static_cast<int>(prompt_ids(m, "Once upon a time").size()) + 10 - 1);

  const char* prompt = "One day a little dog found a ball in the park.";
  const int n_prompt = static_cast<int>(prompt_ids(m, prompt).size());
  struct Poll {
    size_t sampled;
    int position;
    int generating;
  };
  struct Step {
    std::mutex mu;
    std::condition_variable cv;
    size_t sampled = 0;
    bool asked = false, done = false;
    std::vector<Poll> polls;
  } step;
  std::thread poller([&] {
    std::unique_lock<std::mutex> lock(step.mu);
    for (;;) {
      step.cv.wait(lock, [&] { return step.asked || step.done; });
      if (!step.asked) return;
      kiln_session_stats now;
      now.size = sizeof now;
      EXPECT_EQ(kiln_session_stats_get(s, &now), KILN_OK) << kiln_last_error();
      step.polls.push_back({step.sampled, now.position, now.generating});
      step.asked = false;
      step.cv.notify_all();
    }
  });
  // And one that reads without waiting for anything, as an app's progress bar would (under
  // ThreadSanitizer, the test that the position is read and written as an atomic).
  std::atomic<bool> free_done{false};
  int free_max = 0, free_bad = 0;
  std::thread free_poller([&] {
    // One read after the call has returned, however late this thread got a core (a loaded machine).
    for (bool last = false; !last;) {
      last = free_done.load();
      kiln_session_stats now;
      now.size = sizeof now;
      if (kiln_session_stats_get(s, &now) != KILN_OK || now.position < 0 || now.position > 512) ++free_bad;
      free_max = std::max(free_max, now.position);
    }
  });
  // At each piece of text: the poller reads the stats while the generating thread waits.
  kiln_token_fn on_token = [](void* user, const char*, size_t, const int32_t*, size_t n_ids) {
    auto* st = static_cast<Step*>(user);
    std::unique_lock<std::mutex> lock(st->mu);
    st->sampled += n_ids;
    st->asked = true;
    st->cv.notify_all();
    return st->cv.wait_for(lock, std::chrono::seconds(20), [&] { return !st->asked; }) ? 0 : 1;
  };
  kiln_generate_params g = kiln_generate_default_params();
  g.max_tokens = 40;
  kiln_generate_result r;
  r.size = sizeof r;
  ASSERT_EQ(kiln_session_generate(s, prompt, &g, on_token, &step, &r), KILN_OK) << kiln_last_error();
  {
    std::lock_guard<std::mutex> lock(step.mu);
    step.done = true;
  }
  step.cv.notify_all();
  poller.join();
  free_done.store(true);
  free_poller.join();
  EXPECT_EQ(free_bad, 0);
  EXPECT_EQ(free_max, n_prompt + 40 - 1);
  ASSERT_EQ(r.stop_reason, KILN_STOP_LENGTH);
  ASSERT_EQ(r.generated_tokens, 40);
  ASSERT_GE(step.polls.size(), 30u);  // a piece per token, but for a character split over tokens
  for (const Poll& p : step.polls) {
    // Token k is sampled from the logits of the prompt and tokens 1..k-1: those are in the cache.
    EXPECT_EQ(p.position, n_prompt + static_cast<int>(p.sampled) - 1) << "after " << p.sampled << " tokens";
    EXPECT_EQ(p.generating, 1);
  }
  EXPECT_NE(step.polls.front().position, step.polls.back().position);
  ASSERT_EQ(kiln_session_stats_get(s, &st), KILN_OK);
  EXPECT_EQ(st.position, n_prompt + 40 - 1);
  EXPECT_EQ(st.generating, 0);
  kiln_session_free(s);
  kiln_model_free(m);
}

// Four sessions of one model on four threads, greedy and seeded: each equals its solo run.
TEST(CApi, ConcurrentSessionsGiveTheirSoloResults) {
  Runtime rt(0, 2);
  kiln_model* m = load(rt.rt, kiln::test::shipped_model());
  const char* prompts[] = {"Once upon a time", "The cat", "Tim and Sue", "One day"};
  std::string solo[4];
  for (int i = 0; i < 4; ++i) {
    kiln_session* s = session(m, i % 2 ? 0.8f : 0.0f, 100 + i);
    solo[i] = generate(s, prompts[i], 60);
    kiln_session_free(s);
  }
  std::string got[4];
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      kiln_session* s = session(m, i % 2 ? 0.8f : 0.0f, 100 + i);
      got[i] = generate(s, prompts[i], 60);
      kiln_session_free(s);
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i], solo[i]) << i;
  kiln_model_free(m);
}

TEST(CApi, CancelStopsPrefillAndDecodeAndTheSessionGoesOn) {
  Runtime rt;
  kiln_model* m = load(rt.rt, kiln::test::shipped_model());
  kiln_session* s = session(m, 0, 1, 512);
  std::string long_prompt;
  for (int i = 0; i < 40; ++i) long_prompt += "Once upon a time there was a cat. ";
  for (int round = 0; round < 2; ++round) {
    std::atomic<bool> done{false};
    std::thread canceller([&] {
      while (!done.load()) {
        kiln_session_cancel(s);
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    });
    kiln_generate_params g = kiln_generate_default_params();
    g.max_tokens = 100000;
    kiln_generate_result r;
    r.size = sizeof r;
    const auto t0 = std::chrono::steady_clock::now();
    const kiln_status st = kiln_session_generate(s, round == 0 ? long_prompt.c_str() : "", &g, nullptr, nullptr, &r);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    done.store(true);
    canceller.join();
    EXPECT_EQ(st, KILN_E_CANCELLED) << kiln_last_error();
    EXPECT_EQ(r.stop_reason, KILN_STOP_CANCELLED);
    EXPECT_LT(r.generated_tokens, 400);
    EXPECT_LT(ms, 5000);
  }
  // Usable afterwards: the same text as a fresh session.
  const std::string after = generate(s, "Once upon a time", 30);
  kiln_session* fresh = session(m, 0, 1, 512);
  EXPECT_EQ(after, generate(fresh, "Once upon a time", 30));
  kiln_session_free(fresh);
  kiln_session_free(s);
  kiln_model_free(m);
}

// Issue 38 item 11: the prefill's progress, after each step of 128 tokens (the last shorter), counting
// only what the call decodes; a non-zero return stops the call as kiln_session_cancel does.
struct PrefillCalls {
  std::vector<std::pair<int32_t, int32_t>> calls;
  size_t stop_at = 0;  // 0: never; else return non-zero on this call (1-based)
};

int record_prefill(void* user, int32_t done, int32_t total) {
  auto* p = static_cast<PrefillCalls*>(user);
  p->calls.emplace_back(done, total);
  return p->calls.size() == p->stop_at ? 1 : 0;
}

// The calls are chunk-sized steps up to `total`.
void expect_steps(const PrefillCalls& p, int total) {
  ASSERT_EQ(p.calls.size(), static_cast<size_t>((total + 127) / 128));
  for (size_t i = 0; i < p.calls.size(); ++i) {
    EXPECT_EQ(p.calls[i].second, total) << i;
    EXPECT_EQ(p.calls[i].first, std::min(static_cast<int>(i + 1) * 128, total)) << i;
  }
}

TEST(CApi, PrefillProgressCallback) {
  Runtime rt;
  kiln_model* m = load(rt.rt, kiln::test::shipped_model());
  kiln_session* s = session(m, 0, 1, 512);
  std::string prompt;
  for (int i = 0; i < 40; ++i) prompt += "Once upon a time there was a cat. ";
  kiln_generate_params g = kiln_generate_default_params();
  EXPECT_TRUE(g.on_prefill == nullptr);  // none by default
  PrefillCalls p;
  g.max_tokens = 8;
  g.on_prefill = record_prefill;
  g.prefill_user_data = &p;
  kiln_generate_result r;
  r.size = sizeof r;
  Collected c;
  ASSERT_EQ(kiln_session_generate(s, prompt.c_str(), &g, collect, &c, &r), KILN_OK) << kiln_last_error();
  ASSERT_GT(r.prompt_tokens, 256);
  expect_steps(p, r.prompt_tokens);
  EXPECT_EQ(r.generated_tokens, 8);

  // A continuation: only the new tokens are counted (here fewer than a step: one call).
  p.calls.clear();
  const std::string more = prompt + c.text + " The end.";
  ASSERT_EQ(kiln_session_generate(s, more.c_str(), &g, nullptr, nullptr, &r), KILN_OK) << kiln_last_error();
  ASSERT_GT(r.reused_tokens, 256);
  expect_steps(p, r.prompt_tokens - r.reused_tokens);

  // Stopped at the second step: cancelled, nothing generated, the cache as before the call.
  kiln_session* t = session(m, 0, 1, 512);
  PrefillCalls stop;
  stop.stop_at = 2;
  g.prefill_user_data = &stop;
  ASSERT_EQ(kiln_session_generate(t, prompt.c_str(), &g, nullptr, nullptr, &r), KILN_E_CANCELLED);
  EXPECT_NE(std::string(kiln_last_error()).find("cancelled"), std::string::npos) << kiln_last_error();
  EXPECT_EQ(r.stop_reason, KILN_STOP_CANCELLED);
  EXPECT_EQ(r.generated_tokens, 0);
  EXPECT_EQ(stop.calls.size(), 2u);
  kiln_session_stats st;
  st.size = sizeof st;
  ASSERT_EQ(kiln_session_stats_get(t, &st), KILN_OK);
  EXPECT_EQ(st.position, 0);
  // The session goes on as a fresh one would.
  kiln_session* fresh = session(m, 0, 1, 512);
  EXPECT_EQ(generate(t, "Once upon a time", 20), generate(fresh, "Once upon a time", 20));
  kiln_session_free(fresh);

  // A caller built before the callback existed: its `size` ends before it, so whatever lies
  // beyond is not read as one.
  PrefillCalls old;
  kiln_generate_params o = kiln_generate_default_params();
  o.size = offsetof(kiln_generate_params, on_prefill);
  o.on_prefill = record_prefill;
  o.prefill_user_data = &old;
  kiln_session_reset(t);
  ASSERT_EQ(kiln_session_generate(t, prompt.c_str(), &o, nullptr, nullptr, nullptr), KILN_OK) << kiln_last_error();
  EXPECT_TRUE(old.calls.empty());
  kiln_session_free(t);
  kiln_session_free(s);
  kiln_model_free(m);
}

TEST(CApi, ReentrantCallIsAnError) {
  Runtime rt;
  kiln_model* m = load(rt.rt, kiln::test::shipped_model());
  kiln_session* s = session(m);
  struct Ctx {
    kiln_session* s;
    kiln_status inner = KILN_OK;
    std::string message;
  } ctx{s};
  auto cb = [](void* u, const char*, size_t, const int32_t*, size_t) -> int {
    auto* c = static_cast<Ctx*>(u);
    c->inner = kiln_session_generate(c->s, "x", nullptr, nullptr, nullptr, nullptr);
    c->message = kiln_last_error();
    return 1;
  };
  ASSERT_EQ(kiln_session_generate(s, "", nullptr, cb, &ctx, nullptr), KILN_OK) << kiln_last_error();
  EXPECT_EQ(ctx.inner, KILN_E_REENTRANT);
  EXPECT_NE(ctx.message.find("own callback"), std::string::npos) << ctx.message;
  kiln_session_free(s);
  kiln_model_free(m);
}

TEST(CApi, SaveAndRestore) {
  const std::string dir = kiln::test::temp_dir();
  Runtime rt;
  kiln_model* m = load(rt.rt, kiln::test::shipped_model());
  kiln_session* a = session(m, 0, 1, 256);
  const std::string first = generate(a, "Once upon a time", 30);
  const std::string path = dir + "/a.session";
  ASSERT_EQ(kiln_session_save(a, path.c_str()), KILN_OK) << kiln_last_error();
  kiln_generate_result r;
  r.size = sizeof r;
  const std::string cont = "Once upon a time" + first + " Then";
  const std::string want = generate(a, cont, 30);
  kiln_session* b = session(m, 0, 1, 256);
  ASSERT_EQ(kiln_session_restore(b, path.c_str()), KILN_OK) << kiln_last_error();
  EXPECT_EQ(generate(b, cont, 30, &r), want);
  EXPECT_GT(r.reused_tokens, 20);  // the restored cache served the prefix
  // Refused: another n_ctx, another kv type, another model, a damaged or truncated file.
  kiln_session* other_ctx = session(m, 0, 1, 128);
  EXPECT_EQ(kiln_session_restore(other_ctx, path.c_str()), KILN_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("n_ctx 256"), std::string::npos) << kiln_last_error();
  kiln_session_params p = kiln_session_default_params();
  p.n_ctx = 256;
  p.kv_type = KILN_KV_F16;
  kiln_session* f16 = nullptr;
  ASSERT_EQ(kiln_session_create(m, &p, &f16), KILN_OK);
  EXPECT_EQ(kiln_session_restore(f16, path.c_str()), KILN_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("f32"), std::string::npos) << kiln_last_error();
  std::string bytes = read_file(path);
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 1;
  kiln::test::write_file(dir + "/flipped", flipped);
  EXPECT_EQ(kiln_session_restore(b, (dir + "/flipped").c_str()), KILN_E_FORMAT);
  EXPECT_NE(std::string(kiln_last_error()).find("checksum"), std::string::npos) << kiln_last_error();
  kiln::test::write_file(dir + "/short", bytes.substr(0, bytes.size() - 9));
  EXPECT_EQ(kiln_session_restore(b, (dir + "/short").c_str()), KILN_E_FORMAT);
  kiln::test::write_file(dir + "/junk", "hello");
  EXPECT_EQ(kiln_session_restore(b, (dir + "/junk").c_str()), KILN_E_FORMAT);
  EXPECT_EQ(kiln_session_restore(b, (dir + "/missing").c_str()), KILN_E_IO);
  // The refused restores left b as it was.
  EXPECT_EQ(generate(b, cont, 30, &r), want);
  kiln_model* m2 = nullptr;
  kiln_model_params mp = kiln_model_default_params();
  mp.scheme = "w8a16";
  ASSERT_EQ(kiln_model_load(rt.rt, kiln::test::shipped_model().c_str(), &mp, &m2), KILN_OK) << kiln_last_error();
  kiln_session* c = session(m2, 0, 1, 256);
  EXPECT_EQ(kiln_session_restore(c, path.c_str()), KILN_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("another model"), std::string::npos) << kiln_last_error();
  for (kiln_session* x : {a, b, other_ctx, f16, c}) kiln_session_free(x);
  kiln_model_free(m2);
  kiln_model_free(m);
}

TEST(CApi, BudgetEvictsTheIdleModelAndRefusesWhatCannotFit) {
  // The shipped model compiled at f32 holds ~1 MiB of weights; a session of 512 positions ~1 MiB.
  Runtime probe;
  kiln_model* pm = load(probe.rt, kiln::test::shipped_model());
  kiln_session* ps = session(pm, 0, 1, 64);
  kiln_runtime_stats st;
  st.size = sizeof st;
  kiln_runtime_stats_get(probe.rt, &st);
  const uint64_t one = st.held_bytes;  // one model and one session
  const std::string want = generate(ps, "Once upon a time", 40);
  kiln_session_free(ps);
  kiln_model_free(pm);

  Runtime rt(one + one / 2);
  kiln_model* a = load(rt.rt, kiln::test::shipped_model());
  kiln_session* sa = session(a, 0, 1, 64);
  EXPECT_EQ(generate(sa, "Once upon a time", 40), want);
  kiln_model* b = load(rt.rt, kiln::test::shipped_model());  // evicts a (idle) and its session
  kiln_session* sb = session(b, 0, 1, 64);
  kiln_runtime_stats_get(rt.rt, &st);
  EXPECT_GE(st.n_evictions, 1);
  EXPECT_LE(st.held_bytes, one + one / 2);
  kiln_session_stats ss;
  ss.size = sizeof ss;
  ASSERT_EQ(kiln_session_stats_get(sa, &ss), KILN_OK);
  EXPECT_EQ(ss.evicted, 1);
  EXPECT_EQ(generate(sb, "Once upon a time", 40), want);
  // a comes back (b is evicted in turn) and answers as before, from its snapshot.
  kiln_generate_result r;
  r.size = sizeof r;
  EXPECT_EQ(generate(sa, "Once upon a time", 40, &r), want);
  EXPECT_GT(r.reused_tokens, 0);
  // A model alone larger than the budget: KILN_E_BUDGET with both numbers.
  Runtime tiny(1000);
  kiln_model* t = nullptr;
  EXPECT_EQ(kiln_model_load(tiny.rt, kiln::test::shipped_model().c_str(), nullptr, &t), KILN_E_BUDGET);
  const std::string msg = kiln_last_error();
  EXPECT_NE(msg.find("needs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("budget is 0.0 MiB"), std::string::npos) << msg;
  EXPECT_EQ(t, nullptr);
  // trim releases what is idle.
  uint64_t released = 0;
  ASSERT_EQ(kiln_runtime_trim(rt.rt, &released), KILN_OK);
  EXPECT_GT(released, 0u);
  EXPECT_EQ(generate(sb, "Once upon a time", 40), want);
  for (kiln_session* x : {sa, sb}) kiln_session_free(x);
  kiln_model_free(a);
  kiln_model_free(b);
}

TEST(CApi, AsyncLoadReportsOnItsOwnThreadAndCancels) {
  Runtime rt;
  struct Done {
    std::atomic<int> calls{0};
    kiln_status status = KILN_OK;
    kiln_model* model = nullptr;
    std::thread::id thread;
  } done;
  auto on_done = [](void* u, kiln_status st, kiln_model* m, const char*) {
    auto* d = static_cast<Done*>(u);
    d->status = st;
    d->model = m;
    d->thread = std::this_thread::get_id();
    d->calls++;
  };
  kiln_job* job = nullptr;
  ASSERT_EQ(kiln_model_load_async(rt.rt, kiln::test::shipped_model().c_str(), nullptr, on_done, &done, &job), KILN_OK);
  EXPECT_EQ(kiln_job_wait(job), KILN_OK);
  kiln_job_free(job);
  EXPECT_EQ(done.calls.load(), 1);
  EXPECT_EQ(done.status, KILN_OK);
  EXPECT_NE(done.thread, std::this_thread::get_id());
  ASSERT_NE(done.model, nullptr);
  kiln_session* s = session(done.model);
  EXPECT_FALSE(generate(s, "Once", 5).empty());
  kiln_session_free(s);
  kiln_model_free(done.model);
  // Cancelled from the progress callback.
  kiln_model_params p = kiln_model_default_params();
  p.progress = [](void*, float) { return 1; };
  Done d2;
  ASSERT_EQ(kiln_model_load_async(rt.rt, kiln::test::shipped_model().c_str(), &p, on_done, &d2, &job), KILN_OK);
  EXPECT_EQ(kiln_job_wait(job), KILN_E_CANCELLED);
  kiln_job_free(job);
  EXPECT_EQ(d2.status, KILN_E_CANCELLED);
  EXPECT_EQ(d2.model, nullptr);
  // A missing file: the status and message reach the callback.
  Done d3;
  ASSERT_EQ(kiln_model_load_async(rt.rt, "/nonexistent/model.kiln", nullptr, on_done, &d3, &job), KILN_OK);
  EXPECT_NE(kiln_job_wait(job), KILN_OK);
  kiln_job_free(job);
  EXPECT_EQ(d3.model, nullptr);
}

TEST(CApi, BadInputIsAStatusAndAMessage) {
  EXPECT_STRNE(kiln_version(), "");
  // The library's version is the header's (a binding compares them).
  const std::string major_minor = std::to_string(KILN_VERSION_MAJOR) + "." + std::to_string(KILN_VERSION_MINOR) + ".";
  EXPECT_EQ(std::string(kiln_version()).rfind(major_minor, 0), 0u) << kiln_version();
  EXPECT_STREQ(kiln_status_name(KILN_E_BUDGET), "KILN_E_BUDGET");
  kiln_runtime* none = nullptr;
  EXPECT_EQ(kiln_runtime_create(nullptr, nullptr), KILN_E_INVALID_ARGUMENT);
  kiln_runtime_params bad = kiln_runtime_default_params();
  bad.size = 0;
  EXPECT_EQ(kiln_runtime_create(&bad, &none), KILN_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("default_params"), std::string::npos);
  bad = kiln_runtime_default_params();
  bad.n_threads = -3;
  EXPECT_EQ(kiln_runtime_create(&bad, &none), KILN_E_INVALID_ARGUMENT);
  EXPECT_EQ(none, nullptr);
  Runtime rt;
  kiln_model* m = nullptr;
  EXPECT_EQ(kiln_model_load(nullptr, "x", nullptr, &m), KILN_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("kiln_runtime is NULL"), std::string::npos);
  EXPECT_EQ(kiln_model_load(rt.rt, nullptr, nullptr, &m), KILN_E_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_model_load(rt.rt, "/nonexistent/x.kiln", nullptr, &m), KILN_E_NOT_FOUND);
  EXPECT_NE(std::string(kiln_last_error()).find("/nonexistent/x.kiln"), std::string::npos) << kiln_last_error();
  const std::string dir = kiln::test::temp_dir();
  kiln::test::write_file(dir + "/bad.kiln", "KILN" + std::string(300, '\0'));
  EXPECT_EQ(kiln_model_load(rt.rt, (dir + "/bad.kiln").c_str(), nullptr, &m), KILN_E_FORMAT) << kiln_last_error();
  kiln_model_params mp = kiln_model_default_params();
  mp.scheme = "int3";
  EXPECT_EQ(kiln_model_load(rt.rt, kiln::test::shipped_model().c_str(), &mp, &m), KILN_E_INVALID_ARGUMENT);

  m = load(rt.rt, kiln::test::shipped_model());
  kiln_session* s = nullptr;
  kiln_session_params sp = kiln_session_default_params();
  sp.n_ctx = 1 << 30;
  EXPECT_EQ(kiln_session_create(m, &sp, &s), KILN_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("maximum of 512"), std::string::npos) << kiln_last_error();
  sp.n_ctx = -1;
  EXPECT_EQ(kiln_session_create(m, &sp, &s), KILN_E_INVALID_ARGUMENT);
  sp = kiln_session_default_params();
  sp.sampling.top_p = 2;
  EXPECT_EQ(kiln_session_create(m, &sp, &s), KILN_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("kiln_session_create: sampling: top_p must be in 0..1"), std::string::npos)
      << kiln_last_error();
  sp = kiln_session_default_params();
  sp.sampling.size = 3;  // not filled by kiln_sampling_default_params
  EXPECT_EQ(kiln_session_create(m, &sp, &s), KILN_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("params.size is 3"), std::string::npos) << kiln_last_error();
  sp = kiln_session_default_params();
  sp.n_ctx = 32;
  ASSERT_EQ(kiln_session_create(m, &sp, &s), KILN_OK);
  EXPECT_EQ(kiln_session_generate(s, nullptr, nullptr, nullptr, nullptr, nullptr), KILN_E_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_session_generate(s, "\xc3\x28", nullptr, nullptr, nullptr, nullptr), KILN_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("UTF-8"), std::string::npos);
  std::string longp;
  for (int i = 0; i < 20; ++i) longp += "Once upon a time ";
  EXPECT_EQ(kiln_session_generate(s, longp.c_str(), nullptr, nullptr, nullptr, nullptr), KILN_E_CONTEXT_FULL);
  EXPECT_NE(std::string(kiln_last_error()).find("context of 32"), std::string::npos) << kiln_last_error();
  kiln_generate_params g = kiln_generate_default_params();
  g.n_stop = 2;
  EXPECT_EQ(kiln_session_generate(s, "a", &g, nullptr, nullptr, nullptr), KILN_E_INVALID_ARGUMENT);
  g = kiln_generate_default_params();
  g.max_tokens = -1;
  EXPECT_EQ(kiln_session_generate(s, "a", &g, nullptr, nullptr, nullptr), KILN_E_INVALID_ARGUMENT);
  kiln_message msg{"user", nullptr};
  EXPECT_EQ(kiln_session_chat(s, &msg, 1, nullptr, nullptr, nullptr, nullptr), KILN_E_INVALID_ARGUMENT);
  msg.content = "hi";
  EXPECT_EQ(kiln_session_chat(s, &msg, 1, nullptr, nullptr, nullptr, nullptr), KILN_E_NOT_FOUND);
  EXPECT_NE(std::string(kiln_last_error()).find("no chat template"), std::string::npos) << kiln_last_error();
  EXPECT_EQ(kiln_session_save(s, nullptr), KILN_E_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_session_save(s, "/nonexistent-dir/x.session"), KILN_E_IO);
  // A path that is not a regular file is refused, not replaced (issue 38 item 1).
  const std::string fifo = kiln::test::temp_dir() + "/save.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(kiln_session_save(s, fifo.c_str()), KILN_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("save.fifo is a FIFO, not a regular file"), std::string::npos)
      << kiln_last_error();
  struct stat st;
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  // Still fine after all that.
  EXPECT_FALSE(generate(s, "Once", 5).empty());

  // A freed handle is named, not dereferenced.
  kiln_session_free(s);
  EXPECT_EQ(kiln_session_generate(s, "a", nullptr, nullptr, nullptr, nullptr), KILN_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("not a live handle"), std::string::npos);
  EXPECT_EQ(kiln_session_cancel(s), KILN_E_INVALID_ARGUMENT);
  kiln_session_free(s);  // a second free is ignored
  kiln_model_free(m);
  EXPECT_EQ(kiln_session_create(m, nullptr, &s), KILN_E_INVALID_ARGUMENT);
  kiln_model_info info;
  info.size = sizeof info;
  EXPECT_EQ(kiln_model_info_get(m, &info), KILN_E_INVALID_ARGUMENT);
  // A session handle passed as a model is refused too.
  EXPECT_EQ(kiln_model_info_get(reinterpret_cast<kiln_model*>(rt.rt), &info), KILN_E_INVALID_ARGUMENT);
}

}  // namespace
