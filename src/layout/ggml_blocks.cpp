#include "layout/ggml_blocks.h"

#include <cmath>
#include <cstring>

namespace kiln {

namespace {

float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// Q4_0: f16 d, 16 bytes of nibbles; low nibbles are elements 0..15, high ones 16..31.
void dq_q4_0(const uint8_t* b, float* y) {
  const float d = half_at(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((qs[j] & 0x0f) - 8) * d;
    y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

// Q4_1: f16 d, f16 min, nibbles as Q4_0 without the offset.
void dq_q4_1(const uint8_t* b, float* y) {
  const float d = half_at(b), m = half_at(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(qs[j] & 0x0f) * d + m;
    y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

// Q5_0: f16 d, 4 bytes of fifth bits (bit j for element j), 16 bytes of nibbles as Q4_0;
// an element is its 5-bit value less 16, times d.
void dq_q5_0(const uint8_t* b, float* y) {
  const float d = half_at(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const int lo = (qs[j] & 0x0f) | static_cast<int>((qh >> j & 1u) << 4);
    const int hi = (qs[j] >> 4) | static_cast<int>((qh >> (j + 16) & 1u) << 4);
    y[j] = static_cast<float>(lo - 16) * d;
    y[j + 16] = static_cast<float>(hi - 16) * d;
  }
}

// Q5_1: f16 d, f16 min, then as Q5_0 without the offset: an element is its 5-bit value times d
// plus min.
void dq_q5_1(const uint8_t* b, float* y) {
  const float d = half_at(b), m = half_at(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    const int lo = (qs[j] & 0x0f) | static_cast<int>((qh >> j & 1u) << 4);
    const int hi = (qs[j] >> 4) | static_cast<int>((qh >> (j + 16) & 1u) << 4);
    y[j] = static_cast<float>(lo) * d + m;
    y[j + 16] = static_cast<float>(hi) * d + m;
  }
}

// Q8_0: f16 d, 32 int8.
void dq_q8_0(const uint8_t* b, float* y) {
  const float d = half_at(b);
  const auto* qs = reinterpret_cast<const int8_t*>(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(qs[j]) * d;
}

// IQ4_NL: f16 d, 16 bytes of nibbles in Q4_0's order; a nibble indexes GGML's fixed table of
// 16 int8 levels (denser near zero, as trained weights are), times d: an 8-bit value with one
// scale per block of 32.
constexpr const int8_t* kIq4NlLevels = kIq4Levels;

void dq_iq4_nl(const uint8_t* b, float* y) {
  const float d = half_at(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(kIq4NlLevels[qs[j] & 0x0f]) * d;
    y[j + 16] = static_cast<float>(kIq4NlLevels[qs[j] >> 4]) * d;
  }
}

// IQ4_XS: f16 d, u16 of 2-bit high halves and 4 bytes of 4-bit low halves of 8 sub-block scales,
// 128 bytes of nibbles; sub-block j (32 elements) is IQ4_NL's nibbles with the scale d (s - 32),
// s = low4 | high2 << 4.
void dq_iq4_xs(const uint8_t* b, float* y) {
  const float d = half_at(b);
  uint16_t high;
  std::memcpy(&high, b + 2, 2);
  const uint8_t* low = b + 4;
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 8; ++j, qs += 16, y += 32) {
    const int s = ((low[j / 2] >> (4 * (j % 2))) & 0x0f) | (((high >> (2 * j)) & 3) << 4);
    const float dl = d * static_cast<float>(s - 32);
    for (int l = 0; l < 16; ++l) {
      y[l] = dl * static_cast<float>(kIq4NlLevels[qs[l] & 0x0f]);
      y[l + 16] = dl * static_cast<float>(kIq4NlLevels[qs[l] >> 4]);
    }
  }
}

// The 6-bit scale and min of sub-block j (0..7) packed into 12 bytes (Q4_K, Q5_K).
void scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Q4_K: f16 d, f16 dmin, 12 bytes of scales, 128 bytes of nibbles; 8 sub-blocks of 32.
void dq_q4_k(const uint8_t* b, float* y) {
  const float d = half_at(b), dmin = half_at(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  for (int j = 0; j < 256; j += 64) {
    const int is = j / 32;
    uint8_t sc, m;
    scale_min_k4(is, scales, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    scale_min_k4(is + 1, scales, &sc, &m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0x0f) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    q += 32;
  }
}

// Q5_K: as Q4_K plus 32 bytes holding the fifth bit of every element.
void dq_q5_k(const uint8_t* b, float* y) {
  const float d = half_at(b), dmin = half_at(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0; j < 256; j += 64) {
    const int is = j / 32;
    uint8_t sc, m;
    scale_min_k4(is, scales, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    scale_min_k4(is + 1, scales, &sc, &m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>((ql[l] & 0x0f) + ((qh[l] & u1) ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
    ql += 32;
    u1 = static_cast<uint8_t>(u1 << 2);
    u2 = static_cast<uint8_t>(u2 << 2);
  }
}

// Q6_K: 128 bytes low nibbles, 64 bytes of high 2-bit pairs, 16 int8 scales, f16 d.
void dq_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half_at(b + 208);
  for (int n = 0; n < 256; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

}  // namespace

Status dequantize(DType t, std::span<const uint8_t> src, std::span<float> dst) {
  const DTypeInfo info = dtype_info(t);
  auto need = dtype_bytes(t, dst.size());
  if (!need || *need != src.size())
    return invalid_argument("dequantize " + std::string(info.name) + ": " + std::to_string(src.size()) +
                            " bytes for " + std::to_string(dst.size()) + " elements");
  const uint8_t* s = src.data();
  float* y = dst.data();
  const size_t blocks = dst.size() / static_cast<size_t>(info.block_elems);
  for (size_t i = 0; i < blocks; ++i, s += info.block_bytes, y += info.block_elems) {
    switch (t) {
      case DType::kF32: std::memcpy(y, s, 4); break;
      case DType::kF16: *y = half_at(s); break;
      case DType::kBF16: {
        uint16_t h;
        std::memcpy(&h, s, 2);
        *y = bf16_to_f32(h);
        break;
      }
      case DType::kQ4_0: dq_q4_0(s, y); break;
      case DType::kQ4_1: dq_q4_1(s, y); break;
      case DType::kQ8_0: dq_q8_0(s, y); break;
      case DType::kQ4_K: dq_q4_k(s, y); break;
      case DType::kQ5_K: dq_q5_k(s, y); break;
      case DType::kQ6_K: dq_q6_k(s, y); break;
      case DType::kQ5_0: dq_q5_0(s, y); break;
      case DType::kQ5_1: dq_q5_1(s, y); break;
      case DType::kIQ4_NL: dq_iq4_nl(s, y); break;
      case DType::kIQ4_XS: dq_iq4_xs(s, y); break;
    }
  }
  return Status::ok();
}

Status q4_k_to_w4_asym(std::span<const uint8_t> src, std::span<uint8_t> dst) {
  constexpr size_t kBlock = 144, kGroup = 20;
  if (src.size() % kBlock != 0 || dst.size() != src.size() / kBlock * 8 * kGroup)
    return invalid_argument("Q4_K to W4: " + std::to_string(src.size()) + " bytes are not whole blocks for " +
                            std::to_string(dst.size()) + " bytes of groups");
  auto to_half = [](float v, uint8_t* out) {
    const uint16_t h = f32_to_f16(v);
    if (!std::isfinite(f16_to_f32(h))) return false;
    std::memcpy(out, &h, 2);
    return true;
  };
  uint8_t* g = dst.data();
  for (size_t b = 0; b < src.size(); b += kBlock) {
    const uint8_t* blk = src.data() + b;
    const float d = half_at(blk), dmin = half_at(blk + 2);
    const uint8_t* scales = blk + 4;
    const uint8_t* q = blk + 16;
    for (int pair = 0; pair < 4; ++pair, q += 32) {
      for (int half = 0; half < 2; ++half, g += kGroup) {
        uint8_t sc, m;
        scale_min_k4(pair * 2 + half, scales, &sc, &m);
        if (!to_half(d * sc, g) || !to_half(-(dmin * m), g + 2))
          return invalid_argument("Q4_K block " + std::to_string(b / kBlock) + ": a scale or minimum beyond FP16");
        // Sub-block `half` is the low (0) or high (1) nibbles of q[0..31]; kiln's byte j holds
        // element j low and element j + 16 high.
        for (int j = 0; j < 16; ++j) {
          const int lo = half ? q[j] >> 4 : q[j] & 0x0f, hi = half ? q[j + 16] >> 4 : q[j + 16] & 0x0f;
          g[4 + j] = static_cast<uint8_t>(lo | (hi << 4));
        }
      }
    }
  }
  return Status::ok();
}

Status blocks_to_w8_g32(DType type, std::span<const uint8_t> src, std::span<uint8_t> dst) {
  if (type != DType::kQ5_0 && type != DType::kIQ4_NL)
    return invalid_argument(std::string(dtype_info(type).name) + " blocks are not W8 groups of 32");
  const size_t block = type == DType::kQ5_0 ? 22 : 18, group = 34;
  if (src.size() % block != 0 || dst.size() != src.size() / block * group)
    return invalid_argument(std::string(dtype_info(type).name) + " to W8: " + std::to_string(src.size()) +
                            " bytes are not whole blocks for " + std::to_string(dst.size()) + " bytes of groups");
  for (size_t b = 0, o = 0; b < src.size(); b += block, o += group) {
    const uint8_t* blk = src.data() + b;
    uint8_t* g = dst.data() + o;
    std::memcpy(g, blk, 2);  // the f16 scale
    if (type == DType::kQ5_0) {
      uint32_t qh;
      std::memcpy(&qh, blk + 2, 4);
      const uint8_t* qs = blk + 6;
      for (int j = 0; j < 16; ++j) {  // as dq_q5_0
        g[2 + j] = static_cast<uint8_t>(((qs[j] & 0x0f) | (qh >> j & 1u) << 4) - 16);
        g[2 + j + 16] = static_cast<uint8_t>(((qs[j] >> 4) | (qh >> (j + 16) & 1u) << 4) - 16);
      }
    } else {
      const uint8_t* qs = blk + 2;
      for (int j = 0; j < 16; ++j) {  // as dq_iq4_nl
        g[2 + j] = static_cast<uint8_t>(kIq4NlLevels[qs[j] & 0x0f]);
        g[2 + j + 16] = static_cast<uint8_t>(kIq4NlLevels[qs[j] >> 4]);
      }
    }
  }
  return Status::ok();
}

void q4_k_scale_min(const uint8_t* block, int j, uint8_t* scale, uint8_t* min) { scale_min_k4(j, block + 4, scale, min); }

void q4_k_set_scale_min(uint8_t* block, int j, unsigned scale, unsigned min) {
  uint8_t* q = block + 4;  // the inverse of scale_min_k4
  if (j < 4) {
    q[j] = static_cast<uint8_t>((q[j] & 0xc0) | scale);
    q[j + 4] = static_cast<uint8_t>((q[j + 4] & 0xc0) | min);
  } else {
    q[j + 4] = static_cast<uint8_t>((scale & 0x0f) | (min & 0x0f) << 4);
    q[j - 4] = static_cast<uint8_t>((q[j - 4] & 0x3f) | (scale >> 4) << 6);
    q[j] = static_cast<uint8_t>((q[j] & 0x3f) | (min >> 4) << 6);
  }
}

// The inverse of ggml_detail::k_nibble for one element.
namespace {
void set_k_nibble(uint8_t* qs, int e, unsigned u) {
  uint8_t& b = qs[(e / 64) * 32 + e % 32];
  b = e % 64 < 32 ? static_cast<uint8_t>((b & 0xf0) | u) : static_cast<uint8_t>((b & 0x0f) | u << 4);
}
}  // namespace

void q4_k_set_nibble(uint8_t* block, int e, unsigned u) { set_k_nibble(block + 16, e, u); }

// Q5_K's fifth bits: bit e / 32 of byte e % 32 of the 32 bytes at block + 16.
void q5_k_set_value(uint8_t* block, int e, unsigned u) {
  set_k_nibble(block + 48, e, u & 0x0fu);
  uint8_t& h = block[16 + e % 32];
  h = static_cast<uint8_t>((h & ~(1 << (e / 32))) | (u >> 4) << (e / 32));
}

// Q6_K's values: as q6_k_value reads them.
void q6_k_set_value(uint8_t* block, int e, unsigned q) {
  const int h = e / 128, l = e % 32, i = e % 128 / 32;
  uint8_t& lo = block[h * 64 + l + 32 * (i % 2)];
  uint8_t& hi = block[128 + h * 32 + l];
  const int ls = 4 * (i / 2), hs = 2 * i;
  lo = static_cast<uint8_t>((lo & ~(0x0f << ls)) | (q & 0x0fu) << ls);
  hi = static_cast<uint8_t>((hi & ~(3 << hs)) | (q >> 4) << hs);
}

// IQ4_XS: sub-block j's scale is d (ls - 32), ls 6 bits: the low 4 in nibble j % 2 of byte 4 + j / 2,
// the high 2 at bits 2 j of the u16 at byte 2 (dq_iq4_xs); element e of sub-block e / 32 is nibble
// e % 32 < 16 ? low : high of byte 8 + 16 (e / 32) + e % 16.
int iq4_xs_scale(const uint8_t* block, int j) {
  const int lo = (block[4 + j / 2] >> (4 * (j % 2))) & 0x0f, hi = (block[2 + j / 4] >> (2 * (j % 4))) & 3;
  return (lo | hi << 4) - 32;
}

void iq4_xs_set_scale(uint8_t* block, int j, int scale) {
  const auto ls = static_cast<unsigned>(scale + 32);
  uint8_t& lo = block[4 + j / 2];
  uint8_t& hi = block[2 + j / 4];
  lo = static_cast<uint8_t>((lo & ~(0x0f << (4 * (j % 2)))) | (ls & 0x0fu) << (4 * (j % 2)));
  hi = static_cast<uint8_t>((hi & ~(3 << (2 * (j % 4)))) | (ls >> 4) << (2 * (j % 4)));
}

unsigned iq4_xs_nibble(const uint8_t* block, int e) {
  const uint8_t b = block[8 + 16 * (e / 32) + e % 16];
  return e % 32 < 16 ? b & 0x0fu : b >> 4;
}

void q5_block32_set_value(uint8_t* block, bool asym, int e, unsigned u) {
  uint8_t* qh = block + (asym ? 4 : 2);
  uint8_t& b = qh[4 + e % 16];
  b = e < 16 ? static_cast<uint8_t>((b & 0xf0) | (u & 0x0fu)) : static_cast<uint8_t>((b & 0x0f) | (u & 0x0fu) << 4);
  qh[e / 8] = static_cast<uint8_t>((qh[e / 8] & ~(1 << (e % 8))) | (u >> 4) << (e % 8));
}

void iq4_xs_set_nibble(uint8_t* block, int e, unsigned u) {
  uint8_t& b = block[8 + 16 * (e / 32) + e % 16];
  b = e % 32 < 16 ? static_cast<uint8_t>((b & 0xf0) | u) : static_cast<uint8_t>((b & 0x0f) | u << 4);
}

}  // namespace kiln
