#include <algorithm>

#include "compiler/passes.h"

namespace kiln {

namespace {

// Producers and use counts of every value, recomputed after each rewrite.
struct Uses {
  std::vector<int> producer;
  std::vector<int> count;
  explicit Uses(const Graph& g) : producer(g.values.size(), -1), count(g.values.size(), 0) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (int v : g.nodes[i].outputs) producer[static_cast<size_t>(v)] = static_cast<int>(i);
      for (int v : g.nodes[i].inputs) count[static_cast<size_t>(v)]++;
    }
    count[static_cast<size_t>(g.logits_output)]++;
  }
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

const std::string& weight_name(const Graph& g, const Node& n, size_t i = 0) {
  return g.weights[static_cast<size_t>(n.weights[i])].name;
}

bool is_matmul_of(const Graph& g, const Node& n, const std::string& suffix) {
  return n.op == OpCode::kMatMul && ends_with(weight_name(g, n), suffix);
}

void erase_marked(Graph& g, std::vector<bool>& dead) {
  size_t w = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (dead[i]) continue;
    if (w != i) g.nodes[w] = std::move(g.nodes[i]);  // never self-move: it may empty the vectors
    ++w;
  }
  g.nodes.resize(w);
}

int fuse_qkv(Graph& g) {
  int fused = 0;
  std::vector<bool> dead(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& q = g.nodes[i];
    if (dead[i] || !is_matmul_of(g, q, ".attn_q.weight")) continue;
    int ki = -1, vi = -1;
    for (size_t j = i + 1; j < g.nodes.size(); ++j) {
      const Node& n = g.nodes[j];
      if (dead[j] || n.layer != q.layer || n.inputs != q.inputs) continue;
      if (is_matmul_of(g, n, ".attn_k.weight")) ki = static_cast<int>(j);
      if (is_matmul_of(g, n, ".attn_v.weight")) vi = static_cast<int>(j);
    }
    if (ki < 0 || vi < 0) continue;
    const Node& k = g.nodes[static_cast<size_t>(ki)];
    const Node& v = g.nodes[static_cast<size_t>(vi)];
    const bool biased = q.weights.size() == 2 && k.weights.size() == 2 && v.weights.size() == 2;
    if (!biased && (q.weights.size() != 1 || k.weights.size() != 1 || v.weights.size() != 1)) continue;
    Node f = q;
    f.op = OpCode::kMatMulQKV;
    f.outputs = {q.outputs[0], k.outputs[0], v.outputs[0]};
    f.weights = {q.weights[0], k.weights[0], v.weights[0]};
    if (biased) f.weights.insert(f.weights.end(), {q.weights[1], k.weights[1], v.weights[1]});
    dead[static_cast<size_t>(ki)] = dead[static_cast<size_t>(vi)] = true;
    g.nodes[i] = std::move(f);
    ++fused;
  }
  erase_marked(g, dead);
  return fused;
}

int fuse_gate_up(Graph& g) {
  int fused = 0;
  Uses u(g);
  std::vector<bool> dead(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& s = g.nodes[i];
    if (s.op != OpCode::kSwiGLU) continue;
    const int gi = u.producer[static_cast<size_t>(s.inputs[0])], ui = u.producer[static_cast<size_t>(s.inputs[1])];
    if (gi < 0 || ui < 0) continue;
    Node& gate = g.nodes[static_cast<size_t>(gi)];
    const Node& up = g.nodes[static_cast<size_t>(ui)];
    if (!is_matmul_of(g, gate, ".ffn_gate.weight") || !is_matmul_of(g, up, ".ffn_up.weight")) continue;
    if (gate.inputs != up.inputs || gate.weights.size() != 1 || up.weights.size() != 1) continue;
    if (u.count[static_cast<size_t>(s.inputs[0])] != 1 || u.count[static_cast<size_t>(s.inputs[1])] != 1) continue;
    Node f = gate;
    f.op = OpCode::kGateUpSwiGLU;
    f.outputs = s.outputs;
    f.weights = {gate.weights[0], up.weights[0]};
    dead[i] = dead[static_cast<size_t>(ui)] = true;
    gate = std::move(f);
    ++fused;
  }
  erase_marked(g, dead);
  return fused;
}

