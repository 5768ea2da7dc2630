#include "graph/graph.h"

#include <array>
#include <utility>

namespace kiln {

namespace {
constexpr std::array<std::pair<OpCode, std::string_view>, 17> kNames = {{
    {OpCode::kEmbed, "embed"},
    {OpCode::kRmsNorm, "rms_norm"},
    {OpCode::kMatMul, "matmul"},
    {OpCode::kRope, "rope"},
    {OpCode::kKvStore, "kv_store"},
    {OpCode::kAttention, "attention"},
    {OpCode::kSwiGLU, "swiglu"},
    {OpCode::kAdd, "add"},
    {OpCode::kHeadRmsNorm, "head_rms_norm"},
    {OpCode::kMatMulQKV, "matmul_qkv"},
    {OpCode::kGateUpSwiGLU, "gate_up_swiglu"},
    {OpCode::kRopeKvStore, "rope_kv_store"},
    {OpCode::kMatMulAdd, "matmul_add"},
    {OpCode::kRmsNormMatMulQKV, "rms_norm_matmul_qkv"},
    {OpCode::kRmsNormGateUpSwiGLU, "rms_norm_gate_up_swiglu"},
    {OpCode::kGeGLU, "geglu"},
    {OpCode::kSoftcap, "softcap"},
}};

// What verify_graph checks of each op. row_wise: every output row depends on the same row of
// the inputs alone, so the op may run in the tail, which computes the last token's row at row 0
// (RoPE's position, the cache and the token ids would be wrong there).
struct OpRules {
  int inputs, outputs, min_weights, max_weights;
  bool row_wise;
};

OpRules op_rules(OpCode op) {
  switch (op) {
    case OpCode::kEmbed: return {1, 1, 1, 1, false};
    case OpCode::kRmsNorm: return {1, 1, 1, 1, true};
    case OpCode::kMatMul: return {1, 1, 1, 2, true};
    case OpCode::kRope: return {1, 1, 0, 0, false};
    case OpCode::kKvStore: return {2, 0, 0, 0, false};
    case OpCode::kAttention: return {1, 1, 0, 0, false};
    case OpCode::kSwiGLU: return {2, 1, 0, 0, true};
    case OpCode::kGeGLU: return {2, 1, 0, 0, true};
    case OpCode::kSoftcap: return {1, 1, 0, 0, true};
    case OpCode::kAdd: return {2, 1, 0, 0, true};
    case OpCode::kHeadRmsNorm: return {1, 1, 1, 1, true};
    case OpCode::kMatMulQKV: return {1, 3, 3, 6, true};
    case OpCode::kGateUpSwiGLU: return {1, 1, 2, 2, true};
    case OpCode::kRopeKvStore: return {3, 1, 0, 0, false};
    case OpCode::kMatMulAdd: return {2, 1, 1, 2, true};
    case OpCode::kRmsNormMatMulQKV: return {1, 3, 4, 7, true};
    case OpCode::kRmsNormGateUpSwiGLU: return {1, 1, 3, 3, true};
  }
  return {0, 0, 0, 0, false};
}
}  // namespace

std::string_view op_name(OpCode op) {
  for (auto [c, n] : kNames)
    if (c == op) return n;
  return "?";
}

Result<OpCode> op_from_name(std::string_view name) {
  for (auto [c, n] : kNames)
    if (n == name) return c;
  return corrupt("unknown op '" + std::string(name) + "'");
}

int Graph::find_weight(std::string_view name) const {
  for (size_t i = 0; i < weights.size(); ++i)
    if (weights[i].name == name) return static_cast<int>(i);
  return -1;
}

Status verify_graph(const Graph& g) {
  const int nv = static_cast<int>(g.values.size());
  std::vector<bool> written(g.values.size(), false);
  if (g.tokens_input < 0 || g.tokens_input >= nv) return corrupt("graph: no token input");
  if (g.logits_output < 0 || g.logits_output >= nv) return corrupt("graph: no logits output");
  written[static_cast<size_t>(g.tokens_input)] = true;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const std::string where = "graph: node " + std::to_string(i) + " (" + std::string(op_name(n.op)) + ")";
    const OpRules a = op_rules(n.op);
    if (static_cast<int>(n.inputs.size()) != a.inputs || static_cast<int>(n.outputs.size()) != a.outputs)
      return corrupt(where + ": wrong number of inputs or outputs");
    if (static_cast<int>(n.weights.size()) < a.min_weights || static_cast<int>(n.weights.size()) > a.max_weights)
      return corrupt(where + ": wrong number of weights");
    if (n.tail && !a.row_wise) return corrupt(where + ": only a row-wise op may be a tail node");
    for (int w : n.weights)
      if (w < 0 || w >= static_cast<int>(g.weights.size())) return corrupt(where + ": weight index out of range");
    for (int v : n.inputs) {
      if (v < 0 || v >= nv) return corrupt(where + ": input id out of range");
      if (!written[static_cast<size_t>(v)]) return corrupt(where + ": reads '" + g.values[static_cast<size_t>(v)].name + "' before it is written");
    }
    for (int v : n.outputs) {
      if (v < 0 || v >= nv) return corrupt(where + ": output id out of range");
      written[static_cast<size_t>(v)] = true;
    }
    // The first weight of a matmul-like op fixes the widths it maps between.
    auto rows_of = [&](int wi) { return g.weights[static_cast<size_t>(n.weights[static_cast<size_t>(wi)])].shape; };
    auto width = [&](int v) { return g.values[static_cast<size_t>(v)].width; };
    if (n.op == OpCode::kMatMul || n.op == OpCode::kMatMulAdd) {
      auto s = rows_of(0);
      if (s.size() != 2 || s[1] != width(n.inputs[0]) || s[0] != width(n.outputs[0]))
        return corrupt(where + ": weight shape does not match the widths it maps");
    }
    if ((n.op == OpCode::kRope || n.op == OpCode::kAttention || n.op == OpCode::kHeadRmsNorm) &&
        width(n.inputs[0]) != static_cast<int64_t>(n.n_heads) * n.head_dim)
      return corrupt(where + ": width is not n_heads * head_dim");
    if (n.op == OpCode::kHeadRmsNorm &&
        (n.head_dim < 1 || width(n.outputs[0]) != width(n.inputs[0]) ||
         rows_of(0) != std::vector<int64_t>{n.head_dim}))
      return corrupt(where + ": the norm weight must be [head_dim] and the output as wide as the input");
    if (n.op == OpCode::kSoftcap && (width(n.outputs[0]) != width(n.inputs[0]) || !(n.softcap > 0.0f && n.softcap < 1e30f)))
      return corrupt(where + ": the output must be as wide as the input and the cap a positive finite number");
    if (!(n.softcap >= 0.0f && n.softcap < 1e30f)) return corrupt(where + ": the soft-cap must be a finite non-negative number");
  }
  if (!written[static_cast<size_t>(g.logits_output)]) return corrupt("graph: the logits are never written");
  const std::vector<bool> tail = tail_values(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.tail) continue;
    for (const auto* list : {&n.inputs, &n.outputs})
      for (int v : *list)
        if (tail[static_cast<size_t>(v)])
          return corrupt("graph: node " + std::to_string(i) + " (" + std::string(op_name(n.op)) + ") is not a tail node but touches '" +
                         g.values[static_cast<size_t>(v)].name + "', which a tail node writes");
  }
  return Status::ok();
}

std::vector<bool> tail_values(const Graph& g) {
  std::vector<bool> tail(g.values.size(), false);
  for (const Node& n : g.nodes)
    if (n.tail)
      for (int v : n.outputs)
        if (v >= 0 && static_cast<size_t>(v) < tail.size()) tail[static_cast<size_t>(v)] = true;
  return tail;
}

}  // namespace kiln
