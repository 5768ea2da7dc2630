// The FP32 reference: ReferenceModel is shared and immutable; ReferenceSession owns a KV cache
// sized once, and forward() never allocates.
// Generation ends at the model's stop tokens: EOS, and BOS for llama2.c models.
#include <gtest/gtest.h>

#include <algorithm>

#include "formats/import.h"
#include "runtime/generate.h"
#include "reference/load_reference.h"
#include "reference/reference_session.h"
#include "test_util.h"

namespace kiln {
namespace {

std::shared_ptr<const ReferenceModel> shipped() {
  auto imp = import_model(test::shipped_model());
  EXPECT_TRUE(imp) << imp.status().message();
  auto m = ReferenceModel::create(std::move(imp->model));
  EXPECT_TRUE(m);
  return *m;
}

TEST(ReferenceSession, KvCacheAllocatedOnceForContext) {
  auto model = shipped();
  auto s = ReferenceSession::create(model, 128);
  ASSERT_TRUE(s);
  const auto& c = model->config();
  EXPECT_EQ((*s)->kv_cache_bytes(), 2u * c.n_layers * 128u * c.kv_dim() * sizeof(float));
}

TEST(ReferenceSession, ForwardAllocatesNothing) {
  auto model = shipped();
  auto s = ReferenceSession::create(model, 256);
  ASSERT_TRUE(s);
  ASSERT_TRUE((*s)->forward(1));  // warm: nothing lazy may hide in the first call either
  const uint64_t before = test::allocation_count();
  for (int i = 0; i < 200; ++i) {
    auto l = (*s)->forward(3 + i % 500);
    ASSERT_TRUE(l);
  }
  EXPECT_EQ(test::allocation_count(), before);
}

TEST(ReferenceSession, ContextFullIsAnError) {
  auto s = ReferenceSession::create(shipped(), 4);
  ASSERT_TRUE(s);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE((*s)->forward(1));
  auto r = (*s)->forward(1);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("full"), std::string::npos);
}

TEST(ReferenceSession, ContextBeyondModelMaximumRefused) {
  auto model = shipped();
  auto s = ReferenceSession::create(model, model->config().max_seq_len + 1);
  EXPECT_FALSE(s);
}

TEST(ReferenceSession, BadTokenRefused) {
  auto s = ReferenceSession::create(shipped(), 8);
  ASSERT_TRUE(s);
  EXPECT_FALSE((*s)->forward(-1));
  EXPECT_FALSE((*s)->forward(512));
}

// ---- stop tokens ----

// Greedy generation from `prompt`; `forced` (when set) is a token made the most likely one after
// decode call `at` (0 is the prompt), so that the loop samples it as its (at+1)-th token.
struct Forced {
  int at = -1;
  int token = 0;
};

// A session whose logits the test may bend: nothing else of the loop is replaced.
class ForcingDecoder final : public Decoder {
 public:
  ForcingDecoder(Decoder& inner, Forced f) : inner_(inner), forced_(f) {}
  Result<std::span<const float>> decode(std::span<const int> tokens) override {
    KILN_ASSIGN_OR_RETURN(std::span<const float> l, inner_.decode(tokens));
    logits_.assign(l.begin(), l.end());
    if (calls_++ == forced_.at)
      logits_[static_cast<size_t>(forced_.token)] = *std::max_element(logits_.begin(), logits_.end()) + 1.0f;
    return std::span<const float>(logits_);
  }
  int position() const override { return inner_.position(); }
  int n_ctx() const override { return inner_.n_ctx(); }
  const ModelConfig& config() const override { return inner_.config(); }
  void reset() override { inner_.reset(); }
  void rewind(int position) override { inner_.rewind(position); }

 private:
  Decoder& inner_;
  Forced forced_;
  int calls_ = 0;
  std::vector<float> logits_;
};

struct Generated {
  GenerationStats stats;
  std::string text;
};

Generated greedy(const LoadedReference& lm, const std::string& prompt, int n, Forced forced = {}) {
  auto s = ReferenceSession::create(lm.model, 0);
  EXPECT_TRUE(s);
  ForcingDecoder d(**s, forced);
  SamplerParams sp;
  sp.temperature = 0;
  Sampler sampler(sp, lm.model->config().vocab_size);
  auto ids = lm.tokenizer->encode(prompt, true);
  EXPECT_TRUE(ids);
  Generated g;
  auto st = generate(d, sampler, *lm.tokenizer, *ids, n, [&](std::string_view t) { g.text += t; });
  EXPECT_TRUE(st) << st.status().message();
  if (st) g.stats = *st;
  return g;
}

LoadedReference load(const std::string& path) {
  auto lm = load_reference(path);
  EXPECT_TRUE(lm) << lm.status().message();
  return std::move(lm).value();
}

std::vector<int> first(const std::vector<int>& v, size_t n) { return {v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n)}; }

