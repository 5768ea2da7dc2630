// Speculative decoding: a drafter proposes the next few tokens (a smaller draft model of the same
// vocabulary, or prompt lookup: what followed the latest earlier occurrence of the text's last
// n-gram), the target checks them all in one multi-token step (every row's logits), keeps the
// longest prefix it agrees with and rolls its cache back past the rest.
//
// Greedy: a draft is kept when it is the target's own argmax, so the text is the text without
// speculation (to the bits of the target's logits: a multi-token step computes the same logits as
// one-token steps in f32, W8A8 and W4A8; W4A16 and the K-quants round a few ulps apart).
// Sampling: a draft d with draft probability q(d) is kept with probability min(1, p(d) / q(d)),
// p being the target's distribution after the session's own sampler (penalties, top-k/p, min-p,
// temperature); a refused one is replaced by a draw from the normalised residual max(0, p - q).
// Prompt lookup drafts deterministically (q(d) = 1). Either way the tokens follow p exactly.
//
// The generation loop (generate.h) drives it through GenerateOptions::speculator: stop tokens,
// stop strings, max_tokens, cancel and streaming stay the loop's.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace kiln {

struct SpeculativeOptions {
  int lookup = 0;     // prompt lookup's n-gram size (tried from it down to 1); 0: off
  int draft_max = 8;  // the most tokens drafted for one verification step (the adaptive count's cap)
  // The count adapts to the acceptance and to the step times measured as it goes (drafting nothing
  // where a verification costs more than it saves, trying again now and then); false: always
  // draft_max (what there is to draft: lookup may find fewer).
  bool adaptive = true;
};
inline constexpr int kDefaultLookupNgram = 3;
inline constexpr int kMaxDraftTokens = 31;  // a verification step's rows: at most the plan's logit rows

// Drafted, accepted and target steps of a generation (GenerationStats carries them).
struct SpeculativeCounts {
  int drafted = 0;
  int accepted = 0;
  int steps = 0;  // target verification steps (plain one-token steps not counted)
};

// Up to `most` tokens that followed the latest earlier occurrence of the last n tokens of `text`
// (n from `ngram` down to 1, the first n that occurs), appended to `out`; returns how many.
int lookup_draft(std::span<const int> text, int ngram, int most, std::vector<int>& out);

// Whether a draft model can draft for a target: the same vocabulary size and the same text for
// every token id; the error names the first id that differs.
Status check_same_vocabulary(const Tokenizer& target, int target_vocab, const Tokenizer& draft, int draft_vocab);

class Speculator {
 public:
  // `target`: the session generating (the Decoder the generation loop is given). `draft`: a session
  // of the draft model and the tokens its cache holds (kept across calls), or null: prompt lookup
  // alone. `sampler`: the target sampler's parameters (the draft samples with the same rules).
  Speculator(Session& target, Session* draft, std::vector<int>* draft_tokens, const SamplerParams& sampler,
             const SpeculativeOptions& options);

  // What one advance() gives: tokens the loop emits in order (the accepted drafts, then the
  // target's own next token), of which the first `in_cache` are already in the target's cache;
  // none: the target decoded `next` alone and `logits` are its next logits, to sample from.
  struct Step {
    std::vector<int> tokens;
    size_t in_cache = 0;
    std::span<const float> logits;
  };
  // The target decodes `history.back()` (sampled, not yet in its cache; history[0, n_prompt) is
  // the prompt) with what the drafter proposes after it, at most `most - 1` of them (`most`: the
  // tokens the loop may still emit).
  Status advance(std::span<const int> history, size_t n_prompt, int most, Sampler& sampler, Step& out);
  // With a draft model: its cache filled with the prompt (all but its last token, which the first
  // drafting round decodes) beside the target's prefill, so that decoding does not stop to prefill
  // the draft (as llama.cpp's speculative examples and server prefill both). Nothing for lookup.
  Status prefill(std::span<const int> prompt);

  const SpeculativeCounts& counts() const { return counts_; }

 private:
  // How many tokens to draft now, from the acceptance so far and what a drafted token costs.
  int choose_k(int cap);
  // A verification of k drafts, and a drafted token, in one-token target steps: measured, or
  // before a measurement the prior (kRowCost a row, the draft's weight bytes' share a token).
  double verify_cost(int k) const;
  double draft_token_cost() const;
  // The draft model's proposals after `history`, with their draft distributions (sampling).
  Status draft_model(std::span<const int> history, size_t n_prompt, int k);
  // Makes the draft's cache hold `tokens`: keeps what it shares with them and decodes the rest, at
  // least the last token; its logits after them.
  Result<std::span<const float>> catch_up(std::span<const int> tokens);

  Session& target_;
  Session* draft_;
  std::vector<int>* draft_tokens_;
  SpeculativeOptions options_;
  Sampler draft_sampler_;
  bool greedy_;
  double acceptance_;   // running estimate: a drafted token is accepted given the one before was
  double draft_cost_;   // a draft step's time over a target step's (the weight bytes' ratio)
  // Measured step times (running means, seconds; 0: none yet): a one-token target step, a
  // verification of k drafts ([k]), a drafted token; and the rounds since the last draft.
  double t_one_ = 0, t_draft_ = 0;
  std::vector<double> t_verify_;
  int idle_rounds_ = 0;
  // Probes after which drafting still did not pay; at kGiveUpAfter, no more (a draft model).
  int failed_probes_ = 0;
  bool probing_ = false;
  SpeculativeCounts counts_;
  std::vector<int> drafts_, rows_, hist_;
  std::vector<std::vector<Sampler::Choice>> q_;  // the draft's distribution of each draft
  std::vector<Sampler::Choice> p_;
  std::vector<float> q_dense_;  // sampling: the draft distribution of the draft being judged, by id
};

}  // namespace kiln