int fuse_rope_kv(Graph& g) {
  int fused = 0;
  Uses u(g);
  std::vector<bool> dead(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& st = g.nodes[i];
    if (st.op != OpCode::kKvStore) continue;
    const int rki = u.producer[static_cast<size_t>(st.inputs[0])];
    if (rki < 0 || g.nodes[static_cast<size_t>(rki)].op != OpCode::kRope || u.count[static_cast<size_t>(st.inputs[0])] != 1)
      continue;
    // The query rope of the same layer, whose result only attention (after the store) reads.
    int rqi = -1;
    for (size_t j = 0; j < i; ++j) {
      const Node& n = g.nodes[j];
      if (!dead[j] && n.op == OpCode::kRope && n.layer == st.layer && static_cast<int>(j) != rki) rqi = static_cast<int>(j);
    }
    if (rqi < 0) continue;
    const Node& rq = g.nodes[static_cast<size_t>(rqi)];
    const Node& rk = g.nodes[static_cast<size_t>(rki)];
    bool read_before_store = false;
    for (size_t j = static_cast<size_t>(rqi) + 1; j < i; ++j)
      for (int v : g.nodes[j].inputs) read_before_store |= v == rq.outputs[0];
    if (read_before_store) continue;
    Node f = st;
    f.op = OpCode::kRopeKvStore;
    f.inputs = {rq.inputs[0], rk.inputs[0], st.inputs[1]};
    f.outputs = {rq.outputs[0]};
    f.n_heads = rq.n_heads;
    f.n_kv_heads = rk.n_heads;
    f.head_dim = rq.head_dim;
    dead[static_cast<size_t>(rqi)] = dead[static_cast<size_t>(rki)] = true;
    st = std::move(f);
    ++fused;
  }
  erase_marked(g, dead);
  return fused;
}

int fuse_residual(Graph& g) {
  int fused = 0;
  Uses u(g);
  std::vector<bool> dead(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& add = g.nodes[i];
    if (add.op != OpCode::kAdd) continue;
    for (int side = 1; side >= 0; --side) {
      const int p = add.inputs[static_cast<size_t>(side)];
      const int mi = u.producer[static_cast<size_t>(p)];
      if (mi < 0 || dead[static_cast<size_t>(mi)] || g.nodes[static_cast<size_t>(mi)].op != OpCode::kMatMul ||
          u.count[static_cast<size_t>(p)] != 1)
        continue;
      const Node& mm = g.nodes[static_cast<size_t>(mi)];
      Node f = mm;
      f.op = OpCode::kMatMulAdd;
      f.inputs = {mm.inputs[0], add.inputs[static_cast<size_t>(1 - side)]};
      f.outputs = add.outputs;
      f.layer = add.layer;
      dead[static_cast<size_t>(mi)] = true;
      add = std::move(f);
      ++fused;
      break;
    }
  }
  erase_marked(g, dead);
  return fused;
}

int fuse_norm(Graph& g) {
  int fused = 0;
  Uses u(g);
  std::vector<bool> dead(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& c = g.nodes[i];
    if (c.op != OpCode::kMatMulQKV && c.op != OpCode::kGateUpSwiGLU) continue;
    const int ni = u.producer[static_cast<size_t>(c.inputs[0])];
    if (ni < 0 || g.nodes[static_cast<size_t>(ni)].op != OpCode::kRmsNorm || u.count[static_cast<size_t>(c.inputs[0])] != 1)
      continue;
    const Node& norm = g.nodes[static_cast<size_t>(ni)];
    Node f = c;
    f.op = c.op == OpCode::kMatMulQKV ? OpCode::kRmsNormMatMulQKV : OpCode::kRmsNormGateUpSwiGLU;
    f.inputs = norm.inputs;
    f.weights.insert(f.weights.begin(), norm.weights[0]);
    f.eps = norm.eps;
    dead[static_cast<size_t>(ni)] = true;
    c = std::move(f);
    ++fused;
  }
  erase_marked(g, dead);
  return fused;
}

}  // namespace

FusionReport fuse(Graph& g) {
  FusionReport r;
  r.qkv = fuse_qkv(g);
  r.gate_up = fuse_gate_up(g);
  r.rope_kv = fuse_rope_kv(g);
  r.residual = fuse_residual(g);
  r.norm = fuse_norm(g);
  return r;
}

}  // namespace kiln
