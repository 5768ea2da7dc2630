#include "backends/cpu/cpu_backend.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>

#include "backends/api/activation_math.h"
#include "backends/api/node_io.h"
#include "backends/cpu/activations.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/layouts.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"

namespace kiln {

using cpu::KernelTable;
using cpu::kTileRows;

namespace {

bool is_matrix(const Node& n, const WeightDesc& w) { return n.op != OpCode::kEmbed && w.shape.size() == 2; }

// Where an op's matrices are among its weights: [first, first + count).
struct MatrixSpan {
  size_t first = 0, count = 0;
};
MatrixSpan matrix_span(OpCode op) {
  switch (op) {
    case OpCode::kMatMul:
    case OpCode::kMatMulAdd: return {0, 1};
    case OpCode::kMatMulQKV: return {0, 3};
    case OpCode::kRmsNormMatMulQKV: return {1, 3};
    case OpCode::kGateUpSwiGLU: return {0, 2};
    case OpCode::kRmsNormGateUpSwiGLU: return {1, 2};
    default: return {};
  }
}

// The widths one node's scratch regions serve: the rows a fused norm writes, the up projection
// of a fused gate-up (or the keys a rope-and-store rotates before an f16 cache rounds them), the
// rope angles' head_dim, and per preparation slot the columns of the matrices prepared there
// (slots 1 and 2 only for a matrix of a fused op that cannot share an earlier one's preparation:
// another scheme or width). From the node alone: the scratch of a graph is planned in one pass.
struct ScratchWidths {
  int64_t norm = 1, up = 1, head_dim = 2;
  int64_t prep[3] = {1, 1, 1};
};
ScratchWidths scratch_widths(const Node& n, const Graph& g) {
  ScratchWidths w;
  auto params = [&](int wi) -> std::optional<QuantParams> {
    auto p = weight_params(g.weights[static_cast<size_t>(wi)]);
    return p ? std::optional<QuantParams>(*p) : std::nullopt;
  };
  w.head_dim = std::max<int64_t>(w.head_dim, n.head_dim);
  if (n.op == OpCode::kRmsNormMatMulQKV || n.op == OpCode::kRmsNormGateUpSwiGLU)
    w.norm = std::max(w.norm, g.values[static_cast<size_t>(n.inputs[0])].width);
  if (n.op == OpCode::kRmsNormGateUpSwiGLU || n.op == OpCode::kGateUpSwiGLU)
    w.up = std::max(w.up, g.values[static_cast<size_t>(n.outputs[0])].width);
  if (n.op == OpCode::kRopeKvStore)  // its keys, rotated before an f16 cache rounds them
    w.up = std::max(w.up, g.values[static_cast<size_t>(n.inputs[1])].width);
  const MatrixSpan ms = matrix_span(n.op);
  if (n.weights.size() < ms.first + ms.count) return w;
  for (size_t i = 0; i < ms.count; ++i) {
    const int wi = n.weights[ms.first + i];
    const WeightDesc& d = g.weights[static_cast<size_t>(wi)];
    if (d.shape.size() != 2) continue;
    bool shared = false;
    for (size_t j = 0; j < i && !shared; ++j) {
      const int wj = n.weights[ms.first + j];
      const auto pi = params(wi), pj = params(wj);
      const WeightDesc& dj = g.weights[static_cast<size_t>(wj)];
      shared = pi && pj && *pi == *pj && dj.shape.size() == 2 && dj.shape[1] == d.shape[1];  // as same_preparation
    }
    if (!shared) w.prep[i] = std::max(w.prep[i], d.shape[1]);
  }
  return w;
}

// The scratch each call of a node's matmuls needs to itself (cpu::matmul_work_bytes), for up to
// max_tokens tokens on table t: the most of its matrices' (they run one after another).
int64_t matmul_work_bytes(const Node& n, const Graph& g, const KernelTable& t, int max_tokens) {
  const MatrixSpan ms = matrix_span(n.op);
  int64_t most = 0;
  for (size_t i = 0; i < ms.count && ms.first + i < n.weights.size(); ++i) {
    const WeightDesc& d = g.weights[static_cast<size_t>(n.weights[ms.first + i])];
    auto p = weight_params(d);
    if (p && d.shape.size() == 2) most = std::max(most, cpu::matmul_work_bytes(t, *p, d.shape[1], max_tokens));
  }
  return most;
}

size_t align64(size_t n) { return (n + 63) / 64 * 64; }

// One node's part of the per-session scratch, carved into 64-byte aligned regions for up to T
// tokens: the normalised rows, the up projection (or the rotated keys an f16 cache rounds), the
// rope angles, three activation preparations (one per matrix of a fused op), each as wide as
// what uses it, and last a slice per thread for its matmul calls' own work. Every node's regions
// start at the scratch's base: a node uses them only while it runs.
struct ScratchLayout {
  cpu::ActivationScratch prep_layout[3];
  size_t norm = 0, tmp = 0, rope = 0, prep[3] = {}, work = 0, work_stride = 0;
  ScratchLayout(const ScratchWidths& w, int t, int64_t work_bytes)
      : prep_layout{cpu::ActivationScratch(w.prep[0], t), cpu::ActivationScratch(w.prep[1], t),
                    cpu::ActivationScratch(w.prep[2], t)} {
    const auto T = static_cast<size_t>(t);
    size_t at = 0;
    norm = at;
    at = align64(at + 4 * T * static_cast<size_t>(w.norm));
    tmp = at;
    at = align64(at + 4 * T * static_cast<size_t>(w.up));
    rope = at;
    at = align64(at + 4 * T * static_cast<size_t>(w.head_dim));
    for (int i = 0; i < 3; ++i) {
      prep[i] = at;
      at += prep_layout[i].bytes;
    }
    work = align64(at);
    work_stride = align64(static_cast<size_t>(work_bytes));
  }
  ScratchLayout(const Node& n, const Graph& g, const KernelTable& k, int t)
      : ScratchLayout(scratch_widths(n, g), t, matmul_work_bytes(n, g, k, t)) {}
  // The bytes the node needs with `threads` threads.
  size_t bytes(int threads) const { return work + static_cast<size_t>(threads) * work_stride + 64; }
};

// Runs f(begin, end) over [0, n) on the pool, or inline without one.
template <typename F>
void parallel(ThreadPool* pool, int64_t n, F&& f) {
  if (pool) pool->parallel_for(n, [&f](int64_t b, int64_t e, int) { f(b, e); });
  else if (n > 0) f(int64_t{0}, n);
}

// Runs f(begin, end, thread) over the tiles [0, n) of one or more matrices, in chunks that the
// threads take from each other at the end (parallel_chunks), or inline (thread 0) without a pool. A chunk is a
// multiple of 4 tiles (prefill: of 12), which every kernel's tile blocking divides (the prefill
// ones: 2, 3 or 4). Decoding, 4 tiles (~70 KiB of a 2048-wide W4A16 matrix, a few
// microseconds): the threads end within one of them; prefill takes an eighth of a thread's
// share, each tile being many tokens' work.
template <typename F>
void parallel_tiles(ThreadPool* pool, int64_t n, int tokens, F&& f) {
  if (pool == nullptr) {
    if (n > 0) f(int64_t{0}, n, 0);
    return;
  }
  const int64_t grain = tokens == 1 ? 8 : std::max<int64_t>(12, (n / (8 * pool->size()) + 11) / 12 * 12);
  pool->parallel_chunks(n, grain, [&f](int64_t b, int64_t e, int t) { f(b, e, t); });
}

struct Matrix {
  cpu::PackedMatrix m;
  const float* bias = nullptr;
  cpu::MatmulFn fn = nullptr;
  // The activation format its kernel reads for a step of n tokens, [0, max_tokens]: chosen once,
  // when the node is prepared.
  std::vector<cpu::ActivationFormat> formats;
  int64_t tiles() const { return (m.rows + kTileRows - 1) / kTileRows; }
};

class CpuKernel final : public Kernel {
 public:
  CpuKernel(const Node& node, const Graph& graph, const KernelTable& k, std::span<const int64_t> offsets, int max_tokens,
            bool decode_one_stream)
      : node_(node), io_(node, graph, offsets), k_(k), op_(op_for(node.op)), scratch_(node, graph, k, max_tokens),
        max_tokens_(max_tokens), decode_one_stream_(decode_one_stream) {}

