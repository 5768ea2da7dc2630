// k-quant matmul blocks: GGML's Q4_K (w4a16 g256 asymmetric), Q5_K (w5a16) and Q6_K (w6a16)
// super-blocks in their tiles (layouts.h), times activations rounded to 16 bits (kernels.h's a16
// rows), as w4a16_block does: per sub-block the exact integer sum of the values times X (two
// int8 digit sums from one load of the values), then scaled by the sub-block's own scale. The
// tiles hold the blocks' own bytes, so a GGUF's k-quant tensors run at their own 4.5, 5.5 and
// 6.56 bits a weight.
#pragma once

#include "backends/cpu/kernel_helpers.h"
#include "backends/cpu/w4a16_kernels.h"
#include "layout/ggml_blocks.h"

namespace kiln::cpu {
namespace {

// Sub-block j's 6-bit scale (kMin false) or min (true) for lanes v.. of the tile, from the 12
// planes of the rows' packed bytes (layout/ggml_blocks.h: q4_k_scale_min, lane by lane).
template <class S, int j, bool kMin>
inline typename S::I q4k_scale_min(const uint8_t* planes, int v) {
  auto plane = [&](int p) { return S::from_u8(planes + p * 16 + v * S::N); };
  if constexpr (j < 4) {
    return S::andv(plane(kMin ? j + 4 : j), S::set1i(63));
  } else {
    const auto low = kMin ? S::template srli<4>(plane(j + 4)) : S::andv(plane(j + 4), S::set1i(15));
    return S::orv(low, S::template slli<4>(S::template srli<6>(plane(kMin ? j : j - 4))));
  }
}

// IQ4_XS's scale of sub-block j for lanes v.., ls - 32 in [-32, 31], from the 6 planes of the rows'
// bytes 2-7 (layout/ggml_blocks.h: iq4_xs_scale, lane by lane).
template <class S, int j>
inline typename S::I iq4xs_scale(const uint8_t* planes, int v) {
  auto plane = [&](int p) { return S::from_u8(planes + p * 16 + v * S::N); };
  const auto low = S::andv(S::template srli<4 * (j % 2)>(plane(2 + j / 2)), S::set1i(15));
  const auto high = S::andv(S::template srli<2 * (j % 4)>(plane(j / 4)), S::set1i(3));
  return S::subi(S::orv(low, S::template slli<4>(high)), 32);
}

// Bit `from` of every byte of h moved to bit 4 (Q5_K's fifth bits beside the nibbles).
template <class S, int from>
inline typename S::I to_bit4(typename S::I h) {
  if constexpr (from < 4) return S::template slli<4 - from>(h);
  else if constexpr (from > 4) return S::template srli<from - 4>(h);
  else return h;
}

// Q5_K's values for nibble_chunk: chunk kC's nibbles of tile r with their fifth bits (layouts.h:
// the low nibbles' at bit 2 kC of each byte of the sub-block's word, the high ones' at 2 kC + 1)
// at bit 4, unsigned 0..31.
template <class S, int kC>
struct FifthBits {
  static constexpr bool kUnsigned = true;
  const uint8_t* words;  // tile 0's word of the sub-block, lanes v..
  int64_t tile_bytes;
  typename S::I operator()(const typename S::I& nibbles, int r, int half) const {
    const typename S::I h = S::loadi(words + r * tile_bytes);
    const typename S::I b = half == 0 ? to_bit4<S, 2 * kC>(h) : to_bit4<S, 2 * kC + 1>(h);
    return S::orv(nibbles, S::andv(b, S::set1i(0x10101010)));
  }
};

// Traits whose 4-bit products can sum in int16 across a sub-block (dot_u4_16, widen_u4_16).
template <class S>
constexpr bool has_u4_sum16 = requires(typename S::I a) {
  S::widen_u4_16(a, S::dot_u4_16(a, a, 0));
  S::madd16(a, S::ones16());
};

// A Q4_K super-block's sub-block scales times d and mins times dmin, for the tile's rows (what
// q4k_decode and q4k_rows scale each sub-block's sums by; the same products as w4_superblock's).
template <class S>
inline void q4k_scales_mins(const uint8_t* blk, float (&ds)[8][kTileRows], float (&dm)[8][kTileRows]) {
  using F = typename S::F;
  for (int v = 0; v < kTileRows / S::N; ++v) {
    const F d = S::from_f16(blk + v * S::N * 2), dmin = S::from_f16(blk + 32 + v * S::N * 2);
    static_for<8>([&](auto j) {
      S::store(ds[j.value] + v * S::N, S::mul(S::cvt(q4k_scale_min<S, j.value, false>(blk + kQ4KPlanes, v)), d));
      S::store(dm[j.value] + v * S::N, S::mul(S::cvt(q4k_scale_min<S, j.value, true>(blk + kQ4KPlanes, v)), dmin));
    });
  }
}

// The four u32s of four 6-bit values each (elements 16 hb + 0-3, 4-7, 8-11, 12-15) of Q6_K's
// sub-block hb, lanes at blk (a tile's super-block, offset to the lanes): each chunk's nibbles with
// their high bit pairs shifted beside them (layouts.h), unsigned 0..63.
template <class S>
inline void q6k_values(const uint8_t* blk, int hb, typename S::I (&u)[4]) {
  using I = typename S::I;
  const I m30 = S::set1i(0x30303030);
  const I h = S::loadi(blk + kQ6KHighs + hb * 64);
  const I q0 = S::loadi(blk + kQ6KChunks + (2 * hb) * 64), q1 = S::loadi(blk + kQ6KChunks + (2 * hb + 1) * 64);
  u[0] = S::orv(S::lo_nibbles(q0), S::andv(S::template slli<4>(h), m30));
  u[1] = S::orv(S::hi_nibbles(q0), S::andv(S::template slli<2>(h), m30));
  u[2] = S::orv(S::lo_nibbles(q1), S::andv(h, m30));
  u[3] = S::orv(S::hi_nibbles(q1), S::andv(S::template srli<2>(h), m30));
}

// Q4_K decode on traits whose nibble products sum as int16 (has_u4_sum16): one token, one tile,
// q4k_rows' arithmetic (below) with the tile's two halves side by side and the outputs in
// registers, which one token has room for: 1.5x q4k_rows<1>'s speed on AVX2 (L3-resident 5632 x
// 2048). The same operations per output, so the same bits as q4k_rows and w4_superblock.
template <class S>
inline void q4k_decode(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tile) {
  using F = typename S::F;
  using I = typename S::I;
  constexpr int V = kTileRows / S::N;
  const int8_t* xh = a.a16;           // the token's hi digits
  const int8_t* xl = a.a16 + w.cols;  // and lo ones
  F y[V];
  for (int v = 0; v < V; ++v) y[v] = S::zero();
  const uint8_t* base = w.data + tile * w.tile_bytes;
  const uint8_t* end = packed_end(w);
  alignas(64) float ds[8][kTileRows], dm[8][kTileRows];
  for (int64_t sb = 0; sb < w.cols / 256; ++sb) {
    const int64_t off = sb * kQ4KTileBlockBytes;
    const uint8_t* blk = base + off;
    prefetch_ahead(w, base, off, kQ4KTileBlockBytes, w.tile_bytes, end);
    q4k_scales_mins<S>(blk, ds, dm);
    for (int j = 0; j < 8; ++j) {
      const int64_t kb = sb * 8 + j;
      const uint8_t* at = blk + kQ4KChunks + j * 4 * 64;
      I sh[V], sl[V];
      for (int v = 0; v < V; ++v) sh[v] = sl[v] = S::zeroi();
      static_for<4>([&](auto c) {
        const int64_t k = (kb * 8 + 2 * c.value) * 4;
        const int32_t h0 = load_i32(xh + k), h1 = load_i32(xh + k + 4), l0 = load_i32(xl + k), l1 = load_i32(xl + k + 4);
        for (int v = 0; v < V; ++v) {
          const I q = S::loadi(at + c.value * 64 + v * S::N * 4);
          const I lo = S::lo_nibbles(q), hi = S::hi_nibbles(q);
          sh[v] = S::dot_u4_16(S::dot_u4_16(sh[v], lo, h0), hi, h1);
          sl[v] = S::dot_u4_16(S::dot_u4_16(sl[v], lo, l0), hi, l1);
          keep_order(sh[v]);
          keep_order(sl[v]);
        }
      });
      const float s = a.a16_scale[kb];
      const F sv = S::set1(s), mv = S::set1(-(s * static_cast<float>(a.a16_sums[kb * 3])));
      for (int v = 0; v < V; ++v) {
        const I dv = S::addv(S::template slli<8>(S::widen_u4_16(S::zeroi(), sh[v])), S::widen_u4_16(S::zeroi(), sl[v]));
        y[v] = S::fma(S::cvt(dv), S::mul(S::load(ds[j] + v * S::N), sv), y[v]);
        y[v] = S::fma(S::load(dm[j] + v * S::N), mv, y[v]);
      }
    }
  }
  store_tile<S>(w, e, tile, 0, y);
}

// Q4_K on traits whose nibble products sum as int16 (has_u4_sum16), one tile and NT tokens from
// t0 (decode: one; a batched or prefill step: blocks of kKRowsNT): per sub-block j, each digit
// plane's 16 products a lane summed as int16 over the four chunks (exact: 16 x 15 x 128 = 30720),
// widened once, then scaled exactly as w4_superblock does: the same bits, and a token's operations
// do not depend on NT. Written for AVX2's 16 registers: the super-block's scales and mins (times d
// and dmin) are made once into memory, the sub-blocks run as a loop and a tile's two halves (v)
// one after the other, so that the sums of NT tokens and the nibbles stay in registers; sums kept
// in order (keep_order), as GCC otherwise gathers all the products first and spills them.
template <class S, int NT>
inline void q4k_rows(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tile, int t0) {
  using F = typename S::F;
  using I = typename S::I;
  constexpr int V = kTileRows / S::N;
  const int64_t nb = w.cols / 32;
  alignas(64) float y[NT][kTileRows] = {};
  const uint8_t* base = w.data + tile * w.tile_bytes;
  const uint8_t* end = packed_end(w);
  alignas(64) float ds[8][kTileRows], dm[8][kTileRows];
  for (int64_t sb = 0; sb < w.cols / 256; ++sb) {
    const int64_t off = sb * kQ4KTileBlockBytes;
    const uint8_t* blk = base + off;
    if (NT == 1 || t0 == 0) prefetch_ahead(w, base, off, kQ4KTileBlockBytes, w.tile_bytes, end);
    q4k_scales_mins<S>(blk, ds, dm);
    for (int j = 0; j < 8; ++j) {
      const int64_t kb = sb * 8 + j;
      const uint8_t* at = blk + kQ4KChunks + j * 4 * 64;
      for (int v = 0; v < V; ++v) {
        I sh[NT], sl[NT];
        for (int t = 0; t < NT; ++t) sh[t] = sl[t] = S::zeroi();
        static_for<4>([&](auto c) {
          const I q = S::loadi(at + c.value * 64 + v * S::N * 4);
          const I lo = S::lo_nibbles(q), hi = S::hi_nibbles(q);
          for (int t = 0; t < NT; ++t) {
            const int8_t* xh = a.a16 + (t0 + t) * 2 * w.cols + (kb * 8 + 2 * c.value) * 4;
            const int8_t* xl = xh + w.cols;
            sh[t] = S::dot_u4_16(S::dot_u4_16(sh[t], lo, load_i32(xh)), hi, load_i32(xh + 4));
            sl[t] = S::dot_u4_16(S::dot_u4_16(sl[t], lo, load_i32(xl)), hi, load_i32(xl + 4));
            keep_order(sh[t]);
            keep_order(sl[t]);
          }
        });
        const F dsv = S::load(ds[j] + v * S::N), dmv = S::load(dm[j] + v * S::N);
        for (int t = 0; t < NT; ++t) {
          const float s = a.a16_scale[(t0 + t) * nb + kb];
          const I dv = S::addv(S::template slli<8>(S::widen_u4_16(S::zeroi(), sh[t])), S::widen_u4_16(S::zeroi(), sl[t]));
          float* yp = y[t] + v * S::N;
          F yv = S::fma(S::cvt(dv), S::mul(dsv, S::set1(s)), S::load(yp));
          yv = S::fma(dmv, S::set1(-(s * static_cast<float>(a.a16_sums[((t0 + t) * nb + kb) * 3]))), yv);
          S::store(yp, yv);
        }
      }
    }
  }
  for (int t = 0; t < NT; ++t) {
    F yt[V];
    for (int v = 0; v < V; ++v) yt[v] = S::load(y[t] + v * S::N);
    store_tile<S>(w, e, tile, t0 + t, yt);
  }
}

// The 4-bit super-blocks, NT tokens from t0 (their a16 rows) and RT tiles: per sub-block j of 32
// elements (the a16 block kb) the exact integer D, then, as backends/ref/ref_matmul.h up to f32 rounding,
//   Q4_K (kIq4Xs false): D = sum u X,    y += (d sc_j) (s_kb D)  and  y += (dmin m_j) (-(s_kb sum X));
//   IQ4_XS:              D = sum L[u] X (the nibbles' levels as signed weights, lookup16, summed by
//                        dot_lv, whose bias the sums' start takes off),  y += (d s_j) (s_kb D);
//   Q5_K (kFive):        as Q4_K with u the nibble and its fifth bit (FifthBits), 0..31.
// A token's operations do not depend on NT: a batched step gives each token its solo bits.
template <class S, int RT, int NT, bool kIq4Xs, bool kFive = false>
inline void w4_superblock(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tile, int t0) {
  using F = typename S::F;
  using I = typename S::I;
  constexpr int V = kTileRows / S::N;
  constexpr int64_t kBlock = kIq4Xs ? kIq4XsTileBlockBytes : kFive ? kQ5KTileBlockBytes : kQ4KTileBlockBytes;
  constexpr int64_t kChunks = kIq4Xs ? kIq4XsChunks : kQ4KChunks;
  const int64_t nb = w.cols / 32;
  auto x4 = [&](int t, int plane, int64_t k4) { return load_i32(a.a16 + ((t0 + t) * 2 + plane) * w.cols + 4 * k4); };
  auto scale = [&](int t, int64_t kb) { return a.a16_scale[(t0 + t) * nb + kb]; };
  auto sums = [&](int t, int64_t kb) { return a.a16_sums + ((t0 + t) * nb + kb) * 3; };  // sum X, -8 sum hi, -8 sum lo
  auto levels = [](const I& q, int, int) {
    if constexpr (kIq4Xs) return S::w8_prep(S::lookup16(q, kIq4Levels));
    else return q;
  };
  F y[RT][NT][V];
  fill_all(y, S::zero());
  const uint8_t* base = w.data + tile * w.tile_bytes;
  const uint8_t* end = packed_end(w);
  for (int64_t sb = 0; sb < w.cols / 256; ++sb) {
    const int64_t off = sb * kBlock;
    if (NT == 1 || t0 == 0)
      for (int r = 0; r < RT; ++r) prefetch_ahead(w, base + r * w.tile_bytes, off, kBlock, RT * w.tile_bytes, end);
    static_for<8>([&](auto j) {
      const int64_t kb = sb * 8 + j.value;
      I ah[RT][NT][V], al[RT][NT][V];
      for (int t = 0; t < NT; ++t) {  // IQ4_XS: minus dot_lv's bias, kW8DigitBias times the digits' sums
        const I h = kIq4Xs ? S::set1i(S::kW8DigitBias / 8 * sums(t, kb)[1]) : S::zeroi();
        const I l = kIq4Xs ? S::set1i(S::kW8DigitBias / 8 * sums(t, kb)[2]) : S::zeroi();
        for (int r = 0; r < RT; ++r)
          for (int v = 0; v < V; ++v) {
            ah[r][t][v] = h;
            al[r][t][v] = l;
          }
      }
      // Four chunks of eight elements, as w4a16_block's; inlined by force: with Q5_K's fifth bits
      // GCC called them out of line, spilling every accumulator.
      auto chunk = [&](auto c) __attribute__((always_inline)) {
        constexpr int kC = decltype(c)::value;
        const uint8_t* at = base + off + kChunks + (j.value * 4 + kC) * 64;
        for (int v = 0; v < V; ++v) {
          auto col = [&](int r) { return at + r * w.tile_bytes + v * S::N * 4; };
          if constexpr (kIq4Xs) {
            nibble_chunk<S, RT, NT>(ah, al, v, kb * 8 + 2 * kC, col, x4, levels);
          } else if constexpr (kFive) {
            const FifthBits<S, kC> fifth{base + off + kQ5KHighs + j.value * 64 + v * S::N * 4, w.tile_bytes};
            nibble_chunk<S, RT, NT>(ah, al, v, kb * 8 + 2 * kC, col, x4, fifth);
          } else {
            nibble_chunk<S, RT, NT>(ah, al, v, kb * 8 + 2 * kC, col, x4);
          }
        }
      };
      chunk(std::integral_constant<int, 0>{});
      chunk(std::integral_constant<int, 1>{});
      chunk(std::integral_constant<int, 2>{});
      chunk(std::integral_constant<int, 3>{});
      for (int r = 0; r < RT; ++r) {
        const uint8_t* blk = base + r * w.tile_bytes + off;
        for (int v = 0; v < V; ++v) {
          const F d = S::from_f16(blk + v * S::N * 2);
          const F ds = S::mul(S::cvt(kIq4Xs ? iq4xs_scale<S, j.value>(blk + kIq4XsPlanes, v)
                                            : q4k_scale_min<S, j.value, false>(blk + kQ4KPlanes, v)), d);
          for (int t = 0; t < NT; ++t) {
            const I dv = S::addv(S::template slli<8>(ah[r][t][v]), al[r][t][v]);
            y[r][t][v] = S::fma(S::cvt(dv), S::mul(ds, S::set1(scale(t, kb))), y[r][t][v]);
          }
          if constexpr (!kIq4Xs) {
            const F dm = S::mul(S::cvt(q4k_scale_min<S, j.value, true>(blk + kQ4KPlanes, v)), S::from_f16(blk + 32 + v * S::N * 2));
            for (int t = 0; t < NT; ++t)
              y[r][t][v] = S::fma(dm, S::set1(-(scale(t, kb) * static_cast<float>(sums(t, kb)[0]))), y[r][t][v]);
          }
        }
      }
    });
  }
  for (int r = 0; r < RT; ++r)
    for (int t = 0; t < NT; ++t) store_tile<S>(w, e, tile + r, t0 + t, y[r][t]);
}

// What q6k_block's sums start from, for n tokens' a16 rows cols wide: per 16 elements
// -32 sum hi and -32 sum lo (so that they end as sum (q - 32) X), [n][cols / 16][2].
inline void q6k_half_sums(const Activations& a, int64_t cols, int32_t* out) {
  for (int t = 0; t < a.n; ++t) {
    const int8_t* hi = a.a16 + t * 2 * cols;
    const int8_t* lo = hi + cols;
    for (int64_t i = 0; i < cols / 16; ++i) {
      int32_t sh = 0, sl = 0;
      for (int k = 0; k < 16; ++k) {
        sh += hi[16 * i + k];
        sl += lo[16 * i + k];
      }
      out[(t * (cols / 16) + i) * 2] = -32 * sh;
      out[(t * (cols / 16) + i) * 2 + 1] = -32 * sl;
    }
  }
}

// Q6_K decode on traits with int16 sums: q6k_rows' arithmetic (below) for one token with the
// tile's halves side by side and the outputs in registers, as q4k_decode; the same bits.
template <class S>
inline void q6k_decode(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tile, const int32_t* half_sums) {
  using F = typename S::F;
  using I = typename S::I;
  constexpr int V = kTileRows / S::N;
  const int8_t* xh = a.a16;
  const int8_t* xl = a.a16 + w.cols;
  F y[V];
  for (int v = 0; v < V; ++v) y[v] = S::zero();
  const uint8_t* base = w.data + tile * w.tile_bytes;
  const uint8_t* end = packed_end(w);
  const I ones = S::ones16();
  for (int64_t sb = 0; sb < w.cols / 256; ++sb) {
    const int64_t off = sb * kQ6KTileBlockBytes;
    prefetch_ahead(w, base, off, kQ6KTileBlockBytes, w.tile_bytes, end);
    F d[V];
    for (int v = 0; v < V; ++v) d[v] = S::from_f16(base + off + v * S::N * 2);
    for (int hb = 0; hb < 16; ++hb) {
      const int64_t i = sb * 16 + hb, k = 16 * i;
      const int32_t h0 = load_i32(xh + k), h1 = load_i32(xh + k + 4), h2 = load_i32(xh + k + 8), h3 = load_i32(xh + k + 12);
      const int32_t l0 = load_i32(xl + k), l1 = load_i32(xl + k + 4), l2 = load_i32(xl + k + 8), l3 = load_i32(xl + k + 12);
      const I sh = S::set1i(half_sums[i * 2]), sl = S::set1i(half_sums[i * 2 + 1]);
      const F sv = S::set1(a.a16_scale[i / 2]);
      for (int v = 0; v < V; ++v) {
        I u[4];
        q6k_values<S>(base + off + v * S::N * 4, hb, u);
        I ph = S::dot_u4_16(S::dot_u4_16(S::zeroi(), u[0], h0), u[1], h1);
        I ph2 = S::dot_u4_16(S::dot_u4_16(S::zeroi(), u[2], h2), u[3], h3);
        I pl = S::dot_u4_16(S::dot_u4_16(S::zeroi(), u[0], l0), u[1], l1);
        I pl2 = S::dot_u4_16(S::dot_u4_16(S::zeroi(), u[2], l2), u[3], l3);
        keep_order(ph);
        keep_order(pl);
        const I ah = S::addv(S::addv(sh, S::madd16(ph, ones)), S::madd16(ph2, ones));
        const I al = S::addv(S::addv(sl, S::madd16(pl, ones)), S::madd16(pl2, ones));
        const I dv = S::addv(S::template slli<8>(ah), al);
        const F ds = S::mul(S::from_s8(base + off + kQ6KScales + hb * 16 + v * S::N), d[v]);
        y[v] = S::fma(S::cvt(dv), S::mul(ds, sv), y[v]);
      }
    }
  }
  store_tile<S>(w, e, tile, 0, y);
}

// Q6_K on traits with int16 sums (has_u4_sum16), one tile and NT tokens from t0, as q4k_rows:
// q6k_block's sums, with each pair of quads' products summed as int16 first (two pair sums of a
// 6-bit value and an int8 digit: |s| <= 4 x 63 x 128 = 32256, exact) and widened once per pair.
// The same integers, scaled in the same order: the same bits as q6k_block.
template <class S, int NT>
inline void q6k_rows(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tile, int t0,
                     const int32_t* half_sums) {
  using F = typename S::F;
  using I = typename S::I;
  constexpr int V = kTileRows / S::N;
  const int64_t nb = w.cols / 32, nh = w.cols / 16;
  alignas(64) float y[NT][kTileRows] = {};
  const uint8_t* base = w.data + tile * w.tile_bytes;
  const uint8_t* end = packed_end(w);
  const I ones = S::ones16();
  for (int64_t sb = 0; sb < w.cols / 256; ++sb) {
    const int64_t off = sb * kQ6KTileBlockBytes;
    if (NT == 1 || t0 == 0) prefetch_ahead(w, base, off, kQ6KTileBlockBytes, w.tile_bytes, end);
    for (int hb = 0; hb < 16; ++hb) {
      const int64_t i = sb * 16 + hb;
      for (int v = 0; v < V; ++v) {
        I u[4];
        q6k_values<S>(base + off + v * S::N * 4, hb, u);
        const F ds = S::mul(S::from_s8(base + off + kQ6KScales + hb * 16 + v * S::N), S::from_f16(base + off + v * S::N * 2));
        for (int t = 0; t < NT; ++t) {
          const int8_t* xh = a.a16 + (t0 + t) * 2 * w.cols + 16 * i;
          const int8_t* xl = xh + w.cols;
          I ph = S::dot_u4_16(S::dot_u4_16(S::zeroi(), u[0], load_i32(xh)), u[1], load_i32(xh + 4));
          I ph2 = S::dot_u4_16(S::dot_u4_16(S::zeroi(), u[2], load_i32(xh + 8)), u[3], load_i32(xh + 12));
          I pl = S::dot_u4_16(S::dot_u4_16(S::zeroi(), u[0], load_i32(xl)), u[1], load_i32(xl + 4));
          I pl2 = S::dot_u4_16(S::dot_u4_16(S::zeroi(), u[2], load_i32(xl + 8)), u[3], load_i32(xl + 12));
          keep_order(ph);
          keep_order(pl);
          const int32_t* hs = half_sums + ((t0 + t) * nh + i) * 2;
          const I ah = S::addv(S::addv(S::set1i(hs[0]), S::madd16(ph, ones)), S::madd16(ph2, ones));
          const I al = S::addv(S::addv(S::set1i(hs[1]), S::madd16(pl, ones)), S::madd16(pl2, ones));
          const I dv = S::addv(S::template slli<8>(ah), al);
          float* yp = y[t] + v * S::N;
          S::store(yp, S::fma(S::cvt(dv), S::mul(ds, S::set1(a.a16_scale[(t0 + t) * nb + i / 2])), S::load(yp)));
        }
      }
    }
  }
  for (int t = 0; t < NT; ++t) {
    F yt[V];
    for (int v = 0; v < V; ++v) yt[v] = S::load(y[t] + v * S::N);
    store_tile<S>(w, e, tile, t0 + t, yt);
  }
}

// Q6_K, NT tokens from t0 and RT tiles: per sub-block i of 16 elements the exact D = sum (q - 32) X
// (the sums start at `half_sums`, q6k_half_sums), then y += (d sc_i) (s_kb D), kb = i / 2 the a16
// block, as backends/ref/ref_matmul.h up to f32 rounding. The 6-bit values are each chunk's nibbles
// with their high bit pairs shifted beside them (layouts.h).
template <class S, int RT, int NT>
inline void q6k_block(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tile, int t0,
                      const int32_t* half_sums) {
  using F = typename S::F;
  using I = typename S::I;
  constexpr int V = kTileRows / S::N;
  const int64_t nb = w.cols / 32, nh = w.cols / 16;
  auto x4 = [&](int t, int plane, int64_t k4) { return load_i32(a.a16 + ((t0 + t) * 2 + plane) * w.cols + 4 * k4); };
  F y[RT][NT][V];
  fill_all(y, S::zero());
  const uint8_t* base = w.data + tile * w.tile_bytes;
  const uint8_t* end = packed_end(w);
  for (int64_t sb = 0; sb < w.cols / 256; ++sb) {
    const int64_t off = sb * kQ6KTileBlockBytes;
    if (NT == 1 || t0 == 0)
      for (int r = 0; r < RT; ++r) prefetch_ahead(w, base + r * w.tile_bytes, off, kQ6KTileBlockBytes, RT * w.tile_bytes, end);
    for (int hb = 0; hb < 16; ++hb) {
      const int64_t i = sb * 16 + hb, k4 = 4 * i;
      I ah[RT][NT][V], al[RT][NT][V];
      for (int t = 0; t < NT; ++t) {
        const int32_t* hs = half_sums + ((t0 + t) * nh + i) * 2;
        for (int r = 0; r < RT; ++r)
          for (int v = 0; v < V; ++v) {
            ah[r][t][v] = S::set1i(hs[0]);
            al[r][t][v] = S::set1i(hs[1]);
          }
      }
      for (int v = 0; v < V; ++v) {
        // The four u32 of four values each: elements 16 i + (0-3, 4-7, 8-11, 12-15).
        auto values = [&](int r, I (&u)[4]) { q6k_values<S>(base + r * w.tile_bytes + off + v * S::N * 4, hb, u); };
        if constexpr (NT == 1) {
          int32_t xh[4], xl[4];
          for (int k = 0; k < 4; ++k) {
            xh[k] = x4(0, 0, k4 + k);
            xl[k] = x4(0, 1, k4 + k);
          }
          for (int r = 0; r < RT; ++r) {
            I u[4];
            values(r, u);
            for (int k = 0; k < 4; ++k) {
              ah[r][0][v] = S::dot_u4(ah[r][0][v], u[k], xh[k]);
              al[r][0][v] = S::dot_u4(al[r][0][v], u[k], xl[k]);
            }
          }
          continue;
        }
        I u[RT][4];
        for (int r = 0; r < RT; ++r) values(r, u[r]);
        for (int t = 0; t < NT; ++t)
          for (int k = 0; k < 4; ++k) {
            const int32_t xh = x4(t, 0, k4 + k), xl = x4(t, 1, k4 + k);
            for (int r = 0; r < RT; ++r) {
              ah[r][t][v] = S::dot_u4(ah[r][t][v], u[r][k], xh);
              al[r][t][v] = S::dot_u4(al[r][t][v], u[r][k], xl);
            }
          }
      }
      for (int r = 0; r < RT; ++r) {
        const uint8_t* blk = base + r * w.tile_bytes + off;
        for (int v = 0; v < V; ++v) {
          const F ds = S::mul(S::from_s8(blk + kQ6KScales + hb * 16 + v * S::N), S::from_f16(blk + v * S::N * 2));
          for (int t = 0; t < NT; ++t) {
            const I dv = S::addv(S::template slli<8>(ah[r][t][v]), al[r][t][v]);
            y[r][t][v] = S::fma(S::cvt(dv), S::mul(ds, S::set1(a.a16_scale[(t0 + t) * nb + i / 2])), y[r][t][v]);
          }
        }
      }
    }
  }
  for (int r = 0; r < RT; ++r)
    for (int t = 0; t < NT; ++t) store_tile<S>(w, e, tile + r, t0 + t, y[r][t]);
}

}  // namespace
}  // namespace kiln::cpu
