#include "perf/instruction_cost.h"

#include <algorithm>

#include "runtime/model.h"

namespace kiln {

double attended_positions(int first, int n, int window) {
  double attended = 0;
  for (int p = first; p < first + n; ++p) attended += window > 0 ? std::min(p + 1, window) : p + 1;
  return attended;
}

namespace {

// Arithmetic per output element of the ops without products (their FLOPs are small next to a
// matmul's; counted so that the roofline chart places them): a norm squares, sums and scales
// (4), SwiGLU's silu and product (~6), GeGLU's tanh-GELU and product (~9), a soft-cap's divide,
// tanh and multiply (~6), RoPE rotates pairs (3), an add adds (1).
double elementwise_flops(OpCode op) {
  switch (op) {
    case OpCode::kRmsNorm:
    case OpCode::kHeadRmsNorm: return 4;
    case OpCode::kSwiGLU: return 6;
    case OpCode::kGeGLU: return 9;
    case OpCode::kSoftcap: return 6;
    case OpCode::kRope:
    case OpCode::kRopeKvStore: return 3;
    case OpCode::kAdd: return 1;
    default: return 0;
  }
}

bool appends_kv(OpCode op) { return op == OpCode::kKvStore || op == OpCode::kRopeKvStore; }

}  // namespace

InstructionCost instruction_cost(const Model& model, int index, const StepShape& shape) {
  const Program& p = model.program();
  const Graph& g = p.graph;
  const Node& node = g.nodes[static_cast<size_t>(index)];
  const int rows = node.tail && !shape.all_logits ? 1 : shape.rows;
  InstructionCost c;
  for (int wi : node.weights) {
    const WeightDesc& w = g.weights[static_cast<size_t>(wi)];
    const double bytes = static_cast<double>(model.image().weights[static_cast<size_t>(wi)].size());
    // An embedding gathers one row per token.
    if (node.op == OpCode::kEmbed && w.shape.size() == 2 && w.shape[0] > 0)
      c.weight_bytes += bytes / static_cast<double>(w.shape[0]) * rows;
    else c.weight_bytes += bytes;
  }
  const std::vector<bool> tail = tail_values(g);
  auto value_bytes = [&](int v) {
    const double r = tail[static_cast<size_t>(v)] && !shape.all_logits ? 1 : shape.rows;
    return static_cast<double>(g.values[static_cast<size_t>(v)].width) * 4.0 * r;
  };
  double out_elements = 0;
  for (int v : node.inputs) c.activation_read += value_bytes(v);
  for (int v : node.outputs) {
    c.activation_written += value_bytes(v);
    out_elements += value_bytes(v) / 4.0;
  }
  const double kv_row = 2.0 * node.n_kv_heads * node.head_dim * shape.kv_element_bytes;  // a key and a value
  const bool global = node.layer >= 0 && model.constants().window(node.layer) == 0 && shape.attended_global >= 0;
  const double attended = global ? shape.attended_global : shape.attended;
  if (node.op == OpCode::kAttention) c.kv_read = kv_row * attended;
  if (appends_kv(node.op)) c.kv_written = kv_row * rows;
  bool first = true;
  (void)node_products(g, node, rows, attended, [&](Scheme s, double products) {
    c.products += products;
    if (first) c.scheme = s;
    first = false;
  });
  c.flops = 2 * c.products + elementwise_flops(node.op) * out_elements;
  return c;
}

std::string kernel_label(const Graph& g, const Node& node) {
  std::string s = node.backend + " " + std::string(op_name(node.op));
  for (int wi : node.weights) {
    const WeightDesc& w = g.weights[static_cast<size_t>(wi)];
    if (w.shape.size() != 2) continue;
    s += " " + std::string(scheme_name(w.scheme));
    if (w.group_size > 0) s += " g" + std::to_string(w.group_size);
    if (!w.symmetric) s += " asym";
    if (w.layout != kRowMajorLayout) s += " [" + w.layout + "]";
    break;  // a fused node's matrices share their scheme and layout
  }
  return s;
}

}  // namespace kiln
