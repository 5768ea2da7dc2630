// The CPU kernels, written once over a SIMD traits type S and instantiated by one thin file per
// instruction set (which defines S and calls fill_table<S>). Include only from those files.
//
// S provides, for N f32 lanes (16 / N vectors make one 16-row tile column):
//   F, I               float and int32 vectors
//   zero set1 load store fma(a,b,c)=a*b+c mul add sub min max sum hmax (the largest lane)
//   pow2i(F)           2^n for lanes holding integers n in [-126, 127]
//   loadi(p)           N u32 from p
//   srli<s>(I)         logical right shift of each u32
//   floor(F)           round toward -infinity
//   from_f16/bf16/s8(p) N values at p as floats
//   lo_nibbles(I), hi_nibbles(I)   v & 0x0f0f0f0f, (v >> 4) & 0x0f0f0f0f
//   dot_u4(acc, w, x4) acc[i] += sum_j u8(w[4i+j]) * s8(x4[j])      (w: nibbles 0..15)
//   dot_s8(acc, w, x4) acc[i] += sum_j s8(w[4i+j]) * s8(x4[j]) + kW8Bias * sum_j s8(w[4i+j])
//   zeroi set1i(int32) subi(I, int32) addv(I, I) subv(I, I) slli<s>(I) cvt(I)
//   sext_byte<j>(I)    byte j of each u32, sign-extended
//   w8_prep(I), dot_w8(acc, w', x4)   acc[i] += sum_j s8(w[4i+j]) * s8(x4[j]) + kW8DigitBias *
//                                     sum_j s8(x4[j]), with w' = w8_prep(w) computed once
//   kDecodeRT, kDigitRT, kPrefillNT   tiles per decode block (float, digit kernels), tokens
//                                     per prefill block
//   kPrefillRT         tiles per float prefill block (each activation broadcast serves them all)
//   kA8RT, kA8NT       tiles and tokens per W4A8 prefill block (kA8NT divides kPrefillNT)
//   kA16RT, kA16NT     the same for W4A16 (two integer sums per output)
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

#include "backends/cpu/kernels.h"
#include "backends/cpu/layouts.h"
#include "core/dtype.h"

