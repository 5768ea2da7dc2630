// Reference matrix products for every scheme, written to be read: the oracle the fast kernels are
// tested against. Nothing here is fast.
//
//   y[t][r] = sum_c W[r][c] * x[t][c]     for t < n tokens, r < rows outputs, c < cols inputs
//
// f32, f16, bf16, w8a16: W is dequantized to f32 (dequantize_row) and multiplied with the f32
// activations in f32, summing c in order.
//
// w4a16, w6a16 (16-bit activations, computed at run time): each activation row is first rounded with
// quantize_activation_a16 to 16-bit fixed point per block of 32, x ~ X * s_block, and W (dequantized
// to f32) is multiplied with those values X * s in f32, summing c in order. Per element the
// rounding is at most s / 2 = max |x| of the block / 65024: finer than fp16 activations (2^-11
// relative) wherever an element is above 1/32 of its block's largest, and what lets the fast
// kernels sum nibbles times two int8 digits of X exactly (VNNI, SDOT) instead of f32 FMAs.
//
// w8a8, w4a8 (int8 activations per token, computed at run time): each activation row x[t] is
// quantized with quantize_activation_row to qx[c] (int8) and one f32 scale sx, so that
// x[t][c] ~ qx[c] * sx. Then, with exact integer sums (int64 here; an int32 accumulator is
// exact too while cols <= 131072 for W8 and for any 4-bit group):
//   w8a8:            y = (sum_c qw[c] * qx[c]) * sw * sx                sw: the row's f32 scale
//   w4a8 symmetric:  y = sx * sum_groups d_g * (sum_{c in g} q[c] * qx[c])           q = u - 8
//   w4a8 asymmetric: y = sx * sum_groups (d_g * sum_{c in g} u[c] * qx[c] + m_g * sum_{c in g} qx[c])
// which is, up to f32 rounding, the product of the dequantized weights with the dequantized
// activations qx * sx. Against the exact product with the original x the difference is therefore
// bounded by the activation rounding: |y - W x| <= (sx / 2) * sum_c |W[r][c]| (dequantized W).
#pragma once

#include <cstdint>
#include <span>

#include "core/status.h"
#include "layout/weight_layout.h"

namespace kiln {

// Symmetric int8 quantization of one activation row of n values:
//   absmax = max |x|, *scale = absmax / 127, q[i] = round(x[i] * (127 / absmax)) in [-127, 127]
// (round half away from zero). An all-zero row gives scale 0 and q = 0. A row holding a NaN or
// an infinity gives scale NaN and q = 0, so the products come out NaN, as they would in f32.
void quantize_activation_row(const float* x, int64_t n, int8_t* q, float* scale);

// W4A16's activations: per block of 32 values (the last one may be shorter)
//   absmax = max |x|, s = absmax / 127 / 256, X[i] = round_even(x[i] * (127 / absmax) * 256)
// clamped to [-32512, 32512] (= 127 * 256), each product rounded in f32 as written. An all-zero
// block gives s = 0 and X = 0; a block holding a NaN or an infinity gives s = NaN and X = 0.
// scales has (n + 31) / 32 entries.
void quantize_activation_a16(const float* x, int64_t n, int16_t* X, float* scales);

// y[n][rows] = x[n][cols] * W^T, with W the [rows][cols] matrix `w` in the reference layout of
// `p` (exactly quantized_size(p, rows, cols) bytes). n >= 0.
Status ref_matmul(const QuantParams& p, std::span<const uint8_t> w, int64_t rows, int64_t cols, const float* x,
                  int64_t n, float* y);
// The same with the caller's scratch of at least ref_matmul_scratch_bytes(p, cols, n) bytes
// (plus alignof(float) of slack), so that it allocates nothing.
Status ref_matmul(const QuantParams& p, std::span<const uint8_t> w, int64_t rows, int64_t cols, const float* x,
                  int64_t n, float* y, std::span<uint8_t> scratch);
size_t ref_matmul_scratch_bytes(const QuantParams& p, int64_t cols, int64_t n);

}  // namespace kiln
