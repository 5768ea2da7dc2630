// NEON traits shared by the ARM64 files: 4 lanes, four vectors per tile column. The int8 dot
// products are the one difference between the files: widening multiplies on plain NEON, SDOT
// where the CPU has dotprod (KILN_ARM_DOTPROD).
#pragma once

#include <arm_neon.h>

#include <cstring>

namespace kiln::cpu {
namespace {

struct Neon {
  static constexpr int N = 4;
  static constexpr int kDecodeRT = 2;
  static constexpr int kDigitRT = 1;
  static constexpr int kPrefillNT = 4;
  static constexpr int kPrefillRT = 1;
  static constexpr int kA8RT = 1;
  static constexpr int kA8NT = 4;
  static constexpr int kA16RT = 1;
  static constexpr int kA16NT = 2;
  static constexpr int kA16DecodeRT = 1;
  static constexpr int kW8Bias = 0;
  using F = float32x4_t;
  using I = uint32x4_t;
  static F zero() { return vdupq_n_f32(0.0f); }
  static F set1(float x) { return vdupq_n_f32(x); }
  static F load(const float* p) { return vld1q_f32(p); }
  static void store(float* p, F a) { vst1q_f32(p, a); }
  static F fma(F a, F b, F c) { return vfmaq_f32(c, a, b); }
  static F mul(F a, F b) { return vmulq_f32(a, b); }
  static F add(F a, F b) { return vaddq_f32(a, b); }
  static F sub(F a, F b) { return vsubq_f32(a, b); }
  static F min(F a, F b) { return vminq_f32(a, b); }
  static F max(F a, F b) { return vmaxq_f32(a, b); }
  static F round_even(F a) { return vrndnq_f32(a); }
  static F floor(F a) { return vrndmq_f32(a); }
  static F round_away(F a) { return vrndaq_f32(a); }  // halves away from zero, as std::round
  // The lanes, whole numbers in [-128, 127], as int8.
  static void store_s8(int8_t* p, F a) {
    const int16x4_t h = vmovn_s32(vcvtq_s32_f32(a));
    const int8x8_t b = vmovn_s16(vcombine_s16(h, h));
    vst1_lane_s32(reinterpret_cast<int32_t*>(p), vreinterpret_s32_s8(b), 0);
  }
  static F pow2i(F n) {
    return vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23));
  }
  static float sum(F a) { return vaddvq_f32(a); }
  static float hmax(F a) { return vmaxvq_f32(a); }
  static I zeroi() { return vdupq_n_u32(0); }
  static I set1i(int32_t x) { return vdupq_n_u32(static_cast<uint32_t>(x)); }
  static I loadi(const uint8_t* p) { return vld1q_u32(reinterpret_cast<const uint32_t*>(p)); }
  template <int s>
  static I srli(I a) {
    if constexpr (s == 0) return a;
    else return vshrq_n_u32(a, s);
  }
  template <int s>
  static I slli(I a) { return vshlq_n_u32(a, s); }
  static I addv(I a, I b) { return vaddq_u32(a, b); }
  static I subv(I a, I b) { return vsubq_u32(a, b); }
  static I subi(I a, int32_t b) { return vsubq_u32(a, vdupq_n_u32(static_cast<uint32_t>(b))); }
  static F cvt(I a) { return vcvtq_f32_s32(vreinterpretq_s32_u32(a)); }
  static I andv(I a, I b) { return vandq_u32(a, b); }
  static I orv(I a, I b) { return vorrq_u32(a, b); }
  static I lookup16(I idx, const int8_t* table) {
    return vreinterpretq_u32_s8(vqtbl1q_s8(vld1q_s8(table), vreinterpretq_u8_u32(idx)));
  }
  static I from_u8(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return vmovl_u16(vget_low_u16(vmovl_u8(vreinterpret_u8_u32(vdup_n_u32(v)))));
  }
  static I lo_nibbles(I a) { return vandq_u32(a, vdupq_n_u32(0x0f0f0f0fu)); }
  static I hi_nibbles(I a) { return vandq_u32(vshrq_n_u32(a, 4), vdupq_n_u32(0x0f0f0f0fu)); }
  static F from_f16(const uint8_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p)))); }
  static F from_bf16(const uint8_t* p) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p)), 16));
  }
  static F from_s8(const uint8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    const int16x8_t w = vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(v)));
    return vcvtq_f32_s32(vmovl_s16(vget_low_s16(w)));
  }
  static I dot4(I acc, I w, int32_t x4) {
    const int8x16_t a = vreinterpretq_s8_u32(w);
    const int8x16_t b = vreinterpretq_s8_s32(vdupq_n_s32(x4));
#if defined(KILN_ARM_DOTPROD)
    return vreinterpretq_u32_s32(vdotq_s32(vreinterpretq_s32_u32(acc), a, b));
#else
    // |products| <= 127 * 128: a pair fits int16, the four are summed in int32.
    const int16x8_t p0 = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    const int16x8_t p1 = vmull_s8(vget_high_s8(a), vget_high_s8(b));
    return vreinterpretq_u32_s32(vpadalq_s16(vreinterpretq_s32_u32(acc), vpaddq_s16(p0, p1)));
#endif
  }
  template <int j>
  static I sext_byte(I a) {
    return vreinterpretq_u32_s32(vshrq_n_s32(vreinterpretq_s32_u32(vshlq_n_u32(a, 24 - 8 * j)), 24));
  }
  static constexpr int kW8DigitBias = 0;
  static I w8_prep(I w) { return w; }
  static I dot_w8(I acc, I w, int32_t x4) { return dot4(acc, w, x4); }
  static I dot_lv(I acc, I w, int32_t x4) { return dot4(acc, w, x4); }
  static I dot_u4(I acc, I w, int32_t x4) { return dot4(acc, w, x4); }  // nibbles 0..15 are valid s8
  static I dot_s8(I acc, I w, int32_t x4) { return dot4(acc, w, x4); }
};

}  // namespace
}  // namespace kiln::cpu
