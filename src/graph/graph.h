// The model as a graph of typed ops over per-token activations. One graph describes one decoding
// step over T tokens (T from 1 to the planned maximum); every activation is [T][width] floats.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/scheme.h"
#include "core/status.h"

namespace kiln {

enum class OpCode : uint16_t {
  // Plain ops, as the builder emits them.
  kEmbed,      // tokens -> x                         weights: embedding
  kRmsNorm,    // x -> y                              weights: norm
  kMatMul,     // x -> y = W x (+ b)                  weights: W [, b]
  kRope,       // q -> q rotated in place (n_heads)
  kKvStore,    // k, v -> the layer's KV cache
  kAttention,  // q -> o, over the layer's KV cache
  kSwiGLU,     // gate, up -> silu(gate) * up
  kAdd,        // a, b -> a + b
  kHeadRmsNorm,  // x -> each of n_heads heads of head_dim RMS-normalised   weights: norm [head_dim]
  // Fused ops, as the compiler's passes make them.
  kMatMulQKV,         // x -> q, k, v with one weight pass            weights: Wq, Wk, Wv [, bq, bk, bv]
  kGateUpSwiGLU,      // x -> silu(Wg x) * (Wu x)                      weights: Wg, Wu
  kRopeKvStore,       // q, k, v -> rotated q; rotated k and v into the cache
  kMatMulAdd,         // x, r -> r + W x (the residual add as the matmul's epilogue)
  kRmsNormMatMulQKV,  // x -> q, k, v = QKV(rmsnorm(x))               weights: norm, Wq, Wk, Wv [, biases]
  kRmsNormGateUpSwiGLU,  // x -> swiglu(rmsnorm(x))                   weights: norm, Wg, Wu
  // Plain, appended (files name ops by name; the order is kept for readers of the enum).
  kGeGLU,      // gate, up -> gelu_tanh(gate) * up (Gemma)
  kSoftcap,    // x -> softcap * tanh(x / softcap) (Gemma 2's logits)
};

std::string_view op_name(OpCode op);
Result<OpCode> op_from_name(std::string_view name);

// A weight the graph reads: its canonical tensor name, shape and the scheme it is stored in.
struct WeightDesc {
  std::string name;
  std::vector<int64_t> shape;     // outermost first; a matmul weight is {rows, cols}
  Scheme scheme = Scheme::kF32;
  int group_size = 0;             // 4-bit schemes; w8a16: its group (0: one scale per row)
  bool symmetric = true;
  std::string layout = "rowmajor";  // how the bytes are arranged for the kernels that read them
};

struct Value {
  std::string name;
  int64_t width = 0;  // floats per token
};

struct Node {
  OpCode op = OpCode::kAdd;
  std::vector<int> inputs;   // value ids
  std::vector<int> outputs;  // value ids
  std::vector<int> weights;  // indices into Graph::weights
  int layer = -1;
  // Parameters; which ones an op reads is fixed by its kind.
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  float eps = 0.0f;
  // kEmbed: the rows are multiplied by it (Gemma's sqrt(dim)); kAttention: the scores' scale.
  // 0 for either: none (embed), head_dim^-0.5 (attention).
  float scale = 0.0f;
  // kAttention: the scaled scores are capped, s -> softcap * tanh(s / softcap), before the mask
  // (Gemma 2), none where 0; kSoftcap: its cap.
  float softcap = 0.0f;
  // Runs on the last token only unless the caller asks for every token's logits (the final
  // norm and the classifier).
  bool tail = false;
  std::string backend;  // set by partitioning
};

struct Graph {
  std::vector<Value> values;
  std::vector<Node> nodes;  // in execution order
  std::vector<WeightDesc> weights;
  int tokens_input = -1;  // the value the embedding reads token ids from (width 1)
  int logits_output = -1;

  int add_value(std::string name, int64_t width) {
    values.push_back({std::move(name), width});
    return static_cast<int>(values.size()) - 1;
  }
  int add_weight(WeightDesc w) {
    weights.push_back(std::move(w));
    return static_cast<int>(weights.size()) - 1;
  }
  int find_weight(std::string_view name) const;
};

// Checks ids, arities, widths against weight shapes, that each value is written before it is
// read, and that only tail nodes touch what tail nodes write. Every pass must leave a graph that
// passes.
Status verify_graph(const Graph& g);

// Per value: written by a tail node. Those hold only the rows the tail ran on (from row 0), so
// the plan gives them MemoryPlan::logit_rows rows, not max_tokens.
std::vector<bool> tail_values(const Graph& g);

}  // namespace kiln
