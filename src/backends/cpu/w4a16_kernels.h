// W4A16 matmul blocks: 4-bit weights times activations rounded to 16 bits, as two exact int8
// digit sums per output, or (tables with 16-bit products) one sum over widened tiles.
#pragma once

#include "backends/cpu/kernel_helpers.h"

namespace kiln::cpu {
namespace {

// ---- 4-bit weights, 16-bit activations ----

// The nibbles as they are: unsigned weights 0..15 (dot_u4). A map takes the lo (half 0) or hi
// (1) nibbles of tile r; kUnsigned: its weights are unsigned bytes (dot_u4), else signed (dot_lv).
struct NibblesAsIs {
  static constexpr bool kUnsigned = true;
  template <class I>
  I operator()(const I& q, int, int) const { return q; }
};
template <class Map>
constexpr bool unsigned_weights() {
  if constexpr (requires { Map::kUnsigned; }) return Map::kUnsigned;
  else return false;
}

// One chunk of eight elements (k4, k4 + 1: its two quads) of RT tiles' 4-bit columns, lanes v..
// (each row's u32 at col(r): nibbles lo elements 0-3, hi 4-7), into NT tokens' two digit sums
// ah (times the hi digits) and al (lo), the digits from x4(t, plane, quad). The nibbles are the
// weights (dot_u4), or with another `map` the weights it gives: unsigned (kUnsigned: Q5_K's five
// bits) for dot_u4, else signed, prepared for dot_lv (IQ4_XS's levels: the sums gain
// kW8DigitBias times the digits' sums).
template <class S, int RT, int NT, class Col, class X4, class Map = NibblesAsIs>
inline void nibble_chunk(typename S::I (&ah)[RT][NT][kTileRows / S::N], typename S::I (&al)[RT][NT][kTileRows / S::N], int v,
                         int64_t k4, Col&& col, X4&& x4, Map&& map = {}) {
  using I = typename S::I;
  auto dot = [](const I& acc, const I& w, int32_t x) {
    if constexpr (unsigned_weights<std::decay_t<Map>>()) return S::dot_u4(acc, w, x);
    else return S::dot_lv(acc, w, x);
  };
  if constexpr (NT == 1) {  // many tiles, one token: each tile's nibbles used at once
    const int32_t h0 = x4(0, 0, k4), h1 = x4(0, 0, k4 + 1), l0 = x4(0, 1, k4), l1 = x4(0, 1, k4 + 1);
    for (int r = 0; r < RT; ++r) {
      const I q = S::loadi(col(r));
      const I lo = map(S::lo_nibbles(q), r, 0), hi = map(S::hi_nibbles(q), r, 1);
      ah[r][0][v] = dot(dot(ah[r][0][v], lo, h0), hi, h1);
      al[r][0][v] = dot(dot(al[r][0][v], lo, l0), hi, l1);
    }
  } else {
    I lo[RT], hi[RT];
    for (int r = 0; r < RT; ++r) {
      const I q = S::loadi(col(r));
      lo[r] = map(S::lo_nibbles(q), r, 0);
      hi[r] = map(S::hi_nibbles(q), r, 1);
    }
    for (int t = 0; t < NT; ++t) {
      const int32_t h0 = x4(t, 0, k4), h1 = x4(t, 0, k4 + 1), l0 = x4(t, 1, k4), l1 = x4(t, 1, k4 + 1);
      for (int r = 0; r < RT; ++r) {
        ah[r][t][v] = dot(dot(ah[r][t][v], lo[r], h0), hi[r], h1);
        al[r][t][v] = dot(dot(al[r][t][v], lo[r], l0), hi[r], l1);
      }
    }
  }
}


// W4A16, NT tokens from t0 and RT tiles: per block of 32 elements the exact integer
// D = 256 sum u hi + sum u lo = sum u X (|D| < 2^24), both sums from one load of the nibbles;
// symmetric: D - 8 sum X. Then, as backends/ref/ref_matmul.h up to f32 rounding,
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
  fill_all(y, S::zero());
  const uint8_t* base = w.data + tile * w.tile_bytes;
  const uint8_t* end = packed_end(w);
  for (int64_t b = 0; b < groups; ++b) {
    // The first block of tokens over a run of tiles reads them from memory (decode, and a step of
    // a few sessions' tokens, only ever that block): ask for them ahead. Later blocks find them in L2.
    if (NT == 1 || t0 == 0)
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
        const uint8_t* at = base + b * gb + hdr + (blk * 4 + c.value) * 64;
        for (int v = 0; v < V; ++v)
          nibble_chunk<S, RT, NT>(ah, al, v, kb * 8 + 2 * c.value, [&](int r) { return at + r * w.tile_bytes + v * S::N * 4; }, x4);
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

}  // namespace
}  // namespace kiln::cpu
