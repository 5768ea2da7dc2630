// The compiler's passes over the graph, in the order the driver runs them.
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

#include "backends/api/backend.h"
#include "graph/program.h"
#include "quant/overrides.h"

namespace kiln {

// Precision: a scheme for every weight from the overrides (norms and biases stay f32).
// With `guard_classifier`, the classifier (output.weight, or the embedding it is tied to), the
// tensor whose rounding moves the logits most, is stored one step above an integer default:
// w8 for the 4-bit schemes, f16 for the 8-bit ones, unless a rule of the file names it.
// `notes` receives the fallbacks the assignment made.
Status assign_precision(Graph& g, const OverridesFile& overrides, const std::string& overrides_path,
                        bool guard_classifier, std::vector<std::string>* notes);

// Fusion: q/k/v into one projection, gate+up+SwiGLU, RoPE with the KV-cache write, the residual
// add into the projection before it, and RMSNorm into the projection after it.
struct FusionReport {
  int qkv = 0, gate_up = 0, rope_kv = 0, residual = 0, norm = 0;
};
FusionReport fuse(Graph& g);

// Partitioning: each node goes to the first back end that supports it; the last of `backends`
// must support everything (the reference back end does).
struct PartitionReport {
  std::map<std::string, int> nodes;           // per back end
  std::map<std::string, int64_t> weight_bytes;  // per back end, as stored
};
Result<PartitionReport> partition(Graph& g, std::span<const Backend* const> backends,
                                  std::span<const int64_t> weight_sizes);

// Memory planning: liveness of every activation, then a first-fit placement by size. The tail's
// values get kLogitRows rows (at most max_tokens): a step that returns every token's logits
// (perplexity) takes at most that many tokens, so the vocabulary-wide logits do not grow with
// the prefill step.
inline constexpr int kLogitRows = 32;
MemoryPlan plan_memory(const Graph& g, int max_tokens);

// The canonical tensor name's Hugging Face alias, layer and op kind, for overrides.
WeightRef weight_ref(const WeightDesc& w);

}  // namespace kiln