  Status bind(std::span<const BoundWeight> weights) {
    if (op_ == nullptr) return unsupported("cpu back end: op " + std::string(op_name(node_.op)) + " has no kernel");
    weights_.assign(weights.begin(), weights.end());
    for (const BoundWeight& b : weights) {
      KILN_ASSIGN_OR_RETURN(QuantParams p, weight_params(*b.desc));
      params_.push_back(p);
    }
    // The matrices of the op, in order, and the biases that go with them.
    const auto [first, n_mat] = matrix_span(node_.op);
    const bool biased = weights.size() >= first + 2 * n_mat && n_mat > 0;
    for (size_t i = 0; i < n_mat; ++i) {
      const BoundWeight& b = weights[first + i];
      const WeightDesc& d = *b.desc;
      if (d.layout != cpu::matmul_layout(params_[first + i].scheme))
        return unsupported("cpu back end: weight '" + d.name + "' is stored in layout '" + d.layout +
                           "', which its kernels do not read; recompile the model");
      // Matrix i maps the node's input to its output i (gate and up both to the one output): the
      // scratch regions are sized by these widths.
      const int64_t out_w = io_.out_width(std::min(i, io_.n_out() - 1));
      if (d.shape.size() != 2 || d.shape[1] != io_.in_width(0) || d.shape[0] != out_w)
        return corrupt("cpu back end: weight '" + d.name + "' does not map width " + std::to_string(io_.in_width(0)) + " to " +
                       std::to_string(out_w));
      Matrix m;
      m.m.data = b.bytes.data();
      m.m.rows = d.shape[0];
      m.m.cols = d.shape[1];
      m.m.params = params_[first + i];
      auto tb = cpu::tile_bytes(m.m.params, d.layout, m.m.cols);
      auto total = cpu::packed_bytes(m.m.params, d.layout, m.m.rows, m.m.cols);
      if (!tb || !total || *total != b.bytes.size())
        return corrupt("cpu back end: weight '" + d.name + "' has the wrong size for layout '" + d.layout + "'");
      m.m.tile_bytes = static_cast<int64_t>(*tb);
      m.m.decode_one_stream = decode_one_stream_;
      m.fn = k_.matmul[static_cast<int>(m.m.params.scheme)];
      for (int n = 0; n <= max_tokens_; ++n)
        m.formats.push_back(k_.activation_format(m.m.params, std::max(n, 1), m.m.cols));
      if (biased) {
        const BoundWeight& bb = weights[first + n_mat + i];
        if (bb.desc->scheme != Scheme::kF32 || bb.desc->layout != kRowMajorLayout || bb.desc->shape.size() != 1 ||
            bb.desc->shape[0] != m.m.rows)
          return corrupt("cpu back end: bias '" + bb.desc->name + "' must be f32 [" + std::to_string(m.m.rows) + "]");
        m.bias = reinterpret_cast<const float*>(bb.bytes.data());
      }
      mats_.push_back(m);
    }
    for (size_t i = 0; i < weights.size(); ++i) {
      const WeightDesc& d = *weights[i].desc;
      const bool matrix = i >= first && i < first + n_mat;
      if (node_.op == OpCode::kEmbed) {
        if (d.layout != kRowMajorLayout && d.layout != cpu::matmul_layout(params_[i].scheme))
          return unsupported("cpu back end: embedding '" + d.name + "' is stored in unknown layout '" + d.layout + "'");
      } else if (!matrix && d.layout != kRowMajorLayout) {
        return unsupported("cpu back end: weight '" + d.name + "' is stored in unknown layout '" + d.layout + "'");
      }
      if (!matrix && node_.op != OpCode::kEmbed && d.scheme != Scheme::kF32)
        return corrupt("cpu back end: weight '" + d.name + "' must be f32");
    }
    if (node_.op == OpCode::kHeadRmsNorm &&
        (weights.size() != 1 || node_.head_dim < 1 || weights[0].bytes.size() != sizeof(float) * static_cast<size_t>(node_.head_dim) ||
         io_.in_width(0) != static_cast<int64_t>(node_.n_heads) * node_.head_dim))
      return corrupt("cpu back end: head norm '" + (weights.empty() ? std::string("?") : weights[0].desc->name) +
                     "' must be f32 [head_dim] over n_heads * head_dim values");
    return Status::ok();
  }

