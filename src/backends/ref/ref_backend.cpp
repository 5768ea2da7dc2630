#include "backends/ref/ref_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/api/activation_math.h"
#include "backends/api/node_io.h"
#include "backends/ref/kernels.h"
#include "backends/ref/ref_matmul.h"
#include "graph/weight_params.h"

namespace kiln {

namespace {

// Widest activation of the graph: bounds every temporary row a fused kernel keeps in scratch.
int64_t widest(const Graph& g) {
  int64_t w = 1;
  for (const Value& v : g.values) w = std::max(w, v.width);
  return w;
}
// The same for one node's values: the temporaries it keeps are as wide as they (its scratch
// layout, within the graph's, comes from the node alone).
int64_t widest(const Node& n, const Graph& g) {
  int64_t w = 1;
  for (const auto* list : {&n.inputs, &n.outputs})
    for (int v : *list) w = std::max(w, g.values[static_cast<size_t>(v)].width);
  return w;
}

// Scratch layout: two activation temporaries, one row of attention scores, then the matmuls'.
size_t temporaries_bytes(int64_t widest, int max_tokens, int n_ctx) {
  return sizeof(float) * (static_cast<size_t>(2 * widest * max_tokens) + static_cast<size_t>(n_ctx));
}

class RefKernel final : public Kernel {
 public:
  RefKernel(const Node& node, const Graph& graph, std::vector<BoundWeight> weights, std::vector<QuantParams> params,
            std::span<const int64_t> offsets)
      : node_(node), io_(node, graph, offsets), op_(op_for(node.op)), weights_(std::move(weights)), params_(std::move(params)),
        widest_(widest(node, graph)) {}
  bool has_kernel() const { return op_ != nullptr; }

  Status run(const StepContext& ctx) const override {
    // Tail nodes (final norm, classifier) run on the last token unless every token's logits are wanted.
    return (this->*op_)(ctx, io_.rows(ctx));
  }

 private:
  using Rows = NodeIo::Rows;
  // One member function per op (run_<op>), chosen when the node is prepared.
  using Op = OpFunction<RefKernel>;
  friend Op op_function<RefKernel>(OpCode);
  static Op op_for(OpCode op) { return op_function<RefKernel>(op); }
  float* in(const StepContext& ctx, const Rows& r, size_t i) const { return io_.in(ctx, r, i); }
  float* out(const StepContext& ctx, size_t i) const { return io_.out(ctx, i); }
  static float* scratch(const StepContext& ctx) { return reinterpret_cast<float*>(ctx.scratch); }
  // Past the temporaries of the fused ops and the attention scores: the matmuls' own scratch.
  std::span<uint8_t> matmul_scratch(const StepContext& ctx) const {
    return {ctx.scratch + temporaries_bytes(widest_, ctx.n_tokens, ctx.n_ctx), matmul_scratch_bytes(ctx.n_tokens)};
  }

