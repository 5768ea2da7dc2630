// Per-token statistics of next-token logits, shared by perplexity (engine/perplexity.h) and
// `kiln compare` (perf/model_compare.h) so that both score a token the same way.
#pragma once

#include <cstddef>

namespace kiln {

// The window a text is scored in: `requested` when > 0 (at most the model's maximum), else
// min(the model's maximum, 512).
inline int scoring_window(int requested, int max_seq_len) {
  return requested > 0 ? (requested < max_seq_len ? requested : max_seq_len) : (max_seq_len < 512 ? max_seq_len : 512);
}

// -log softmax(logits)[target], in double.
double token_nll(const float* logits, size_t vocab, int target);

// KL(softmax(p) || softmax(q)), in nats.
double kl_divergence(const float* p, const float* q, size_t vocab);

// The index of the largest logit (the first of equal ones).
int argmax(const float* logits, size_t vocab);

}  // namespace kiln