  Status run(const StepContext& ctx) const override {
    const int threads = ctx.pool ? ctx.pool->size() : 1;
    if (ctx.n_tokens < 1 || ctx.n_tokens > max_tokens_)
      return invalid_argument("cpu back end: a step of " + std::to_string(ctx.n_tokens) + " tokens, the node was prepared for 1 to " +
                              std::to_string(max_tokens_));
    if (scratch_.work_stride > 0 && ctx.scratch_size < scratch_.bytes(threads))
      return {StatusCode::kInternal, "cpu back end: the session's scratch of " + std::to_string(ctx.scratch_size) +
                                         " bytes was not planned for this node on " + std::to_string(threads) + " threads (" +
                                         std::to_string(scratch_.bytes(threads)) + " bytes)"};
    return (this->*op_)(ctx, io_.rows(ctx));
  }

 private:
  using Rows = NodeIo::Rows;
  // One member function per op (run_<op>), chosen when the node is prepared.
  using Op = OpFunction<CpuKernel>;
  friend Op op_function<CpuKernel>(OpCode);
  static Op op_for(OpCode op) { return op_function<CpuKernel>(op); }
  float* in(const StepContext& ctx, const Rows& r, size_t i) const { return io_.in(ctx, r, i); }
  float* out(const StepContext& ctx, size_t i) const { return io_.out(ctx, i); }

