// What every back end's kernel does the same way around its op: where a node's values lie in the
// arena, which rows of them a step touches, and the f32 steps whose bits every back end shares
// (the embedding lookup of a row-major table, storing K and V rows into the cache). Header only:
// each back end's library includes it without linking another's.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "backends/api/backend.h"
#include "core/dtype.h"
#include "graph/weight_params.h"

namespace kiln {

// A node's inputs and outputs: arena offsets, widths, and whether an input is a tail value.
class NodeIo {
 public:
  NodeIo(const Node& node, const Graph& graph, std::span<const int64_t> offsets) : tail_node_(node.tail) {
    // Only a tail node can read a tail value (validate_graph): the others need no pass over the
    // graph, so that preparing every node of a graph stays linear in its size.
    const std::vector<bool> tail = node.tail ? tail_values(graph) : std::vector<bool>();
    for (int v : node.inputs) {
      in_.push_back(offsets[static_cast<size_t>(v)]);
      in_width_.push_back(graph.values[static_cast<size_t>(v)].width);
      in_tail_.push_back(node.tail && tail[static_cast<size_t>(v)]);
    }
    for (int v : node.outputs) {
      out_.push_back(offsets[static_cast<size_t>(v)]);
      out_width_.push_back(graph.values[static_cast<size_t>(v)].width);
    }
  }

  // The rows of one step: a tail node on the last token alone (unless every token's logits are
  // wanted) reads that row of the body's values; its own values (planned for
  // MemoryPlan::logit_rows rows) start at row 0.
  struct Rows {
    int body_row = 0;  // the first row of the body's values it reads
    int count = 0;     // rows it computes
  };
  Rows rows(const StepContext& ctx) const {
    const int body_row = (tail_node_ && !ctx.all_logits) ? ctx.n_tokens - 1 : 0;
    return {body_row, ctx.n_tokens - body_row};
  }
  float* in(const StepContext& ctx, const Rows& r, size_t i) const {
    return reinterpret_cast<float*>(ctx.arena + in_[i]) + (in_tail_[i] ? 0 : r.body_row) * in_width_[i];
  }
  float* out(const StepContext& ctx, size_t i) const { return reinterpret_cast<float*>(ctx.arena + out_[i]); }
  int64_t in_width(size_t i) const { return in_width_[i]; }
  int64_t out_width(size_t i) const { return out_width_[i]; }
  size_t n_in() const { return in_.size(); }
  size_t n_out() const { return out_.size(); }

 private:
  bool tail_node_;
  std::vector<int64_t> in_, out_, in_width_, out_width_;
  std::vector<bool> in_tail_;  // the input is a tail value (rows from 0)
};

// A kernel class's member that runs one op over a step's rows.
template <class K>
using OpFunction = Status (K::*)(const StepContext&, const NodeIo::Rows&) const;

// The member of kernel class K that runs `op`, chosen once when a node is prepared (one function
// per op; every back end's kernel class names them alike, run_<op>); null for an op it lacks.
template <class K>
OpFunction<K> op_function(OpCode op) {
  switch (op) {
    case OpCode::kEmbed: return &K::run_embed;
    case OpCode::kRmsNorm: return &K::run_rmsnorm;
    case OpCode::kHeadRmsNorm: return &K::run_head_rmsnorm;
    case OpCode::kMatMul: return &K::run_matmul;
    case OpCode::kMatMulAdd: return &K::run_matmul_add;
    case OpCode::kMatMulQKV: return &K::run_qkv;
    case OpCode::kRmsNormMatMulQKV: return &K::run_norm_qkv;
    case OpCode::kGateUpSwiGLU: return &K::run_gate_up;
    case OpCode::kRmsNormGateUpSwiGLU: return &K::run_norm_gate_up;
    case OpCode::kRope: return &K::run_rope;
    case OpCode::kKvStore: return &K::run_kv_store;
    case OpCode::kRopeKvStore: return &K::run_rope_kv_store;
    case OpCode::kAttention: return &K::run_attention;
    case OpCode::kSwiGLU: return &K::run_swiglu;
    case OpCode::kGeGLU: return &K::run_geglu;
    case OpCode::kSoftcap: return &K::run_softcap;
    case OpCode::kAdd: return &K::run_add;
  }
  return nullptr;
}

// Row `id` of a row-major embedding table (weight `w`, bytes `table`) into y, for every token of
// the step; a token outside the vocabulary is an error naming it.
inline Status embed_rowmajor(const StepContext& ctx, const WeightDesc& w, const QuantParams& p,
                             std::span<const uint8_t> table, float* y) {
  const int64_t vocab = w.shape[0], d = w.shape[1];
  auto row_bytes = quantized_row_size(p, d);
  if (!row_bytes) return invalid_argument("embed: bad weight layout");
  for (int t = 0; t < ctx.n_tokens; ++t) {
    const int32_t id = ctx.tokens[t];
    if (id < 0 || id >= vocab) return invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary");
    KILN_RETURN_IF_ERROR(dequantize_row(p, table.subspan(static_cast<size_t>(id) * *row_bytes, *row_bytes), d, y + t * d));
  }
  return Status::ok();
}

// Where token t of the step lies in layer `layer`'s K (or V) cache, in elements.
inline size_t kv_cache_index(const StepContext& ctx, int layer, int kv_dim, int t) {
  return (static_cast<size_t>(layer) * static_cast<size_t>(ctx.n_ctx) + static_cast<size_t>(ctx.first_pos + t)) *
         static_cast<size_t>(kv_dim);
}

// Token t's rows of K and V (kv_dim f32 each) into the cache, as its element type holds them (f16:
// each rounded once).
inline void store_kv_row(const StepContext& ctx, int layer, int kv_dim, int t, const float* k, const float* v) {
  const size_t at = kv_cache_index(ctx, layer, kv_dim, t);
  if (ctx.kv_dtype == DType::kF16) {
    auto* kc = static_cast<uint16_t*>(ctx.key_cache) + at;
    auto* vc = static_cast<uint16_t*>(ctx.value_cache) + at;
    for (int i = 0; i < kv_dim; ++i) {
      kc[i] = f32_to_f16(k[i]);
      vc[i] = f32_to_f16(v[i]);
    }
    return;
  }
  std::memcpy(static_cast<float*>(ctx.key_cache) + at, k, sizeof(float) * static_cast<size_t>(kv_dim));
  std::memcpy(static_cast<float*>(ctx.value_cache) + at, v, sizeof(float) * static_cast<size_t>(kv_dim));
}

}  // namespace kiln