// Everything here has internal linkage: each instruction-set file gets its own copy, compiled
// with its own flags, and the linker can never hand one file's copy to another.
namespace kiln::cpu {
namespace {

template <int... Is, typename Fn>
inline void static_for_impl(std::integer_sequence<int, Is...>, Fn&& f) {
  (f(std::integral_constant<int, Is>{}), ...);
}
// f(std::integral_constant<int, i>) for i = 0 .. n-1, unrolled.
template <int n, typename Fn>
inline void static_for(Fn&& f) {
  static_for_impl(std::make_integer_sequence<int, n>{}, f);
}

inline int32_t load_i32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// ---- the epilogue: y = residual + (acc + bias), for the valid rows of a tile ----

template <class S>
inline void store_tile(const PackedMatrix& w, const Epilogue& e, int64_t tile, int t, const typename S::F* y) {
  constexpr int V = kTileRows / S::N;
  alignas(64) float tmp[kTileRows];
  for (int v = 0; v < V; ++v) S::store(tmp + v * S::N, y[v]);
  const int64_t r0 = tile * kTileRows;
  const int nr = static_cast<int>(std::min<int64_t>(kTileRows, w.rows - r0));
  float* out = e.y + t * e.y_stride + r0;
  if (e.bias)
    for (int i = 0; i < nr; ++i) tmp[i] += e.bias[r0 + i];
  if (e.residual) {
    const float* res = e.residual + t * e.residual_stride + r0;
    for (int i = 0; i < nr; ++i) out[i] = res[i] + tmp[i];
  } else {
    for (int i = 0; i < nr; ++i) out[i] = tmp[i];
  }
}

// The hardware prefetchers stop at 4 KiB boundaries, and a decode kernel that reads RT tiles at
// once is RT streams that each cross one every few microseconds: asking for the bytes
// kPrefetchBytes ahead of the ones being read keeps them coming (TinyLlama W4A16 decode, 2
// threads: 79 -> 84 % of the measured read bandwidth). prefetcht0: NTA hints halved the speed.
// Near a tile's end the bytes ahead are those of the tile this stream reads next, `next` bytes
// further on (the next block of RT tiles): a 2048-wide W4A16 tile is 18 KiB, and its first 2 KiB
// would otherwise come in unasked every time.
// `end`: the matrix's end (packed_end), past which nothing is asked for.
constexpr int64_t kPrefetchBytes = 2048;
inline const uint8_t* packed_end(const PackedMatrix& w) { return w.data + (w.rows + kTileRows - 1) / kTileRows * w.tile_bytes; }
inline void prefetch_ahead(const PackedMatrix& w, const uint8_t* tile, int64_t off, int64_t bytes, int64_t next,
                           const uint8_t* end) {
  for (int64_t o = off + kPrefetchBytes; o < off + kPrefetchBytes + bytes; o += 64) {
    const uint8_t* q = o < w.tile_bytes ? tile + o : tile + next + (o - w.tile_bytes);
    if (q < end) __builtin_prefetch(q, 0, 3);
  }
}

// ---- 4-bit weights, 16-bit activations ----

inline uint64_t w4_group_bytes(const QuantParams& p) { return (p.symmetric ? 32u : 64u) + 8u * static_cast<uint64_t>(p.group_size); }

// A 4-bit matrix's groups (layouts.h): elements per group, symmetric, groups per row, bytes per
// group of one tile, and the bytes of scales (and mins) that open each.
struct W4Groups {
  int g;
  bool sym;
  int64_t groups;
  uint64_t gb;
  int hdr;
};
inline W4Groups w4_groups(const PackedMatrix& w) {
  const int g = w.params.group_size;
  return {g, w.params.symmetric, w.cols / g, w4_group_bytes(w.params), w.params.symmetric ? 32 : 64};
}

// An asymmetric group's activation term: sum over its blocks k of scale(k) sum(k), in block order
// (the word and digit kernels share it, and so their bits).
template <class Scale, class Sum>
inline float group_x_sum(int64_t first, int blocks, Scale&& scale, Sum&& sum) {
  float s = 0.0f;
  for (int64_t k = first; k < first + blocks; ++k) s += scale(k) * static_cast<float>(sum(k));
  return s;
}

// W4A16, NT tokens from t0 and RT tiles: per block of 32 elements the exact integer
// D = 256 sum u hi + sum u lo = sum u X (|D| < 2^24), both sums from one load of the nibbles;
// symmetric: D - 8 sum X. Then, as quant/ref_matmul.h up to f32 rounding,
//   y += d * (s_block * D)      and, asymmetric, per group  y += m * sum_blocks s_block sum X.
// kPanels: the digits from the a16 panels (prefill: every broadcast at a fixed offset from one
// pointer, serving RT tiles), else from the token rows (decode).
template <class S, int RT, int NT, bool kPanels>
inline void w4a16_block(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tile, int t0) {
  using F = typename S::F;
  using I = typename S::I;
  constexpr int V = kTileRows / S::N;
  constexpr int P = S::kPrefillNT;
  // Plain copies: the step lambda uses them, and clang before 16 cannot capture structured bindings.
  const W4Groups geo = w4_groups(w);
  const int g = geo.g, hdr = geo.hdr;
  const bool sym = geo.sym;
  const int64_t groups = geo.groups, nb = w.cols / 32;
  const uint64_t gb = geo.gb;
  const int32_t* xq = kPanels ? a.a16_panels + (t0 / P) * (w.cols / 2) * P + t0 % P : nullptr;
  const float* xsc = kPanels ? a.a16_panel_scale + (t0 / P) * nb * P + t0 % P : nullptr;
  const int32_t* xsm = kPanels ? a.a16_panel_sums + (t0 / P) * nb * 3 * P + t0 % P : nullptr;
  // Four digits (plane 0: hi, 1: lo) of token t0 + t from quad k4; the token's scale and sum of
  // block kb.
  auto x4 = [&](int t, int plane, int64_t k4) {
    if constexpr (kPanels) return xq[(k4 * 2 + plane) * P + t];
    else return load_i32(a.a16 + ((t0 + t) * 2 + plane) * w.cols + 4 * k4);
  };
  auto scale = [&](int t, int64_t kb) {
    if constexpr (kPanels) return xsc[kb * P + t];
    else return a.a16_scale[(t0 + t) * nb + kb];
  };
  // Entry j of block kb's sums (kernels.h): 0 the sum of X, 1 and 2 the symmetric starts.
  auto xsum = [&](int t, int64_t kb, int j) {
    if constexpr (kPanels) return xsm[(kb * 3 + j) * P + t];
    else return a.a16_sums[((t0 + t) * nb + kb) * 3 + j];
  };
  F y[RT][NT][V];
  for (int r = 0; r < RT; ++r)
    for (int t = 0; t < NT; ++t)
      for (int v = 0; v < V; ++v) y[r][t][v] = S::zero();
  const uint8_t* base = w.data + tile * w.tile_bytes;
  const uint8_t* end = packed_end(w);
  for (int64_t b = 0; b < groups; ++b) {
    if constexpr (NT == 1)  // decode streams the weights; prefill reuses each group NT times
      for (int r = 0; r < RT; ++r) prefetch_ahead(w, base + r * w.tile_bytes, b * gb, gb, RT * w.tile_bytes, end);
    for (int blk = 0; blk < g / 32; ++blk) {
      const int64_t kb = b * (g / 32) + blk;
      // Symmetric: the sums start at -8 sum hi and -8 sum lo, so that they end as sum (u - 8) X.
      I ah[RT][NT][V], al[RT][NT][V];
      for (int t = 0; t < NT; ++t) {
        const I h = sym ? S::set1i(xsum(t, kb, 1)) : S::zeroi(), l = sym ? S::set1i(xsum(t, kb, 2)) : S::zeroi();
        for (int r = 0; r < RT; ++r)
          for (int v = 0; v < V; ++v) {
            ah[r][t][v] = h;
            al[r][t][v] = l;
          }
      }
      // Four steps of eight elements (nibbles lo: elements 0-3, hi: 4-7 of each row's u32), each
      // into both sums; unrolled, as a loop GCC kept the sums in memory.
      static_for<4>([&](auto c) {
        const int64_t k4 = kb * 8 + 2 * c.value;
        for (int v = 0; v < V; ++v) {
          if constexpr (NT == 1) {  // many tiles, one token: each tile's nibbles used at once
            const int32_t h0 = x4(0, 0, k4), h1 = x4(0, 0, k4 + 1), l0 = x4(0, 1, k4), l1 = x4(0, 1, k4 + 1);
            for (int r = 0; r < RT; ++r) {
              const I q = S::loadi(base + r * w.tile_bytes + b * gb + hdr + (blk * 4 + c.value) * 64 + v * S::N * 4);
              const I lo = S::lo_nibbles(q), hi = S::hi_nibbles(q);
              ah[r][0][v] = S::dot_u4(S::dot_u4(ah[r][0][v], lo, h0), hi, h1);
              al[r][0][v] = S::dot_u4(S::dot_u4(al[r][0][v], lo, l0), hi, l1);
            }
            continue;
          }
          I lo[RT], hi[RT];
          for (int r = 0; r < RT; ++r) {
            const I q = S::loadi(base + r * w.tile_bytes + b * gb + hdr + (blk * 4 + c.value) * 64 + v * S::N * 4);
            lo[r] = S::lo_nibbles(q);
            hi[r] = S::hi_nibbles(q);
          }
          for (int t = 0; t < NT; ++t) {
            const int32_t h0 = x4(t, 0, k4), h1 = x4(t, 0, k4 + 1), l0 = x4(t, 1, k4), l1 = x4(t, 1, k4 + 1);
            for (int r = 0; r < RT; ++r) {
              ah[r][t][v] = S::dot_u4(S::dot_u4(ah[r][t][v], lo[r], h0), hi[r], h1);
              al[r][t][v] = S::dot_u4(S::dot_u4(al[r][t][v], lo[r], l0), hi[r], l1);
            }
          }
        }
      });
      for (int r = 0; r < RT; ++r)
        for (int t = 0; t < NT; ++t)
          for (int v = 0; v < V; ++v) ah[r][t][v] = S::addv(S::template slli<8>(ah[r][t][v]), al[r][t][v]);
      for (int r = 0; r < RT; ++r) {
        const uint8_t* grp = base + r * w.tile_bytes + b * gb;
        for (int v = 0; v < V; ++v) {
          const F d = S::from_f16(grp + v * S::N * 2);
          for (int t = 0; t < NT; ++t) {
            y[r][t][v] = S::fma(S::cvt(ah[r][t][v]), S::mul(d, S::set1(scale(t, kb))), y[r][t][v]);
          }
        }
      }
    }
    if (!sym) {
      float xs[NT];
      for (int t = 0; t < NT; ++t)
        xs[t] = group_x_sum(b * (g / 32), g / 32, [&](int64_t k) { return scale(t, k); }, [&](int64_t k) { return xsum(t, k, 0); });
      for (int r = 0; r < RT; ++r) {
        const uint8_t* grp = base + r * w.tile_bytes + b * gb;
        for (int v = 0; v < V; ++v) {
          const F m = S::from_f16(grp + 32 + v * S::N * 2);
          for (int t = 0; t < NT; ++t) y[r][t][v] = S::fma(m, S::set1(xs[t]), y[r][t][v]);
        }
      }
    }
  }
  for (int r = 0; r < RT; ++r)
    for (int t = 0; t < NT; ++t) store_tile<S>(w, e, tile + r, t0 + t, y[r][t]);
}

// W4A16 prefill with 16-bit products, on tables whose traits have them (kA16WordsNT): X as one
// int16 per element, pairs of them (2j, 2j + 1) in each u32 of the a16 word panels, times the
// nibbles of a tile widened once per call to the same pairs of int16 (u - 8 for symmetric groups,
// u for asymmetric ones). One integer sum per output instead of two digit sums, so that four
// tiles by six tokens fit the registers, and no nibble unpacking among the products: the
// products run ~1.3x as fast as the digit kernel's (TinyLlama shapes, AVX-512 VNNI). The same
// exact D per block of 32 as w4a16_block, scaled in the same order: the same bits.
template <class S>
constexpr bool has_a16_words = requires { S::kA16WordsNT; };

// A tile's widened weights (prepare_w4_words): [cols / 2][16] u32 pairs, then the group scales
// [groups][16] f32, then (asymmetric) the mins [groups][16] f32.
struct W4Words {
  int64_t scales, mins, bytes;  // byte offsets of the scales and mins, and the whole
};
inline W4Words w4_words(const PackedMatrix& w) {
  const int64_t groups = w.cols / w.params.group_size;
  const int64_t scales = w.cols / 2 * kTileRows * 4, mins = scales + groups * kTileRows * 4;
  return {scales, mins, w4_words_tile_bytes(w.params, w.cols)};  // kernels.h: what matmul_work_bytes plans
}

template <class S>
inline void prepare_w4_words(const PackedMatrix& w, int64_t tile, uint8_t* out) {
  using I = typename S::I;
  constexpr int V = kTileRows / S::N;
  const W4Groups geo = w4_groups(w);
  const W4Words lay = w4_words(w);
  const uint8_t* base = w.data + tile * w.tile_bytes;
  auto* scales = reinterpret_cast<float*>(out + lay.scales);
  auto* mins = reinterpret_cast<float*>(out + lay.mins);
  const uint8_t* end = packed_end(w);
  const int16_t bias = geo.sym ? 8 : 0;
  for (int64_t b = 0; b < geo.groups; ++b) {
    const uint8_t* grp = base + b * geo.gb;
    for (int v = 0; v < V; ++v) {
      S::store(scales + b * kTileRows + v * S::N, S::from_f16(grp + v * S::N * 2));
      if (!geo.sym) S::store(mins + b * kTileRows + v * S::N, S::from_f16(grp + 32 + v * S::N * 2));
    }
    for (int c = 0; c < geo.g / 8; ++c)  // chunks of 8 elements: pairs 4 c' .. 4 c' + 3 of the matrix
      for (int v = 0; v < V; ++v) {
        const uint8_t* q = grp + geo.hdr + c * 64 + v * S::N * 4;
        if (q + kPrefetchBytes < end) __builtin_prefetch(q + kPrefetchBytes, 0, 3);  // as the decode kernels
        I p[4];
        S::nibble_pairs(S::loadi(q), bias, p);
        const int64_t kp = (b * geo.g + 8 * c) / 2;
        for (int j = 0; j < 4; ++j) S::storei(out + ((kp + j) * kTileRows + v * S::N) * 4, p[j]);
      }
  }
}

// NT tokens from t0 (within one panel) times RT tiles widened at `words`, `stride` bytes apart;
// the pf_bytes at pf asked for into L2 along the way.
template <class S, int RT, int NT>
inline void w4a16_words_block(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tile, int t0,
                              const uint8_t* words, int64_t stride, const uint8_t* pf, int64_t pf_bytes) {
  using F = typename S::F;
  using I = typename S::I;
  constexpr int V = kTileRows / S::N;
  constexpr int P = S::kPrefillNT;
  const W4Groups geo = w4_groups(w);
  const W4Words lay = w4_words(w);
  const int bpg = geo.g / 32;
  const int lg_bpg = std::countr_zero(static_cast<unsigned>(bpg));  // groups of 32, 64 or 128: no division per block
  const int64_t nb = w.cols / 32;
  const int32_t* xw = a.a16_words + (t0 / P) * (w.cols / 2) * P + t0 % P;
  const float* xsc = a.a16_panel_scale + (t0 / P) * nb * P + t0 % P;
  const int32_t* xsm = a.a16_panel_sums + (t0 / P) * nb * 3 * P + t0 % P;
  // The sums of up to 4 x 6 outputs take 24 registers: y lives in memory (L1), read and written
  // once per block of 32.
  alignas(64) float y[RT][NT][kTileRows];
  for (int r = 0; r < RT; ++r)
    for (int t = 0; t < NT; ++t)
      for (int v = 0; v < V; ++v) S::store(y[r][t] + v * S::N, S::zero());
  const int64_t pf_step = (pf_bytes / nb + 63) / 64 * 64;
  for (int64_t kb = 0; kb < nb; ++kb) {
    const int64_t grp = kb >> lg_bpg;
    for (int64_t o = kb * pf_step; o < std::min(pf_bytes, (kb + 1) * pf_step); o += 64) __builtin_prefetch(pf + o, 0, 2);
    I acc[RT][NT][V];
    for (int r = 0; r < RT; ++r)
      for (int t = 0; t < NT; ++t)
        for (int v = 0; v < V; ++v) acc[r][t][v] = S::zeroi();
    static_for<16>([&](auto j) {  // the block's 16 pairs, unrolled
      const int64_t kp = kb * 16 + j.value;
      for (int v = 0; v < V; ++v) {
        I wv[RT];
        for (int r = 0; r < RT; ++r) wv[r] = S::loadi(words + r * stride + (kp * kTileRows + v * S::N) * 4);
        for (int t = 0; t < NT; ++t) {
          const int32_t x2 = xw[kp * P + t];
          for (int r = 0; r < RT; ++r) acc[r][t][v] = S::dot_w16(acc[r][t][v], wv[r], x2);
        }
      }
    });
    for (int r = 0; r < RT; ++r) {
      const auto* d = reinterpret_cast<const float*>(words + r * stride + lay.scales) + grp * kTileRows;
      for (int v = 0; v < V; ++v) {
        const F dv = S::load(d + v * S::N);
        for (int t = 0; t < NT; ++t) {
          float* yp = y[r][t] + v * S::N;
          S::store(yp, S::fma(S::cvt(acc[r][t][v]), S::mul(dv, S::set1(xsc[kb * P + t])), S::load(yp)));
        }
      }
    }
    if (!geo.sym && ((kb + 1) & (bpg - 1)) == 0) {  // the group's min term, as w4a16_block
      float xs[NT];
      for (int t = 0; t < NT; ++t)
        xs[t] = group_x_sum(grp * bpg, bpg, [&](int64_t k) { return xsc[k * P + t]; }, [&](int64_t k) { return xsm[k * 3 * P + t]; });
      for (int r = 0; r < RT; ++r) {
        const auto* m = reinterpret_cast<const float*>(words + r * stride + lay.mins) + grp * kTileRows;
        for (int v = 0; v < V; ++v)
          for (int t = 0; t < NT; ++t) {
            float* yp = y[r][t] + v * S::N;
            S::store(yp, S::fma(S::load(m + v * S::N), S::set1(xs[t]), S::load(yp)));
          }
      }
    }
  }
  for (int r = 0; r < RT; ++r)
    for (int t = 0; t < NT; ++t) {
      F yt[V];
      for (int v = 0; v < V; ++v) yt[v] = S::load(y[r][t] + v * S::N);
      store_tile<S>(w, e, tile + r, t0 + t, yt);
    }
}

// ---- dense weights (f32, f16, bf16), f32 activations ----

template <class S, Scheme kScheme>
inline typename S::F dense_column(const uint8_t* tile, int64_t k, int v) {
  if constexpr (kScheme == Scheme::kF32) return S::load(reinterpret_cast<const float*>(tile) + k * kTileRows + v * S::N);
  else if constexpr (kScheme == Scheme::kF16) return S::from_f16(tile + (k * kTileRows + v * S::N) * 2);
  else return S::from_bf16(tile + (k * kTileRows + v * S::N) * 2);
}

// kPanels: x from the prefill panels (element k of token t0 + t at xp[k P + t]); otherwise the
// one decoded token's row.
template <class S, Scheme kScheme, int RT, int NT, bool kPanels>
inline void dense_block(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tile, int t0) {
  using F = typename S::F;
  constexpr int V = kTileRows / S::N;
  constexpr int P = kPanels ? S::kPrefillNT : 1;
  F y[RT][NT][V];
  for (int r = 0; r < RT; ++r)
    for (int t = 0; t < NT; ++t)
      for (int v = 0; v < V; ++v) y[r][t][v] = S::zero();
  const uint8_t* base = w.data + tile * w.tile_bytes;
  const float* x = kPanels ? a.x_panels + (t0 / P) * w.cols * P : a.x + t0 * a.x_stride;
  for (int64_t k = 0; k < w.cols; ++k)
    for (int v = 0; v < V; ++v) {
      F col[RT];
      for (int r = 0; r < RT; ++r) col[r] = dense_column<S, kScheme>(base + r * w.tile_bytes, k, v);
      for (int t = 0; t < NT; ++t) {
        const F xv = S::set1(x[k * P + t]);
        for (int r = 0; r < RT; ++r) y[r][t][v] = S::fma(col[r], xv, y[r][t][v]);
      }
    }
  for (int r = 0; r < RT; ++r)
    for (int t = 0; t < NT; ++t) store_tile<S>(w, e, tile + r, t0 + t, y[r][t]);
}

// ---- w8a16 (layout r16k4) ----

// Many tokens (or a width that is not a multiple of 32): each column widened to f32 exactly
// (byte j of each row's u32), multiplied into NT accumulators per tile of RT, times the row scale
// at the end.
template <class S, int RT, int NT>
inline void w8a16_prefill(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tile, int t0) {
  using F = typename S::F;
  using I = typename S::I;
  constexpr int V = kTileRows / S::N;
  constexpr int P = S::kPrefillNT;
  F y[RT][NT][V];
  for (int r = 0; r < RT; ++r)
    for (int t = 0; t < NT; ++t)
      for (int v = 0; v < V; ++v) y[r][t][v] = S::zero();
  const uint8_t* base = w.data + tile * w.tile_bytes;
  const float* xp = a.x_panels + (t0 / P) * w.cols * P;
  const int64_t k4 = (w.cols + 3) / 4;
  for (int64_t c = 0; c < k4; ++c)
    for (int v = 0; v < V; ++v) {
      I q[RT];
      for (int r = 0; r < RT; ++r) q[r] = S::loadi(base + r * w.tile_bytes + 128 + c * 64 + v * S::N * 4);
      static_for<4>([&](auto j) {
        if (4 * c + j.value >= w.cols) return;
        F col[RT];
        for (int r = 0; r < RT; ++r) col[r] = S::cvt(S::template sext_byte<j.value>(q[r]));
        for (int t = 0; t < NT; ++t) {
          const F xv = S::set1(xp[(4 * c + j.value) * P + t]);
          for (int r = 0; r < RT; ++r) y[r][t][v] = S::fma(col[r], xv, y[r][t][v]);
        }
      });
    }
  for (int r = 0; r < RT; ++r)
    for (int t = 0; t < NT; ++t) {
      for (int v = 0; v < V; ++v)
        y[r][t][v] = S::mul(y[r][t][v], S::load(reinterpret_cast<const float*>(base + r * w.tile_bytes) + v * S::N));
      store_tile<S>(w, e, tile + r, t0 + t, y[r][t]);
    }
}

// Decode (one token, width a multiple of 32): the activation digits, as w4_decode: per block of
// 32 the exact integer D = sum q X, y = sw * sum_blocks scale_block * D.
template <class S, int RT>
inline void w8a16_decode(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tile) {
  using F = typename S::F;
  using I = typename S::I;
  constexpr int V = kTileRows / S::N;
  const int8_t* d1 = a.digits;
  const int8_t* d2 = d1 + w.cols;
  const int8_t* d3 = d2 + w.cols;
  F y[RT][V];
  for (int r = 0; r < RT; ++r)
    for (int v = 0; v < V; ++v) y[r][v] = S::zero();
  const uint8_t* base = w.data + tile * w.tile_bytes;
  const uint8_t* end = packed_end(w);
  for (int64_t kb = 0; kb < w.cols / 32; ++kb) {
    for (int r = 0; r < RT; ++r) prefetch_ahead(w, base + r * w.tile_bytes, 128 + kb * 512, 512, RT * w.tile_bytes, end);
    I i1[RT][V], i2[RT][V], i3[RT][V];
    for (int r = 0; r < RT; ++r)
      for (int v = 0; v < V; ++v) i1[r][v] = i2[r][v] = i3[r][v] = S::zeroi();
    static_for<8>([&](auto c) {  // unrolled, as w4a16_block's steps
      const int64_t k0 = kb * 32 + c.value * 4;
      const int32_t x1 = load_i32(d1 + k0), x2 = load_i32(d2 + k0), x3 = load_i32(d3 + k0);
      for (int r = 0; r < RT; ++r)
        for (int v = 0; v < V; ++v) {
          const I q = S::w8_prep(S::loadi(base + r * w.tile_bytes + 128 + (kb * 8 + c.value) * 64 + v * S::N * 4));
          i1[r][v] = S::dot_w8(i1[r][v], q, x1);
          i2[r][v] = S::dot_w8(i2[r][v], q, x2);
          i3[r][v] = S::dot_w8(i3[r][v], q, x3);
        }
    });
    // Each plane's sum is exact in int32 (|q d| <= 128 * 127 over 32 elements); 16384 sum1 is
    // not, so the planes are combined in f32.
    const float sc = a.digit_scale[kb];
    const int64_t nb = w.cols / 32;
    const int32_t b1 = S::kW8DigitBias * a.digit_plane_sums[kb], b2 = S::kW8DigitBias * a.digit_plane_sums[nb + kb],
                  b3 = S::kW8DigitBias * a.digit_plane_sums[2 * nb + kb];
    const F s1 = S::set1(sc * 16384.0f), s2 = S::set1(sc * 128.0f), s3 = S::set1(sc);
    for (int r = 0; r < RT; ++r)
      for (int v = 0; v < V; ++v)
        y[r][v] = S::fma(S::cvt(S::subi(i1[r][v], b1)), s1,
                         S::fma(S::cvt(S::subi(i2[r][v], b2)), s2, S::fma(S::cvt(S::subi(i3[r][v], b3)), s3, y[r][v])));
  }
  for (int r = 0; r < RT; ++r) {
    for (int v = 0; v < V; ++v)
      y[r][v] = S::mul(y[r][v], S::load(reinterpret_cast<const float*>(base + r * w.tile_bytes) + v * S::N));
    store_tile<S>(w, e, tile + r, 0, y[r]);
  }
}

// ---- int8 activations ----

// W4A8: per group the exact integer sum of u * q, then, as quant/ref_matmul.h,
//   symmetric  y += d * (sum - 8 * qsum)     asymmetric  y += d * sum + m * qsum
// and at the end y *= the row's activation scale. kPanels: the activations and their group sums
// from the q panels (prefill: every broadcast at a fixed offset from one pointer, serving RT
// tiles), else from the rows (decode). kG32: the group is 32 elements, its four steps unrolled (a
// loop carried through registers made GCC copy every accumulator each step: 1.6x slower).
template <class S, int RT, int NT, bool kPanels, bool kG32>
inline void w4a8_block(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tile, int t0) {
  using F = typename S::F;
  using I = typename S::I;
  constexpr int V = kTileRows / S::N;
  constexpr int P = S::kPrefillNT;
  // Plain copies: the step lambda uses them, and clang before 16 cannot capture structured bindings.
  const W4Groups geo = w4_groups(w);
  const int g = geo.g, hdr = geo.hdr;
  const bool sym = geo.sym;
  const int64_t groups = geo.groups;
  const uint64_t gb = geo.gb;
  const int32_t* xq = kPanels ? a.q_panels + (t0 / P) * (a.q_stride / 4) * P + t0 % P : nullptr;
  const int32_t* xs = kPanels ? a.q_panel_sums + (t0 / P) * groups * P + t0 % P : nullptr;
  // Four elements of token t0 + t from quad k4, and the token's integer sum over group b.
  auto x4 = [&](int t, int64_t k4) {
    if constexpr (kPanels) return xq[k4 * P + t];
    else return load_i32(a.q + (t0 + t) * a.q_stride + 4 * k4);
  };
  auto qsum = [&](int t, int64_t b) {
    if constexpr (kPanels) return xs[b * P + t];
    else return a.q_group_sums[(t0 + t) * groups + b];
  };
  F y[RT][NT][V];
  for (int r = 0; r < RT; ++r)
    for (int t = 0; t < NT; ++t)
      for (int v = 0; v < V; ++v) y[r][t][v] = S::zero();
  const uint8_t* base = w.data + tile * w.tile_bytes;
  const uint8_t* end = packed_end(w);
  for (int64_t b = 0; b < groups; ++b) {
    if constexpr (NT == 1)  // decode streams the weights; prefill reuses each group NT times
      for (int r = 0; r < RT; ++r) prefetch_ahead(w, base + r * w.tile_bytes, b * gb, gb, RT * w.tile_bytes, end);
    I acc[RT][NT][V];
    for (int r = 0; r < RT; ++r)
      for (int t = 0; t < NT; ++t)
        for (int v = 0; v < V; ++v) acc[r][t][v] = S::zeroi();
    // Eight elements: nibbles lo (elements 0-3) and hi (4-7) of each row's u32.
    auto step = [&](int c) {
      const int64_t k4 = b * g / 4 + 2 * c;
      for (int v = 0; v < V; ++v) {
        I lo[RT], hi[RT];
        for (int r = 0; r < RT; ++r) {
          const I q = S::loadi(base + r * w.tile_bytes + b * gb + hdr + c * 64 + v * S::N * 4);
          lo[r] = S::lo_nibbles(q);
          hi[r] = S::hi_nibbles(q);
        }
        for (int t = 0; t < NT; ++t) {
          for (int r = 0; r < RT; ++r) acc[r][t][v] = S::dot_u4(acc[r][t][v], lo[r], x4(t, k4));
          for (int r = 0; r < RT; ++r) acc[r][t][v] = S::dot_u4(acc[r][t][v], hi[r], x4(t, k4 + 1));
        }
      }
    };
    if constexpr (kG32)
      static_for<4>([&](auto c) { step(c.value); });
    else
      for (int c = 0; c < g / 8; ++c) step(c);
    for (int r = 0; r < RT; ++r) {
      const uint8_t* grp = base + r * w.tile_bytes + b * gb;
      for (int v = 0; v < V; ++v) {
        const F d = S::from_f16(grp + v * S::N * 2);
        if (sym) {
          for (int t = 0; t < NT; ++t) y[r][t][v] = S::fma(S::cvt(S::subi(acc[r][t][v], 8 * qsum(t, b))), d, y[r][t][v]);
        } else {
          const F m = S::from_f16(grp + 32 + v * S::N * 2);
          for (int t = 0; t < NT; ++t)
            y[r][t][v] = S::fma(m, S::set1(static_cast<float>(qsum(t, b))), S::fma(S::cvt(acc[r][t][v]), d, y[r][t][v]));
        }
      }
    }
  }
  for (int r = 0; r < RT; ++r)
    for (int t = 0; t < NT; ++t) {
      for (int v = 0; v < V; ++v) y[r][t][v] = S::mul(y[r][t][v], S::set1(a.q_scale[t0 + t]));
      store_tile<S>(w, e, tile + r, t0 + t, y[r][t]);
    }
}

// W8A8: the exact integer sum of q_w * q_x over the row, times the weight and activation scales.
// kPanels: the activations from the q panels (prefill), else from the rows.
template <class S, int RT, int NT, bool kPanels>
inline void w8a8_block(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tile, int t0) {
  using F = typename S::F;
  using I = typename S::I;
  constexpr int V = kTileRows / S::N;
  constexpr int P = S::kPrefillNT;
  const int32_t* xp = kPanels ? a.q_panels + (t0 / P) * (a.q_stride / 4) * P + t0 % P : nullptr;
  auto x4 = [&](int t, int64_t c) {
    if constexpr (kPanels) return xp[c * P + t];
    else return load_i32(a.q + (t0 + t) * a.q_stride + 4 * c);
  };
  I acc[RT][NT][V];
  for (int r = 0; r < RT; ++r)
    for (int t = 0; t < NT; ++t)
      for (int v = 0; v < V; ++v) acc[r][t][v] = S::zeroi();
  const uint8_t* base = w.data + tile * w.tile_bytes;
  const uint8_t* end = packed_end(w);
  const int64_t k4 = (w.cols + 3) / 4;
  for (int64_t c = 0; c < k4; ++c) {
    if constexpr (NT == 1)
      if (c % 8 == 0)
        for (int r = 0; r < RT; ++r) prefetch_ahead(w, base + r * w.tile_bytes, 128 + c * 64, 512, RT * w.tile_bytes, end);
    for (int r = 0; r < RT; ++r)
      for (int v = 0; v < V; ++v) {
        const I q = S::loadi(base + r * w.tile_bytes + 128 + c * 64 + v * S::N * 4);
        for (int t = 0; t < NT; ++t) acc[r][t][v] = S::dot_s8(acc[r][t][v], q, x4(t, c));
      }
  }
  for (int r = 0; r < RT; ++r) {
    const uint8_t* tb = base + r * w.tile_bytes;
    for (int t = 0; t < NT; ++t) {
      F y[V];
      for (int v = 0; v < V; ++v) {
        I s = acc[r][t][v];
        static_assert(S::kW8Bias == 0 || S::kW8Bias == 128);
        if constexpr (S::kW8Bias != 0) s = S::subv(s, S::template slli<7>(S::loadi(tb + 64 + v * S::N * 4)));
        // As the reference: float(sum) * sw * sx.
        y[v] = S::mul(S::mul(S::cvt(s), S::load(reinterpret_cast<const float*>(tb) + v * S::N)), S::set1(a.q_scale[t0 + t]));
      }
      store_tile<S>(w, e, tile + r, t0 + t, y);
    }
  }
}

// ---- drivers: a range of tiles for every token, in blocks the templates were made for ----

// Calls block<RT>(tile) over [tb, te) in runs of kRT tiles, then the remainder one size down.
template <int kRT, typename Block>
inline void over_tiles(int64_t tb, int64_t te, Block&& block) {
  int64_t t = tb;
  for (; t + kRT <= te; t += kRT) block(std::integral_constant<int, kRT>{}, t);
  if constexpr (kRT > 1) {
    const int64_t rest = te - t;
    static_for<kRT>([&](auto r) {
      if (r.value > 0 && rest == r.value) block(std::integral_constant<int, (r.value > 0 ? r.value : 1)>{}, t);
    });
  }
}
// Decode: over_tiles in runs of kRT tiles side by side, or of one where the host reads one
// stream faster (decode_one_stream). x86 only: no ARM core has asked for it, and there the
// compiler contracts the generic table's products into FMAs differently per run length, so the
// bits would depend on the choice.
template <int kRT, typename Block>
inline void over_decode_tiles(const PackedMatrix& w, int64_t tb, int64_t te, Block&& block) {
#if defined(__x86_64__)
  if (w.decode_one_stream) {
    over_tiles<1>(tb, te, block);
    return;
  }
#else
  (void)w;
#endif
  over_tiles<kRT>(tb, te, block);
}
// Calls block<NT>(t0) over the tokens [0, n) in runs of kNT, then the remainder.
template <int kNT, typename Block>
inline void over_tokens(int n, Block&& block) {
  int t = 0;
  for (; t + kNT <= n; t += kNT) block(std::integral_constant<int, kNT>{}, t);
  const int rest = n - t;
  static_for<kNT>([&](auto r) {
    if (r.value > 0 && rest == r.value) block(std::integral_constant<int, (r.value > 0 ? r.value : 1)>{}, t);
  });
}

// Prefill: the tiles [tb, te) in runs of about 256 KiB of weights, and in each run every block of
// kNT tokens over all the run's tiles. The run's weights stay in L2 while the blocks of
// activations pass, instead of every pair of tiles streaming all the tokens' activations again
// (for a 5632-wide matrix and 64 tokens, 1.4 MiB of f32 panels per pair: more than L2, read from
// L3 each time). Each output comes from the same call as before, so the bits do not change.
template <int kRT, int kNT, typename Block>
inline void over_tile_runs(const PackedMatrix& w, int64_t tb, int64_t te, int n, Block&& block) {
  const int64_t run = std::max<int64_t>(kRT, (int64_t{256} << 10) / std::max<int64_t>(w.tile_bytes, 1) / kRT * kRT);
  for (int64_t r0 = tb; r0 < te; r0 += run) {
    const int64_t r1 = std::min(te, r0 + run);
    over_tokens<kNT>(n, [&](auto nt, int t0) { over_tiles<kRT>(r0, r1, [&](auto rt, int64_t t) { block(rt, nt, t, t0); }); });
  }
}

// Each run of kRT tiles widened once, then every block of tokens over it (from L2).
template <class S, int kRT>
void matmul_w4a16_words(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tb, int64_t te,
                        int64_t stride, uint8_t* words) {
  static_assert(S::kPrefillNT % S::kA16WordsNT == 0, "a block of tokens lies within one panel");
  // While the blocks of tokens run, each asks for a slice of the next run's packed tiles, a
  // line or two per block of 32 elements, so that widening them reads L2 rather than memory
  // (one burst of prefetches stalled on the fill buffers instead).
  const int64_t blocks = (a.n + S::kA16WordsNT - 1) / S::kA16WordsNT;
  over_tiles<kRT>(tb, te, [&](auto rt, int64_t t) {
    for (int r = 0; r < rt.value; ++r) prepare_w4_words<S>(w, t + r, words + r * stride);
    const uint8_t* next = w.data + (t + rt.value) * w.tile_bytes;
    const int64_t next_bytes = std::min<int64_t>(kRT, te - t - rt.value) * w.tile_bytes;
    const int64_t slice = (next_bytes / blocks + 63) / 64 * 64;
    int64_t at = 0;
    over_tokens<S::kA16WordsNT>(a.n, [&](auto nt, int t0) {
      const uint8_t* pf = next + at;
      const int64_t pf_bytes = std::max<int64_t>(0, std::min(slice, next_bytes - at));
      at += slice;
      w4a16_words_block<S, rt.value, nt.value>(w, a, e, t, t0, words, stride, pf, pf_bytes);
    });
  });
}

template <class S>
void matmul_w4a16(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tb, int64_t te, uint8_t* work) {
  (void)work;  // only the 16-bit products' prefill uses it
  if (a.n == 1) {
    over_decode_tiles<S::kA16DecodeRT>(w, tb, te, [&](auto rt, int64_t t) { w4a16_block<S, rt.value, 1, false>(w, a, e, t, 0); });
    return;
  }
  if constexpr (has_a16_words<S>) {
    if (a.a16_words) {
      // Runs of four widened tiles where they leave L2 room for the next run's packed tiles and
      // the tokens' panels (2048 wide: 4 x 64 KiB), else three (5632 wide: 3 x 176 KiB).
      const int64_t stride = w4_words(w).bytes;
      // `work` holds four (matmul_work_bytes), planned with the session's scratch.
      if (4 * stride <= S::kA16WordsRunBytes) matmul_w4a16_words<S, 4>(w, a, e, tb, te, stride, work);
      else matmul_w4a16_words<S, 3>(w, a, e, tb, te, stride, work);
      return;
    }
  }
  static_assert(S::kPrefillNT % S::kA16NT == 0, "a block of tokens lies within one panel");
  over_tile_runs<S::kA16RT, S::kA16NT>(w, tb, te, a.n, [&](auto rt, auto nt, int64_t t, int t0) {
    w4a16_block<S, rt.value, nt.value, true>(w, a, e, t, t0);
  });
}

template <class S, Scheme kScheme>
void matmul_dense(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tb, int64_t te, uint8_t* /*work*/) {
  if (a.n == 1) {
    over_decode_tiles<S::kDecodeRT>(w, tb, te, [&](auto rt, int64_t t) { dense_block<S, kScheme, rt.value, 1, false>(w, a, e, t, 0); });
    return;
  }
  over_tile_runs<S::kPrefillRT, S::kPrefillNT>(w, tb, te, a.n, [&](auto rt, auto nt, int64_t t, int t0) {
    dense_block<S, kScheme, rt.value, nt.value, true>(w, a, e, t, t0);
  });
}

template <class S>
void matmul_w8a16(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tb, int64_t te, uint8_t* /*work*/) {
  if (a.n == 1 && a.digits) {
    over_decode_tiles<S::kDigitRT>(w, tb, te, [&](auto rt, int64_t t) { w8a16_decode<S, rt.value>(w, a, e, t); });
    return;
  }
  over_tile_runs<S::kPrefillRT, S::kPrefillNT>(w, tb, te, a.n, [&](auto rt, auto nt, int64_t t, int t0) {
    w8a16_prefill<S, rt.value, nt.value>(w, a, e, t, t0);
  });
}

template <class S>
void matmul_w4a8(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tb, int64_t te, uint8_t* /*work*/) {
  if (a.n == 1) {
    over_decode_tiles<S::kDecodeRT>(w, tb, te, [&](auto rt, int64_t t) { w4a8_block<S, rt.value, 1, false, false>(w, a, e, t, 0); });
    return;
  }
  static_assert(S::kPrefillNT % S::kA8NT == 0, "a block of tokens lies within one panel");
  auto run = [&](auto g32) {
    over_tile_runs<S::kA8RT, S::kA8NT>(w, tb, te, a.n, [&](auto rt, auto nt, int64_t t, int t0) {
      w4a8_block<S, rt.value, nt.value, true, g32.value>(w, a, e, t, t0);
    });
  };
  if (w.params.group_size == 32) run(std::true_type{});
  else run(std::false_type{});
}

template <class S>
void matmul_w8a8(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tb, int64_t te, uint8_t* /*work*/) {
  if (a.n == 1) {
    over_decode_tiles<S::kDecodeRT>(w, tb, te, [&](auto rt, int64_t t) { w8a8_block<S, rt.value, 1, false>(w, a, e, t, 0); });
    return;
  }
  over_tile_runs<S::kA8RT, S::kA8NT>(w, tb, te, a.n, [&](auto rt, auto nt, int64_t t, int t0) {
    w8a8_block<S, rt.value, nt.value, true>(w, a, e, t, t0);
  });
}

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

// As quantize_activation_row in quant/ref_matmul.cpp (the same values: the same f32 product and
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

// quant/ref_matmul.h's W4A16 rounding of one row of x (cols a multiple of 32), S::N elements at
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

template <class S>
inline float dot(const float* a, const float* b, int64_t n) {
  typename S::F acc = S::zero();
  int64_t i = 0;
  for (; i + S::N <= n; i += S::N) acc = S::fma(S::load(a + i), S::load(b + i), acc);
  float s = S::sum(acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// ---- float ops ----

// exp(x) for the softmax and SiLU: Cephes' single-precision polynomial after the reduction
// x = n ln2 + r, |r| <= ln2 / 2; relative error about 2 ulp, exp(x < -87) = about 1e-38.
inline float fast_exp(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

template <class S>
void rmsnorm(float* y, const float* x, const float* w, int64_t n, float eps) {
  typename S::F acc = S::zero();
  int64_t i = 0;
  for (; i + S::N <= n; i += S::N) {
    const auto v = S::load(x + i);
    acc = S::fma(v, v, acc);
  }
  float ss = S::sum(acc);
  for (; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (int64_t j = 0; j < n; ++j) y[j] = w[j] * (x[j] * inv);
}

template <class S>
void head_rmsnorm(float* y, const float* x, const float* w, int n_heads, int64_t head_dim, float eps) {
  for (int h = 0; h < n_heads; ++h) rmsnorm<S>(y + h * head_dim, x + h * head_dim, w, head_dim, eps);
}

inline void swiglu(float* y, const float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    y[i] = g / (1.0f + fast_exp(-g)) * up[i];
  }
}

inline void add(float* y, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

// As ref::rope, with the angles' cos/sin computed once per token by the caller.
inline void rope(float* x, int n_heads, int head_dim, const float* cs, const float* sn, bool half_split) {
  const int half = head_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* head = x + static_cast<int64_t>(h) * head_dim;
    if (half_split) {
      for (int i = 0; i < half; ++i) {
        const float a0 = head[i], b0 = head[i + half];
        head[i] = a0 * cs[i] - b0 * sn[i];
        head[i + half] = a0 * sn[i] + b0 * cs[i];
      }
    } else {
      for (int i = 0; i < half; ++i) {
        const float a0 = head[2 * i], b0 = head[2 * i + 1];
        head[2 * i] = a0 * cs[i] - b0 * sn[i];
        head[2 * i + 1] = a0 * sn[i] + b0 * cs[i];
      }
    }
  }
}

// ---- attention ----
//
// For kv head `kvh` and its query heads [hb, he): positions are visited in blocks of 16; each
// block of K is transposed once into a [head_dim][16] buffer and, with its block of V, used by
// every (token, head) query of the range while it is in L1. Per query and block: 16 scores at
// once (head_dim FMAs of 16 lanes), one vector exp, 16 rows of V into the output. Softmax is
// online: per query the running max m, the running sum l, and the output accumulated
// unnormalised in place, rescaled by exp(m_old - m_new) when the max grows. No score matrix is
// ever materialised.

// exp over a vector, as fast_exp.
template <class S>
inline typename S::F vexp(typename S::F x) {
  using F = typename S::F;
  x = S::min(S::max(x, S::set1(-87.0f)), S::set1(88.0f));
  const F magic = S::set1(12582912.0f);
  const F n = S::sub(S::fma(x, S::set1(1.44269504088896341f), magic), magic);
  const F r = S::fma(n, S::set1(2.12194440e-4f), S::fma(n, S::set1(-0.693359375f), x));
  F p = S::set1(1.9875691500e-4f);
  p = S::fma(p, r, S::set1(1.3981999507e-3f));
  p = S::fma(p, r, S::set1(8.3334519073e-3f));
  p = S::fma(p, r, S::set1(4.1665795894e-2f));
  p = S::fma(p, r, S::set1(1.6666665459e-1f));
  p = S::fma(p, r, S::set1(5.0000001201e-1f));
  p = S::add(S::fma(S::mul(p, r), r, r), S::set1(1.0f));
  return S::mul(p, S::pow2i(n));
}

// Keys per block: 16, or the table's kAttnBlock. A longer block loads each query element once for
// more keys (AVX-512: 64 keys, four vectors per query element broadcast) and spreads the
// per-block softmax bookkeeping over more of them.
template <class S>
constexpr int attn_block() {
  if constexpr (requires { S::kAttnBlock; }) return S::kAttnBlock;
  else return 16;
}

// n IEEE halves at src as floats at dst.
template <class S>
inline void widen_f16(const uint16_t* src, float* dst, int n) {
  int i = 0;
  for (; i + S::N <= n; i += S::N) S::store(dst + i, S::from_f16(reinterpret_cast<const uint8_t*>(src + i)));
  for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

template <class S>
void attention(const AttentionArgs& a, int kvh, int hb, int he) {
  using F = typename S::F;
  constexpr int kBlock = attn_block<S>(), V = kBlock / S::N, kMaxHeadDim = 256;
  // Partial sums over d per score vector, so that each chain of dependent FMAs is short: four
  // for blocks of 16 keys, two for 32, one for 64 (whose four vectors per query already make
  // four chains, sixteen for four heads).
  constexpr int P = kBlock >= 64 ? 1 : kBlock >= 32 ? 2 : 4;
  const int hd = a.head_dim, kv_dim = a.n_kv_heads * hd, qd = a.n_heads * hd;
  if (hd > kMaxHeadDim) return;  // refused by CpuBackend::supports
  // Each block's rows of K and V are read through kb and vb, ks and vs floats apart: the cache
  // itself when it holds f32, the block widened into kh and vh when it holds f16.
  const int64_t head_off = static_cast<int64_t>(kvh) * hd;
  alignas(64) float kh[kBlock * kMaxHeadDim];
  alignas(64) float vh[kBlock * kMaxHeadDim];
  auto first_of = [&](int t) {
    const int pos = a.first_pos + t;
    return (a.window > 0 && pos >= a.window) ? pos - a.window + 1 : 0;
  };
  constexpr int kMaxQueries = 512;
  const int heads = he - hb;
  const int chunk = std::max(1, kMaxQueries / heads);
  for (int t0 = 0; t0 < a.n_tokens; t0 += chunk) {
    const int t1 = std::min(a.n_tokens, t0 + chunk);
    float m[kMaxQueries], l[kMaxQueries];
    for (int i = 0; i < (t1 - t0) * heads; ++i) {
      m[i] = -INFINITY;
      l[i] = 0.0f;
    }
    for (int t = t0; t < t1; ++t)
      for (int h = hb; h < he; ++h)
        for (int i = 0; i < hd; ++i) a.out[static_cast<int64_t>(t) * qd + h * hd + i] = 0.0f;
    int block_first = a.first_pos + t1 - 1;
    for (int t = t0; t < t1; ++t) block_first = std::min(block_first, first_of(t));
    const int block_last = a.first_pos + t1 - 1;
    alignas(64) float kt[kMaxHeadDim][kBlock];
    for (int p0 = block_first; p0 <= block_last; p0 += kBlock) {
      const int nb = std::min(kBlock, block_last + 1 - p0);
      const int64_t row0 = static_cast<int64_t>(p0) * kv_dim + head_off;
      const float *kb = kh, *vb = vh;
      int64_t ks = hd, vs = hd;
      if (a.kv_f16) {
        for (int j = 0; j < nb; ++j) {
          widen_f16<S>(static_cast<const uint16_t*>(a.k) + row0 + j * kv_dim, kh + j * hd, hd);
          widen_f16<S>(static_cast<const uint16_t*>(a.v) + row0 + j * kv_dim, vh + j * hd, hd);
        }
      } else {
        kb = static_cast<const float*>(a.k) + row0;
        vb = static_cast<const float*>(a.v) + row0;
        ks = vs = kv_dim;
      }
      // Transposing pays off when many queries share the block (prefill); a few (decoding)
      // take their dot products from the rows as they are.
      const bool transposed = (t1 - t0) * heads >= 16;
      if (transposed)
        for (int j = 0; j < kBlock; ++j) {
          const float* kp = kb + j * ks;
          for (int d = 0; d < hd; ++d) kt[d][j] = j < nb ? kp[d] : 0.0f;
        }
      // HG query heads of token t at once, from head h0: each key column and value row loaded
      // once serves them all (one head at a time, a score took two loads per FMA). The sums run
      // in the same order whatever HG is, so a head's bits do not depend on its neighbours.
      auto heads_block = [&](auto hg, int t, int h0, int lo, int hi) {
        constexpr int HG = decltype(hg)::value;
        const float* q[HG];
        float* o[HG];
        for (int u = 0; u < HG; ++u) {
          q[u] = a.q + static_cast<int64_t>(t) * qd + (h0 + u) * hd;
          o[u] = a.out + static_cast<int64_t>(t) * qd + (h0 + u) * hd;
        }
        alignas(64) float sc[HG][kBlock];
        if (transposed) {
          // P partial sums over d: one chain of hd dependent FMAs waited on their latency.
          F sv[HG][P][V];
          for (int u = 0; u < HG; ++u)
            for (int p = 0; p < P; ++p)
              for (int v = 0; v < V; ++v) sv[u][p][v] = S::zero();
          int d = 0;
          for (; d + P <= hd; d += P)
            for (int p = 0; p < P; ++p)
              for (int v = 0; v < V; ++v) {
                const F k = S::load(kt[d + p] + v * S::N);
                for (int u = 0; u < HG; ++u) sv[u][p][v] = S::fma(S::set1(q[u][d + p]), k, sv[u][p][v]);
              }
          for (; d < hd; ++d)
            for (int v = 0; v < V; ++v) {
              const F k = S::load(kt[d] + v * S::N);
              for (int u = 0; u < HG; ++u) sv[u][0][v] = S::fma(S::set1(q[u][d]), k, sv[u][0][v]);
            }
          for (int u = 0; u < HG; ++u)
            for (int v = 0; v < V; ++v) {
              // The P partial sums, added pairwise.
              F total;
              if constexpr (P == 1) total = sv[u][0][v];
              else if constexpr (P == 2) total = S::add(sv[u][0][v], sv[u][1][v]);
              else total = S::add(S::add(sv[u][0][v], sv[u][1][v]), S::add(sv[u][2][v], sv[u][3][v]));
              S::store(sc[u] + v * S::N, S::mul(total, S::set1(a.scale)));
            }
        } else {
          for (int u = 0; u < HG; ++u)
            for (int j = lo; j <= hi; ++j) sc[u][j] = dot<S>(q[u], kb + j * ks, hd) * a.scale;
        }
        float corr[HG];
        for (int u = 0; u < HG; ++u) {
          float* su = sc[u];
          for (int j = 0; j < lo; ++j) su[j] = -INFINITY;
          for (int j = hi + 1; j < kBlock; ++j) su[j] = -INFINITY;
          F mv = S::load(su);  // the lanes outside [lo, hi] are -inf
          for (int v = 1; v < V; ++v) mv = S::max(mv, S::load(su + v * S::N));
          const float mx = S::hmax(mv);
          const int qi = (t - t0) * heads + (h0 + u - hb);
          const float m_new = std::max(m[qi], mx);
          corr[u] = fast_exp(m[qi] - m_new);
          F sum = S::zero();
          for (int v = 0; v < V; ++v) {
            const F e = vexp<S>(S::sub(S::load(su + v * S::N), S::set1(m_new)));
            S::store(su + v * S::N, e);
          }
          for (int j = 0; j < lo; ++j) su[j] = 0.0f;
          for (int j = hi + 1; j < kBlock; ++j) su[j] = 0.0f;
          for (int v = 0; v < V; ++v) sum = S::add(sum, S::load(su + v * S::N));
          l[qi] = l[qi] * corr[u] + S::sum(sum);
          m[qi] = m_new;
        }
        // o = o * corr + sum_j p_j v_j, in j order for every element, four vectors at a time.
        constexpr int kCols = 4;
        int i = 0;
        for (; i + kCols * S::N <= hd; i += kCols * S::N) {
          F acc[HG][kCols];
          for (int u = 0; u < HG; ++u)
            for (int c = 0; c < kCols; ++c) {
              const F ov = S::load(o[u] + i + c * S::N);
              acc[u][c] = corr[u] != 1.0f ? S::mul(ov, S::set1(corr[u])) : ov;
            }
          for (int j = lo; j <= hi; ++j) {
            const float* vr = vb + j * vs + i;
            F vv[kCols];
            for (int c = 0; c < kCols; ++c) vv[c] = S::load(vr + c * S::N);
            for (int u = 0; u < HG; ++u) {
              const F pj = S::set1(sc[u][j]);
              for (int c = 0; c < kCols; ++c) acc[u][c] = S::fma(pj, vv[c], acc[u][c]);
            }
          }
          for (int u = 0; u < HG; ++u)
            for (int c = 0; c < kCols; ++c) S::store(o[u] + i + c * S::N, acc[u][c]);
        }
        for (int u = 0; u < HG; ++u) {
          int iu = i;
          for (; iu + S::N <= hd; iu += S::N) {
            F acc = corr[u] != 1.0f ? S::mul(S::load(o[u] + iu), S::set1(corr[u])) : S::load(o[u] + iu);
            for (int j = lo; j <= hi; ++j)
              acc = S::fma(S::set1(sc[u][j]), S::load(vb + j * vs + iu), acc);
            S::store(o[u] + iu, acc);
          }
          for (; iu < hd; ++iu) {
            float acc = o[u][iu] * corr[u];
            for (int j = lo; j <= hi; ++j) acc += sc[u][j] * vb[j * vs + iu];
            o[u][iu] = acc;
          }
        }
      };
      for (int t = t0; t < t1; ++t) {
        const int lo = std::max(p0, first_of(t)) - p0, hi = std::min(p0 + nb - 1, a.first_pos + t) - p0;
        if (lo > hi) continue;
        int h = hb;
        for (; h + 4 <= he; h += 4) heads_block(std::integral_constant<int, 4>{}, t, h, lo, hi);
        for (; h < he; ++h) heads_block(std::integral_constant<int, 1>{}, t, h, lo, hi);
      }
    }
    for (int t = t0; t < t1; ++t)
      for (int h = hb; h < he; ++h) {
        float* o = a.out + static_cast<int64_t>(t) * qd + h * hd;
        const float inv = 1.0f / l[(t - t0) * heads + (h - hb)];
        for (int i = 0; i < hd; ++i) o[i] *= inv;
      }
  }
}

// ---- the arithmetic ceiling: kiln bench's prefill roofline ----

// Keeps x in a register here, so that the compiler cannot fold a loop of the same products into
// one multiplication (the loops below multiply the same values every round).
template <class T>
inline void opaque(T& x) {
  if constexpr (std::is_class_v<T>) {
    asm volatile("" : "+m"(x));  // the generic table's plain arrays
  } else {
#if defined(__x86_64__)
    asm volatile("" : "+v"(x));
#elif defined(__aarch64__)
    asm volatile("" : "+w"(x));
#else
    asm volatile("" : "+m"(x));
#endif
  }
}

// `rounds` rounds of op(acc) on kProductChains independent sums, back to back, nothing else. Named
// sums, not an array: GCC keeps a 768-byte array of them on the stack.
inline constexpr int kProductChains = 12;  // enough to cover each instruction's latency
template <class V, class Op>
inline void product_chains(V start, int64_t rounds, Op op) {
  V a0 = start, a1 = start, a2 = start, a3 = start, a4 = start, a5 = start;
  V a6 = start, a7 = start, a8 = start, a9 = start, a10 = start, a11 = start;
  for (int64_t r = 0; r < rounds; ++r) {
    a0 = op(a0), a1 = op(a1), a2 = op(a2), a3 = op(a3), a4 = op(a4), a5 = op(a5);
    a6 = op(a6), a7 = op(a7), a8 = op(a8), a9 = op(a9), a10 = op(a10), a11 = op(a11);
    opaque(a0), opaque(a1), opaque(a2), opaque(a3), opaque(a4), opaque(a5);
    opaque(a6), opaque(a7), opaque(a8), opaque(a9), opaque(a10), opaque(a11);
  }
}

// The instruction that the kernel of scheme s for `tokens` tokens multiplies with, run for
// `rounds` rounds on kProductChains sums (no loads, no stores, none of the kernel's other work):
// the most products that kernel could do per second, whatever its blocking. Returns the scheme's
// products done (weight times activation): through int8 digits a 16-bit activation takes two
// products (W4A16 on dot_u4), a W8A16 one three (decoding).
template <class S>
double product_loop(Scheme s, int tokens, int64_t rounds) {
  using I = typename S::I;
  using F = typename S::F;
  I w = S::set1i(0x01010101);
  F a = S::set1(1e-3f);
  opaque(w);
  opaque(a);
  const double ops = static_cast<double>(rounds) * kProductChains;
  // The lambdas take w and a by value: a reference would load them from the stack every time.
  auto digits = [&] { product_chains(S::zeroi(), rounds, [w](I acc) { return S::dot_u4(acc, w, 0x01010101); }); };
  switch (s) {
    case Scheme::kW4A16:
      if constexpr (has_a16_words<S>)
        if (tokens >= S::kA16WordsMinRows) {
          product_chains(S::zeroi(), rounds, [w](I acc) { return S::dot_w16(acc, w, 0x00010001); });
          return ops * 2 * S::N;
        }
      digits();
      return ops * 4 * S::N / 2;
    case Scheme::kW4A8:
      digits();
      return ops * 4 * S::N;
    case Scheme::kW8A8:
      product_chains(S::zeroi(), rounds, [w](I acc) { return S::dot_s8(acc, w, 0x01010101); });
      return ops * 4 * S::N;
    case Scheme::kW8A16:
      if (tokens == 1) {  // w8a16_decode: three digits of x times the int8 weights
        const I w8 = S::w8_prep(w);
        product_chains(S::zeroi(), rounds, [w8](I acc) { return S::dot_w8(acc, w8, 0x01010101); });
        return ops * 4 * S::N / 3;
      }
      [[fallthrough]];
    case Scheme::kF32:
    case Scheme::kF16:
    case Scheme::kBF16:
      product_chains(S::zero(), rounds, [a](F acc) { return S::fma(a, a, acc); });
      return ops * S::N;
  }
  return 0;
}

// ---- the table ----

template <class S>
void fill_table(KernelTable& t) {
  t.matmul[static_cast<int>(Scheme::kF32)] = &matmul_dense<S, Scheme::kF32>;
  t.matmul[static_cast<int>(Scheme::kF16)] = &matmul_dense<S, Scheme::kF16>;
  t.matmul[static_cast<int>(Scheme::kBF16)] = &matmul_dense<S, Scheme::kBF16>;
  t.matmul[static_cast<int>(Scheme::kW8A16)] = &matmul_w8a16<S>;
  t.matmul[static_cast<int>(Scheme::kW4A16)] = &matmul_w4a16<S>;
  t.matmul[static_cast<int>(Scheme::kW8A8)] = &matmul_w8a8<S>;
  t.matmul[static_cast<int>(Scheme::kW4A8)] = &matmul_w4a8<S>;
  t.quantize_rows = &quantize_rows<S>;
  static_assert(S::kPrefillNT <= 16, "the back end's scratch holds panels of at most 16 tokens");
  t.panel_tokens = S::kPrefillNT;
  t.make_x_panels = &make_x_panels<S::kPrefillNT>;
  t.make_q_panel = &make_q_panel<S::kPrefillNT>;
  t.make_digits = &make_digits<S>;
  t.make_a16 = &make_a16<S>;
  t.make_a16_panel = &make_a16_panel<S::kPrefillNT>;
  if constexpr (has_a16_words<S>) {
    t.make_a16_word_panel = &make_a16_word_panel<S::kPrefillNT>;
    t.a16_words_min_rows = S::kA16WordsMinRows;
  }
  t.rmsnorm = &rmsnorm<S>;
  t.head_rmsnorm = &head_rmsnorm<S>;
  t.swiglu = &swiglu;
  t.add = &add;
  t.rope = &rope;
  t.attention = &attention<S>;
  t.product_loop = &product_loop<S>;
}

}  // namespace
}  // namespace kiln::cpu
