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
constexpr bool has_u4_sum16 = requires(typename S::I a) { S::widen_u4_16(a, S::dot_u4_16(a, a, 0)); };

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
      if constexpr (!kIq4Xs && !kFive && NT == 1 && has_u4_sum16<S>) {
        // Q4_K decode: each digit plane's products summed as int16 over the sub-block's four
        // chunks (16 products of a nibble and a digit per lane: exact, dot_u4_16), widened once;
        // the same integers as the chunks above, with one multiply per product instead of two.
        I sh[RT][V], sl[RT][V];
        for (int r = 0; r < RT; ++r)
          for (int v = 0; v < V; ++v) sh[r][v] = sl[r][v] = S::zeroi();
        static_for<4>([&](auto c) {
          const uint8_t* at = base + off + kChunks + (j.value * 4 + c.value) * 64;
          const int64_t k4 = kb * 8 + 2 * c.value;
          const int32_t h0 = x4(0, 0, k4), h1 = x4(0, 0, k4 + 1), l0 = x4(0, 1, k4), l1 = x4(0, 1, k4 + 1);
          for (int v = 0; v < V; ++v)
            for (int r = 0; r < RT; ++r) {
              const I q = S::loadi(at + r * w.tile_bytes + v * S::N * 4);
              const I lo = S::lo_nibbles(q), hi = S::hi_nibbles(q);
              sh[r][v] = S::dot_u4_16(S::dot_u4_16(sh[r][v], lo, h0), hi, h1);
              sl[r][v] = S::dot_u4_16(S::dot_u4_16(sl[r][v], lo, l0), hi, l1);
            }
        });
        for (int r = 0; r < RT; ++r)
          for (int v = 0; v < V; ++v) {
            ah[r][0][v] = S::widen_u4_16(ah[r][0][v], sh[r][v]);
            al[r][0][v] = S::widen_u4_16(al[r][0][v], sl[r][v]);
          }
      } else {
        chunk(std::integral_constant<int, 0>{});
        chunk(std::integral_constant<int, 1>{});
        chunk(std::integral_constant<int, 2>{});
        chunk(std::integral_constant<int, 3>{});
      }
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
  const I m30 = S::set1i(0x30303030);
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
        auto values = [&](int r, I (&u)[4]) {
          const uint8_t* blk = base + r * w.tile_bytes + off + v * S::N * 4;
          const I h = S::loadi(blk + kQ6KHighs + hb * 64);
          const I q0 = S::loadi(blk + kQ6KChunks + (2 * hb) * 64), q1 = S::loadi(blk + kQ6KChunks + (2 * hb + 1) * 64);
          u[0] = S::orv(S::lo_nibbles(q0), S::andv(S::template slli<4>(h), m30));
          u[1] = S::orv(S::hi_nibbles(q0), S::andv(S::template slli<2>(h), m30));
          u[2] = S::orv(S::lo_nibbles(q1), S::andv(h, m30));
          u[3] = S::orv(S::hi_nibbles(q1), S::andv(S::template srli<2>(h), m30));
        };
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