  Status run_embed(const StepContext& ctx, const Rows&) const {
    KILN_RETURN_IF_ERROR(embed(ctx, out(ctx, 0)));
    scale_embedding(node_, out(ctx, 0), ctx.n_tokens * io_.out_width(0));
    return Status::ok();
  }
  Status run_rmsnorm(const StepContext& ctx, const Rows& r) const {
    norm_rows(ctx.pool, in(ctx, r, 0), out(ctx, 0), r.count);
    return Status::ok();
  }
  Status run_head_rmsnorm(const StepContext& ctx, const Rows& r) const {
    const int64_t w = io_.in_width(0);
    const auto* nw = reinterpret_cast<const float*>(weights_[0].bytes.data());
    const float* x = in(ctx, r, 0);
    float* y = out(ctx, 0);
    for_each_index(ctx.pool, r.count, [&](int64_t t) { k_.head_rmsnorm(y + t * w, x + t * w, nw, node_.n_heads, node_.head_dim, node_.eps); });
    return Status::ok();
  }
  Status run_matmul(const StepContext& ctx, const Rows& r) const {
    matmul(ctx, in(ctx, r, 0), out(ctx, 0), nullptr, r.count);
    return Status::ok();
  }
  Status run_matmul_add(const StepContext& ctx, const Rows& r) const {
    matmul(ctx, in(ctx, r, 0), out(ctx, 0), in(ctx, r, 1), r.count);
    return Status::ok();
  }
  Status run_qkv(const StepContext& ctx, const Rows& r) const {
    qkv(ctx, in(ctx, r, 0), out(ctx, 0), out(ctx, 1), out(ctx, 2), r.count);
    return Status::ok();
  }
  Status run_norm_qkv(const StepContext& ctx, const Rows& r) const {
    float* xn = scratch_f32(ctx, scratch_.norm);
    norm_rows(ctx.pool, in(ctx, r, 0), xn, r.count);
    qkv(ctx, xn, out(ctx, 0), out(ctx, 1), out(ctx, 2), r.count);
    return Status::ok();
  }
  Status run_gate_up(const StepContext& ctx, const Rows& r) const {
    gate_up(ctx, in(ctx, r, 0), out(ctx, 0), r.count);
    return Status::ok();
  }
  Status run_norm_gate_up(const StepContext& ctx, const Rows& r) const {
    float* xn = scratch_f32(ctx, scratch_.norm);
    norm_rows(ctx.pool, in(ctx, r, 0), xn, r.count);
    gate_up(ctx, xn, out(ctx, 0), r.count);
    return Status::ok();
  }
  // x rotated into y, row by row, by the angles of the step's last r.count tokens.
  void rope_rows(const StepContext& ctx, const Rows& r, const float* x, float* y) const {
    const float* cs = rope_angles(ctx, r.count);
    const int64_t w = io_.in_width(0);
    for_each_index(ctx.pool, r.count, [&](int64_t t) {
      std::memcpy(y + t * w, x + t * w, sizeof(float) * static_cast<size_t>(w));
      rope_row(ctx, cs, t, y + t * w, node_.n_heads);
    });
  }
  Status run_rope(const StepContext& ctx, const Rows& r) const {
    rope_rows(ctx, r, in(ctx, r, 0), out(ctx, 0));
    return Status::ok();
  }
  Status run_kv_store(const StepContext& ctx, const Rows& r) const {
    kv_store(ctx, in(ctx, r, 0), in(ctx, r, 1), false);
    return Status::ok();
  }
  Status run_rope_kv_store(const StepContext& ctx, const Rows& r) const {
    rope_rows(ctx, r, in(ctx, r, 0), out(ctx, 0));
    kv_store(ctx, in(ctx, r, 1), in(ctx, r, 2), true);
    return Status::ok();
  }
  Status run_attention(const StepContext& ctx, const Rows& r) const {
    attention(ctx, in(ctx, r, 0), out(ctx, 0));
    return Status::ok();
  }
  Status run_swiglu(const StepContext& ctx, const Rows& r) const {
    const int64_t w = io_.out_width(0);
    const float *g = in(ctx, r, 0), *u = in(ctx, r, 1);
    float* y = out(ctx, 0);
    for_each_index(ctx.pool, r.count, [&](int64_t t) { k_.swiglu(y + t * w, g + t * w, u + t * w, w); });
    return Status::ok();
  }
  Status run_geglu(const StepContext& ctx, const Rows& r) const {
    const int64_t w = io_.out_width(0);
    const float *g = in(ctx, r, 0), *u = in(ctx, r, 1);
    float* y = out(ctx, 0);
    for_each_index(ctx.pool, r.count, [&](int64_t t) { geglu(y + t * w, g + t * w, u + t * w, w); });
    return Status::ok();
  }
  Status run_softcap(const StepContext& ctx, const Rows& r) const {
    const int64_t w = io_.out_width(0);
    const float* x = in(ctx, r, 0);
    float* y = out(ctx, 0);
    for_each_index(ctx.pool, r.count, [&](int64_t t) { softcap_rows(y + t * w, x + t * w, w, node_.softcap); });
    return Status::ok();
  }
  Status run_add(const StepContext& ctx, const Rows& r) const {
    const int64_t w = io_.out_width(0);
    const float *a = in(ctx, r, 0), *b = in(ctx, r, 1);
    float* y = out(ctx, 0);
    for_each_index(ctx.pool, r.count, [&](int64_t t) { k_.add(y + t * w, a + t * w, b + t * w, w); });
    return Status::ok();
  }

