// The fast CPU back end: every op of the graph, with the kernels of the best instruction set
// the .kiln target allows (kernels.h, dispatch.cpp), weights repacked at compile time into
// 16-row interleaved tiles (layouts.h), work split over the session's thread pool by output rows
// (matmuls) or by heads (attention).
//
// Numerics, against the reference back end:
//  - f32, f16, bf16, w8a16, w4a16 ("A16"): activations stay f32 and are never quantized; each
//    weight is widened to f32 exactly and multiplied in f32 with FMA. Decoding (one token) sums a
//    4-bit group as d * sum(u x) + o * sum(x) (u the nibble 0..15, o = -8 d or the group's min);
//    prefill sums the dequantized weights. Both differ from the reference only by the order and
//    contraction of f32 roundings (relative error of a dot product ~ 1e-6 of sum |w x|).
//  - w8a8, w4a8: each activation row is quantized to int8 exactly as quant/ref_matmul.h does;
//    the integer sums are exact; only the final f32 scaling differs in rounding order.
//  - softmax and SiLU use a polynomial exp (relative error ~2 ulp); attention's softmax is
//    computed online (flash-style), not in two passes.
// With the same kernels the result does not depend on the number of threads: each output row
// is computed by one thread, in the same order.
#pragma once

#include "backends/api/backend.h"

namespace kiln {

class CpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }
  bool supports(const Node& node, const Graph& graph) const override;
  Result<std::unique_ptr<Kernel>> prepare(const Node& node, const Graph& graph, std::span<const BoundWeight> weights,
                                          std::span<const int64_t> value_offsets, int max_tokens) const override;
  Result<std::unique_ptr<Kernel>> prepare(const Node& node, const Graph& graph, std::span<const BoundWeight> weights,
                                          std::span<const int64_t> value_offsets, int max_tokens,
                                          const PrepareOptions& options) const override;
  size_t scratch_bytes(const Graph& graph, int max_tokens, int n_ctx) const override;

  Result<std::string> layout_for(const Node& node, const Graph& graph, const WeightDesc& w) const override;
  bool reads_layout(const Node& node, const WeightDesc& w, std::string_view layout) const override;
  std::optional<uint64_t> layout_bytes(const WeightDesc& w) const override;
  Status pack(const WeightDesc& w, std::span<const uint8_t> ref, std::vector<uint8_t>& out) const override;
  Status unpack(const WeightDesc& w, std::span<const uint8_t> packed, std::vector<uint8_t>& ref) const override;
};

// The CPU features the cpu back end's kernels can use on a target with `features`: the
// features of the best kernel table they allow (what a .kiln for them records).
uint64_t cpu_kernel_features(uint64_t features);
// The name of that kernel table ("avx512", "avx2", "dotprod", "neon", "generic").
const char* cpu_kernel_name(uint64_t features);

}  // namespace kiln
