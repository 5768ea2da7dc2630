#include "layout/weight_layout.h"

#include <cstring>
#include <limits>

#include "core/dtype.h"
#include "layout/ggml_blocks.h"

namespace kiln {

int scale_group(const QuantParams& p) {
  if (is_4bit(p.scheme)) return p.group_size;
  if (is_q5_block32(p)) return 32;
  if (p.scheme == Scheme::kW6A16 || p.scheme == Scheme::kW5A16) return 256;
  return p.scheme == Scheme::kW8A16 ? p.w8_group : 0;
}
DType ggml_block_type(const QuantParams& p) {
  if (p.scheme == Scheme::kW6A16) return DType::kQ6_K;
  if (is_q5_block32(p)) return p.symmetric ? DType::kQ5_0 : DType::kQ5_1;
  if (p.scheme == Scheme::kW5A16) return DType::kQ5_K;
  return p.symmetric ? DType::kIQ4_XS : DType::kQ4_K;
}

bool is_ggml_superblock(const QuantParams& p) {
  return p.scheme == Scheme::kW6A16 || (p.scheme == Scheme::kW5A16 && p.w5_group != 32) ||
         (p.scheme == Scheme::kW4A16 && p.group_size == 256);
}
bool is_q5_block32(const QuantParams& p) { return p.scheme == Scheme::kW5A16 && p.w5_group == 32; }
bool is_ggml_block(const QuantParams& p) { return is_ggml_superblock(p) || is_q5_block32(p); }

QuantParams canonical(QuantParams p) {
  if (p.scheme != Scheme::kW5A16 || p.w5_group != 32) p.w5_group = 0;
  if (!is_4bit(p.scheme)) {
    p.group_size = 0;
    if (!is_q5_block32(p)) p.symmetric = true;
  }
  if (p.scheme != Scheme::kW8A16) p.w8_group = 0;
  return p;
}

std::string describe(const QuantParams& p) {
  std::string s(scheme_name(p.scheme));
  if (is_4bit(p.scheme)) s += " g" + std::to_string(p.group_size) + (p.symmetric ? " sym" : " asym");
  if (p.scheme == Scheme::kW8A16 && p.w8_group != 0) s += " g" + std::to_string(p.w8_group);
  if (is_q5_block32(p)) s += p.symmetric ? " g32 sym" : " g32 asym";
  return s;
}

Status validate_params(const QuantParams& p) {
  if (scheme_name(p.scheme) == "?")
    return invalid_argument("unknown scheme " + std::to_string(static_cast<int>(p.scheme)));
  if (p.scheme == Scheme::kW4A8 && p.group_size == 256)
    return invalid_argument("w4a8: group size 256 (GGML's Q4_K and IQ4_XS super-blocks) is a w4a16 layout only");
  if (is_4bit(p.scheme) && p.group_size != 32 && p.group_size != 64 && p.group_size != 128 && p.group_size != 256)
    return invalid_argument(std::string(scheme_name(p.scheme)) + ": group size " + std::to_string(p.group_size) +
                            " is not one of 32, 64, 128 (or 256 for w4a16: GGML's Q4_K and IQ4_XS)");
  if (p.w8_group != 0 && p.scheme != Scheme::kW8A16)
    return invalid_argument(std::string(scheme_name(p.scheme)) + ": 8-bit groups are a w8a16 layout only");
  if (p.w8_group != 0 && p.w8_group != 32 && p.w8_group != 64 && p.w8_group != 128)
    return invalid_argument("w8a16: group size " + std::to_string(p.w8_group) + " is not one of 32, 64, 128");
  if (p.w5_group != 0 && (p.scheme != Scheme::kW5A16 || p.w5_group != 32))
    return invalid_argument(std::string(scheme_name(p.scheme)) + ": blocks of " + std::to_string(p.w5_group) +
                            " are not a layout (w5a16's blocks of 32, GGML's Q5_0 and Q5_1, are the only ones)");
  return Status::ok();
}

std::optional<uint64_t> quantized_row_size(const QuantParams& p, int64_t cols) {
  if (!validate_params(p) || cols < 0) return std::nullopt;
  const auto c = static_cast<uint64_t>(cols);
  switch (p.scheme) {
    case Scheme::kF32: return 4 * c;  // cols < 2^63: no overflow
    case Scheme::kF16:
    case Scheme::kBF16: return 2 * c;
    case Scheme::kW8A16:
    case Scheme::kW8A8:
      if (p.w8_group != 0) {
        const auto g = static_cast<uint64_t>(p.w8_group);
        if (c % g != 0 || c / g > std::numeric_limits<uint64_t>::max() / (2 + g)) return std::nullopt;
        return (c / g) * (2 + g);
      }
      if (c > std::numeric_limits<uint64_t>::max() - 4) return std::nullopt;
      return 4 + c;
    case Scheme::kW6A16:
    case Scheme::kW5A16:
      if (is_q5_block32(p)) {
        if (c % 32 != 0) return std::nullopt;
        return (c / 32) * static_cast<uint64_t>(p.symmetric ? kQ5_0BlockBytes : kQ5_1BlockBytes);  // less than c: fits
      }
      if (c % 256 != 0) return std::nullopt;
      return (c / 256) * static_cast<uint64_t>(dtype_info(ggml_block_type(p)).block_bytes);  // less than c: fits
    case Scheme::kW4A16:
    case Scheme::kW4A8: {
      const auto g = static_cast<uint64_t>(p.group_size);
      if (c % g != 0) return std::nullopt;
      if (g == 256) return (c / g) * (p.symmetric ? kIq4XsBlockBytes : kQ4KBlockBytes);
      return (c / g) * ((p.symmetric ? 2 : 4) + g / 2);  // at most c / 2 + c / 8: fits
    }
  }
  return std::nullopt;
}

std::optional<uint64_t> quantized_size(const QuantParams& p, int64_t rows, int64_t cols) {
  if (rows < 0) return std::nullopt;
  auto row = quantized_row_size(p, cols);
  if (!row) return std::nullopt;
  const auto r = static_cast<uint64_t>(rows);
  if (*row != 0 && r > std::numeric_limits<uint64_t>::max() / *row) return std::nullopt;
  return r * *row;
}

Status check_shape(const QuantParams& p, int64_t rows, int64_t cols) {
  KILN_RETURN_IF_ERROR(validate_params(p));
  if (rows < 0 || cols < 0)
    return invalid_argument("negative matrix shape [" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
  if (const int g = scale_group(p); g != 0 && cols % g != 0)
    return invalid_argument(describe(p) + " needs the input dimension (" + std::to_string(cols) +
                            ") to be a multiple of the group size " + std::to_string(g));
  if (!quantized_size(p, rows, cols))
    return invalid_argument("matrix [" + std::to_string(rows) + ", " + std::to_string(cols) + "] is too large");
  return Status::ok();
}

Status dequantize_row(const QuantParams& p, std::span<const uint8_t> q, int64_t cols, float* out) {
  KILN_RETURN_IF_ERROR(check_shape(p, 1, cols));
  const uint64_t want = *quantized_row_size(p, cols);
  if (q.size() != want)
    return invalid_argument("dequantize " + describe(p) + ": row is " + std::to_string(q.size()) + " bytes, expected " +
                            std::to_string(want));
  const uint8_t* b = q.data();
  if (is_ggml_block(p))  // GGML's own blocks: its reference dequantization, bit for bit
    return dequantize(ggml_block_type(p), q, std::span<float>(out, static_cast<size_t>(cols)));
  switch (p.scheme) {
    case Scheme::kF32:
      for (int64_t c = 0; c < cols; ++c) out[c] = load_unaligned<float>(b + 4 * c);
      break;
    case Scheme::kF16:
      for (int64_t c = 0; c < cols; ++c) out[c] = f16_to_f32(load_unaligned<uint16_t>(b + 2 * c));
      break;
    case Scheme::kBF16:
      for (int64_t c = 0; c < cols; ++c) out[c] = bf16_to_f32(load_unaligned<uint16_t>(b + 2 * c));
      break;
    case Scheme::kW8A16:
    case Scheme::kW8A8: {
      if (const int g = p.w8_group; g != 0) {
        for (int64_t c0 = 0; c0 < cols; c0 += g, b += 2 + g) {
          const float scale = f16_to_f32(load_unaligned<uint16_t>(b));
          const auto* qs = reinterpret_cast<const int8_t*>(b + 2);
          for (int j = 0; j < g; ++j) out[c0 + j] = static_cast<float>(qs[j]) * scale;
        }
        break;
      }
      const float scale = load_unaligned<float>(b);
      const auto* qs = reinterpret_cast<const int8_t*>(b + 4);
      for (int64_t c = 0; c < cols; ++c) out[c] = static_cast<float>(qs[c]) * scale;
      break;
    }
    case Scheme::kW6A16:
    case Scheme::kW5A16: break;  // above
    case Scheme::kW4A16:
    case Scheme::kW4A8: {
      const int g = p.group_size, half = g / 2;
      for (int64_t c0 = 0; c0 < cols; c0 += g) {
        const float scale = f16_to_f32(load_unaligned<uint16_t>(b));
        const float mn = p.symmetric ? 0.0f : f16_to_f32(load_unaligned<uint16_t>(b + 2));
        const uint8_t* nib = b + (p.symmetric ? 2 : 4);
        for (int j = 0; j < half; ++j) {
          const int lo = nib[j] & 0x0f, hi = nib[j] >> 4;
          if (p.symmetric) {
            out[c0 + j] = static_cast<float>(lo - 8) * scale;
            out[c0 + j + half] = static_cast<float>(hi - 8) * scale;
          } else {
            out[c0 + j] = static_cast<float>(lo) * scale + mn;
            out[c0 + j + half] = static_cast<float>(hi) * scale + mn;
          }
        }
        b = nib + half;
      }
      break;
    }
  }
  return Status::ok();
}

Status dequantize_matrix(const QuantParams& p, std::span<const uint8_t> q, int64_t rows, int64_t cols, float* out) {
  KILN_RETURN_IF_ERROR(check_shape(p, rows, cols));
  const uint64_t want = *quantized_size(p, rows, cols);
  if (q.size() != want)
    return invalid_argument("dequantize " + describe(p) + ": matrix [" + std::to_string(rows) + ", " +
                            std::to_string(cols) + "] needs " + std::to_string(want) + " bytes, got " +
                            std::to_string(q.size()));
  const uint64_t row_bytes = *quantized_row_size(p, cols);
  for (int64_t r = 0; r < rows; ++r)
    KILN_RETURN_IF_ERROR(dequantize_row(p, q.subspan(static_cast<uint64_t>(r) * row_bytes, row_bytes), cols,
                                        out + r * cols));
  return Status::ok();
}

}  // namespace kiln
