// What one program instruction moves and computes in a step: the profiler's cost model, and the
// product count the compute roofline (compute_probe.h) is built on.
//
// Bytes read: every weight byte the node reads (an embedding gathers only its tokens' rows), its
// input activations, and for attention the KV cache rows of the positions attended; bytes
// written: its outputs, and for a KV store the rows it appends. Products are multiply-adds of a
// weight (or, in attention, a key or value) by an activation; FLOPs count each as two, plus the
// element-wise arithmetic of the other ops (a fixed count per output element, see the .cpp).
#pragma once

#include <string>

#include "graph/graph.h"
#include "layout/weight_layout.h"

namespace kiln {

class Model;

struct InstructionCost {
  double weight_bytes = 0;
  double activation_read = 0, activation_written = 0;
  double kv_read = 0, kv_written = 0;
  double products = 0;
  double flops = 0;
  Scheme scheme = Scheme::kF32;  // of the products (attention: f32)
  double bytes_read() const { return weight_bytes + activation_read + kv_read; }
  double bytes_written() const { return activation_written + kv_written; }
  double bytes() const { return bytes_read() + bytes_written(); }
};

// Where an instruction ran: `rows` activations (a step's tokens, or every session's in a batched
// decode step; a tail node runs on one unless every token's logits were asked), attending to
// `attended` positions summed over its rows.
struct StepShape {
  int rows = 1;
  double attended = 0;  // through the sliding window, where the model has one
  double attended_global = -1;  // in the layers without it (Gemma 3's global layers); < 0: as attended
  int kv_element_bytes = 4;
  bool all_logits = false;
};

// Positions a step's queries attend to: min(p + 1, window) for p in [first, first + n).
double attended_positions(int first, int n, int window);

// The products of `node` run on `n` rows (a tail node's rows as it ran) attending to `attended` positions, by scheme
// (attention: f32); calls add(scheme, products) once per weight matrix or attention.
template <typename Add>
Status node_products(const Graph& g, const Node& node, int n, double attended, Add&& add) {
  if (node.op == OpCode::kAttention) {
    add(Scheme::kF32, 2.0 * node.n_heads * node.head_dim * attended);  // q k, then p v
    return Status::ok();
  }
  if (node.op == OpCode::kEmbed) return Status::ok();  // a gather, no products
  for (int wi : node.weights) {
    const WeightDesc& w = g.weights[static_cast<size_t>(wi)];
    if (w.shape.size() != 2) continue;  // norms and biases
    add(w.scheme, static_cast<double>(w.shape[0]) * static_cast<double>(w.shape[1]) * n);
  }
  return Status::ok();
}

InstructionCost instruction_cost(const Model& model, int node, const StepShape& shape);

// "cpu matmul w4a16 g32 [q4_32x8]": the back end, the op and what its weights are stored as,
// which is what picks the kernel.
std::string kernel_label(const Graph& g, const Node& node);

}  // namespace kiln
