// The portable traits: plain C++ "vectors" of 16 lanes, for machines without the instruction
// sets below and as the scalar twin every SIMD table is tested against.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace kiln::cpu {

namespace {

struct Generic {
  static constexpr int N = 16;
  static constexpr int kDecodeRT = 2;
  static constexpr int kDigitRT = 1;
  static constexpr int kPrefillNT = 4;
  static constexpr int kPrefillRT = 1;
  static constexpr int kA8RT = 1;
  static constexpr int kA8NT = 4;
  static constexpr int kA16RT = 1;
  static constexpr int kA16NT = 4;
  static constexpr int kA16DecodeRT = 1;
  static constexpr int kW8Bias = 0;
  struct F {
    float v[N];
  };
  struct I {
    uint32_t v[N];
  };
  static F zero() { return set1(0.0f); }
  static F set1(float x) {
    F r;
    for (float& e : r.v) e = x;
    return r;
  }
  static F load(const float* p) {
    F r;
    std::memcpy(r.v, p, sizeof r.v);
    return r;
  }
  static void store(float* p, const F& a) { std::memcpy(p, a.v, sizeof a.v); }
  static F fma(const F& a, const F& b, const F& c) {
    F r;
    for (int i = 0; i < N; ++i) r.v[i] = a.v[i] * b.v[i] + c.v[i];
    return r;
  }
  static F mul(const F& a, const F& b) {
    F r;
    for (int i = 0; i < N; ++i) r.v[i] = a.v[i] * b.v[i];
    return r;
  }
  static F add(const F& a, const F& b) {
    F r;
    for (int i = 0; i < N; ++i) r.v[i] = a.v[i] + b.v[i];
    return r;
  }
  static F sub(const F& a, const F& b) {
    F r;
    for (int i = 0; i < N; ++i) r.v[i] = a.v[i] - b.v[i];
    return r;
  }
  static F min(const F& a, const F& b) {
    F r;
    for (int i = 0; i < N; ++i) r.v[i] = a.v[i] < b.v[i] ? a.v[i] : b.v[i];
    return r;
  }
  static F max(const F& a, const F& b) {
    F r;
    for (int i = 0; i < N; ++i) r.v[i] = a.v[i] > b.v[i] ? a.v[i] : b.v[i];
    return r;
  }
  static F round_even(const F& a) {
    F r;
    for (int i = 0; i < N; ++i) r.v[i] = std::nearbyint(a.v[i]);
    return r;
  }
  static F floor(const F& a) {
    F r;
    for (int i = 0; i < N; ++i) r.v[i] = std::floor(a.v[i]);
    return r;
  }
  static F round_away(const F& a) {
    F r;
    for (int i = 0; i < N; ++i) r.v[i] = round_half_away(a.v[i]);
    return r;
  }
  static void store_s8(int8_t* p, const F& a) {
    for (int i = 0; i < N; ++i) p[i] = static_cast<int8_t>(a.v[i]);
  }
  static F pow2i(const F& n) {
    F r;
    for (int i = 0; i < N; ++i) r.v[i] = std::bit_cast<float>((static_cast<int32_t>(n.v[i]) + 127) << 23);
    return r;
  }
  static float sum(const F& a) {
    float s = 0.0f;
    for (float e : a.v) s += e;
    return s;
  }
  static float hmax(const F& a) {
    float m = a.v[0];
    for (float e : a.v) m = e > m ? e : m;
    return m;
  }
  static I zeroi() { return I{}; }
  static I set1i(int32_t x) {
    I r;
    for (int i = 0; i < N; ++i) r.v[i] = static_cast<uint32_t>(x);
    return r;
  }
  static I loadi(const uint8_t* p) {
    I r;
    std::memcpy(r.v, p, sizeof r.v);
    return r;
  }
  template <int s>
  static I srli(const I& a) {
    I r;
    for (int i = 0; i < N; ++i) r.v[i] = a.v[i] >> s;
    return r;
  }
  template <int s>
  static I slli(const I& a) {
    I r;
    for (int i = 0; i < N; ++i) r.v[i] = a.v[i] << s;
    return r;
  }
  static I addv(const I& a, const I& b) {
    I r;
    for (int i = 0; i < N; ++i) r.v[i] = a.v[i] + b.v[i];
    return r;
  }
  static I subv(const I& a, const I& b) {
    I r;
    for (int i = 0; i < N; ++i) r.v[i] = a.v[i] - b.v[i];
    return r;
  }
  static I subi(const I& a, int32_t b) {
    I r;
    for (int i = 0; i < N; ++i) r.v[i] = a.v[i] - static_cast<uint32_t>(b);
    return r;
  }
  static F cvt(const I& a) {
    F r;
    for (int i = 0; i < N; ++i) r.v[i] = static_cast<float>(static_cast<int32_t>(a.v[i]));
    return r;
  }
  static I andv(const I& a, const I& b) {
    I r;
    for (int i = 0; i < N; ++i) r.v[i] = a.v[i] & b.v[i];
    return r;
  }
  static I orv(const I& a, const I& b) {
    I r;
    for (int i = 0; i < N; ++i) r.v[i] = a.v[i] | b.v[i];
    return r;
  }
  static I lookup16(const I& idx, const int8_t* table) {
    I r;
    for (int i = 0; i < N; ++i) {
      uint32_t v = 0;
      for (int b = 0; b < 4; ++b) v |= static_cast<uint32_t>(static_cast<uint8_t>(table[(idx.v[i] >> (8 * b)) & 15u])) << (8 * b);
      r.v[i] = v;
    }
    return r;
  }
  static I from_u8(const uint8_t* p) {
    I r;
    for (int i = 0; i < N; ++i) r.v[i] = p[i];
    return r;
  }
  static I lo_nibbles(const I& a) {
    I r;
    for (int i = 0; i < N; ++i) r.v[i] = a.v[i] & 0x0f0f0f0fu;
    return r;
  }
  static I hi_nibbles(const I& a) {
    I r;
    for (int i = 0; i < N; ++i) r.v[i] = (a.v[i] >> 4) & 0x0f0f0f0fu;
    return r;
  }
  static F from_f16(const uint8_t* p) {
    F r;
    for (int i = 0; i < N; ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      r.v[i] = f16_to_f32(h);
    }
    return r;
  }
  static F from_bf16(const uint8_t* p) {
    F r;
    for (int i = 0; i < N; ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      r.v[i] = bf16_to_f32(h);
    }
    return r;
  }
  static F from_s8(const uint8_t* p) {
    F r;
    for (int i = 0; i < N; ++i) r.v[i] = static_cast<float>(static_cast<int8_t>(p[i]));
    return r;
  }
  static int32_t dot4(uint32_t w, int32_t x4, bool w_signed) {
    int32_t s = 0;
    for (int j = 0; j < 4; ++j) {
      const auto wb = static_cast<uint8_t>(w >> (8 * j));
      const int wv = w_signed ? static_cast<int8_t>(wb) : wb;
      s += wv * static_cast<int8_t>(static_cast<uint32_t>(x4) >> (8 * j));
    }
    return s;
  }
  static I dot_u4(const I& acc, const I& w, int32_t x4) {
    I r;
    for (int i = 0; i < N; ++i) r.v[i] = acc.v[i] + static_cast<uint32_t>(dot4(w.v[i], x4, false));
    return r;
  }
  template <int j>
  static I sext_byte(const I& a) {
    I r;
    for (int i = 0; i < N; ++i) r.v[i] = static_cast<uint32_t>(static_cast<int32_t>(static_cast<int8_t>(a.v[i] >> (8 * j))));
    return r;
  }
  static constexpr int kW8DigitBias = 0;
  static I w8_prep(const I& w) { return w; }
  static I dot_w8(const I& acc, const I& w, int32_t x4) { return dot_s8(acc, w, x4); }
  static I dot_lv(const I& acc, const I& w, int32_t x4) { return dot_s8(acc, w, x4); }
  static I dot_s8(const I& acc, const I& w, int32_t x4) {
    I r;
    for (int i = 0; i < N; ++i) r.v[i] = acc.v[i] + static_cast<uint32_t>(dot4(w.v[i], x4, true));
    return r;
  }
};

}  // namespace
}  // namespace kiln::cpu
