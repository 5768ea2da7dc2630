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

// The grid round-to-nearest puts one scale group of weights on (a whole row for W8 per row), as
// layout/weight_layout.h says: value = min + scale * code, code an integer in [lo, hi] (min 0
// for symmetric grids). Data-aware methods choose codes on it themselves (GPTQ); a matrix of
// values on the grids whose groups each reach their grid's ends is written by round-to-nearest
// with exactly those grids and codes.
struct RoundingGrid {
  float scale = 0, min = 0;
  int lo = 0, hi = 0;
  float code(float v) const;  // the nearest code (half away from zero), clamped; 0 if the scale is 0
  float value(float code) const { return min + scale * code; }
};
// Schemes with one grid per scale group or row: the 4-bit groups of 32-128, W8 (per row or
// grouped), Q5_0/Q5_1.
bool has_rounding_grid(const QuantParams& p);
// The grid of n weights (one group, or a W8 row) of p; an error for other schemes, non-finite
// weights or a range FP16 cannot scale.
Result<RoundingGrid> rounding_grid(const QuantParams& p, const float* w, int64_t n);

// FP16 helpers for the directed roundings of round-to-nearest (exposed for tests and other
// quantizers).
uint16_t f16_round_up(float v);    // the smallest FP16 >= v (v finite, |v| <= 65504)
uint16_t f16_round_down(float v);  // the largest FP16 <= v

}  // namespace kiln
