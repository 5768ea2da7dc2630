// What the compiler hands the runtime: the graph after its passes, the memory plan, and the
// weights in the layout the chosen kernels read. The .kiln file is this, serialized.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "formats/model_config.h"
#include "graph/graph.h"
#include "tokenizer/tokenizer_source.h"

namespace kiln {

// Every activation's place in one arena, planned for up to max_tokens tokens per step; what
// tail nodes write (the final norm's rows, the logits) for logit_rows of them, as only a step
// that wants every token's logits fills more than one.
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
};

// A program with everything it needs to run, wherever its bytes live.
struct ProgramImage {
  ModelConfig config;
  Program program;
  std::vector<std::span<const uint8_t>> weights;  // per graph weight
  std::vector<std::shared_ptr<const void>> owners;  // keep the weight bytes alive
  TokenizerBlob tokenizer;
  // The CPU features the kernels may use (the .kiln target's; ~0: whatever the machine has).
  uint64_t cpu_features = ~0ull;
};

// JSON encodings for the .kiln sections; decoding validates every id, width and offset.
std::string program_to_json(const Program& p);  // the graph and its constants
std::string plan_to_json(const MemoryPlan& plan);
// The rows value v's buffer is planned for: logit_rows for what tail nodes write, else max_tokens.
inline int planned_rows(const MemoryPlan& plan, const std::vector<bool>& tail, size_t v) {
  return tail[v] ? plan.logit_rows : plan.max_tokens;
}
Result<Program> program_from_json(std::string_view program, std::string_view plan, const std::string& where);
std::string config_to_json(const ModelConfig& c);
Result<ModelConfig> config_from_json(std::string_view text, const std::string& where);

}  // namespace kiln
