// Per-token statistics of next-token logits, shared by perplexity (engine/perplexity.h) and
// `kiln compare` (engine/model_compare.h) so that both score a token the same way.
#pragma once

#include <cstddef>
#include <string>

#include "core/status.h"

namespace kiln {

// The window a text is scored in: `requested` when > 0, else min(the model's maximum, 512).
// Refused, not cut to fit: a perplexity over another window than asked for is another number.
inline Result<int> scoring_window(int requested, int max_seq_len) {
  if (requested > max_seq_len)
    return invalid_argument("a window of " + std::to_string(requested) + " tokens exceeds the model's maximum of " +
                            std::to_string(max_seq_len));
  if (requested == 1) return invalid_argument("a window of 1 token scores nothing (a window needs at least 2)");
  return requested > 0 ? requested : (max_seq_len < 512 ? max_seq_len : 512);
}

// -log softmax(logits)[target], in double.
double token_nll(const float* logits, size_t vocab, int target);

// KL(softmax(p) || softmax(q)), in nats.
double kl_divergence(const float* p, const float* q, size_t vocab);

// The index of the largest logit (the first of equal ones).
int argmax(const float* logits, size_t vocab);

}  // namespace kiln