  Status run_embed(const StepContext& ctx, const Rows&) const {
    KILN_RETURN_IF_ERROR(embed_rowmajor(ctx, *weights_[0].desc, params_[0], weights_[0].bytes, out(ctx, 0)));
    scale_embedding(node_, out(ctx, 0), ctx.n_tokens * io_.out_width(0));
    return Status::ok();
  }
  Status run_rmsnorm(const StepContext& ctx, const Rows& r) const {
    for (int t = 0; t < r.count; ++t)
      ref::rmsnorm(out(ctx, 0) + t * io_.out_width(0), in(ctx, r, 0) + t * io_.in_width(0), weight_f32(0),
                   static_cast<int>(io_.in_width(0)), node_.eps);
    return Status::ok();
  }
  Status run_head_rmsnorm(const StepContext& ctx, const Rows& r) const {
    for (int t = 0; t < r.count; ++t)
      ref::head_rmsnorm(out(ctx, 0) + t * io_.out_width(0), in(ctx, r, 0) + t * io_.in_width(0), weight_f32(0), node_.n_heads,
                        node_.head_dim, node_.eps);
    return Status::ok();
  }
  Status run_matmul(const StepContext& ctx, const Rows& r) const {
    return matmul(0, in(ctx, r, 0), out(ctx, 0), r.count, matmul_scratch(ctx));
  }
  Status run_matmul_add(const StepContext& ctx, const Rows& r) const {
    float* tmp = scratch(ctx);
    KILN_RETURN_IF_ERROR(matmul(0, in(ctx, r, 0), tmp, r.count, matmul_scratch(ctx)));
    const float* res = in(ctx, r, 1);
    float* y = out(ctx, 0);
    for (int64_t i = 0; i < r.count * io_.out_width(0); ++i) y[i] = res[i] + tmp[i];
    return Status::ok();
  }
  Status run_qkv(const StepContext& ctx, const Rows& r) const {
    return qkv(0, in(ctx, r, 0), out(ctx, 0), out(ctx, 1), out(ctx, 2), r.count, matmul_scratch(ctx));
  }
  Status run_norm_qkv(const StepContext& ctx, const Rows& r) const {
    norm_rows(in(ctx, r, 0), scratch(ctx), r.count);
    return qkv(1, scratch(ctx), out(ctx, 0), out(ctx, 1), out(ctx, 2), r.count, matmul_scratch(ctx));
  }
  Status run_gate_up(const StepContext& ctx, const Rows& r) const {
    return gate_up(0, in(ctx, r, 0), out(ctx, 0), scratch(ctx), r.count, matmul_scratch(ctx));
  }
  Status run_norm_gate_up(const StepContext& ctx, const Rows& r) const {
    norm_rows(in(ctx, r, 0), scratch(ctx), r.count);
    return gate_up(1, scratch(ctx), out(ctx, 0), scratch(ctx) + static_cast<int64_t>(r.count) * io_.in_width(0), r.count,
                   matmul_scratch(ctx));
  }
  Status run_rope(const StepContext& ctx, const Rows& r) const {
    std::memcpy(out(ctx, 0), in(ctx, r, 0), sizeof(float) * static_cast<size_t>(r.count * io_.in_width(0)));
    rope(ctx, out(ctx, 0), node_.n_heads, r.count);
    return Status::ok();
  }
  Status run_kv_store(const StepContext& ctx, const Rows& r) const {
    kv_store(ctx, in(ctx, r, 0), in(ctx, r, 1));
    return Status::ok();
  }
  Status run_rope_kv_store(const StepContext& ctx, const Rows& r) const {
    KILN_RETURN_IF_ERROR(run_rope(ctx, r));
    float* k = scratch(ctx);
    std::memcpy(k, in(ctx, r, 1), sizeof(float) * static_cast<size_t>(r.count * io_.in_width(1)));
    rope(ctx, k, node_.n_kv_heads, r.count);
    kv_store(ctx, k, in(ctx, r, 2));
    return Status::ok();
  }
  Status run_attention(const StepContext& ctx, const Rows& r) const {
    attention(ctx, in(ctx, r, 0), out(ctx, 0), scratch(ctx));
    return Status::ok();
  }
  Status run_swiglu(const StepContext& ctx, const Rows& r) const {
    ref_swiglu(out(ctx, 0), in(ctx, r, 0), in(ctx, r, 1), r.count * io_.out_width(0));
    return Status::ok();
  }
  Status run_geglu(const StepContext& ctx, const Rows& r) const {
    geglu(out(ctx, 0), in(ctx, r, 0), in(ctx, r, 1), r.count * io_.out_width(0));
    return Status::ok();
  }
  Status run_softcap(const StepContext& ctx, const Rows& r) const {
    softcap_rows(out(ctx, 0), in(ctx, r, 0), r.count * io_.out_width(0), node_.softcap);
    return Status::ok();
  }
  Status run_add(const StepContext& ctx, const Rows& r) const {
    const float *a = in(ctx, r, 0), *b = in(ctx, r, 1);
    float* y = out(ctx, 0);
    for (int64_t i = 0; i < r.count * io_.out_width(0); ++i) y[i] = a[i] + b[i];
    return Status::ok();
  }

