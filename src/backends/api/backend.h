// The back-end interface: what a device supports, how it prepares a node into a kernel once,
// and how that kernel runs each step. GPU and NPU back ends plug in here.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "graph/graph.h"
#include "graph/weight_params.h"
#include "layout/weight_layout.h"

namespace kiln {

class ThreadPool;

// The name of the reference layout of src/layout/weight_layout.h, which every back end can be handed.
inline constexpr std::string_view kRowMajorLayout = "rowmajor";

// Model-wide constants the kernels need, fixed when the model is opened.
struct ModelConstants {
  std::vector<float> inv_freq;  // RoPE frequency per pair
  std::vector<float> inv_freq_local;  // the sliding-window layers' own (Gemma 3); empty: the same
  bool rope_half_split = false;
  int rotary_dim = 0;  // RoPE turns the first rotary_dim elements of each head (0: all; Phi-4-mini: 3/4)
  std::vector<int> layer_windows;  // per layer, ModelConfig::layer_window: 0 is the whole context

  // The window a layer attends through (0: the whole context), and its RoPE frequencies.
  int window(int layer) const {
    return layer >= 0 && static_cast<size_t>(layer) < layer_windows.size() ? layer_windows[static_cast<size_t>(layer)] : 0;
  }
  const std::vector<float>& freqs(int layer) const {
    return !inv_freq_local.empty() && window(layer) > 0 ? inv_freq_local : inv_freq;
  }
};

// What one step gives the kernels: the arena, the tokens, the positions, the KV cache.
struct StepContext {
  uint8_t* arena = nullptr;
  const int32_t* tokens = nullptr;
  int n_tokens = 0;    // T: tokens in this step
  int first_pos = 0;   // position of the first of them
  bool all_logits = false;  // tail nodes run on every token, not only the last
  int n_ctx = 0;                 // positions in each layer's KV cache
  // [layer][n_ctx][kv_dim] elements of kv_dtype: f32, or f16 (half the memory and the bytes a
  // decoded token reads at long contexts; each K and V rounded once, when stored).
  void* key_cache = nullptr;
  void* value_cache = nullptr;
  DType kv_dtype = DType::kF32;
  const ModelConstants* model = nullptr;
  // Per-session scratch of Backend::session_scratch_bytes() bytes, planned for the threads of
  // `pool`; scratch_size says how many were allocated (0: unknown, for callers of scratch_bytes
  // that run no kernel needing per-thread scratch).
  uint8_t* scratch = nullptr;
  size_t scratch_size = 0;
  ThreadPool* pool = nullptr;  // the session's workers; kernels may split their work over it
};

// The bytes of one weight as the kernels read them (mapped from a .kiln, or owned in memory).
struct BoundWeight {
  const WeightDesc* desc = nullptr;
  std::span<const uint8_t> bytes;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual Status run(const StepContext& ctx) const = 0;
};

// How the kernels of a program are chosen when it is bound.
struct PrepareOptions {
  // The CPU features the kernels may use: those the .kiln target records (for a model compiled
  // in memory, and a file compiled for "auto", kCpuBestTable: whatever this machine may use).
  // A file for a named target therefore runs the same kernels everywhere.
  uint64_t cpu_features = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // Whether this back end can run `node` (its op, and the schemes of its weights).
  virtual bool supports(const Node& node, const Graph& graph) const = 0;
  // Binds a node once: weights, and the arena offsets (bytes) of every value.
  virtual Result<std::unique_ptr<Kernel>> prepare(const Node& node, const Graph& graph,
                                                  std::span<const BoundWeight> weights,
                                                  std::span<const int64_t> value_offsets,
                                                  int max_tokens) const = 0;
  // Which kernels prepare() picks here with these options, and why not faster ones (a line for
  // bench, profile and inspect); "" for back ends without a choice.
  virtual std::string kernel_choice(const PrepareOptions&) const { return ""; }
  // The same, with the kernel choice; back ends without choices keep the default.
  virtual Result<std::unique_ptr<Kernel>> prepare(const Node& node, const Graph& graph,
                                                  std::span<const BoundWeight> weights,
                                                  std::span<const int64_t> value_offsets, int max_tokens,
                                                  const PrepareOptions&) const {
    return prepare(node, graph, weights, value_offsets, max_tokens);
  }

  // Weight layouts. The compiler asks, for every weight a node of this back end reads, which
  // layout it wants (layout_for), settles on one that every reader can read (reads_layout), and
  // repacks the reference bytes into it (pack) at compile time; the runtime checks the layout
  // name and the size (layout_bytes) and refuses what it does not know. The defaults are the
  // reference layout, "rowmajor".
  virtual Result<std::string> layout_for(const Node&, const Graph&, const WeightDesc&) const {
    return std::string(kRowMajorLayout);
  }
  virtual bool reads_layout(const Node&, const WeightDesc&, std::string_view layout) const {
    return layout == kRowMajorLayout;
  }
  // Bytes of `w` stored in w.layout; nullopt for a layout or shape this back end cannot store.
  virtual std::optional<uint64_t> layout_bytes(const WeightDesc& w) const { return reference_bytes(w); }
  // Writes `w` (reference bytes `ref`, exactly the reference size) in the layout w.layout.
  virtual Status pack(const WeightDesc& w, std::span<const uint8_t> ref, std::vector<uint8_t>& out) const {
    if (w.layout != kRowMajorLayout)
      return unsupported("back end '" + std::string(name()) + "' has no weight layout '" + w.layout + "'");
    out.assign(ref.begin(), ref.end());
    return Status::ok();
  }

  // The inverse of pack: the reference bytes of `w` stored as `packed` in w.layout (for tests,
  // tools, and converting a file to another target).
  virtual Status unpack(const WeightDesc& w, std::span<const uint8_t> packed, std::vector<uint8_t>& ref) const {
    if (w.layout != kRowMajorLayout)
      return unsupported("back end '" + std::string(name()) + "' has no weight layout '" + w.layout + "'");
    ref.assign(packed.begin(), packed.end());
    return Status::ok();
  }

  // Bytes of `w` in the reference layout of its scheme; nullopt for a bad scheme or shape.
  static std::optional<uint64_t> reference_bytes(const WeightDesc& w) {
    if (w.layout != kRowMajorLayout || w.shape.empty()) return std::nullopt;
    auto p = weight_params(w);
    if (!p) return std::nullopt;
    return quantized_size(*p, w.shape.size() == 2 ? w.shape[0] : 1, w.shape.back());
  }

  // Products of `scheme` (weight times activation) per second that one thread of this machine
  // could at most do in the kernels this back end runs for a step of `tokens` tokens: the
  // instruction they multiply with, timed back to back for about `seconds` (the compute
  // roofline of a prefill, as bandwidth is decoding's). nullopt: the back end has no such measure.
  virtual std::optional<double> product_rate(Scheme, int /*tokens*/, const PrepareOptions&, double /*seconds*/) const {
    return std::nullopt;
  }

  // Scratch the kernels of this back end need per session, for up to max_tokens tokens per
  // step and n_ctx positions of context.
  virtual size_t scratch_bytes(const Graph& graph, int max_tokens, int n_ctx) const = 0;
  // The same for a session whose steps run on `threads` threads (the pool's, the caller
  // included): kernels whose calls each need scratch of their own get a slice per thread.
  virtual size_t session_scratch_bytes(const Graph& graph, int max_tokens, int n_ctx, int threads) const {
    (void)threads;
    return scratch_bytes(graph, max_tokens, n_ctx);
  }
};

}  // namespace kiln
