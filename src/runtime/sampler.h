// Picks the next token from logits: repetition penalty, then top-k, top-p, min-p, temperature.
#pragma once

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

  // `history` is the sequence so far (prompt and generated tokens), for the repetition penalty.
  int sample(std::span<const float> logits, std::span<const int> history);

  const SamplerParams& params() const { return params_; }

 private:
  struct Candidate {
    int id;
    float logit;
  };
  SamplerParams params_;
  Rng rng_;
  std::vector<Candidate> cand_;
  std::vector<float> probs_;
  std::vector<uint32_t> penalized_;  // epoch stamps: a token is penalised once per step
  uint32_t epoch_ = 0;
};

}  // namespace kiln
