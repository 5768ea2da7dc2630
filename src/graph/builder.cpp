#include "graph/builder.h"

#include <cmath>

namespace kiln {

std::vector<float> rope_inv_freq(const ModelConfig& c, std::span<const float> rope_freqs, bool long_factors) {
  const int dim = c.rope_dim(), half = dim / 2;
  std::vector<float> f(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i)
    f[static_cast<size_t>(i)] = 1.0f / std::pow(c.rope_theta, static_cast<float>(2 * i) / static_cast<float>(dim));
  const RopeScaling& s = c.rope_scaling;
  if (s.type == RopeScaling::Type::kLinear) {
    for (float& x : f) x /= s.factor;
  } else if (s.type == RopeScaling::Type::kLlama3) {
    // Llama 3.1: long wavelengths are slowed by `factor`, short ones kept, the band between blended.
    const float pi = 3.14159265358979f;
    const float orig = static_cast<float>(s.original_max_position);
    const float low_wavelen = orig / s.low_freq_factor;
    const float high_wavelen = orig / s.high_freq_factor;
    for (float& x : f) {
      const float wavelen = 2.0f * pi / x;
      if (wavelen < high_wavelen) continue;
      if (wavelen > low_wavelen) {
        x /= s.factor;
      } else {
        const float smooth = (orig / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        x = (1.0f - smooth) * x / s.factor + smooth * x;
      }
    }
  }
  if (s.type == RopeScaling::Type::kLongRope) {
    const std::vector<float>& by = long_factors ? s.long_factor : s.short_factor;
    for (size_t i = 0; i < f.size() && i < by.size(); ++i) f[i] /= by[i];
  }
  for (size_t i = 0; i < f.size() && i < rope_freqs.size(); ++i) f[i] /= rope_freqs[i];
  return f;
}

std::vector<float> rope_inv_freq_long(const ModelConfig& c, std::span<const float> rope_freqs) {
  if (!c.rope_scaling.long_factors_for(c.max_seq_len)) return {};
  return rope_inv_freq(c, rope_freqs, true);
}

float attention_scale(const ModelConfig& c) {
  const float base = c.query_pre_attn_scalar > 0.0f ? 1.0f / std::sqrt(c.query_pre_attn_scalar)
                                                    : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const float af = c.rope_scaling.type == RopeScaling::Type::kLongRope ? c.rope_scaling.attention_factor : 1.0f;
  return base * af * af;
}

std::vector<float> rope_inv_freq_local(const ModelConfig& c) {
  if (!(c.rope_theta_local > 0.0f)) return {};
  ModelConfig local = c;
  local.rope_theta = c.rope_theta_local;
  local.rope_scaling = RopeScaling{};
  return rope_inv_freq(local);
}

namespace {

struct Builder {
  Graph g;
  int value(const std::string& name, int64_t width) { return g.add_value(name, width); }
  int weight(const std::string& name, std::vector<int64_t> shape) {
    WeightDesc w;
    w.name = name;
    w.shape = std::move(shape);
    return g.add_weight(std::move(w));
  }
  Node& node(OpCode op, std::vector<int> in, std::vector<int> out, std::vector<int> weights, int layer) {
    Node n;
    n.op = op;
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    n.weights = std::move(weights);
    n.layer = layer;
    g.nodes.push_back(std::move(n));
    return g.nodes.back();
  }
};

}  // namespace

Result<Graph> build_decoder_graph(const ModelConfig& c) {
  Builder b;
  const int64_t d = c.dim, qd = c.q_dim(), kvd = c.kv_dim(), h = c.hidden_dim, v = c.vocab_size;
  b.g.tokens_input = b.value("tokens", 1);
  const int embd = b.weight("token_embd.weight", {v, d});
  int x = b.value("x.embed", d);
  // Gemma scales the embedding by sqrt(dim), MiniCPM by scale_emb (a tied classifier reads the
  // table unscaled).
  b.node(OpCode::kEmbed, {b.g.tokens_input}, {x}, {embd}, -1).scale = c.embedding_multiplier();
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    auto W = [&](const std::string& n, std::vector<int64_t> s) { return b.weight(p + n, std::move(s)); };
    auto V = [&](const std::string& n, int64_t w) { return b.value(p + n, w); };

    const int hn = V("attn_in", d);
    b.node(OpCode::kRmsNorm, {x}, {hn}, {W("attn_norm.weight", {d})}, l).eps = c.rms_eps;
    const int q = V("q", qd), k = V("k", kvd), vv = V("v", kvd);
    std::vector<int> wq = {W("attn_q.weight", {qd, d})}, wk = {W("attn_k.weight", {kvd, d})},
                     wv = {W("attn_v.weight", {kvd, d})};
    if (c.qkv_bias) {
      wq.push_back(W("attn_q.bias", {qd}));
      wk.push_back(W("attn_k.bias", {kvd}));
      wv.push_back(W("attn_v.bias", {kvd}));
    }
    b.node(OpCode::kMatMul, {hn}, {q}, wq, l);
    b.node(OpCode::kMatMul, {hn}, {k}, wk, l);
    b.node(OpCode::kMatMul, {hn}, {vv}, wv, l);
    int qn = q, kn = k;
    if (c.qk_norm) {
      // Qwen3: every head of q and k RMS-normalised by a weight of head_dim, before RoPE.
      auto head_norm = [&](int in, const std::string& name, const std::string& weight, int heads, int64_t width) {
        const int out = V(name, width);
        Node& n = b.node(OpCode::kHeadRmsNorm, {in}, {out}, {W(weight, {c.head_dim})}, l);
        n.n_heads = heads;
        n.head_dim = c.head_dim;
        n.eps = c.rms_eps;
        return out;
      };
      qn = head_norm(q, "q_norm", "attn_q_norm.weight", c.n_heads, qd);
      kn = head_norm(k, "k_norm", "attn_k_norm.weight", c.n_kv_heads, kvd);
    }
    int qr = qn, kr = kn;  // a NoPE layer (SmolLM3) attends with q and k as projected
    if (c.layer_has_rope(l)) {
      qr = V("q_rope", qd);
      kr = V("k_rope", kvd);
      Node& rq = b.node(OpCode::kRope, {qn}, {qr}, {}, l);
      rq.n_heads = c.n_heads;
      rq.head_dim = c.head_dim;
      Node& rk = b.node(OpCode::kRope, {kn}, {kr}, {}, l);
      rk.n_heads = c.n_kv_heads;
      rk.head_dim = c.head_dim;
    }
    Node& st = b.node(OpCode::kKvStore, {kr, vv}, {}, {}, l);
    st.n_kv_heads = c.n_kv_heads;
    st.head_dim = c.head_dim;
    const int o = V("attn_out", qd);
    Node& at = b.node(OpCode::kAttention, {qr}, {o}, {}, l);
    at.n_heads = c.n_heads;
    at.n_kv_heads = c.n_kv_heads;
    at.head_dim = c.head_dim;
    if (c.query_pre_attn_scalar > 0.0f || c.rope_scaling.type == RopeScaling::Type::kLongRope) at.scale = attention_scale(c);
    at.softcap = c.attn_softcap;
    // Gemma normalises each block's output before the residual add.
    auto post_norm = [&](int in, const std::string& name, const std::string& weight) {
      if (!c.gemma_block()) return in;
      const int out = V(name, d);
      b.node(OpCode::kRmsNorm, {in}, {out}, {W(weight, {d})}, l).eps = c.rms_eps;
      return out;
    };
    const int a = V("attn_proj", d);
    b.node(OpCode::kMatMul, {o}, {a}, {W("attn_output.weight", {d, qd})}, l);
    const int a_out = post_norm(a, "attn_post", "post_attention_norm.weight");
    const int x2 = V("x.attn", d);
    b.node(OpCode::kAdd, {x, a_out}, {x2}, {}, l);

    const int fn = V("ffn_in", d);
    b.node(OpCode::kRmsNorm, {x2}, {fn}, {W("ffn_norm.weight", {d})}, l).eps = c.rms_eps;
    const int gate = V("gate", h), up = V("up", h), act = V("ffn_act", h);
    b.node(OpCode::kMatMul, {fn}, {gate}, {W("ffn_gate.weight", {h, d})}, l);
    b.node(OpCode::kMatMul, {fn}, {up}, {W("ffn_up.weight", {h, d})}, l);
    b.node(c.gemma_block() ? OpCode::kGeGLU : OpCode::kSwiGLU, {gate, up}, {act}, {}, l);
    const int down = V("ffn_down", d);
    b.node(OpCode::kMatMul, {act}, {down}, {W("ffn_down.weight", {d, h})}, l);
    const int f_out = post_norm(down, "ffn_post", "post_ffw_norm.weight");
    const int x3 = V("x.ffn", d);
    b.node(OpCode::kAdd, {x2, f_out}, {x3}, {}, l);
    x = x3;
  }
  const int xn = b.value("out_norm", d);
  Node& on = b.node(OpCode::kRmsNorm, {x}, {xn}, {b.weight("output_norm.weight", {d})}, -1);
  on.eps = c.rms_eps;
  on.tail = true;
  const int cls = c.tie_embeddings ? embd : b.weight("output.weight", {v, d});
  if (c.final_softcap > 0.0f) {  // Gemma 2 caps the classifier's output
    const int raw = b.value("logits.raw", v);
    b.node(OpCode::kMatMul, {xn}, {raw}, {cls}, -1).tail = true;
    b.g.logits_output = b.value("logits", v);
    Node& sc = b.node(OpCode::kSoftcap, {raw}, {b.g.logits_output}, {}, -1);
    sc.softcap = c.final_softcap;
    sc.tail = true;
  } else {
    b.g.logits_output = b.value("logits", v);
    b.node(OpCode::kMatMul, {xn}, {b.g.logits_output}, {cls}, -1).tail = true;
  }
  KILN_RETURN_IF_ERROR(verify_graph(b.g));
  return std::move(b.g);
}

}  // namespace kiln
