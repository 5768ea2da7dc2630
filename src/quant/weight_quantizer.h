// The compiler's rounding of f32 weights into the reference layouts of layout/weight_layout.h
// (whose comment says what round-to-nearest writes, scheme by scheme).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "core/status.h"
#include "layout/weight_layout.h"

namespace kiln {

// Writes the reference layout. Round-to-nearest is the first method; data-aware methods (GPTQ,
// AWQ) implement the same interface and write the same layout, so everything downstream
// (dequantize_matrix, ref_matmul, the kernels) is shared.
class WeightQuantizer {
 public:
  virtual ~WeightQuantizer();
  // `w` is the [rows][cols] f32 matrix, row-major; `out` must be exactly
  // quantized_size(p, rows, cols) bytes.
  virtual Status quantize(const QuantParams& p, const float* w, int64_t rows, int64_t cols,
                          std::span<uint8_t> out) const = 0;
  virtual std::string_view name() const = 0;
};

const WeightQuantizer& round_to_nearest();  // name() == "rtn"

// FP16 helpers for the directed roundings of round-to-nearest (exposed for tests and other
// quantizers).
uint16_t f16_round_up(float v);    // the smallest FP16 >= v (v finite, |v| <= 65504)
uint16_t f16_round_down(float v);  // the largest FP16 <= v

}  // namespace kiln
