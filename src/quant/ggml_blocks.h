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

}  // namespace kiln
