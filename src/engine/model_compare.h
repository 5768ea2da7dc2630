// `kiln compare`: two compiles of one model (f32 and w4a16, two override files, ...) run on the
// same tokens, in the windows perplexity scores a text in (engine/perplexity.h). Per layer, the
// hidden state after it (the residual stream) of B against A's: mean cosine similarity and mean
// relative error ||b - a|| / ||a|| over the tokens; and the error each layer adds to the one
// before it, by which the layers are ranked. At the end, over the scored tokens: top-1
// agreement, KL(A || B) of the next-token distributions, and each one's perplexity (the same
// numbers `kiln ppl` prints).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace kiln {

class Model;

struct CompareOptions {
  int n_ctx = 0;  // the scoring window; <= 0: min(the model's maximum, 512)
  int threads = 1;
};

struct LayerDelta {
  int layer = 0;
  std::string value;      // A's name for the hidden state compared
  double cosine = 0;      // mean over tokens
  double min_cosine = 0;  // the worst token's
  double relative_error = 0;
  double added_error = 0;  // relative_error minus the previous layer's
};

struct CompareResult {
  int n_ctx = 0;
  int64_t tokens = 0;  // run through both
  int64_t scored = 0;  // with a next token to score
  double ppl_a = 0, ppl_b = 0;
  double top1_agreement = 0;  // fraction of scored tokens whose most likely next token is the same
  double kl = 0;              // mean KL(A || B), nats
  double max_kl = 0;
  std::vector<LayerDelta> layers;  // in layer order
  std::vector<int> ranked;         // indices into layers, most added error first
};

// `tokens` as the tokenizer gives them (BOS included where the model wants it). The two models
// must have the same layers, width and vocabulary.
Result<CompareResult> compare_models(std::shared_ptr<const Model> a, std::shared_ptr<const Model> b,
                                     std::span<const int> tokens, const CompareOptions& options);

}  // namespace kiln
