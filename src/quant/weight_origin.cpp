#include "quant/weight_origin.h"

namespace kiln {

WeightOrigin weight_origin(DType source, const QuantParams& p) {
  switch (source) {
    case DType::kF32:
      if (p.scheme == Scheme::kF32) return WeightOrigin::kAsStored;
      break;
    case DType::kF16:
      if (p.scheme == Scheme::kF16) return WeightOrigin::kAsStored;
      break;
    case DType::kBF16:
      if (p.scheme == Scheme::kBF16) return WeightOrigin::kAsStored;
      break;
    case DType::kQ4_0:
    case DType::kQ4_1:  // W4 g32 symmetric / asymmetric, in both activation widths
      if (is_4bit(p.scheme) && p.group_size == 32 && p.symmetric == (source == DType::kQ4_0)) return WeightOrigin::kAsStored;
      break;
    case DType::kQ8_0:
      if (p.scheme == Scheme::kW8A16 && p.w8_group == 32) return WeightOrigin::kAsStored;
      break;
    case DType::kQ4_K:
      if (is_4bit(p.scheme) && p.group_size == 32 && !p.symmetric) return WeightOrigin::kSubBlocks;
      [[fallthrough]];
    case DType::kIQ4_XS:  // w4a16 g256, asymmetric (Q4_K) or symmetric (IQ4_XS)
      if (p.scheme == Scheme::kW4A16 && is_ggml_superblock(p) && ggml_block_type(p) == source) return WeightOrigin::kAsStored;
      break;
    case DType::kQ5_K:
    case DType::kQ5_1:
      if (p.scheme == Scheme::kW5A16 && ggml_block_type(p) == source) return WeightOrigin::kAsStored;
      break;
    case DType::kQ6_K:
      if (p.scheme == Scheme::kW6A16) return WeightOrigin::kAsStored;
      break;
    case DType::kQ5_0:
      if (p.scheme == Scheme::kW5A16 && ggml_block_type(p) == source) return WeightOrigin::kAsStored;
      [[fallthrough]];
    case DType::kIQ4_NL:
      if (p.scheme == Scheme::kW8A16 && p.w8_group == 32) return WeightOrigin::kWidened;
      break;
    default: break;
  }
  return WeightOrigin::kRounded;
}

std::string weight_origin_text(DType source, Scheme target, WeightOrigin origin) {
  switch (origin) {
    case WeightOrigin::kAsStored: return "kept byte for byte";
    case WeightOrigin::kSubBlocks: return "its sub-blocks as groups of 32, their scales and minimums rounded once to f16";
    case WeightOrigin::kWidened:
      // Q5_0 has its own 5-bit scheme (w5a16 g32 sym): widened only where w8a16 g32 is asked for.
      return source == DType::kQ5_0 ? "widened: its values as int8, exact" : "widened: no 4-bit scheme of that block";
    case WeightOrigin::kRounded: break;
  }
  const bool blocks = source != DType::kF32 && source != DType::kF16 && source != DType::kBF16;
  if (target == Scheme::kF32) return blocks ? "dequantized" : "converted, exact";  // f16 and bf16 widen exactly
  return blocks ? "dequantized, then rounded once" : "rounded from its values";
}

}  // namespace kiln
