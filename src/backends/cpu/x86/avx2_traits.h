// The AVX2 traits (AVX2, FMA, F16C): 8 lanes, two vectors per tile column.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace kiln::cpu {
namespace {

struct Avx2 {
  static constexpr int N = 8;
  static constexpr int kDecodeRT = 2;
  static constexpr int kDigitRT = 1;
  static constexpr int kPrefillNT = 3;
  static constexpr int kPrefillRT = 1;
  static constexpr int kA8RT = 1;
  static constexpr int kA8NT = 3;
  static constexpr int kA16RT = 1;
  static constexpr int kA16NT = 1;
  static constexpr int kA16DecodeRT = 1;
  static constexpr int kKRowsNT = 4;  // q4k_rows, q6k_rows: tokens per block (a tile's half at a time)
  static constexpr int kW8Bias = 0;  // |w| times sign(x, w): no bias to remove
  using F = __m256;
  using I = __m256i;
  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float x) { return _mm256_set1_ps(x); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F a) { _mm256_storeu_ps(p, a); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F min(F a, F b) { return _mm256_min_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F round_even(F a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static F floor(F a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
  // Halves away from zero (std::round): v - trunc(v) is exact, so is its comparison with 0.5.
  static F round_away(F a) {
    const F t = _mm256_round_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const F f = _mm256_sub_ps(a, t);
    const F up = _mm256_cmp_ps(_mm256_max_ps(f, _mm256_sub_ps(_mm256_setzero_ps(), f)), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    const F one = _mm256_or_ps(_mm256_and_ps(a, _mm256_set1_ps(-0.0f)), _mm256_set1_ps(1.0f));
    return _mm256_add_ps(t, _mm256_and_ps(up, one));
  }
  // The lanes, whole numbers in [-128, 127], as int8.
  static void store_s8(int8_t* p, F a) {
    const __m256i i = _mm256_cvtps_epi32(a);
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packs_epi16(w, w));
  }
  static F pow2i(F n) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23));
  }
  static float sum(F a) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
  }
  static float hmax(F a) {
    const __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 t = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(t, _mm_shuffle_ps(t, t, 1)));
  }
  static I zeroi() { return _mm256_setzero_si256(); }
  static I set1i(int32_t x) { return _mm256_set1_epi32(x); }
  static I loadi(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  template <int s>
  static I srli(I a) { return _mm256_srli_epi32(a, s); }
  template <int s>
  static I slli(I a) { return _mm256_slli_epi32(a, s); }
  static I addv(I a, I b) { return _mm256_add_epi32(a, b); }
  static I subv(I a, I b) { return _mm256_sub_epi32(a, b); }
  static I subi(I a, int32_t b) { return _mm256_sub_epi32(a, _mm256_set1_epi32(b)); }
  static F cvt(I a) { return _mm256_cvtepi32_ps(a); }
  static I andv(I a, I b) { return _mm256_and_si256(a, b); }
  static I orv(I a, I b) { return _mm256_or_si256(a, b); }
  static I lookup16(I idx, const int8_t* table) {
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table))), idx);
  }
  static I from_u8(const uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
  static I lo_nibbles(I a) { return _mm256_and_si256(a, _mm256_set1_epi8(0x0f)); }
  static I hi_nibbles(I a) { return _mm256_and_si256(_mm256_srli_epi32(a, 4), _mm256_set1_epi8(0x0f)); }
  static F from_f16(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static F from_bf16(const uint8_t* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
  static F from_s8(const uint8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static I dot_u4(I acc, I w, int32_t x4) {
    const __m256i p = _mm256_maddubs_epi16(w, _mm256_set1_epi32(x4));  // nibbles <= 15: no saturation
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
  }
  // dot_u4 with the pair sums kept as int16 (one multiply instead of two): acc16's 16 lanes of
  // int16 gain u8(w) s8(x4) pair sums; exact while a lane sums at most 16 products of a nibble
  // (<= 15) and an int8 (16 x 15 x 128 = 30720). widen_u4_16 adds a lane's pairs into acc.
  static I dot_u4_16(I acc16, I w, int32_t x4) { return _mm256_add_epi16(acc16, _mm256_maddubs_epi16(w, _mm256_set1_epi32(x4))); }
  static I widen_u4_16(I acc, I acc16) { return _mm256_add_epi32(acc, _mm256_madd_epi16(acc16, _mm256_set1_epi16(1))); }
  // The int16 lanes' pairs summed into int32 (with ones16: their sum; q6k_decode's widening).
  static I ones16() { return _mm256_set1_epi16(1); }
  static I madd16(I a, I b) { return _mm256_madd_epi16(a, b); }
  template <int j>
  static I sext_byte(I a) { return _mm256_srai_epi32(_mm256_slli_epi32(a, 24 - 8 * j), 24); }
  static constexpr int kW8DigitBias = 0;  // dot_s8 multiplies |w| by sign(x, w): no bias
  static I w8_prep(I w) { return w; }
  static I dot_w8(I acc, I w, int32_t x4) { return dot_s8(acc, w, x4); }
  // As dot_w8 for weights in [-127, 127] and any x4 (a16's low digit reaches -128, which dot_s8's
  // sign trick would negate into itself): |x| unsigned times w carrying x's sign.
  static I dot_lv(I acc, I w, int32_t x4) {
    const __m256i x = _mm256_set1_epi32(x4);
    const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(x), _mm256_sign_epi8(w, x));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
  }
  static I dot_s8(I acc, I w, int32_t x4) {
    const __m256i x = _mm256_set1_epi32(x4);
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
  }
};

}  // namespace
}  // namespace kiln::cpu