  static float* scratch_f32(const StepContext& ctx, size_t off) { return reinterpret_cast<float*>(ctx.scratch + off); }
  // Thread t's slice for its matmul calls' own work (null where they need none).
  uint8_t* work(const StepContext& ctx, int t) const {
    return scratch_.work_stride > 0 ? ctx.scratch + scratch_.work + static_cast<size_t>(t) * scratch_.work_stride : nullptr;
  }

  void norm_rows(ThreadPool* pool, const float* x, float* y, int rows) const {
    const int64_t d = io_.in_width(0);
    const auto* w = reinterpret_cast<const float*>(weights_[0].bytes.data());
    for_each_index(pool, rows, [&](int64_t t) { k_.rmsnorm(y + t * d, x + t * d, w, d, node_.eps); });
  }

  cpu::Activations prepare_activations(const StepContext& ctx, const Matrix& m, const float* x, int rows, int slot) const {
    return cpu::prepare_activations(k_, m.formats[static_cast<size_t>(rows)], m.m.params, m.m.cols, x, rows,
                                    scratch_.prep_layout[slot], ctx.scratch + scratch_.prep[slot], ctx.pool);
  }

  static bool same_preparation(const Matrix& a, const Matrix& b) {
    return a.m.cols == b.m.cols && a.m.params == b.m.params;
  }

  void matmul(const StepContext& ctx, const float* x, float* y, const float* residual, int rows) const {
    const Matrix& m = mats_[0];
    const cpu::Activations a = prepare_activations(ctx, m, x, rows, 0);
    cpu::Epilogue e;
    e.y = y;
    e.y_stride = m.m.rows;
    e.bias = m.bias;
    e.residual = residual;
    e.residual_stride = m.m.rows;
    parallel_tiles(ctx.pool, m.tiles(), rows, [&](int64_t b, int64_t end, int t) { m.fn(m.m, a, e, b, end, work(ctx, t)); });
  }

  // q, k and v in one pass over the pool: the threads split the three matrices' tiles together.
  void qkv(const StepContext& ctx, const float* x, float* q, float* k, float* v, int rows) const {
    cpu::Activations a[3];
    for (int i = 0; i < 3; ++i) {
      int same = -1;
      for (int j = 0; j < i && same < 0; ++j)
        if (same_preparation(mats_[static_cast<size_t>(i)], mats_[static_cast<size_t>(j)])) same = j;
      a[i] = same >= 0 ? a[same] : prepare_activations(ctx, mats_[static_cast<size_t>(i)], x, rows, i);
    }
    float* outs[3] = {q, k, v};
    cpu::Epilogue e[3];
    int64_t start[4] = {0, 0, 0, 0};
    for (int i = 0; i < 3; ++i) {
      const Matrix& m = mats_[static_cast<size_t>(i)];
      e[i].y = outs[i];
      e[i].y_stride = m.m.rows;
      e[i].bias = m.bias;
      start[i + 1] = start[i] + m.tiles();
    }
    parallel_tiles(ctx.pool, start[3], rows, [&](int64_t b, int64_t end, int t) {
      for (int i = 0; i < 3; ++i) {
        const int64_t lo = std::max(b, start[i]), hi = std::min(end, start[i + 1]);
        if (lo < hi)
          mats_[static_cast<size_t>(i)].fn(mats_[static_cast<size_t>(i)].m, a[i], e[i], lo - start[i], hi - start[i], work(ctx, t));
      }
    });
  }

