// Sampling under a grammar (constrained output): the sampler's pick is checked first (the early
// accept, one token's bytes through the matcher); only when the grammar refuses it is the full
// mask computed and the pick made again among the allowed tokens. One per generation, so every
// session keeps its own grammar state.
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "grammar/token_mask.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace kiln {

// The vocabulary as a grammar sees it: each id's bytes as they appear inside a text (not at its
// start, where a SentencePiece tokenizer drops a leading space); special tokens have none, so a
// grammar never allows them.
std::shared_ptr<const TokenTrie> grammar_vocabulary(const Tokenizer& tokenizer);

struct GrammarSamplingStats {
  int tokens = 0;         // tokens sampled under the grammar
  int masked = 0;         // of them, the sampler's first pick refused: the mask was needed
  int walks = 0;          // masks computed by walking the vocabulary (the rest came from the cache)
  double mask_seconds = 0;  // time in the masks (the walks and the masked re-sampling)
};

class GrammarSampler {
 public:
  GrammarSampler(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> vocabulary,
                 std::vector<int> stop_ids);

  // The next token: the sampler's pick when the grammar allows it, else its pick among the allowed
  // tokens. kDone when the grammar is complete and allows nothing more, not even a stop token; an
  // error when it is not complete and no token of the vocabulary can continue it.
  static constexpr int kDone = -1;
  Result<int> sample(Sampler& sampler, std::span<const float> logits, std::span<const int> history, size_t n_prompt);
  // Advances the grammar past the sampled token (a stop token ends it).
  Status accept(int id);
  // Advances it past text already in the reply (a lazy grammar's trigger onward); false when the
  // grammar refuses that text.
  bool accept_text(std::string_view bytes) { return mask_.accept_text(bytes); }
  const GrammarSamplingStats& stats() const { return stats_; }

 private:
  TokenMask mask_;
  std::vector<float> masked_;
  GrammarSamplingStats stats_;
};

}  // namespace kiln
