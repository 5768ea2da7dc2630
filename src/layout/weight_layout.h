// The reference storage layout of each scheme's matmul weights (core/scheme.h names the
// schemes): their parameters, sizes and dequantization, which the back ends read. How weights
// are rounded into these layouts is the compiler's business (quant/weight_quantizer.h); the
// rules below say what its round-to-nearest writes.
//
// A weight matrix W has `rows` output channels and `cols` input elements (y = W x), stored row
// after row; each row is a sequence of blocks. The layouts below are the *reference* layout: what
// quantize writes, dequantize_matrix and ref_matmul (backends/ref/) read, and what the
// quantization record of a `.kiln` describes. Fast kernels may repack it; they are tested against
// this. All multi-byte
// values are little-endian; FP16 is IEEE binary16; there is no padding anywhere.
//
//   f32    4 bytes per element.                                   row = 4 * cols bytes
//   f16    2 bytes per element (IEEE half, round to nearest even). row = 2 * cols bytes
//   bf16   2 bytes per element (bfloat16, round to nearest even).  row = 2 * cols bytes
//
//   W8 (w8a16 and w8a8 share it), symmetric, one scale per output channel:
//     row = [f32 scale][cols x int8 q]                             row = 4 + cols bytes
//     w[c] = q[c] * scale. Round-to-nearest writes scale = absmax(row) / 127 and
//     q = round(w / scale) in [-127, 127]; readers accept -128 too. The scale is f32, not FP16:
//     there is one per row, so its size does not matter, and f32 keeps it exact.
//
//   W8 with groups (w8a16 only, QuantParams::w8_group = g, 32, 64 or 128; cols a multiple of g):
//     each row is cols / g groups, each [f16 scale][g x int8 q]      group = 2 + g bytes
//     w[c] = q[c] * scale of its group. With g = 32 this is byte for byte GGML's Q8_0 block (and
//     Q5_0's values, widened to int8, with its scale). Round-to-nearest writes scale = absmax / 127
//     rounded *up* to FP16 and q = round(w / scale) in [-127, 127].
//
//   W4 (w4a16 and w4a8 share it), groups of g = group_size (32, 64 or 128) input elements;
//   cols must be a multiple of g. Each row is cols / g groups, each group:
//     symmetric:  [f16 scale][g/2 bytes of nibbles]                 group = 2 + g/2 bytes
//     asymmetric: [f16 scale][f16 min][g/2 bytes of nibbles]        group = 4 + g/2 bytes
//     Byte j (0 <= j < g/2) of the nibbles holds element j in its low nibble (bits 0-3) and
//     element j + g/2 in its high nibble (bits 4-7). A nibble u is an unsigned 0..15:
//       symmetric:  w = (u - 8) * scale   (the int4 value q = u - 8 is in [-8, 7])
//       asymmetric: w = u * scale + min
//     With g = 32 these groups are byte for byte GGML's Q4_0 (symmetric) and Q4_1 (asymmetric)
//     blocks. Round-to-nearest writes, per group:
//       symmetric:  scale = absmax / 7 rounded *up* to FP16, q = round(w / scale) in [-7, 7];
//       asymmetric: min = min(w) rounded *down* to FP16, scale = (max(w) - min) / 15 rounded up
//                   to FP16, u = round((w - min) / scale) in [0, 15].
//     The directed roundings keep every w inside the representable range, so the round-trip
//     error of each element is at most scale / 2 (the FP16 scale actually stored).
//
//   W4 super-blocks (w4a16 with group_size 256, asymmetric): GGML's Q4_K block byte for
//   byte, 144 bytes per 256 elements (cols a multiple of 256):
//     [f16 d][f16 dmin][12 bytes: a 6-bit scale sc_j and min m_j for each sub-block j of 32]
//     [128 bytes of nibbles: per 64 elements 32 bytes, elements 0-31 low, 32-63 high]
//     w = (d * sc_j) * u - (dmin * m_j)  (layout/ggml_blocks.h has the packing). A GGUF's Q4_K
//     tensors are kept so, never rounded again. Round-to-nearest writes, per sub-block, the
//     range [min(0, min w), max w] / 15, then d = the largest of them / 63 and dmin = the largest
//     -min(0, min w) / 63, both rounded *up* to FP16, m_j = ceil(-min / dmin),
//     sc_j = ceil((max w + dmin m_j) / (15 d)) (at most 63), u = round((w + dmin m_j) / (d sc_j))
//     in [0, 15].
//
//   W4 codebook super-blocks (w4a16 with group_size 256, symmetric): GGML's IQ4_XS block byte for
//   byte, 136 bytes per 256 elements: [f16 d][u16: high 2 bits of 8 sub-block scales][4 bytes:
//   their low 4 bits][128 bytes: per sub-block of 32, 16 bytes, elements 0-15 low, 16-31 high]
//     w = d * s_j * L[u], s_j = ls_j - 32 in [-32, 31], L = GGML's 16 levels (-127 .. 113, denser
//     near 0). Round-to-nearest writes per sub-block s = (its element of largest magnitude) / -127,
//     d = the largest |s| / 31 rounded *up* to FP16, s_j = round(s / d), and each u the level
//     nearest w / (d s_j).
//
//   W6 (w6a16: 6-bit weights, activations as w4a16's): GGML's Q6_K block byte for byte, 210
//   bytes per 256 elements (cols a multiple of 256):
//     [128 bytes of low nibbles][64 bytes of high bit pairs][16 int8 scales sc_i][f16 d]
//     w = d * sc_i * (q - 32) for element e of sub-block i = e / 16, q in [0, 63]. Round-to-
//     nearest writes per sub-block s_i = absmax / 31, d = the largest s_i / 127 rounded *up* to
//     FP16, sc_i = ceil(s_i / d) (at most 127), q - 32 = round(w / (d sc_i)) in [-31, 31].
//
//   W5 (w5a16: 5-bit weights, activations as w4a16's): GGML's Q5_K block byte for byte, 176
//   bytes per 256 elements (cols a multiple of 256):
//     [f16 d][f16 dmin][12 bytes of 6-bit scales sc_j and mins m_j, as Q4_K's]
//     [32 bytes: bit j of byte l is the fifth bit of element 32 j + l]
//     [128 bytes of low 4 bits, as Q4_K's nibbles]
//     w = (d * sc_j) * u - (dmin * m_j), u in [0, 31], j = e / 32. A GGUF's Q5_K tensors (most
//     of a Q5_K_M file) are kept so. Round-to-nearest is Q4_K's over 31 levels: per sub-block
//     the range [min(0, min w), max w] / 31, d = the largest of them / 63 and dmin = the largest
//     -min(0, min w) / 63, both rounded *up* to FP16, m_j = ceil(-min / dmin),
//     sc_j = ceil((max w + dmin m_j) / (31 d)) (at most 63), u = round((w + dmin m_j) / (d sc_j))
//     in [0, 31].
//
//   W5 blocks of 32 (w5a16 with w5_group 32): GGML's Q5_0 (symmetric, 22 bytes per 32 elements)
//   and Q5_1 (asymmetric, 24 bytes) blocks byte for byte (cols a multiple of 32):
//     [f16 d]([f16 m], Q5_1 only)[u32: bit e is the fifth bit of element e][16 bytes: byte j holds
//     element j in its low nibble and j + 16 in its high one]
//     Q5_0: w = d * (u - 16), Q5_1: w = d * u + m, u in [0, 31]. A GGUF's Q5_0 and Q5_1 tensors
//     are kept so. Round-to-nearest is W4's over 31 levels: symmetric d = absmax / 15 rounded
//     *up* to FP16, u - 16 = round(w / d) in [-15, 15]; asymmetric m = min(w) rounded *down* to
//     FP16, d = (max(w) - m) / 31 rounded up to FP16, u = round((w - m) / d) in [0, 31].
//
// "Round" is round half away from zero (std::round) everywhere. For the integer schemes a
// non-finite weight is an error; f32/f16/bf16 store what they are given, except that a finite
// value too large for FP16 is an error rather than an infinity.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "core/scheme.h"
#include "core/status.h"

