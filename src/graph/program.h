// A compiled program: the graph after the compiler's passes, its memory plan and RoPE constants
// (artifact/program_image.h adds the weights and tokenizer: what the compiler hands the runtime).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "formats/model_config.h"
#include "graph/graph.h"

namespace kiln {

// Every activation's place in one arena, planned for up to max_tokens tokens per step; what
// tail nodes write (the final norm's rows, the logits) for logit_rows of them, as only a step
// that wants every token's logits fills more than one.
// Tokens per prefill step by default (MemoryPlan::max_tokens of a compile that names none). The
// W4A16 prefill widens each matrix's nibbles once per step, so a longer step repays it over more
// tokens. At 128 a TinyLlama-1.1B session reserves 36 MiB, 22 of them the KV cache (the logits
// are planned for kLogitRows rows, not 128).
inline constexpr int kDefaultMaxTokens = 128;

struct MemoryPlan {
  int max_tokens = 0;
  int logit_rows = 0;  // 1..max_tokens: the most tokens of a step that returns every token's logits
  std::vector<int64_t> offsets;  // bytes, per graph value
  std::vector<int64_t> sizes;    // bytes, per graph value (0: never materialised)
  int64_t arena_bytes = 0;       // peak: what the runtime reserves
  int64_t total_bytes = 0;       // the sum of all sizes: what it would take without reuse
};

struct Program {
  Graph graph;
  MemoryPlan plan;
  std::vector<float> rope_inv_freq;  // per pair of a head, scaling and GGUF rope_freqs applied
  // The sliding-window layers' frequencies where they differ (Gemma 3); empty: the same.
  std::vector<float> rope_inv_freq_local;
  // LongRoPE's long-factor frequencies, which a session longer than the original context uses in
  // place of rope_inv_freq; empty: none (and files before them held such a model to that context).
  std::vector<float> rope_inv_freq_long;
};

// The rows value v's buffer is planned for: logit_rows for what tail nodes write, else max_tokens.
inline int planned_rows(const MemoryPlan& plan, const std::vector<bool>& tail, size_t v) {
  return tail[v] ? plan.logit_rows : plan.max_tokens;
}

}  // namespace kiln
