#include "backends/ref/ref_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/ref/kernels.h"
#include "quant/ref_matmul.h"
#include "quant/weight_params.h"

namespace kiln {

namespace {

// Widest activation of the graph: bounds every temporary row a fused kernel keeps in scratch.
int64_t widest(const Graph& g) {
  int64_t w = 1;
  for (const Value& v : g.values) w = std::max(w, v.width);
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
      : node_(node), weights_(std::move(weights)), params_(std::move(params)), widest_(widest(graph)) {
    const std::vector<bool> tail = tail_values(graph);
    for (int v : node.inputs) {
      in_.push_back(offsets[static_cast<size_t>(v)]);
      in_width_.push_back(graph.values[static_cast<size_t>(v)].width);
      in_tail_.push_back(tail[static_cast<size_t>(v)]);
    }
    for (int v : node.outputs) {
      out_.push_back(offsets[static_cast<size_t>(v)]);
      out_width_.push_back(graph.values[static_cast<size_t>(v)].width);
    }
  }

  Status run(const StepContext& ctx) const override {
    // Tail nodes (final norm, classifier) run on the last token unless every token's logits are wanted.
    // A tail node on the last token alone reads that row of the body's values; its own values
    // (planned for MemoryPlan::logit_rows rows) start at row 0.
    const int body_row = (node_.tail && !ctx.all_logits) ? ctx.n_tokens - 1 : 0;
    const int rows = ctx.n_tokens - body_row;
    auto in = [&](size_t i) { return reinterpret_cast<float*>(ctx.arena + in_[i]) + (in_tail_[i] ? 0 : body_row) * in_width_[i]; };
    auto out = [&](size_t i) { return reinterpret_cast<float*>(ctx.arena + out_[i]); };
    float* scratch = reinterpret_cast<float*>(ctx.scratch);
    // Past the temporaries of the fused ops and the attention scores: the matmuls' own scratch.
    const std::span<uint8_t> ms = {ctx.scratch + temporaries_bytes(widest_, ctx.n_tokens, ctx.n_ctx),
                                   matmul_scratch_bytes(ctx.n_tokens)};
    switch (node_.op) {
      case OpCode::kEmbed: return embed(ctx, out(0));
      case OpCode::kRmsNorm:
        for (int t = 0; t < rows; ++t)
          ref::rmsnorm(out(0) + t * out_width_[0], in(0) + t * in_width_[0], weight_f32(0), static_cast<int>(in_width_[0]),
                       node_.eps);
        return Status::ok();
      case OpCode::kMatMul: return matmul(0, in(0), out(0), rows, ms);
      case OpCode::kHeadRmsNorm:
        for (int t = 0; t < rows; ++t)
          ref::head_rmsnorm(out(0) + t * out_width_[0], in(0) + t * in_width_[0], weight_f32(0), node_.n_heads,
                            node_.head_dim, node_.eps);
        return Status::ok();
      case OpCode::kRope:
        std::memcpy(out(0), in(0), sizeof(float) * static_cast<size_t>(rows * in_width_[0]));
        rope(ctx, out(0), node_.n_heads, rows);
        return Status::ok();
      case OpCode::kKvStore: kv_store(ctx, in(0), in(1)); return Status::ok();
      case OpCode::kAttention: attention(ctx, in(0), out(0), scratch); return Status::ok();
      case OpCode::kSwiGLU: ref_swiglu(out(0), in(0), in(1), rows * out_width_[0]); return Status::ok();
      case OpCode::kAdd:
        for (int64_t i = 0; i < rows * out_width_[0]; ++i) out(0)[i] = in(0)[i] + in(1)[i];
        return Status::ok();
      case OpCode::kMatMulQKV: return qkv(0, in(0), out(0), out(1), out(2), rows, ms);
      case OpCode::kGateUpSwiGLU: return gate_up(0, in(0), out(0), scratch, rows, ms);
      case OpCode::kRopeKvStore: {
        std::memcpy(out(0), in(0), sizeof(float) * static_cast<size_t>(rows * in_width_[0]));
        rope(ctx, out(0), node_.n_heads, rows);
        float* k = scratch;
        std::memcpy(k, in(1), sizeof(float) * static_cast<size_t>(rows * in_width_[1]));
        rope(ctx, k, node_.n_kv_heads, rows);
        kv_store(ctx, k, in(2));
        return Status::ok();
      }
      case OpCode::kMatMulAdd: {
        KILN_RETURN_IF_ERROR(matmul(0, in(0), scratch, rows, ms));
        for (int64_t i = 0; i < rows * out_width_[0]; ++i) out(0)[i] = in(1)[i] + scratch[i];
        return Status::ok();
      }
      case OpCode::kRmsNormMatMulQKV:
        norm_rows(in(0), scratch, rows);
        return qkv(1, scratch, out(0), out(1), out(2), rows, ms);
      case OpCode::kRmsNormGateUpSwiGLU:
        norm_rows(in(0), scratch, rows);
        return gate_up(1, scratch, out(0), scratch + static_cast<int64_t>(rows) * in_width_[0], rows, ms);
    }
    return internal_error();
  }

 private:
  static Status internal_error() { return {StatusCode::kInternal, "ref backend: unknown op"}; }

  const float* weight_f32(size_t i) const { return reinterpret_cast<const float*>(weights_[i].bytes.data()); }
  int64_t weight_rows(size_t i) const { return weights_[i].desc->shape[0]; }
  int64_t weight_cols(size_t i) const { return weights_[i].desc->shape.size() > 1 ? weights_[i].desc->shape[1] : 1; }

  void norm_rows(const float* x, float* y, int rows) const {
    const int d = static_cast<int>(in_width_[0]);
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
    ref_swiglu(out, out, tmp, rows * out_width_[0]);
    return Status::ok();
  }
  static void ref_swiglu(float* y, const float* g, const float* u, int64_t n) {
    ref::swiglu(y, g, u, static_cast<int>(n));
  }

  Status embed(const StepContext& ctx, float* y) const {
    const WeightDesc& w = *weights_[0].desc;
    const int64_t vocab = w.shape[0], d = w.shape[1];
    auto row_bytes = quantized_row_size(params_[0], d);
    if (!row_bytes) return invalid_argument("embed: bad weight layout");
    for (int t = 0; t < ctx.n_tokens; ++t) {
      const int32_t id = ctx.tokens[t];
      if (id < 0 || id >= vocab) return invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary");
      auto row = weights_[0].bytes.subspan(static_cast<size_t>(id) * *row_bytes, *row_bytes);
      KILN_RETURN_IF_ERROR(dequantize_row(params_[0], row, d, y + t * d));
    }
    return Status::ok();
  }

  void rope(const StepContext& ctx, float* x, int n_heads, int rows) const {
    const int width = n_heads * node_.head_dim;
    const int first_row = ctx.n_tokens - rows;
    for (int t = 0; t < rows; ++t)
      ref::rope(x + t * width, n_heads, node_.head_dim, ctx.first_pos + first_row + t, ctx.model->inv_freq.data(),
                ctx.model->rope_half_split);
  }

  void kv_store(const StepContext& ctx, const float* k, const float* v) const {
    const int kv_dim = node_.n_kv_heads * node_.head_dim;
    const size_t layer_off = static_cast<size_t>(node_.layer) * static_cast<size_t>(ctx.n_ctx) * static_cast<size_t>(kv_dim);
    for (int t = 0; t < ctx.n_tokens; ++t) {
      const size_t at = layer_off + static_cast<size_t>(ctx.first_pos + t) * static_cast<size_t>(kv_dim);
      if (ctx.kv_dtype == DType::kF16) {
        auto* kc = static_cast<uint16_t*>(ctx.key_cache) + at;
        auto* vc = static_cast<uint16_t*>(ctx.value_cache) + at;
        for (int i = 0; i < kv_dim; ++i) {
          kc[i] = f32_to_f16(k[t * kv_dim + i]);
          vc[i] = f32_to_f16(v[t * kv_dim + i]);
        }
      } else {
        std::memcpy(static_cast<float*>(ctx.key_cache) + at, k + t * kv_dim, sizeof(float) * static_cast<size_t>(kv_dim));
        std::memcpy(static_cast<float*>(ctx.value_cache) + at, v + t * kv_dim, sizeof(float) * static_cast<size_t>(kv_dim));
      }
    }
  }

  void attention(const StepContext& ctx, const float* q, float* o, float* scores) const {
    const int hd = node_.head_dim, kv_dim = node_.n_kv_heads * hd, q_dim = node_.n_heads * hd;
    const int group = node_.n_heads / node_.n_kv_heads;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const size_t layer_off = static_cast<size_t>(node_.layer) * static_cast<size_t>(ctx.n_ctx) * static_cast<size_t>(kv_dim);
    const int window = ctx.model->sliding_window;
    auto attend_all = [&](const auto* kc, const auto* vc) {
      for (int t = 0; t < ctx.n_tokens; ++t) {
        const int pos = ctx.first_pos + t;
        const int first = (window > 0 && pos >= window) ? pos - window + 1 : 0;
        for (int h = 0; h < node_.n_heads; ++h) {
          const int kvh = h / group;
          ref::attend(o + t * q_dim + h * hd, q + t * q_dim + h * hd, kc + kvh * hd, vc + kvh * hd, first, pos, kv_dim,
                      hd, scale, scores);
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
  std::vector<BoundWeight> weights_;
  std::vector<QuantParams> params_;
  int64_t widest_ = 0;
  std::vector<int64_t> in_, out_, in_width_, out_width_;
  std::vector<bool> in_tail_;  // the input is a tail value (rows from 0)
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
  return std::unique_ptr<Kernel>(new RefKernel(node, graph, {weights.begin(), weights.end()}, std::move(params), value_offsets));
}

size_t RefBackend::scratch_bytes(const Graph& graph, int max_tokens, int n_ctx) const {
  // The matmuls need at most a dequantized row, or the int8 activations and their scales.
  const int64_t w = widest(graph);
  const size_t matmul = static_cast<size_t>(w * max_tokens) + 4 * static_cast<size_t>(max_tokens) +
                        sizeof(float) * static_cast<size_t>(w) + 2 * alignof(float);
  return temporaries_bytes(w, max_tokens, n_ctx) + matmul;
}

}  // namespace kiln
