// Picks the next token from logits: the repetition penalty, then the frequency and presence
// penalties (llama.cpp's order), then top-k, top-p, min-p, temperature.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace kiln {

struct SamplerParams {
  float temperature = 0.8f;  // <= 0: greedy
  int top_k = 40;            // <= 0: off
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.05f;       // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off
  int repeat_last_n = 64;       // how many recent tokens the penalty looks at
  uint64_t seed = 0;
  // OpenAI's: logit[t] -= presence_penalty * (count[t] > 0) + frequency_penalty * count[t], with
  // count[t] how often t was sampled so far in this request (the prompt does not count). 0: off.
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
};

// A small, portable generator (splitmix64): the same seed gives the same stream everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  float uniform();  // [0, 1)
 private:
  uint64_t state_;
};

class Sampler {
 public:
  // Buffers for vocab_size candidates are allocated here, so that sample() allocates nothing.
  Sampler(const SamplerParams& params, int vocab_size);

  // `history` is the sequence so far: its first `n_prompt` tokens the prompt, the rest what this
  // request sampled. The repetition penalty looks at the last repeat_last_n of all of it, the
  // frequency and presence penalties count the sampled part only.
  int sample(std::span<const float> logits, std::span<const int> history, size_t n_prompt = 0);

  // The penalties sample() applies before top-k, on `logits` in place (a test's window on them).
  void apply_penalties(std::span<float> logits, std::span<const int> history, size_t n_prompt = 0);

  // The distribution sample() draws from, as (id, probability) pairs, most likely first: the
  // candidates left after the penalties, top-k, top-p and min-p, at the temperature; greedy: the
  // one token sample() gives, with probability 1 (speculative sampling judges drafts by it).
  struct Choice {
    int id;
    float p;
  };
  void distribution(std::span<const float> logits, std::span<const int> history, size_t n_prompt,
                    std::vector<Choice>& out);
  // A token drawn from `dist` (probabilities summing to about 1) with the sampler's generator, and
  // a uniform [0, 1) draw from it.
  int draw(std::span<const Choice> dist);
  float uniform() { return rng_.uniform(); }

  const SamplerParams& params() const { return params_; }

 private:
  struct Candidate {
    int id;
    float logit;
  };
  // Fills cand_[0, n) and probs_[0, n) with what sample() draws from; returns n (greedy: 1).
  size_t prepare(std::span<const float> logits, std::span<const int> history, size_t n_prompt);
  // The penalties on the logit `logit_at(id)` of each token id below n_vocab.
  template <typename LogitAt>
  void penalize(size_t n_vocab, std::span<const int> history, size_t n_prompt, LogitAt&& logit_at);

  SamplerParams params_;
  Rng rng_;
  std::vector<Candidate> cand_;
  std::vector<float> probs_;
  std::vector<uint32_t> penalized_;  // epoch stamps: a token is penalised once per step
  uint32_t epoch_ = 0;
  std::vector<uint32_t> counted_;    // epoch stamps: count_[t] is this step's when counted_[t] == epoch_
  std::vector<uint32_t> count_;      // how often each token was sampled in this request
};

}  // namespace kiln
