// Reference dequantization of the GGML block formats that GGUF files carry (and of F16/BF16).
#pragma once

#include <cstdint>
#include <span>

#include "core/dtype.h"
#include "core/status.h"

namespace kiln {

// Expands `n` elements stored as `t` in `src` into `dst`. `src` must hold exactly
// dtype_bytes(t, n) bytes and n must be a whole number of blocks.
Status dequantize(DType t, std::span<const uint8_t> src, std::span<float> dst);

// Q4_K blocks rewritten as kiln's W4 asymmetric groups of 32 (layout/weight_layout.h): each of a block's
// 8 sub-blocks of 32 becomes one group, its 4-bit values unchanged, its scale d * sc and minimum
// -dmin * m rounded once to FP16 (relative error at most 2^-11 of each; the nibbles move to
// kiln's order). `src` holds whole Q4_K blocks; `dst` gets 8 groups of 20 bytes per block. A
// scale or minimum beyond FP16's range is an error.
Status q4_k_to_w4_asym(std::span<const uint8_t> src, std::span<uint8_t> dst);

// Q5_0 or IQ4_NL blocks rewritten as kiln's W8 groups of 32 (w8a16 g32, layout/weight_layout.h): each
// block's f16 scale as it is, then its 32 values as int8 (Q5_0: 5-bit, less 16: -16..15;
// IQ4_NL: the level each nibble indexes). Exact. `src` holds whole blocks (22 or 18 bytes);
// `dst` gets 34 bytes per block.
Status blocks_to_w8_g32(DType type, std::span<const uint8_t> src, std::span<uint8_t> dst);

// The k-quant blocks kiln keeps as they are (w4a16 g256 asymmetric is GGML's Q4_K block, w5a16
// its Q5_K block, w6a16 its Q6_K block: layout/weight_layout.h), element by element; `e` is 0..255 within
// one block. The getters are inline (packing reads every value of a model through them); the
// setters overwrite only that element's bits.
inline constexpr int kQ4KBlockBytes = 144, kQ5KBlockBytes = 176, kQ6KBlockBytes = 210;
// Q4_K: sub-block j (0..7, elements 32 j ..) has a 6-bit scale and min packed into 12 bytes at
// block + 4; its elements are d * scale * u - dmin * min. Q5_K packs its scales and mins so
// too (q4_k_scale_min and q4_k_set_scale_min serve it).
void q4_k_scale_min(const uint8_t* block, int j, uint8_t* scale, uint8_t* min);
void q4_k_set_scale_min(uint8_t* block, int j, unsigned scale, unsigned min);  // each < 64
namespace ggml_detail {
// Q4_K's nibbles (and Q5_K's low 4 bits, at `qs`): 32 bytes per 64 elements, the first 32 in
// the low nibbles, the next 32 in the high ones (dq_q4_k, dq_q5_k).
inline unsigned k_nibble(const uint8_t* qs, int e) {
  const uint8_t b = qs[(e / 64) * 32 + e % 32];
  return e % 64 < 32 ? b & 0x0fu : b >> 4;
}
}  // namespace ggml_detail
inline unsigned q4_k_nibble(const uint8_t* block, int e) { return ggml_detail::k_nibble(block + 16, e); }
void q4_k_set_nibble(uint8_t* block, int e, unsigned u);  // u < 16
// Q6_K: the 6-bit q (0..63) of element e; the element is d * scale[e / 16] * (q - 32), with the
// int8 scales at block + 192 and the f16 d at block + 208.
// Per half of 128 elements, 64 bytes of low nibbles and 32 of high bit pairs; element l + 32 i
// of the half (l < 32, i < 4) is nibble i / 2 of byte l + 32 (i % 2) and pair i of byte l (dq_q6_k).
inline unsigned q6_k_value(const uint8_t* block, int e) {
  const int h = e / 128, l = e % 32, i = e % 128 / 32;
  const uint8_t lo = block[h * 64 + l + 32 * (i % 2)], hi = block[128 + h * 32 + l];
  return ((lo >> (4 * (i / 2))) & 0x0fu) | ((hi >> (2 * i)) & 3u) << 4;
}
void q6_k_set_value(uint8_t* block, int e, unsigned q);  // q < 64
// Q5_K: the 5-bit u (0..31) of element e, its low 4 bits in 128 bytes of nibbles at block + 48
// (as Q4_K's at block + 16) and its fifth bit in 32 bytes at block + 16; the element is
// d * scale_j * u - dmin * min_j with Q4_K's scales and mins, j = e / 32. The fifth bit is bit
// e / 32 of byte e % 32 (dq_q5_k's u1, u2).
inline unsigned q5_k_value(const uint8_t* block, int e) {
  return ggml_detail::k_nibble(block + 48, e) | ((block[16 + e % 32] >> (e / 32)) & 1u) << 4;
}
void q5_k_set_value(uint8_t* block, int e, unsigned u);  // u < 32
// IQ4_XS (w4a16 g256 symmetric): sub-block j (0..7, elements 32 j ..) has the scale d * s with s =
// iq4_xs_scale in [-32, 31] (f16 d at block + 0); element e is d * s * kIq4Levels[its nibble].
inline constexpr int kIq4XsBlockBytes = 136;
inline constexpr int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
int iq4_xs_scale(const uint8_t* block, int j);
void iq4_xs_set_scale(uint8_t* block, int j, int scale);  // scale in [-32, 31]
unsigned iq4_xs_nibble(const uint8_t* block, int e);
// Q5_0 (w5a16 g32 symmetric) and Q5_1 (asymmetric): [f16 d]([f16 m], Q5_1)[u32 qh][16 bytes of
// nibbles]; element e (0..31) is u = its nibble (byte e % 16, low for e < 16, high above) with
// bit e of qh as its fifth bit; Q5_0's element is d (u - 16), Q5_1's d u + m (dq_q5_0, dq_q5_1).
inline constexpr int kQ5_0BlockBytes = 22, kQ5_1BlockBytes = 24;
inline unsigned q5_block32_value(const uint8_t* block, bool asym, int e) {
  const uint8_t* qh = block + (asym ? 4 : 2);
  const uint8_t b = qh[4 + e % 16];
  return (e < 16 ? b & 0x0fu : b >> 4) | ((qh[e / 8] >> (e % 8)) & 1u) << 4;
}
void q5_block32_set_value(uint8_t* block, bool asym, int e, unsigned u);  // u < 32
void iq4_xs_set_nibble(uint8_t* block, int e, unsigned u);  // u < 16

}  // namespace kiln
