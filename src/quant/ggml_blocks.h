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

// Q4_K blocks rewritten as kiln's W4 asymmetric groups of 32 (quant/scheme.h): each of a block's
// 8 sub-blocks of 32 becomes one group, its 4-bit values unchanged, its scale d * sc and minimum
// -dmin * m rounded once to FP16 (relative error at most 2^-11 of each; the nibbles move to
// kiln's order). `src` holds whole Q4_K blocks; `dst` gets 8 groups of 20 bytes per block. A
// scale or minimum beyond FP16's range is an error.
Status q4_k_to_w4_asym(std::span<const uint8_t> src, std::span<uint8_t> dst);

// Q5_0 or IQ4_NL blocks rewritten as kiln's W8 groups of 32 (w8a16 g32, quant/scheme.h): each
// block's f16 scale as it is, then its 32 values as int8 (Q5_0: 5-bit, less 16: -16..15;
// IQ4_NL: the level each nibble indexes). Exact. `src` holds whole blocks (22 or 18 bytes);
// `dst` gets 34 bytes per block.
Status blocks_to_w8_g32(DType type, std::span<const uint8_t> src, std::span<uint8_t> dst);

}  // namespace kiln