namespace kiln {

struct QuantParams {
  Scheme scheme = Scheme::kW4A16;
  int group_size = 32;    // 4-bit schemes only: 32, 64 or 128 input elements per scale; w4a16: 256 (Q4_K, IQ4_XS)
  bool symmetric = true;  // 4-bit schemes only; W8 is always symmetric
  int w8_group = 0;       // w8a16 only: 0 = one f32 scale per row, else 32, 64 or 128 (f16 scales)
  // w5a16 only: 0 = GGML's Q5_K super-blocks of 256, 32 = its blocks of 32, Q5_0 (symmetric) or
  // Q5_1 (asymmetric). A .kiln records it as the weight's group_size (256 or 32).
  int w5_group = 0;
  friend bool operator==(const QuantParams&, const QuantParams&) = default;
};

// The same parameters with the fields the scheme ignores cleared (group_size 0, symmetric true
// for every scheme but the 4-bit ones and w5a16 g32, w8_group 0 for all but w8a16, w5_group 0
// for all but w5a16, and there anything but 32), so that equal layouts compare equal.
QuantParams canonical(QuantParams p);
// The group of `p`'s scales: group_size for 4-bit, w8_group for w8a16 (0: per row), 256 for
// w6a16's and w5a16's super-blocks, 32 for w5a16's blocks of 32, else 0.
int scale_group(const QuantParams& p);
// GGML's super-blocks of 256, kept as they are: w4a16 g256 asymmetric (Q4_K) and symmetric
// (IQ4_XS), w5a16 (Q5_K) and w6a16 (Q6_K); ggml_block_type names the one p is (p must be one of them).
bool is_ggml_superblock(const QuantParams& p);
// w5a16 in GGML's blocks of 32: Q5_0 (symmetric) or Q5_1 (asymmetric), kept as they are.
bool is_q5_block32(const QuantParams& p);
// Either of the above: the reference layout is GGML's own blocks (ggml_block_type names them),
// dequantized by layout/ggml_blocks.h.
bool is_ggml_block(const QuantParams& p);
DType ggml_block_type(const QuantParams& p);
// "w4a16 g32 sym", "w4a16 g128 asym", "w4a16 g256 asym" (Q4_K), "w4a16 g256 sym" (IQ4_XS), "w8a16",
// "w8a16 g32", "w6a16", "w5a16" (Q5_K), "w5a16 g32 sym" (Q5_0), "w5a16 g32 asym" (Q5_1), "f16".
std::string describe(const QuantParams& p);

// OK when the parameters are usable at all (a 4-bit group size of 32, 64 or 128, or 256 for
// w4a16; a w8_group of 0, 32, 64 or 128, and only on w8a16).
Status validate_params(const QuantParams& p);
// OK when `p` can store a [rows][cols] matrix: valid parameters, non-negative dimensions, cols a
// multiple of the group size for 4-bit schemes and grouped w8a16, and a size that fits in 64 bits.
Status check_shape(const QuantParams& p, int64_t rows, int64_t cols);

// Bytes of one row / of the whole matrix; nullopt exactly when check_shape fails.
std::optional<uint64_t> quantized_row_size(const QuantParams& p, int64_t cols);
std::optional<uint64_t> quantized_size(const QuantParams& p, int64_t rows, int64_t cols);

// Expands the reference layout `q` (exactly quantized_size(p, rows, cols) bytes) into the
// [rows][cols] f32 matrix `out`.
Status dequantize_matrix(const QuantParams& p, std::span<const uint8_t> q, int64_t rows, int64_t cols,
                         float* out);
// One row: `q` is exactly quantized_row_size(p, cols) bytes.
Status dequantize_row(const QuantParams& p, std::span<const uint8_t> q, int64_t cols, float* out);

}  // namespace kiln
