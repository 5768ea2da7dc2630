// Perplexity of a model on a text: the cost of each scheme as one number (`kiln ppl`).
#pragma once

#include <string_view>

#include "engine/open_model.h"

namespace kiln {

struct PerplexityOptions {
  int n_ctx = 0;  // window length; <= 0: min(the model's maximum, 512)
  int threads = 1;
  DType kv_dtype = DType::kF32;
  // llama-perplexity's way, so that the two compare: whole windows only (a shorter tail is not
  // scored), each starting with BOS where the tokenizer adds one, and only the tokens of each
  // window's second half scored.
  bool second_half = false;
};

struct PerplexityResult {
  double ppl = 0;
  int64_t scored = 0;  // tokens scored
  int n_ctx = 0;       // the window used
};

// Windows of n_ctx tokens; in each, every token after the first is scored against the logits of
// the token before it (second_half: see above). The text starts with BOS where the tokenizer has one.
Result<PerplexityResult> perplexity(const OpenedModel& m, std::string_view text, const PerplexityOptions& options);

}  // namespace kiln
