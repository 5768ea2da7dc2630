// kiln's next-token distributions against llama.cpp's on the same tokens: llama-perplexity's saved
// logits (formats/llama_logits.h) are the base, as in llama.cpp's own --kl-divergence; the figures
// are the ones it prints (mean KL divergence, how often the top token is the same, both
// perplexities), so that a kiln file and a llama.cpp quantization read side by side.
#pragma once

#include "engine/open_model.h"
#include "engine/perplexity.h"
#include "formats/llama_logits.h"

namespace kiln {

struct KlResult {
  int64_t scored = 0;
  double mean_kld = 0, max_kld = 0;  // KL(llama.cpp || kiln), nats
  double same_top = 0;               // fraction of positions whose most likely token is the same
  // Normalized mean squared error of kiln's log-probabilities against the base's, over the entries
  // the base keeps (above -16): sum (kiln - base)^2 / sum base^2, all positions together.
  double nmse = 0;
  double ppl = 0, base_ppl = 0;      // kiln's, and llama.cpp's from its saved log-probabilities
};

// The base's chunks through `m` (threads and KV type from `options`; its window is the base's),
// each starting with BOS where the model's tokenizer adds one, as llama-perplexity ran them.
Result<KlResult> kl_divergence_against(const OpenedModel& m, const LlamaLogits& base, const PerplexityOptions& options);

}  // namespace kiln
