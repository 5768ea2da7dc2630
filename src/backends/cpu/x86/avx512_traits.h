// The AVX-512 traits (F, BW, VL, VNNI) shared by avx512.cpp and amx.cpp: 16 lanes, one vector
// per tile column; 4-bit columns through a 16-entry permute, int8 dot products with vpdpbusd.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace kiln::cpu {
namespace {

struct Avx512 {
  static constexpr int N = 16;
  static constexpr int kDecodeRT = 4;
  static constexpr int kDigitRT = 4;
  static constexpr int kPrefillNT = 12;
  static constexpr int kPrefillRT = 2;
  static constexpr int kA8RT = 2;
  static constexpr int kA8NT = 6;
  static constexpr int kA16RT = 2;
  static constexpr int kA16NT = 4;
  static constexpr int kA16DecodeRT = 8;
  // W4A16, W4A8 and W8A8 read the activation rows, not panels, for steps of up to 8 tokens
  // (their blocks with kPanels false).
  static constexpr int kRowsMaxNT = 8;
  // W4A16 prefill with 16-bit products (w4a16_kernels.h: w4a16_words_block) from 24 tokens on.
  static constexpr int64_t kA16WordsRunBytes = 512 << 10;  // widened tiles per run, at most (of L2's 1-2 MiB)
  static constexpr int kA16WordsNT = 6;
  static constexpr int kA16WordsMinRows = 24;
  static constexpr int kAttnBlock = 64;  // keys per attention block: four vectors
  static constexpr int kW8Bias = 128;  // vpdpbusd multiplies u8 by s8: x + 128 by w
  using F = __m512;
  using I = __m512i;
  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float x) { return _mm512_set1_ps(x); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F a) { _mm512_storeu_ps(p, a); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F min(F a, F b) { return _mm512_min_ps(a, b); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static F round_even(F a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static F floor(F a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
  // Halves away from zero (std::round): v - trunc(v) is exact, so is its comparison with 0.5.
  static F round_away(F a) {
    const F t = _mm512_roundscale_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const F f = _mm512_sub_ps(a, t);
    const __mmask16 up = _mm512_cmp_ps_mask(_mm512_max_ps(f, _mm512_sub_ps(_mm512_setzero_ps(), f)), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    const F one = _mm512_castsi512_ps(_mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN)),
                                                      _mm512_set1_epi32(0x3f800000)));  // +-1, AVX-512F only
    return _mm512_mask_add_ps(t, up, t, one);
  }
  // The lanes, whole numbers in [-128, 127], as int8.
  static void store_s8(int8_t* p, F a) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(a)));
  }
  static F pow2i(F n) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23));
  }
  static float sum(F a) { return _mm512_reduce_add_ps(a); }
  static float hmax(F a) { return _mm512_reduce_max_ps(a); }
  static I zeroi() { return _mm512_setzero_si512(); }
  static I set1i(int32_t x) { return _mm512_set1_epi32(x); }
  static I loadi(const uint8_t* p) { return _mm512_loadu_si512(p); }
  template <int s>
  static I srli(I a) { return _mm512_srli_epi32(a, s); }
  template <int s>
  static I slli(I a) { return _mm512_slli_epi32(a, s); }
  static I addv(I a, I b) { return _mm512_add_epi32(a, b); }
  static I subv(I a, I b) { return _mm512_sub_epi32(a, b); }
  static I subi(I a, int32_t b) { return _mm512_sub_epi32(a, _mm512_set1_epi32(b)); }
  static F cvt(I a) { return _mm512_cvtepi32_ps(a); }
  static I andv(I a, I b) { return _mm512_and_si512(a, b); }
  static I orv(I a, I b) { return _mm512_or_si512(a, b); }
  static I lookup16(I idx, const int8_t* table) {
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table))), idx);
  }
  static I from_u8(const uint8_t* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static I lo_nibbles(I a) { return _mm512_and_si512(a, _mm512_set1_epi8(0x0f)); }
  static I hi_nibbles(I a) { return _mm512_and_si512(_mm512_srli_epi32(a, 4), _mm512_set1_epi8(0x0f)); }
  static F from_f16(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static F from_bf16(const uint8_t* p) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  }
  static F from_s8(const uint8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static I dot_u4(I acc, I w, int32_t x4) { return _mm512_dpbusd_epi32(acc, w, _mm512_set1_epi32(x4)); }
  // acc[i] += w.lo16[i] x2.lo16 + w.hi16[i] x2.hi16, signed 16-bit.
  static I dot_w16(I acc, I w, int32_t x2) { return _mm512_dpwssd_epi32(acc, w, _mm512_set1_epi32(x2)); }
  static void storei(uint8_t* p, I a) { _mm512_storeu_si512(p, a); }
  // The 8 nibbles of each row's u32 (layouts.h: byte m holds elements m and 4 + m) as the 16-bit
  // pairs of elements (0, 1), (2, 3), (4, 5), (6, 7), less `bias` each.
  static void nibble_pairs(I q, int16_t bias, I out[4]) {
    const I lo = _mm512_set1_epi32(0x0000000f), hi = _mm512_set1_epi32(0x000f0000), b = _mm512_set1_epi16(bias);
    auto pair = [&](I a, I c) { return _mm512_sub_epi16(_mm512_or_si512(_mm512_and_si512(a, lo), _mm512_and_si512(c, hi)), b); };
    out[0] = pair(q, _mm512_slli_epi32(q, 8));
    out[1] = pair(_mm512_srli_epi32(q, 16), _mm512_srli_epi32(q, 8));
    out[2] = pair(_mm512_srli_epi32(q, 4), _mm512_slli_epi32(q, 4));
    out[3] = pair(_mm512_srli_epi32(q, 20), _mm512_srli_epi32(q, 12));
  }
  template <int j>
  static I sext_byte(I a) { return _mm512_srai_epi32(_mm512_slli_epi32(a, 24 - 8 * j), 24); }
  // vpdpbusd multiplies u8 by s8: w + 128 (w xor 0x80) by the digits, and the kernel takes
  // 128 * sum x back off.
  static constexpr int kW8DigitBias = 128;
  static I w8_prep(I w) { return _mm512_xor_si512(w, _mm512_set1_epi8(static_cast<char>(0x80))); }
  static I dot_w8(I acc, I w, int32_t x4) { return _mm512_dpbusd_epi32(acc, w, _mm512_set1_epi32(x4)); }
  static I dot_lv(I acc, I w, int32_t x4) { return dot_w8(acc, w, x4); }  // exact for any x4
  static I dot_s8(I acc, I w, int32_t x4) {
    return _mm512_dpbusd_epi32(acc, _mm512_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(x4) ^ 0x80808080u)), w);
  }
};

}  // namespace
}  // namespace kiln::cpu
