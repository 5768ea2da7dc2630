#include "core/dtype.h"

#include <limits>

namespace kiln {

DTypeInfo dtype_info(DType t) {
  switch (t) {
    case DType::kF32: return {"F32", 1, 4};
    case DType::kF16: return {"F16", 1, 2};
    case DType::kBF16: return {"BF16", 1, 2};
    case DType::kQ4_0: return {"Q4_0", 32, 18};
    case DType::kQ4_1: return {"Q4_1", 32, 20};
    case DType::kQ8_0: return {"Q8_0", 32, 34};
    case DType::kQ4_K: return {"Q4_K", 256, 144};
    case DType::kQ5_K: return {"Q5_K", 256, 176};
    case DType::kQ6_K: return {"Q6_K", 256, 210};
    case DType::kQ5_0: return {"Q5_0", 32, 22};
    case DType::kQ5_1: return {"Q5_1", 32, 24};
    case DType::kIQ4_NL: return {"IQ4_NL", 32, 18};
    case DType::kIQ4_XS: return {"IQ4_XS", 256, 136};
  }
  return {"?", 1, 1};
}

std::optional<uint64_t> dtype_bytes(DType t, uint64_t n) {
  DTypeInfo info = dtype_info(t);
  if (n % static_cast<uint64_t>(info.block_elems) != 0) return std::nullopt;
  uint64_t blocks = n / static_cast<uint64_t>(info.block_elems);
  if (blocks > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(info.block_bytes))
    return std::nullopt;
  return blocks * static_cast<uint64_t>(info.block_bytes);
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (absx >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absx < 0x38800000u) {  // subnormal or zero in f16
    if (absx < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t e = absx >> 23;
    uint32_t m = (absx & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e;  // f16 subnormal LSB is 2^-24
    uint32_t half = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t e = (absx >> 23) - 127 + 15;
  uint32_t m = absx & 0x7fffffu;
  uint32_t h = e << 10 | m >> 13;
  uint32_t rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: correct
  return static_cast<uint16_t>(sign | h);
}

uint16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

}  // namespace kiln