  const float* weight_f32(size_t i) const { return reinterpret_cast<const float*>(weights_[i].bytes.data()); }
  int64_t weight_rows(size_t i) const { return weights_[i].desc->shape[0]; }
  int64_t weight_cols(size_t i) const { return weights_[i].desc->shape.size() > 1 ? weights_[i].desc->shape[1] : 1; }

  void norm_rows(const float* x, float* y, int rows) const {
    const int d = static_cast<int>(io_.in_width(0));
    for (int t = 0; t < rows; ++t) ref::rmsnorm(y + t * d, x + t * d, weight_f32(0), d, node_.eps);
  }

  // y[rows][W.rows] = x[rows][W.cols] W^T, then the bias (weight i + 1) when the op has one.
  Status matmul_into(size_t wi, const float* x, float* y, int rows, const float* bias, std::span<uint8_t> ms) const {
    const int64_t r = weight_rows(wi), c = weight_cols(wi);
    KILN_RETURN_IF_ERROR(ref_matmul(params_[wi], weights_[wi].bytes, r, c, x, rows, y, ms));
    if (bias)
      for (int t = 0; t < rows; ++t)
        for (int64_t i = 0; i < r; ++i) y[t * r + i] += bias[i];
    return Status::ok();
  }
  Status matmul(size_t wi, const float* x, float* y, int rows, std::span<uint8_t> ms) const {
    return matmul_into(wi, x, y, rows, weights_.size() > wi + 1 ? weight_f32(wi + 1) : nullptr, ms);
  }
  // q, k, v from weights first..first+2, biases after them when present.
  Status qkv(size_t first, const float* x, float* q, float* k, float* v, int rows, std::span<uint8_t> ms) const {
    const bool bias = weights_.size() >= first + 6;
    KILN_RETURN_IF_ERROR(matmul_into(first, x, q, rows, bias ? weight_f32(first + 3) : nullptr, ms));
    KILN_RETURN_IF_ERROR(matmul_into(first + 1, x, k, rows, bias ? weight_f32(first + 4) : nullptr, ms));
    return matmul_into(first + 2, x, v, rows, bias ? weight_f32(first + 5) : nullptr, ms);
  }
  Status gate_up(size_t first, const float* x, float* out, float* tmp, int rows, std::span<uint8_t> ms) const {
    KILN_RETURN_IF_ERROR(matmul_into(first, x, out, rows, nullptr, ms));
    KILN_RETURN_IF_ERROR(matmul_into(first + 1, x, tmp, rows, nullptr, ms));
    ref_swiglu(out, out, tmp, rows * io_.out_width(0));
    return Status::ok();
  }
  static void ref_swiglu(float* y, const float* g, const float* u, int64_t n) {
    ref::swiglu(y, g, u, static_cast<int>(n));
  }

  void rope(const StepContext& ctx, float* x, int n_heads, int rows) const {
    const int width = n_heads * node_.head_dim;
    const int first_row = ctx.n_tokens - rows;
    for (int t = 0; t < rows; ++t)
      ref::rope(x + t * width, n_heads, node_.head_dim, ctx.first_pos + first_row + t, ctx.model->freqs(node_.layer).data(),
                ctx.model->rope_half_split, ctx.model->rotary_dim);
  }

  void kv_store(const StepContext& ctx, const float* k, const float* v) const {
    const int kv_dim = node_.n_kv_heads * node_.head_dim;
    for (int t = 0; t < ctx.n_tokens; ++t) store_kv_row(ctx, node_.layer, kv_dim, t, k + t * kv_dim, v + t * kv_dim);
  }