TEST(StopTokens, Llama2cModelStopsAtEosAndBos) {
  const LoadedReference lm = load(test::shipped_model());
  EXPECT_EQ(lm.model->config().stop_ids, (std::vector<int>{2, 1}));
  const Generated free = greedy(lm, "Once upon a time", 30);
  ASSERT_EQ(free.stats.stop, StopReason::kLength);
  ASSERT_EQ(free.stats.generated.size(), 30u);
  const Generated five = greedy(lm, "Once upon a time", 5);
  for (int stop : {2, 1}) {
    const Generated g = greedy(lm, "Once upon a time", 30, {5, stop});
    EXPECT_EQ(g.stats.stop, StopReason::kStopToken) << stop;
    EXPECT_EQ(g.stats.generated_tokens, 5) << stop;
    EXPECT_EQ(g.stats.generated, first(free.stats.generated, 5)) << stop;  // the stop token is not kept
    EXPECT_EQ(g.text, five.text) << stop;                                 // nor printed
  }
  // The same forcing with an ordinary token: it is generated, and generation goes on.
  const Generated other = greedy(lm, "Once upon a time", 30, {5, 300});
  EXPECT_EQ(other.stats.stop, StopReason::kLength);
  ASSERT_EQ(other.stats.generated.size(), 30u);
  EXPECT_EQ(other.stats.generated[5], 300);
}

TEST(StopTokens, GgufModelStopsAtEosOnly) {
  // The same weights as GGUF: llama.cpp's rule, EOS (and EOT) only; BOS is an ordinary token.
  const LoadedReference lm = load(test::data_path("stories260K-gguf/stories260K.gguf"));
  EXPECT_EQ(lm.model->config().stop_ids, (std::vector<int>{2}));
  const Generated free = greedy(lm, "Once upon a time", 30);
  const Generated eos = greedy(lm, "Once upon a time", 30, {5, 2});
  EXPECT_EQ(eos.stats.stop, StopReason::kStopToken);
  EXPECT_EQ(eos.stats.generated, first(free.stats.generated, 5));
  const Generated bos = greedy(lm, "Once upon a time", 30, {5, 1});
  EXPECT_EQ(bos.stats.stop, StopReason::kLength);
  ASSERT_EQ(bos.stats.generated.size(), 30u);
  EXPECT_EQ(bos.stats.generated[5], 1);
}

// Unforced: stories260K ends a story by sampling BOS (its training data put BOS before each
// story). Greedy from this prompt reaches it after 217 tokens; the llama2.c model stops there,
// the GGUF one, for which BOS is no stop, samples that very BOS and goes on.
TEST(StopTokens, ShippedModelStopsAtItsOwnBos) {
  const Generated l2c = greedy(load(test::shipped_model()), "The little dog", 400);
  EXPECT_EQ(l2c.stats.stop, StopReason::kStopToken);
  ASSERT_EQ(l2c.stats.generated_tokens, 217);
  const Generated gguf = greedy(load(test::data_path("stories260K-gguf/stories260K.gguf")), "The little dog", 230);
  ASSERT_EQ(gguf.stats.generated.size(), 230u);
  EXPECT_EQ(first(gguf.stats.generated, 217), l2c.stats.generated);
  EXPECT_EQ(gguf.stats.generated[217], 1);
  EXPECT_EQ(gguf.text.substr(0, l2c.text.size()), l2c.text);
}

TEST(ReferenceSession, SessionsShareAModelIndependently) {
  auto model = shipped();
  auto a = ReferenceSession::create(model, 32);
  auto b = ReferenceSession::create(model, 32);
  ASSERT_TRUE(a && b);
  std::vector<float> la, lb;
  for (int t : {1, 403, 407}) {
    auto r = (*a)->forward(t);
    la.assign(r->begin(), r->end());
  }
  (*b)->forward(1);
  (*b)->forward(99);  // a different history must not disturb session a
  (*b)->reset();
  for (int t : {1, 403, 407}) {
    auto r = (*b)->forward(t);
    lb.assign(r->begin(), r->end());
  }
  EXPECT_EQ(la, lb);
}

}  // namespace
}  // namespace kiln
