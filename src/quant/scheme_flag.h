// The -q value a user types, read into parameters: kiln's scheme names, and the names a
// llama.cpp or QNN user brings (q4_0, fp16, ...) where they mean one kiln layout.
#pragma once

#include <optional>
#include <string_view>

#include "core/status.h"
#include "layout/weight_layout.h"

namespace kiln {

// `name` is a scheme name (w4a16, ...) or an alias, case-insensitive:
//   fp32, float32, float -> f32     fp16, half, float16 -> f16     bfloat16 -> bf16
//   q4_0 -> w4a16 g32 symmetric (byte for byte GGML's Q4_0 block)
//   q4_1 -> w4a16 g32 asymmetric (GGML's Q4_1 block)
//   q8_0 -> w8a16 g32 (byte for byte GGML's Q8_0 block)
//   q4_k -> w4a16 g256 asymmetric (GGML's Q4_K block), q5_k -> w5a16 (GGML's Q5_K block),
//   q5_0 / q5_1 -> w5a16 in blocks of 32, symmetric / asymmetric (GGML's Q5_0 / Q5_1 blocks),
//   q6_k -> w6a16 (GGML's Q6_K block), iq4_xs -> w4a16 g256 symmetric (GGML's IQ4_XS block)
//   "w8a16 g32" / "w8a16g32" (also g64, g128) -> w8a16 with an f16 scale per group
// `group_size` and `symmetric` apply to names that leave them open; an alias that fixes the
// group is an error with another --group. "int8"/"int4" name no layout by themselves (the
// activations' width is open) and get a hint naming the schemes they could mean.
Result<QuantParams> parse_scheme_flag(std::string_view name, int group_size, bool symmetric);

// "w8a16 g<N>" or "w8a16g<N>" (the name describe() writes; case-insensitive) as w8a16 with
// w8_group N, not yet validated; nullopt for any other name.
std::optional<QuantParams> parse_grouped_w8(std::string_view name);

}  // namespace kiln