  void attention(const StepContext& ctx, const float* q, float* o, float* scores) const {
    const int hd = node_.head_dim, kv_dim = node_.n_kv_heads * hd, q_dim = node_.n_heads * hd;
    const int group = node_.n_heads / node_.n_kv_heads;
    const float scale = attention_scale(node_);
    const size_t layer_off = static_cast<size_t>(node_.layer) * static_cast<size_t>(ctx.n_ctx) * static_cast<size_t>(kv_dim);
    const int window = ctx.model->window(node_.layer);
    auto attend_all = [&](const auto* kc, const auto* vc) {
      for (int t = 0; t < ctx.n_tokens; ++t) {
        const int pos = ctx.first_pos + t;
        const int first = (window > 0 && pos >= window) ? pos - window + 1 : 0;
        for (int h = 0; h < node_.n_heads; ++h) {
          const int kvh = h / group;
          ref::attend(o + t * q_dim + h * hd, q + t * q_dim + h * hd, kc + kvh * hd, vc + kvh * hd, first, pos, kv_dim,
                      hd, scale, scores, node_.softcap);
        }
      }
    };
    if (ctx.kv_dtype == DType::kF16)
      attend_all(static_cast<const uint16_t*>(ctx.key_cache) + layer_off, static_cast<const uint16_t*>(ctx.value_cache) + layer_off);
    else
      attend_all(static_cast<const float*>(ctx.key_cache) + layer_off, static_cast<const float*>(ctx.value_cache) + layer_off);
  }

  size_t matmul_scratch_bytes(int n_tokens) const {
    size_t b = 0;
    for (size_t i = 0; i < weights_.size(); ++i)
      b = std::max(b, ref_matmul_scratch_bytes(params_[i], weight_cols(i), n_tokens));
    return b + alignof(float);
  }

  Node node_;
  NodeIo io_;
  Op op_;
  std::vector<BoundWeight> weights_;
  std::vector<QuantParams> params_;
  int64_t widest_ = 0;
};

}  // namespace

Result<std::unique_ptr<Kernel>> RefBackend::prepare(const Node& node, const Graph& graph,
                                                    std::span<const BoundWeight> weights,
                                                    std::span<const int64_t> value_offsets, int) const {
  std::vector<QuantParams> params;
  for (const BoundWeight& w : weights) {
    KILN_ASSIGN_OR_RETURN(QuantParams p, weight_params(*w.desc));
    params.push_back(p);
  }
  // The norms read their weight as f32 values, one per element of the (head) row.
  if ((node.op == OpCode::kRmsNorm || node.op == OpCode::kHeadRmsNorm) && !weights.empty()) {
    const WeightDesc& d = *weights[0].desc;
    if (params[0].scheme != Scheme::kF32 || weights[0].bytes.size() != sizeof(float) * static_cast<size_t>(d.shape.back()))
      return corrupt("ref back end: norm weight '" + d.name + "' must be f32 [" + std::to_string(d.shape.back()) + "]");
  }
  auto kernel = std::make_unique<RefKernel>(node, graph, std::vector<BoundWeight>(weights.begin(), weights.end()), std::move(params),
                                            value_offsets);
  if (!kernel->has_kernel()) return unsupported("ref back end: op " + std::string(op_name(node.op)) + " has no kernel");
  return std::unique_ptr<Kernel>(std::move(kernel));
}

size_t RefBackend::scratch_bytes(const Graph& graph, int max_tokens, int n_ctx) const {
  // The matmuls need at most a dequantized row, or the int8 activations and their scales.
  const int64_t w = widest(graph);
  const size_t matmul = static_cast<size_t>(w * max_tokens) + 4 * static_cast<size_t>(max_tokens) +
                        sizeof(float) * static_cast<size_t>(w) + 2 * alignof(float);
  return temporaries_bytes(w, max_tokens, n_ctx) + matmul;
}

}  // namespace kiln