  // silu(Wg x) * (Wu x): each thread computes the gate and up rows of its tiles, then combines
  // them while they are in its cache.
  void gate_up(const StepContext& ctx, const float* x, float* out, int rows) const {
    const Matrix& mg = mats_[0];
    const Matrix& mu = mats_[1];
    const cpu::Activations ag = prepare_activations(ctx, mg, x, rows, 0);
    const cpu::Activations au = same_preparation(mg, mu) ? ag : prepare_activations(ctx, mu, x, rows, 1);
    float* up = scratch_f32(ctx, scratch_.tmp);
    const int64_t h = mg.m.rows;
    cpu::Epilogue eg, eu;
    eg.y = out;
    eg.y_stride = h;
    eu.y = up;
    eu.y_stride = h;
    parallel_tiles(ctx.pool, mg.tiles(), rows, [&](int64_t b, int64_t end, int t) {
      mg.fn(mg.m, ag, eg, b, end, work(ctx, t));
      mu.fn(mu.m, au, eu, b, end, work(ctx, t));
      const int64_t c0 = b * kTileRows, c1 = std::min(h, end * kTileRows);
      for (int t = 0; t < rows; ++t) k_.swiglu(out + t * h + c0, out + t * h + c0, up + t * h + c0, c1 - c0);
    });
  }

  Status embed(const StepContext& ctx, float* y) const {
    const WeightDesc& w = *weights_[0].desc;
    if (w.layout == kRowMajorLayout) return embed_rowmajor(ctx, w, params_[0], weights_[0].bytes, y);
    const int64_t vocab = w.shape[0], d = w.shape[1];
    for (int t = 0; t < ctx.n_tokens; ++t) {
      const int32_t id = ctx.tokens[t];
      if (id < 0 || id >= vocab) return invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary");
      cpu::unpack_row(params_[0], w.layout, weights_[0].bytes.data(), d, id, y + t * d);
    }
    return Status::ok();
  }

  // cos and sin of every pair's angle for the last `rows` tokens of the step, as ref::rope
  // computes them: per row (head_dim apart), the pairs' cosines then their sines.
  const float* rope_angles(const StepContext& ctx, int rows) const {
    float* cs = scratch_f32(ctx, scratch_.rope);
    const int half = (ctx.model->rotary_dim > 0 ? ctx.model->rotary_dim : node_.head_dim) / 2;
    const int first_row = ctx.n_tokens - rows;
    const std::vector<float>& freqs = ctx.model->freqs(node_.layer);
    for (int t = 0; t < rows; ++t) {
      const int pos = ctx.first_pos + first_row + t;
      for (int i = 0; i < half; ++i) {
        const float angle = static_cast<float>(pos) * freqs[static_cast<size_t>(i)];
        cs[t * node_.head_dim + i] = std::cos(angle);
        cs[t * node_.head_dim + half + i] = std::sin(angle);
      }
    }
    return cs;
  }
  void rope_row(const StepContext& ctx, const float* cs, int64_t t, float* x, int n_heads) const {
    const int rot = ctx.model->rotary_dim > 0 ? ctx.model->rotary_dim : node_.head_dim;
    const float* c = cs + t * node_.head_dim;
    k_.rope(x, n_heads, node_.head_dim, rot, c, c + rot / 2, ctx.model->rope_half_split);
  }

  void kv_store(const StepContext& ctx, const float* k, const float* v, bool rotate_k) const {
    const int kv_dim = node_.n_kv_heads * node_.head_dim;
    const float* cs = rotate_k ? scratch_f32(ctx, scratch_.rope) : nullptr;
    if (ctx.kv_dtype == DType::kF16) {
      // Rotated in f32 (in the scratch the up projection uses, free here), then rounded once.
      float* rotated = scratch_f32(ctx, scratch_.tmp);
      for_each_index(ctx.pool, ctx.n_tokens, [&](int64_t t) {
        const float* kt = k + t * kv_dim;
        if (rotate_k) {
          float* r = rotated + t * kv_dim;
          std::memcpy(r, kt, sizeof(float) * static_cast<size_t>(kv_dim));
          rope_row(ctx, cs, t, r, node_.n_kv_heads);
          kt = r;
        }
        store_kv_row(ctx, node_.layer, kv_dim, static_cast<int>(t), kt, v + t * kv_dim);
      });
      return;
    }
    for (int t = 0; t < ctx.n_tokens; ++t) {
      store_kv_row(ctx, node_.layer, kv_dim, t, k + t * kv_dim, v + t * kv_dim);
      // f32: the keys rotated where they lie in the cache.
      if (rotate_k) rope_row(ctx, cs, t, static_cast<float*>(ctx.key_cache) + kv_cache_index(ctx, node_.layer, kv_dim, t), node_.n_kv_heads);
    }
  }

