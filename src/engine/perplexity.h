// Perplexity of a model on a text: the cost of each scheme as one number (`kiln ppl`).
#pragma once

#include <string_view>

#include "engine/open_model.h"

namespace kiln {

struct PerplexityOptions {
  int n_ctx = 0;  // window length; <= 0: min(the model's maximum, 512)
  int threads = 1;
  DType kv_dtype = DType::kF32;
};

struct PerplexityResult {
  double ppl = 0;
  int64_t scored = 0;  // tokens scored
  int n_ctx = 0;       // the window used
};

// Windows of n_ctx tokens; in each, every token after the first is scored against the logits of
// the token before it. The text starts with BOS where the tokenizer has one.
Result<PerplexityResult> perplexity(const OpenedModel& m, std::string_view text, const PerplexityOptions& options);

}  // namespace kiln
