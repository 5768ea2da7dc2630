// The C API's speculative decoding: a draft model handle and prompt lookup in
// kiln_generate_params, the counts in kiln_generate_result; the greedy text unchanged; a draft
// of another vocabulary refused; callers built before the fields existed unaffected.
#include <gtest/gtest.h>

#include <cstddef>
#include <filesystem>

#include "capi_test_util.h"
#include "test_util.h"
#include "tools/synth/synth_model.h"

namespace kiln::test::capi {
namespace {

const char* const kPrompt = "Once upon a time, there was a little girl named Lily. Lily liked to play with her ball. One day, Lily";

std::string run(kiln_session* s, const kiln_generate_params& g, kiln_generate_result* r) {
  Collected c;
  kiln_session_reset(s);
  EXPECT_EQ(kiln_session_generate(s, kPrompt, &g, collect, &c, r), KILN_OK) << kiln_last_error();
  return c.text;
}

TEST(CApiSpeculative, DraftModelAndLookupGiveTheSameTextWithTheirCounts) {
  Runtime rt;
  kiln_model* m = load(rt.rt, shipped_model());
  kiln_model* d = load(rt.rt, shipped_model());
  kiln_session* s = session(m, 0, 1, 256);
  kiln_generate_params g = kiln_generate_default_params();
  EXPECT_EQ(g.draft_model, nullptr);  // off by default
  EXPECT_EQ(g.lookup_ngram, 0);
  g.max_tokens = 64;
  kiln_generate_result plain{};
  plain.size = sizeof plain;
  const std::string want = run(s, g, &plain);
  EXPECT_EQ(plain.drafted_tokens, 0);
  EXPECT_EQ(plain.accepted_tokens, 0);
  EXPECT_EQ(plain.target_steps, plain.generated_tokens - 1);

  g.draft_model = d;
  g.draft_max = 4;
  kiln_generate_result r{};
  r.size = sizeof r;
  EXPECT_EQ(run(s, g, &r), want);
  EXPECT_GT(r.drafted_tokens, 0);
  EXPECT_EQ(r.accepted_tokens, r.drafted_tokens);  // the same model drafting: every draft accepted
  EXPECT_LT(r.target_steps, plain.target_steps);

  g.draft_model = nullptr;
  g.lookup_ngram = 3;
  r = kiln_generate_result{};
  r.size = sizeof r;
  EXPECT_EQ(run(s, g, &r), want);
  EXPECT_GT(r.drafted_tokens, 0);
  // Which steps draft follows the step times measured as it goes (the adaptive count), so how many
  // lookup drafts hit varies from run to run; Speculative.GreedyLookupGivesTheSameTextOnTheShippedModel
  // counts them with a fixed count.
  EXPECT_LE(r.accepted_tokens, r.drafted_tokens);
  EXPECT_LE(r.target_steps, plain.target_steps);
  EXPECT_EQ(r.generated_tokens, plain.generated_tokens);

  // A result struct from before the counts: nothing is written past its size.
  struct {
    kiln_generate_result r;
  } old;
  std::memset(&old, 0x5a, sizeof old);
  old.r.size = offsetof(kiln_generate_result, drafted_tokens);
  EXPECT_EQ(run(s, g, &old.r), want);
  EXPECT_EQ(old.r.drafted_tokens, 0x5a5a5a5a);
  // Params from before the fields: speculation stays off.
  kiln_generate_params o = g;
  o.size = offsetof(kiln_generate_params, draft_model);
  r = kiln_generate_result{};
  r.size = sizeof r;
  EXPECT_EQ(run(s, o, &r), want);
  EXPECT_EQ(r.drafted_tokens, 0);
  kiln_session_free(s);
  kiln_model_free(d);
  kiln_model_free(m);
}

TEST(CApiSpeculative, ADraftOfAnotherVocabularyOrABadHandleIsAnError) {
  const std::string dir = temp_dir() + "/capi-spec-tiny-llama";
  if (!std::filesystem::exists(dir + "/config.json")) {
    SynthOptions o;
    o.preset = "tiny-llama";
    o.out_dir = dir;
    o.layers = 1;
    o.force = true;
    ASSERT_TRUE(write_synth_model(o));
  }
  Runtime rt;
  kiln_model* m = load(rt.rt, shipped_model());
  kiln_model* d = load(rt.rt, dir);
  kiln_session* s = session(m, 0, 1, 64);
  kiln_generate_params g = kiln_generate_default_params();
  g.max_tokens = 4;
  g.draft_model = d;
  EXPECT_EQ(kiln_session_generate(s, "Once", &g, nullptr, nullptr, nullptr), KILN_E_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(),
               "kiln_session_generate: the draft model's token 1 is '<s>', the target's '\\x0a<s>\\x0a': a draft "
               "model needs the target's vocabulary");
  g.draft_model = reinterpret_cast<kiln_model*>(s);  // not a model
  EXPECT_EQ(kiln_session_generate(s, "Once", &g, nullptr, nullptr, nullptr), KILN_E_INVALID_ARGUMENT);
  g.draft_model = nullptr;
  g.lookup_ngram = -1;
  EXPECT_EQ(kiln_session_generate(s, "Once", &g, nullptr, nullptr, nullptr), KILN_E_INVALID_ARGUMENT);
  g.lookup_ngram = 0;
  EXPECT_EQ(kiln_session_generate(s, "Once", &g, nullptr, nullptr, nullptr), KILN_OK) << kiln_last_error();
  kiln_session_free(s);
  kiln_model_free(d);
  kiln_model_free(m);
}

}  // namespace
}  // namespace kiln::test::capi
