// The back-end interface: what a device supports, how it prepares a node into a kernel once,
// and how that kernel runs each step. GPU and NPU back ends plug in here.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "graph/graph.h"

namespace kiln {

// Model-wide constants the kernels need, fixed when the model is opened.
struct ModelConstants {
  std::vector<float> inv_freq;  // RoPE frequency per pair
  bool rope_half_split = false;
  int sliding_window = 0;
};

// What one step gives the kernels: the arena, the tokens, the positions, the KV cache.
struct StepContext {
  uint8_t* arena = nullptr;
  const int32_t* tokens = nullptr;
  int n_tokens = 0;    // T: tokens in this step
  int first_pos = 0;   // position of the first of them
  bool all_logits = false;  // tail nodes run on every token, not only the last
  int n_ctx = 0;                 // positions in each layer's KV cache
  float* key_cache = nullptr;    // [layer][n_ctx][kv_dim]
  float* value_cache = nullptr;
  const ModelConstants* model = nullptr;
  uint8_t* scratch = nullptr;  // per-session scratch of Backend::scratch_bytes() bytes
};

// The bytes of one weight as the kernels read them (mapped from a .kiln, or owned in memory).
struct BoundWeight {
  const WeightDesc* desc = nullptr;
  std::span<const uint8_t> bytes;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual Status run(const StepContext& ctx) const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // Whether this back end can run `node` (its op, and the schemes of its weights).
  virtual bool supports(const Node& node, const Graph& graph) const = 0;
  // Binds a node once: weights, and the arena offsets (bytes) of every value.
  virtual Result<std::unique_ptr<Kernel>> prepare(const Node& node, const Graph& graph,
                                                  std::span<const BoundWeight> weights,
                                                  std::span<const int64_t> value_offsets,
                                                  int max_tokens) const = 0;
  // Scratch the kernels of this back end need per session, for up to max_tokens tokens per
  // step and n_ctx positions of context.
  virtual size_t scratch_bytes(const Graph& graph, int max_tokens, int n_ctx) const = 0;
};

}  // namespace kiln
