// Element types of tensors as they are stored in files, and scalar conversions.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace kiln {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  // GGML block formats, as GGUF stores them.
  kQ4_0,
  kQ4_1,
  kQ8_0,
  kQ4_K,
  kQ5_K,
  kQ6_K,
  kQ5_0,
  kQ5_1,
  kIQ4_NL,
  kIQ4_XS,
};

struct DTypeInfo {
  std::string_view name;
  int block_elems;  // elements per block (1 for plain scalars)
  int block_bytes;  // bytes per block
};

DTypeInfo dtype_info(DType t);
inline std::string_view dtype_name(DType t) { return dtype_info(t).name; }

// Bytes needed for n elements; nullopt if n is not a whole number of blocks or overflows.
std::optional<uint64_t> dtype_bytes(DType t, uint64_t n);

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float f16_to_f32(uint16_t h);

// A value stored at any alignment in a file's or a tensor's bytes (little-endian hosts only).
template <typename T>
inline T load_unaligned(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
uint16_t f32_to_f16(float f);
uint16_t f32_to_bf16(float f);  // round to nearest even

}  // namespace kiln
