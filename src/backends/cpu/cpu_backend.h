// The fast CPU back end: every op of the graph, with the kernels of the best instruction set
// the .kiln target allows (kernels.h, dispatch.cpp), weights repacked at compile time into
// 16-row interleaved tiles (layouts.h), work split over the session's thread pool by output rows
// (matmuls) or by heads (attention).
//
// Numerics, against the reference back end (tests/cpu_backend_test.cpp checks each kernel to
// |y - y_ref| <= 1e-5 * sum_k |w_k x_k|):
//  - float schemes (f32, f16, bf16) and w8a16: activations are never quantized.
//    f32/f16/bf16/w8a16 widen each weight to f32 exactly and multiply in f32 with FMA (on AMX
//    machines, prefill: x split into two bf16 parts, hi + lo, |error| <= 2^-17 |x|, times the
//    bf16-exact weights on the tile units, summing in f32).
//    w8a16, one token (decoding): x is written per block of 32 as 21-bit fixed point, three int8
//    digits (|error| <= 2.4e-7 of the block's max |x|), and the weights times the digits are
//    summed exactly in int32 (VNNI vpdpbusd, SDOT); the row scale is applied in f32.
//  - w4a16: each activation row is rounded to 16 bits per block of 32 exactly as
//    backends/ref/ref_matmul.h does (make_a16), X = 256 hi + lo with int8 digits, and the nibbles times
//    the digits are summed exactly in int32 (two sums per output from one load of the weights;
//    AVX-512 prefill from 24 tokens: X as int16 pairs times the nibbles widened to int16, one
//    exact sum, the same value); the group's f16 scale and the block's activation scale are
//    applied in f32. On AMX
//    machines, prefill: the rounded values s X split into two bf16 parts as above, times the
//    bf16-exact nibbles on the tile units.
//  - A8 schemes (w8a8, w4a8): each activation row is quantized to int8 exactly as
//    backends/ref/ref_matmul.h does; the integer sums are exact; only the final f32 scaling differs in
//    rounding order.
//  - softmax and SiLU use a polynomial exp (relative error ~2 ulp); attention's softmax is
//    computed online (flash-style), not in two passes.
// With the same kernels the result does not depend on the number of threads: each output row
// is computed by one thread, in the same order.
#pragma once

#include "backends/api/backend.h"

namespace kiln {

class CpuBackend final : public Backend {
 public:
  CpuBackend();
  std::string_view name() const override { return "cpu"; }
  bool supports(const Node& node, const Graph& graph) const override;
  Result<std::unique_ptr<Kernel>> prepare(const Node& node, const Graph& graph, std::span<const BoundWeight> weights,
                                          std::span<const int64_t> value_offsets, int max_tokens) const override;
  Result<std::unique_ptr<Kernel>> prepare(const Node& node, const Graph& graph, std::span<const BoundWeight> weights,
                                          std::span<const int64_t> value_offsets, int max_tokens,
                                          const PrepareOptions& options) const override;
  size_t scratch_bytes(const Graph& graph, int max_tokens, int n_ctx) const override;
  size_t session_scratch_bytes(const Graph& graph, int max_tokens, int n_ctx, int threads) const override;
  std::string kernel_choice(const PrepareOptions& options) const override;
  std::optional<double> product_rate(Scheme s, int tokens, const PrepareOptions& options, double seconds) const override;

  Result<std::string> layout_for(const Node& node, const Graph& graph, const WeightDesc& w) const override;
  bool reads_layout(const Node& node, const WeightDesc& w, std::string_view layout) const override;
  std::optional<uint64_t> layout_bytes(const WeightDesc& w) const override;
  Status pack(const WeightDesc& w, std::span<const uint8_t> ref, std::vector<uint8_t>& out) const override;
  Status unpack(const WeightDesc& w, std::span<const uint8_t> packed, std::vector<uint8_t>& ref) const override;

 private:
  // Whether decode reads its tiles one at a time (cpu::PackedMatrix::decode_one_stream): chosen
  // once for this host when the back end is made, then part of every kernel it prepares.
  bool decode_one_stream_;
};

// The CPU features the cpu back end's kernels need on a target with `features`: those of the
// best kernel table (of any architecture) they allow, what a .kiln for them records.
uint64_t cpu_kernel_features(uint64_t features);
// The name of that kernel table ("avx512", "avx2", "dotprod", "neon", "generic").
const char* cpu_kernel_name(uint64_t features);


}  // namespace kiln
