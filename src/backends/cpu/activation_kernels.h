// Activation preparation: what the quantized kernels read besides x (int8 rows, W8A16 digits,
// W4A16 16-bit rows, and their panels for prefill), made once per matmul.
#pragma once

#include "backends/cpu/kernel_helpers.h"

namespace kiln::cpu {
namespace {

// ---- activation preparation ----

// std::round (halves away from zero) without its library call, which took a third of quantizing
// a prefill's activations: v - trunc(v) is exact, so the comparison with 0.5 is too.
inline float round_half_away(float v) {
  const float t = std::trunc(v);
  return std::fabs(v - t) >= 0.5f ? t + std::copysign(1.0f, v) : t;
}

// The largest |x[i]| of n elements and whether all are finite, S::N at a time (the max is exact,
// so the lanes' order does not matter).
struct AbsMax {
  float absmax;
  bool finite;
};
template <class S>
inline AbsMax abs_max(const float* x, int64_t n) {
  using F = typename S::F;
  constexpr int N = S::N;
  F m = S::zero(), nonfinite = S::zero();
  const int64_t full = n / N * N;  // GCC 12 warns of an overflow in `i + N <= n`
  for (int64_t i = 0; i < full; i += N) {
    const F v = S::load(x + i);
    m = S::max(m, S::max(v, S::sub(S::zero(), v)));
    nonfinite = S::add(nonfinite, S::mul(v, S::zero()));  // NaN where an element is inf or NaN
  }
  alignas(64) float lanes[N];
  S::store(lanes, m);
  AbsMax r{0.0f, !std::isnan(S::sum(nonfinite))};
  for (float l : lanes) r.absmax = std::max(r.absmax, l);
  for (int64_t i = full; i < n; ++i) {
    r.finite &= std::isfinite(x[i]);
    r.absmax = std::max(r.absmax, std::fabs(x[i]));
  }
  return r;
}

// As quantize_activation_row in backends/ref/ref_matmul.cpp (the same values: the same f32 product and
// rounding per element), with k padded to q_stride with zeros, and the integer sums per group;
// S::N elements at a time (scalar, it was 17 % of a W4A8 prefill).
template <class S>
inline void quantize_rows(const float* x, int64_t x_stride, int n, int64_t cols, int group, int8_t* q, int64_t q_stride,
                          float* scales, int32_t* group_sums) {
  using F = typename S::F;
  constexpr int N = S::N;
  for (int t = 0; t < n; ++t) {
    const float* xt = x + t * x_stride;
    int8_t* qt = q + t * q_stride;
    const auto [absmax, finite] = abs_max<S>(xt, cols);
    if (!finite || absmax == 0.0f) {
      std::memset(qt, 0, static_cast<size_t>(q_stride));
      scales[t] = finite ? 0.0f : std::nanf("");
    } else {
      scales[t] = absmax / 127.0f;
      const float inv = 127.0f / absmax;
      const F vinv = S::set1(inv), lo = S::set1(-127.0f), hi = S::set1(127.0f);
      int64_t i = 0;
      for (; i + N <= cols; i += N)
        S::store_s8(qt + i, S::min(S::max(S::round_away(S::mul(S::load(xt + i), vinv)), lo), hi));
      for (; i < cols; ++i) qt[i] = static_cast<int8_t>(std::clamp(round_half_away(xt[i] * inv), -127.0f, 127.0f));
      for (i = cols; i < q_stride; ++i) qt[i] = 0;
    }
    if (group > 0)
      for (int64_t b = 0; b < cols / group; ++b) {
        int32_t s = 0;
        for (int j = 0; j < group; ++j) s += qt[b * group + j];
        group_sums[t * (cols / group) + b] = s;
      }
  }
}

// Panel p of kernels.h's q panels (P tokens each).
template <int P>
void make_q_panel(const int8_t* q, int64_t q_stride, const int32_t* group_sums, int n, int64_t cols, int group, int p,
                  int32_t* quads, int32_t* sums) {
  const int64_t kq = q_stride / 4, groups = group > 0 ? cols / group : 0;
  const int nt = std::min(P, n - p * P);
  int32_t* out = quads + p * kq * P;
  for (int64_t k = 0; k < kq; ++k) {
    for (int t = 0; t < nt; ++t) out[k * P + t] = load_i32(q + (p * P + t) * q_stride + 4 * k);
    for (int t = nt; t < P; ++t) out[k * P + t] = 0;
  }
  int32_t* so = sums + p * groups * P;
  for (int64_t b = 0; b < groups; ++b)
    for (int t = 0; t < P; ++t) so[b * P + t] = t < nt ? group_sums[(p * P + t) * groups + b] : 0;
}

// The prefill panels of kernels.h: n tokens of x as [ceil(n / NT)][cols][NT].
template <int NT>
void make_x_panels(const float* x, int64_t x_stride, int n, int64_t cols, float* panels) {
  for (int p = 0; p * NT < n; ++p) {
    float* out = panels + p * cols * NT;
    const int nt = std::min(NT, n - p * NT);
    for (int64_t k = 0; k < cols; ++k) {
      for (int t = 0; t < nt; ++t) out[k * NT + t] = x[(p * NT + t) * x_stride + k];
      for (int t = nt; t < NT; ++t) out[k * NT + t] = 0.0f;
    }
  }
}

// The digits of kernels.h for one row of x (cols a multiple of 32), S::N elements at a time: it
// runs on one thread before every decode matmul of an A16 scheme, and scalar it was ~2.5 % of a
// TinyLlama token. Every table computes the same digits: the same f32 operations per element,
// ties to even.
template <class S>
inline void make_digits(const float* x, int64_t cols, int8_t* digits, float* scales, int32_t* sums,
                        int32_t* plane_sums) {
  using F = typename S::F;
  constexpr int N = S::N;
  static_assert(32 % N == 0);
  const int64_t nb = cols / 32;
  int8_t* d1 = digits;
  int8_t* d2 = d1 + cols;
  int8_t* d3 = d2 + cols;
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * 32;
    const auto [absmax, finite] = abs_max<S>(xb, 32);
    int32_t p1 = 0, p2 = 0, p3 = 0;
    if (!finite || absmax == 0.0f) {
      for (int i = 0; i < 32; ++i) d1[b * 32 + i] = d2[b * 32 + i] = d3[b * 32 + i] = 0;
      scales[b] = finite ? 0.0f : std::nanf("");
    } else {
      // r - q and the scalings by 128 are exact: X / 16384 is r rounded to 2^-14. The plane sums
      // (at most 32 * 127) are exact in f32.
      const F inv = S::set1(127.0f / absmax), lo = S::set1(-127.0f), hi = S::set1(127.0f), k128 = S::set1(128.0f);
      F s1 = S::zero(), s2 = S::zero(), s3 = S::zero();
      for (int i = 0; i < 32; i += N) {
        const F r0 = S::mul(S::load(xb + i), inv);
        const F q1 = S::min(S::max(S::round_even(r0), lo), hi);
        const F r1 = S::mul(S::sub(r0, q1), k128);
        const F q2 = S::min(S::max(S::round_even(r1), lo), hi);
        const F q3 = S::min(S::max(S::round_even(S::mul(S::sub(r1, q2), k128)), lo), hi);
        S::store_s8(d1 + b * 32 + i, q1);
        S::store_s8(d2 + b * 32 + i, q2);
        S::store_s8(d3 + b * 32 + i, q3);
        s1 = S::add(s1, q1);
        s2 = S::add(s2, q2);
        s3 = S::add(s3, q3);
      }
      p1 = static_cast<int32_t>(S::sum(s1));
      p2 = static_cast<int32_t>(S::sum(s2));
      p3 = static_cast<int32_t>(S::sum(s3));
      scales[b] = absmax / 127.0f / 16384.0f;
    }
    const int32_t sum = 16384 * p1 + 128 * p2 + p3;
    sums[b] = sum;
    plane_sums[b] = p1;
    plane_sums[nb + b] = p2;
    plane_sums[2 * nb + b] = p3;
  }
}

// backends/ref/ref_matmul.h's W4A16 rounding of one row of x (cols a multiple of 32), S::N elements at
// a time with the same f32 operations (ties to even), each X written as the digits
// hi = floor((X + 128) / 256) in [-127, 127] and lo = X - 256 hi in [-128, 127] (exact in f32).
template <class S>
inline void make_a16(const float* x, int64_t cols, int8_t* digits, float* scales, int32_t* sums) {
  using F = typename S::F;
  constexpr int N = S::N;
  static_assert(32 % N == 0);
  int8_t* hi = digits;
  int8_t* lo = digits + cols;
  for (int64_t b = 0; b < cols / 32; ++b) {
    const float* xb = x + b * 32;
    const auto [absmax, finite] = abs_max<S>(xb, 32);
    if (!finite || absmax == 0.0f) {
      std::memset(hi + b * 32, 0, 32);
      std::memset(lo + b * 32, 0, 32);
      scales[b] = finite ? 0.0f : std::nanf("");
      sums[3 * b] = sums[3 * b + 1] = sums[3 * b + 2] = 0;
      continue;
    }
    const F inv = S::set1(127.0f / absmax), k256 = S::set1(256.0f), k128 = S::set1(128.0f), r256 = S::set1(1.0f / 256.0f),
            bound = S::set1(32512.0f), nbound = S::set1(-32512.0f);
    F sum = S::zero(), sum_hi = S::zero(), sum_lo = S::zero();  // at most 32 * 32512: exact in f32
    for (int i = 0; i < 32; i += N) {
      const F X = S::min(S::max(S::round_even(S::mul(S::mul(S::load(xb + i), inv), k256)), nbound), bound);
      const F h = S::floor(S::mul(S::add(X, k128), r256)), l = S::sub(X, S::mul(h, k256));
      S::store_s8(hi + b * 32 + i, h);
      S::store_s8(lo + b * 32 + i, l);
      sum = S::add(sum, X);
      sum_hi = S::add(sum_hi, h);
      sum_lo = S::add(sum_lo, l);
    }
    scales[b] = absmax / 127.0f / 256.0f;
    sums[3 * b] = static_cast<int32_t>(S::sum(sum));
    sums[3 * b + 1] = -8 * static_cast<int32_t>(S::sum(sum_hi));
    sums[3 * b + 2] = -8 * static_cast<int32_t>(S::sum(sum_lo));
  }
}

// The scales and sums of panel p of the a16 panels (digits or words, below) from make_a16's rows.
template <int P>
void a16_panel_scales_sums(const float* scales, const int32_t* sums, int n, int64_t cols, int p, float* panel_scales,
                           int32_t* panel_sums) {
  const int64_t nb = cols / 32;
  const int nt = std::min(P, n - p * P);
  float* so = panel_scales + p * nb * P;
  int32_t* sm = panel_sums + p * nb * 3 * P;
  for (int64_t b = 0; b < nb; ++b)
    for (int t = 0; t < P; ++t) {
      so[b * P + t] = t < nt ? scales[(p * P + t) * nb + b] : 0.0f;
      for (int j = 0; j < 3; ++j) sm[(b * 3 + j) * P + t] = t < nt ? sums[((p * P + t) * nb + b) * 3 + j] : 0;
    }
}

// Panel p of kernels.h's a16 panels (P tokens each) from the rows of make_a16.
template <int P>
void make_a16_panel(const int8_t* digits, const float* scales, const int32_t* sums, int n, int64_t cols, int p,
                    int32_t* quads, float* panel_scales, int32_t* panel_sums) {
  const int64_t kq = cols / 4;
  const int nt = std::min(P, n - p * P);
  int32_t* out = quads + p * kq * 2 * P;
  for (int64_t k = 0; k < kq; ++k)
    for (int plane = 0; plane < 2; ++plane) {
      int32_t* o = out + (k * 2 + plane) * P;
      for (int t = 0; t < nt; ++t) o[t] = load_i32(digits + ((p * P + t) * 2 + plane) * cols + 4 * k);
      for (int t = nt; t < P; ++t) o[t] = 0;
    }
  a16_panel_scales_sums<P>(scales, sums, n, cols, p, panel_scales, panel_sums);
}

// Panel p of kernels.h's a16 word panels: per pair of elements (2j, 2j + 1) and token the u32
// X[2j] | X[2j + 1] << 16 (X = 256 hi + lo, 16-bit two's complement), [cols / 2][P].
template <int P>
void make_a16_word_panel(const int8_t* digits, const float* scales, const int32_t* sums, int n, int64_t cols, int p,
                         int32_t* words, float* panel_scales, int32_t* panel_sums) {
  const int nt = std::min(P, n - p * P);
  int32_t* out = words + p * (cols / 2) * P;
  for (int t = 0; t < P; ++t) {
    const int8_t* hi = t < nt ? digits + (p * P + t) * 2 * cols : nullptr;
    for (int64_t j = 0; j < cols / 2; ++j) {
      uint32_t v = 0;
      if (hi) {
        const int8_t* lo = hi + cols;
        const auto x0 = static_cast<uint16_t>(256 * hi[2 * j] + lo[2 * j]);
        const auto x1 = static_cast<uint16_t>(256 * hi[2 * j + 1] + lo[2 * j + 1]);
        v = x0 | static_cast<uint32_t>(x1) << 16;
      }
      out[j * P + t] = static_cast<int32_t>(v);
    }
  }
  a16_panel_scales_sums<P>(scales, sums, n, cols, p, panel_scales, panel_sums);
}

}  // namespace
}  // namespace kiln::cpu