  void attention(const StepContext& ctx, const float* q, float* o) const {
    cpu::AttentionArgs a;
    const int hd = node_.head_dim, kv_dim = node_.n_kv_heads * hd;
    const size_t layer_off = static_cast<size_t>(node_.layer) * static_cast<size_t>(ctx.n_ctx) * static_cast<size_t>(kv_dim);
    a.q = q;
    a.out = o;
    const auto elem = static_cast<size_t>(dtype_info(ctx.kv_dtype).block_bytes);
    a.k = static_cast<const uint8_t*>(ctx.key_cache) + layer_off * elem;
    a.v = static_cast<const uint8_t*>(ctx.value_cache) + layer_off * elem;
    a.kv_f16 = ctx.kv_dtype == DType::kF16;
    a.n_tokens = ctx.n_tokens;
    a.first_pos = ctx.first_pos;
    a.n_heads = node_.n_heads;
    a.n_kv_heads = node_.n_kv_heads;
    a.head_dim = hd;
    a.window = ctx.model->window(node_.layer);
    a.scale = attention_scale(node_);
    a.softcap = node_.softcap;
    // Work items: (kv head, slice of its query heads), enough of them to give every thread one.
    const int group = node_.n_heads / node_.n_kv_heads;
    const int threads = ctx.pool ? ctx.pool->size() : 1;
    const int slices = std::min(group, (threads + node_.n_kv_heads - 1) / node_.n_kv_heads);
    const int per = (group + slices - 1) / slices;
    parallel(ctx.pool, static_cast<int64_t>(node_.n_kv_heads) * slices, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const int kvh = static_cast<int>(i / slices), s = static_cast<int>(i % slices);
        const int h0 = kvh * group + s * per, h1 = std::min(kvh * group + (s + 1) * per, (kvh + 1) * group);
        if (h0 < h1) k_.attention(a, kvh, h0, h1);
      }
    });
  }

  Node node_;
  NodeIo io_;
  const KernelTable& k_;
  Op op_;
  ScratchLayout scratch_;
  int max_tokens_;
  bool decode_one_stream_;
  std::vector<BoundWeight> weights_;
  std::vector<QuantParams> params_;
  std::vector<Matrix> mats_;
};

}  // namespace

CpuBackend::CpuBackend() : decode_one_stream_(host_reads_one_stream_faster()) {}

uint64_t cpu_kernel_features(uint64_t features) { return cpu::target_kernel_features(features); }
const char* cpu_kernel_name(uint64_t features) { return cpu::kernel_table_name(features); }

bool CpuBackend::supports(const Node& node, const Graph& graph) const {
  for (int wi : node.weights) {
    const WeightDesc& w = graph.weights[static_cast<size_t>(wi)];
    auto p = weight_params(w);
    if (!p) return false;
    if (is_matrix(node, w) && !cpu::tile_bytes(*p, cpu::matmul_layout(p->scheme), w.shape[1])) return false;
    if (!is_matrix(node, w) && node.op != OpCode::kEmbed && p->scheme != Scheme::kF32) return false;
  }
  if (node.op == OpCode::kAttention || node.op == OpCode::kRopeKvStore || node.op == OpCode::kRope)
    if (node.head_dim <= 0 || node.head_dim % 2 != 0 || node.head_dim > 256) return false;
  return true;
}

Result<std::string> CpuBackend::layout_for(const Node& node, const Graph&, const WeightDesc& w) const {
  if (!is_matrix(node, w)) return std::string(kRowMajorLayout);
  KILN_ASSIGN_OR_RETURN(QuantParams p, weight_params(w));
  return std::string(cpu::matmul_layout(p.scheme));
}

bool CpuBackend::reads_layout(const Node& node, const WeightDesc& w, std::string_view layout) const {
  auto p = weight_params(w);
  if (!p) return false;
  if (node.op == OpCode::kEmbed) return layout == kRowMajorLayout || (w.shape.size() == 2 && layout == cpu::matmul_layout(p->scheme));
  if (!is_matrix(node, w)) return layout == kRowMajorLayout;
  return layout == cpu::matmul_layout(p->scheme);
}

