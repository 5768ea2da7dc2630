#include "backends/cpu/layouts.h"

#include <cstring>

#include "core/dtype.h"
#include "layout/ggml_blocks.h"

namespace kiln::cpu {

namespace {

int64_t tiles_of(int64_t rows) { return (rows + kTileRows - 1) / kTileRows; }
int64_t k4_of(int64_t cols) { return (cols + 3) / 4; }
uint64_t w4_group_bytes(const QuantParams& p) { return (p.symmetric ? 32u : 64u) + 8u * static_cast<uint64_t>(p.group_size); }

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T>
void store(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

// The reference 4-bit row: nibble of element k, and the group's scale and min bits.
struct W4Ref {
  const uint8_t* row;
  int g;
  bool sym;
  size_t group_bytes() const { return static_cast<size_t>((sym ? 2 : 4) + g / 2); }
  const uint8_t* group(int64_t b) const { return row + static_cast<size_t>(b) * group_bytes(); }
  unsigned nibble(int64_t k) const {
    const uint8_t* nib = group(k / g) + (sym ? 2 : 4);
    const int j = static_cast<int>(k % g), half = g / 2;
    return j < half ? nib[j] & 0x0fu : nib[j - half] >> 4;
  }
};

// A k-quant tile's super-block `tb` (kQ4KTileBlockBytes, kQ5KTileBlockBytes or
// kQ6KTileBlockBytes bytes) from the lane's GGML block `ref`, and back (layouts.h).
void kquant_to_tile(const QuantParams& p, const uint8_t* ref, int lane, uint8_t* tb) {
  // The block's 256 values once, then their low 4 bits as 4-bit chunks and their high bits
  // beside them.
  const bool six = p.scheme == Scheme::kW6A16, five = p.scheme == Scheme::kW5A16;
  const bool iq4 = !six && !five && p.symmetric;  // IQ4_XS, else Q4_K
  uint8_t u[256];
  for (int e = 0; e < 256; ++e)
    u[e] = static_cast<uint8_t>(six    ? q6_k_value(ref, e)
                                : five ? q5_k_value(ref, e)
                                : iq4  ? iq4_xs_nibble(ref, e)
                                       : q4_k_nibble(ref, e));
  for (int c = 0; c < 32; ++c) {
    uint32_t v = 0;
    for (int m = 0; m < 4; ++m) v |= ((u[8 * c + m] & 15u) | (u[8 * c + 4 + m] & 15u) << 4) << (8 * m);
    store<uint32_t>(tb + (six ? kQ6KChunks : iq4 ? kIq4XsChunks : kQ4KChunks) + c * 64 + lane * 4, v);
  }
  if (six) {
    std::memcpy(tb + lane * 2, ref + 208, 2);
    for (int i = 0; i < 16; ++i) tb[kQ6KScales + i * 16 + lane] = ref[192 + i];
    for (int i = 0; i < 16; ++i) {
      uint32_t v = 0;
      for (int m = 0; m < 4; ++m)
        for (int j = 0; j < 4; ++j) v |= (u[16 * i + 4 * j + m] >> 4u) << (8 * m + 2 * j);
      store<uint32_t>(tb + kQ6KHighs + i * 64 + lane * 4, v);
    }
    return;
  }
  // IQ4_XS: d and 6 bytes of scales; Q4_K and Q5_K: d, dmin and 12 bytes of scales and mins,
  // and Q5_K's fifth bits.
  std::memcpy(tb + lane * 2, ref, 2);
  if (iq4) {
    for (int pl = 0; pl < 6; ++pl) tb[kIq4XsPlanes + pl * 16 + lane] = ref[2 + pl];
    return;
  }
  std::memcpy(tb + 32 + lane * 2, ref + 2, 2);
  for (int pl = 0; pl < 12; ++pl) tb[kQ4KPlanes + pl * 16 + lane] = ref[4 + pl];
  if (!five) return;
  for (int j = 0; j < 8; ++j) {
    uint32_t v = 0;
    for (int m = 0; m < 4; ++m)
      for (int b = 0; b < 8; ++b) v |= (u[32 * j + 4 * b + m] >> 4u) << (8 * m + b);
    store<uint32_t>(tb + kQ5KHighs + j * 64 + lane * 4, v);
  }
}

void kquant_from_tile(const QuantParams& p, const uint8_t* tb, int lane, uint8_t* ref) {
  auto chunk_value = [&](int64_t chunks, int e) {  // element e's 4 bits in the chunks
    const uint32_t v = load<uint32_t>(tb + chunks + (e / 8) * 64 + lane * 4);
    const int m = e % 8;
    return (v >> (m < 4 ? 8 * m : 8 * (m - 4) + 4)) & 15u;
  };
  if (p.scheme == Scheme::kW6A16) {
    std::memcpy(ref + 208, tb + lane * 2, 2);
    for (int i = 0; i < 16; ++i) ref[192 + i] = tb[kQ6KScales + i * 16 + lane];
    for (int e = 0; e < 256; ++e) {
      const uint32_t h = load<uint32_t>(tb + kQ6KHighs + (e / 16) * 64 + lane * 4);
      const int j = e % 16 / 4, m = e % 4;
      q6_k_set_value(ref, e, chunk_value(kQ6KChunks, e) | ((h >> (8 * m + 2 * j)) & 3u) << 4);
    }
    return;
  }
  std::memcpy(ref, tb + lane * 2, 2);
  if (p.scheme == Scheme::kW4A16 && p.symmetric) {  // IQ4_XS
    for (int pl = 0; pl < 6; ++pl) ref[2 + pl] = tb[kIq4XsPlanes + pl * 16 + lane];
    for (int e = 0; e < 256; ++e) iq4_xs_set_nibble(ref, e, chunk_value(kIq4XsChunks, e));
    return;
  }
  std::memcpy(ref + 2, tb + 32 + lane * 2, 2);
  for (int pl = 0; pl < 12; ++pl) ref[4 + pl] = tb[kQ4KPlanes + pl * 16 + lane];
  if (p.scheme != Scheme::kW5A16) {
    for (int e = 0; e < 256; ++e) q4_k_set_nibble(ref, e, chunk_value(kQ4KChunks, e));
    return;
  }
  for (int e = 0; e < 256; ++e) {
    const uint32_t h = load<uint32_t>(tb + kQ5KHighs + (e / 32) * 64 + lane * 4);
    const int b = e % 32 / 4, m = e % 4;
    q5_k_set_value(ref, e, chunk_value(kQ4KChunks, e) | ((h >> (8 * m + b)) & 1u) << 4);
  }
}

// A w5a16 g32 tile's block (q5_32_tile_block_bytes) from the lane's Q5_0 / Q5_1 block, and back.
void q5_32_to_tile(const QuantParams& p, const uint8_t* ref, int lane, uint8_t* tb) {
  const bool asym = !p.symmetric;
  uint8_t u[32];
  for (int e = 0; e < 32; ++e) u[e] = static_cast<uint8_t>(q5_block32_value(ref, asym, e));
  std::memcpy(tb + lane * 2, ref, 2);
  if (asym) std::memcpy(tb + 32 + lane * 2, ref + 2, 2);
  const int64_t highs = q5_32_highs(p.symmetric);
  uint32_t h = 0;
  for (int m = 0; m < 4; ++m)
    for (int b = 0; b < 8; ++b) h |= (u[4 * b + m] >> 4u) << (8 * m + b);
  store<uint32_t>(tb + highs + lane * 4, h);
  for (int c = 0; c < 4; ++c) {
    uint32_t v = 0;
    for (int m = 0; m < 4; ++m) v |= ((u[8 * c + m] & 15u) | (u[8 * c + 4 + m] & 15u) << 4) << (8 * m);
    store<uint32_t>(tb + highs + 64 + c * 64 + lane * 4, v);
  }
}

void q5_32_from_tile(const QuantParams& p, const uint8_t* tb, int lane, uint8_t* ref) {
  const bool asym = !p.symmetric;
  std::memset(ref, 0, static_cast<size_t>(asym ? kQ5_1BlockBytes : kQ5_0BlockBytes));
  std::memcpy(ref, tb + lane * 2, 2);
  if (asym) std::memcpy(ref + 2, tb + 32 + lane * 2, 2);
  const int64_t highs = q5_32_highs(p.symmetric);
  const uint32_t h = load<uint32_t>(tb + highs + lane * 4);
  for (int e = 0; e < 32; ++e) {
    const uint32_t v = load<uint32_t>(tb + highs + 64 + (e / 8) * 64 + lane * 4);
    const int m = e % 8;
    const unsigned lo = (v >> (m < 4 ? 8 * m : 8 * (m - 4) + 4)) & 15u;
    q5_block32_set_value(ref, asym, e, lo | ((h >> (8 * (e % 4) + e / 4)) & 1u) << 4);
  }
}

int64_t kquant_tile_block(const QuantParams& p) {
  if (is_q5_block32(p)) return q5_32_tile_block_bytes(p.symmetric);
  if (p.scheme == Scheme::kW6A16) return kQ6KTileBlockBytes;
  if (p.scheme == Scheme::kW5A16) return kQ5KTileBlockBytes;
  return p.symmetric ? kIq4XsTileBlockBytes : kQ4KTileBlockBytes;
}
int64_t kquant_ref_block(const QuantParams& p) { return static_cast<int64_t>(*quantized_row_size(p, is_q5_block32(p) ? 32 : 256)); }
int64_t kquant_block_cols(const QuantParams& p) { return is_q5_block32(p) ? 32 : 256; }
// A GGML block of the lane into a tile, and back.
void block_to_tile(const QuantParams& p, const uint8_t* ref, int lane, uint8_t* tb) {
  if (is_q5_block32(p)) q5_32_to_tile(p, ref, lane, tb);
  else kquant_to_tile(p, ref, lane, tb);
}
void block_from_tile(const QuantParams& p, const uint8_t* tb, int lane, uint8_t* ref) {
  if (is_q5_block32(p)) q5_32_from_tile(p, tb, lane, ref);
  else kquant_from_tile(p, tb, lane, ref);
}

}  // namespace

std::string_view matmul_layout(Scheme s) {
  return s == Scheme::kW8A8 || s == Scheme::kW8A16 ? kLayoutR16K4 : kLayoutR16;
}

std::optional<uint64_t> tile_bytes(const QuantParams& p, std::string_view layout, int64_t cols) {
  if (cols <= 0 || layout != matmul_layout(p.scheme) || !validate_params(p)) return std::nullopt;
  const auto k = static_cast<uint64_t>(cols);
  if (is_ggml_block(p)) {
    const int64_t bc = kquant_block_cols(p);
    if (cols % bc != 0) return std::nullopt;
    return static_cast<uint64_t>(kquant_tile_block(p)) * (k / static_cast<uint64_t>(bc));
  }
  switch (p.scheme) {
    case Scheme::kF32: return 64 * k;
    case Scheme::kF16:
    case Scheme::kBF16: return 32 * k;
    case Scheme::kW8A16:
    case Scheme::kW8A8:
      if (p.w8_group != 0) {
        if (cols % p.w8_group != 0) return std::nullopt;
        return kW8GroupBlockBytes * (k / 32);
      }
      return 128 + 64 * static_cast<uint64_t>(k4_of(cols));
    case Scheme::kW5A16:
    case Scheme::kW6A16: return std::nullopt;  // a k-quant: above
    case Scheme::kW4A16:
    case Scheme::kW4A8:
      if (cols % p.group_size != 0) return std::nullopt;
      return w4_group_bytes(p) * (k / static_cast<uint64_t>(p.group_size));
  }
  return std::nullopt;
}

std::optional<uint64_t> packed_bytes(const QuantParams& p, std::string_view layout, int64_t rows, int64_t cols) {
  if (rows <= 0 || rows > (int64_t{1} << 40)) return std::nullopt;
  auto t = tile_bytes(p, layout, cols);
  if (!t) return std::nullopt;
  const auto n = static_cast<uint64_t>(tiles_of(rows));
  if (*t > (uint64_t{1} << 62) / n) return std::nullopt;
  return *t * n;
}

Status pack_matrix(const QuantParams& p, std::string_view layout, std::span<const uint8_t> ref, int64_t rows,
                   int64_t cols, std::vector<uint8_t>& out) {
  auto total = packed_bytes(p, layout, rows, cols);
  if (!total) return unsupported("no layout '" + std::string(layout) + "' for " + describe(p) + " [" + std::to_string(rows) +
                                 ", " + std::to_string(cols) + "]");
  auto row_bytes = quantized_row_size(p, cols);
  if (!row_bytes || ref.size() != *row_bytes * static_cast<uint64_t>(rows))
    return invalid_argument("pack: the reference bytes do not match " + describe(p));
  out.assign(*total, 0);
  const uint64_t tb = *tile_bytes(p, layout, cols);
  for (int64_t t = 0; t < tiles_of(rows); ++t) {
    uint8_t* tile = out.data() + static_cast<size_t>(t) * tb;
    for (int lane = 0; lane < kTileRows; ++lane) {
      const int64_t r = t * kTileRows + lane;
      if (r >= rows) break;  // padding rows stay zero
      const uint8_t* row = ref.data() + static_cast<size_t>(r) * *row_bytes;
      if (is_ggml_block(p)) {
        for (int64_t sb = 0; sb < cols / kquant_block_cols(p); ++sb)
          block_to_tile(p, row + sb * kquant_ref_block(p), lane, tile + sb * kquant_tile_block(p));
        continue;
      }
      switch (p.scheme) {
        case Scheme::kF32:
          for (int64_t k = 0; k < cols; ++k) std::memcpy(tile + (k * kTileRows + lane) * 4, row + k * 4, 4);
          break;
        case Scheme::kF16:
        case Scheme::kBF16:
          for (int64_t k = 0; k < cols; ++k) std::memcpy(tile + (k * kTileRows + lane) * 2, row + k * 2, 2);
          break;
        case Scheme::kW8A16:
        case Scheme::kW8A8: {
          if (const int g = p.w8_group; g != 0) {
            for (int64_t k = 0; k < cols; ++k) {
              uint8_t* blk = tile + (k / 32) * kW8GroupBlockBytes;
              const uint8_t* grp = row + (k / g) * (2 + g);
              if (k % 32 == 0) std::memcpy(blk + lane * 2, grp, 2);
              blk[32 + (k % 32 / 4) * 64 + lane * 4 + k % 4] = grp[2 + k % g];
            }
            break;
          }
          std::memcpy(tile + lane * 4, row, 4);
          int32_t sum = 0;
          for (int64_t k = 0; k < cols; ++k) {
            const auto q = static_cast<int8_t>(row[4 + k]);
            sum += q;
            tile[128 + (k / 4) * 64 + lane * 4 + k % 4] = static_cast<uint8_t>(q);
          }
          store<int32_t>(tile + 64 + lane * 4, sum);
          break;
        }
        case Scheme::kW5A16:
        case Scheme::kW6A16: break;  // a k-quant: above
        case Scheme::kW4A16:
        case Scheme::kW4A8: {
          const W4Ref w{row, p.group_size, p.symmetric};
          const uint64_t gb = w4_group_bytes(p);
          for (int64_t b = 0; b < cols / p.group_size; ++b) {
            uint8_t* grp = tile + static_cast<size_t>(b) * gb;
            std::memcpy(grp + lane * 2, w.group(b), 2);                     // scale
            if (!p.symmetric) std::memcpy(grp + 32 + lane * 2, w.group(b) + 2, 2);  // min
            uint8_t* chunks = grp + (p.symmetric ? 32 : 64);
            for (int c = 0; c < p.group_size / 8; ++c) {
              const int64_t k0 = b * p.group_size + c * 8;
              uint32_t v = 0;
              for (int m = 0; m < 4; ++m)
                v |= (w.nibble(k0 + m) | w.nibble(k0 + 4 + m) << 4) << (8 * m);
              store<uint32_t>(chunks + c * 64 + lane * 4, v);
            }
          }
          break;
        }
      }
    }
  }
  return Status::ok();
}

Status unpack_matrix(const QuantParams& p, std::string_view layout, std::span<const uint8_t> packed, int64_t rows,
                     int64_t cols, std::vector<uint8_t>& ref) {
  auto total = packed_bytes(p, layout, rows, cols);
  auto row_bytes = quantized_row_size(p, cols);
  if (!total || !row_bytes || packed.size() != *total)
    return invalid_argument("unpack: the bytes do not match layout '" + std::string(layout) + "' of " + describe(p));
  ref.assign(*row_bytes * static_cast<uint64_t>(rows), 0);
  const uint64_t tb = *tile_bytes(p, layout, cols);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* tile = packed.data() + static_cast<size_t>(r / kTileRows) * tb;
    const int lane = static_cast<int>(r % kTileRows);
    uint8_t* row = ref.data() + static_cast<size_t>(r) * *row_bytes;
    if (is_ggml_block(p)) {
      for (int64_t sb = 0; sb < cols / kquant_block_cols(p); ++sb)
        block_from_tile(p, tile + sb * kquant_tile_block(p), lane, row + sb * kquant_ref_block(p));
      continue;
    }
    switch (p.scheme) {
      case Scheme::kF32:
        for (int64_t k = 0; k < cols; ++k) std::memcpy(row + k * 4, tile + (k * kTileRows + lane) * 4, 4);
        break;
      case Scheme::kF16:
      case Scheme::kBF16:
        for (int64_t k = 0; k < cols; ++k) std::memcpy(row + k * 2, tile + (k * kTileRows + lane) * 2, 2);
        break;
      case Scheme::kW8A16:
      case Scheme::kW8A8:
        if (const int g = p.w8_group; g != 0) {
          for (int64_t k = 0; k < cols; ++k) {
            const uint8_t* blk = tile + (k / 32) * kW8GroupBlockBytes;
            uint8_t* grp = row + (k / g) * (2 + g);
            if (k % g == 0) std::memcpy(grp, blk + lane * 2, 2);
            grp[2 + k % g] = blk[32 + (k % 32 / 4) * 64 + lane * 4 + k % 4];
          }
          break;
        }
        std::memcpy(row, tile + lane * 4, 4);
        for (int64_t k = 0; k < cols; ++k) row[4 + k] = tile[128 + (k / 4) * 64 + lane * 4 + k % 4];
        break;
      case Scheme::kW5A16:
      case Scheme::kW6A16: break;  // a k-quant: above
      case Scheme::kW4A16:
      case Scheme::kW4A8: {
        const int g = p.group_size, half = g / 2;
        const uint64_t gb = w4_group_bytes(p);
        const size_t rgb = static_cast<size_t>((p.symmetric ? 2 : 4) + half);
        for (int64_t b = 0; b < cols / g; ++b) {
          const uint8_t* grp = tile + static_cast<size_t>(b) * gb;
          uint8_t* out = row + static_cast<size_t>(b) * rgb;
          std::memcpy(out, grp + lane * 2, 2);
          if (!p.symmetric) std::memcpy(out + 2, grp + 32 + lane * 2, 2);
          uint8_t* nib = out + (p.symmetric ? 2 : 4);
          const uint8_t* chunks = grp + (p.symmetric ? 32 : 64);
          for (int j = 0; j < g; ++j) {
            const int c = j / 8, m = j % 8;  // element j of the group: chunk c, offset m
            const uint32_t v = load<uint32_t>(chunks + c * 64 + lane * 4);
            const unsigned u = (v >> (m < 4 ? 8 * m : 8 * (m - 4) + 4)) & 15u;
            if (j < half) nib[j] = static_cast<uint8_t>(nib[j] | u);
            else nib[j - half] = static_cast<uint8_t>(nib[j - half] | u << 4);
          }
        }
        break;
      }
    }
  }
  return Status::ok();
}

void unpack_row(const QuantParams& p, std::string_view layout, const uint8_t* packed, int64_t cols, int64_t r,
                float* out) {
  const uint64_t tb = *tile_bytes(p, layout, cols);
  const uint8_t* tile = packed + static_cast<size_t>(r / kTileRows) * tb;
  const int lane = static_cast<int>(r % kTileRows);
  if (is_ggml_block(p)) {  // the lane's GGML blocks, dequantized by the reference (bit for bit)
    uint8_t blk[kQ6KBlockBytes];  // the largest of them
    const int64_t bc = kquant_block_cols(p);
    for (int64_t sb = 0; sb < cols / bc; ++sb) {
      block_from_tile(p, tile + sb * kquant_tile_block(p), lane, blk);
      (void)dequantize(ggml_block_type(p), std::span<const uint8_t>(blk, static_cast<size_t>(kquant_ref_block(p))),
                       std::span<float>(out + sb * bc, static_cast<size_t>(bc)));
    }
    return;
  }
  switch (p.scheme) {
    case Scheme::kF32:
      for (int64_t k = 0; k < cols; ++k) out[k] = load<float>(tile + (k * kTileRows + lane) * 4);
      return;
    case Scheme::kF16:
      for (int64_t k = 0; k < cols; ++k) out[k] = f16_to_f32(load<uint16_t>(tile + (k * kTileRows + lane) * 2));
      return;
    case Scheme::kBF16:
      for (int64_t k = 0; k < cols; ++k) out[k] = bf16_to_f32(load<uint16_t>(tile + (k * kTileRows + lane) * 2));
      return;
    case Scheme::kW8A16:
    case Scheme::kW8A8: {
      if (p.w8_group != 0) {
        for (int64_t k = 0; k < cols; ++k) {
          const uint8_t* blk = tile + (k / 32) * kW8GroupBlockBytes;
          out[k] = static_cast<float>(static_cast<int8_t>(blk[32 + (k % 32 / 4) * 64 + lane * 4 + k % 4])) *
                   f16_to_f32(load<uint16_t>(blk + lane * 2));
        }
        return;
      }
      const float d = load<float>(tile + lane * 4);
      for (int64_t k = 0; k < cols; ++k)
        out[k] = static_cast<float>(static_cast<int8_t>(tile[128 + (k / 4) * 64 + lane * 4 + k % 4])) * d;
      return;
    }
    case Scheme::kW5A16:
    case Scheme::kW6A16: return;  // a k-quant: above
    case Scheme::kW4A16:
    case Scheme::kW4A8: {
      const uint64_t gb = w4_group_bytes(p);
      for (int64_t b = 0; b < cols / p.group_size; ++b) {
        const uint8_t* grp = tile + static_cast<size_t>(b) * gb;
        const float d = f16_to_f32(load<uint16_t>(grp + lane * 2));
        const float m = p.symmetric ? 0.0f : f16_to_f32(load<uint16_t>(grp + 32 + lane * 2));
        const uint8_t* chunks = grp + (p.symmetric ? 32 : 64);
        for (int c = 0; c < p.group_size / 8; ++c) {
          const uint32_t v = load<uint32_t>(chunks + c * 64 + lane * 4);
          for (int m4 = 0; m4 < 4; ++m4) {
            const unsigned lo = (v >> (8 * m4)) & 15u, hi = (v >> (8 * m4 + 4)) & 15u;
            float* o = out + b * p.group_size + c * 8;
            o[m4] = p.symmetric ? (static_cast<float>(lo) - 8.0f) * d : static_cast<float>(lo) * d + m;
            o[4 + m4] = p.symmetric ? (static_cast<float>(hi) - 8.0f) * d : static_cast<float>(hi) * d + m;
          }
        }
      }
      return;
    }
  }
}

}  // namespace kiln::cpu
