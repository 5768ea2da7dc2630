// Quantization policy for a source's weights: keep its bytes, rewrite its blocks, or round it
// (the block rewrites themselves are layout/ggml_blocks.h's).
#pragma once

#include <string>

#include "core/dtype.h"
#include "core/scheme.h"
#include "layout/weight_layout.h"

namespace kiln {

// How the compiler makes a weight stored as `source` into `p`'s reference layout: the one
// decision compile_model acts on and `kiln inspect` reports on a source model, so the two cannot
// disagree.
enum class WeightOrigin {
  kAsStored,   // the source's bytes are p's layout byte for byte (f32, f16, bf16, Q4_0/Q4_1 as w4 g32,
               // Q8_0 as w8a16 g32, Q4_K/IQ4_XS as w4a16 g256, Q5_K as w5a16, Q5_0/Q5_1 as w5a16 g32,
               // Q6_K as w6a16)
  kSubBlocks,  // Q4_K's sub-blocks as w4 asymmetric groups of 32 (q4_k_to_w4_asym)
  kWidened,    // Q5_0 or IQ4_NL blocks as w8a16 g32, their values as int8, exact (blocks_to_w8_g32)
  kRounded,    // dequantized and rounded once into p (round to nearest)
};
WeightOrigin weight_origin(DType source, const QuantParams& p);
// How, in a few words, for `inspect`: "kept byte for byte", "widened: no 4-bit scheme of that
// block", "rounded from its values", ... (`target` is the scheme it becomes).
std::string weight_origin_text(DType source, Scheme target, WeightOrigin origin);

}  // namespace kiln