std::optional<uint64_t> CpuBackend::layout_bytes(const WeightDesc& w) const {
  if (w.layout == kRowMajorLayout) return reference_bytes(w);
  auto p = weight_params(w);
  if (!p || w.shape.size() != 2) return std::nullopt;
  return cpu::packed_bytes(*p, w.layout, w.shape[0], w.shape[1]);
}

Status CpuBackend::pack(const WeightDesc& w, std::span<const uint8_t> ref, std::vector<uint8_t>& out) const {
  if (w.layout == kRowMajorLayout) {
    out.assign(ref.begin(), ref.end());
    return Status::ok();
  }
  KILN_ASSIGN_OR_RETURN(QuantParams p, weight_params(w));
  if (w.shape.size() != 2) return unsupported("cpu back end: layout '" + w.layout + "' is for matrices, not '" + w.name + "'");
  return cpu::pack_matrix(p, w.layout, ref, w.shape[0], w.shape[1], out).with_context("weight '" + w.name + "'");
}

Status CpuBackend::unpack(const WeightDesc& w, std::span<const uint8_t> packed, std::vector<uint8_t>& ref) const {
  if (w.layout == kRowMajorLayout) {
    ref.assign(packed.begin(), packed.end());
    return Status::ok();
  }
  KILN_ASSIGN_OR_RETURN(QuantParams p, weight_params(w));
  if (w.shape.size() != 2 || layout_bytes(w) != packed.size())
    return invalid_argument("cpu back end: weight '" + w.name + "' does not fit layout '" + w.layout + "'");
  return cpu::unpack_matrix(p, w.layout, packed, w.shape[0], w.shape[1], ref);
}

Result<std::unique_ptr<Kernel>> CpuBackend::prepare(const Node& node, const Graph& graph,
                                                    std::span<const BoundWeight> weights,
                                                    std::span<const int64_t> value_offsets, int max_tokens) const {
  PrepareOptions o;
  o.cpu_features = host_cpu_features();
  return prepare(node, graph, weights, value_offsets, max_tokens, o);
}

Result<std::unique_ptr<Kernel>> CpuBackend::prepare(const Node& node, const Graph& graph,
                                                    std::span<const BoundWeight> weights,
                                                    std::span<const int64_t> value_offsets, int max_tokens,
                                                    const PrepareOptions& options) const {
  const KernelTable& k = cpu::select_kernels(cpu_features_for(options.cpu_features));
  auto kernel = std::make_unique<CpuKernel>(node, graph, k, value_offsets, max_tokens, decode_one_stream_);
  KILN_RETURN_IF_ERROR(kernel->bind(weights));
  return std::unique_ptr<Kernel>(std::move(kernel));
}

std::string CpuBackend::kernel_choice(const PrepareOptions& options) const {
  return cpu::kernel_choice(options.cpu_features);
}

std::optional<double> CpuBackend::product_rate(Scheme s, int tokens, const PrepareOptions& options, double seconds) const {
  const KernelTable& k = cpu::select_kernels(cpu_features_for(options.cpu_features));
  if (k.product_loop == nullptr) return std::nullopt;
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  // Rounds per call: doubled until one call takes a millisecond (and the clock's cost is lost).
  int64_t rounds = 256;
  for (auto t0 = Clock::now(); k.product_loop(s, tokens, rounds) > 0 && since(t0) < 1e-3 && rounds < (int64_t{1} << 40);
       t0 = Clock::now())
    rounds *= 2;
  double products = 0;
  const auto t0 = Clock::now();
  do {
    const double p = k.product_loop(s, tokens, rounds);
    if (p <= 0) return std::nullopt;
    products += p;
  } while (since(t0) < seconds);
  return products / since(t0);
}

size_t CpuBackend::scratch_bytes(const Graph& graph, int max_tokens, int n_ctx) const {
  return session_scratch_bytes(graph, max_tokens, n_ctx, 1);
}

size_t CpuBackend::session_scratch_bytes(const Graph& graph, int max_tokens, int, int threads) const {
  // The host's best table: a kernel's own (what the .kiln allows of it) needs no more.
  const KernelTable& k = cpu::select_kernels(host_cpu_features());
  size_t most = 0;
  for (const Node& n : graph.nodes) most = std::max(most, ScratchLayout(n, graph, k, max_tokens).bytes(std::max(threads, 1)));
  return most;
}

}  // namespace kiln
