// GGML's Q5_0 and Q5_1 blocks of 32 (w5a16 g32, symmetric and asymmetric) in their tiles
// (layouts.h), times activations rounded to 16 bits (kernels.h's a16 rows), as w4a16_block and
// Q5_K's w4_superblock: per block of 32 the exact integer D = sum u X over the 5-bit values (the
// nibbles with their fifth bits, FifthBits), two int8 digit sums from one load of the values, then
// scaled by the block's own d. The tiles hold the blocks' own bytes, so a GGUF's Q5_0 tensors
// run at their own 5.5 bits a weight (Q5_1's at 6) instead of widened to 8.
#pragma once

#include "backends/cpu/kernel_helpers.h"
#include "backends/cpu/kquant_kernels.h"
#include "backends/cpu/w4a16_kernels.h"

namespace kiln::cpu {
namespace {

// NT tokens from t0 (their a16 rows) and RT tiles; per block kb of 32 elements, as
// backends/ref/ref_matmul.h up to f32 rounding,
//   Q5_0 (kAsym false): D = sum (u - 16) X (the sums start at twice the symmetric starts, -16 sum
//                       hi and -16 sum lo; |D| < 2^24, exact), y += d (s_kb D);
//   Q5_1:               D = sum u X,  y += d (s_kb D)  and  y += m (s_kb sum X).
// A token's operations do not depend on NT: a batched step gives each token its solo bits.
template <class S, int RT, int NT, bool kAsym>
inline void q5_32_block(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tile, int t0) {
  using F = typename S::F;
  using I = typename S::I;
  constexpr int V = kTileRows / S::N;
  constexpr int64_t kBlock = q5_32_tile_block_bytes(!kAsym), kHighs = q5_32_highs(!kAsym), kChunks = kHighs + 64;
  const int64_t nb = w.cols / 32;
  auto x4 = [&](int t, int plane, int64_t k4) { return load_i32(a.a16 + ((t0 + t) * 2 + plane) * w.cols + 4 * k4); };
  auto scale = [&](int t, int64_t kb) { return a.a16_scale[(t0 + t) * nb + kb]; };
  auto sums = [&](int t, int64_t kb) { return a.a16_sums + ((t0 + t) * nb + kb) * 3; };  // sum X, -8 sum hi, -8 sum lo
  F y[RT][NT][V];
  fill_all(y, S::zero());
  const uint8_t* base = w.data + tile * w.tile_bytes;
  const uint8_t* end = packed_end(w);
  for (int64_t kb = 0; kb < nb; ++kb) {
    const int64_t off = kb * kBlock;
    if (NT == 1 || t0 == 0)
      for (int r = 0; r < RT; ++r) prefetch_ahead(w, base + r * w.tile_bytes, off, kBlock, RT * w.tile_bytes, end);
    I ah[RT][NT][V], al[RT][NT][V];
    for (int t = 0; t < NT; ++t) {
      const I h = kAsym ? S::zeroi() : S::set1i(2 * sums(t, kb)[1]);
      const I l = kAsym ? S::zeroi() : S::set1i(2 * sums(t, kb)[2]);
      for (int r = 0; r < RT; ++r)
        for (int v = 0; v < V; ++v) {
          ah[r][t][v] = h;
          al[r][t][v] = l;
        }
    }
    // Four chunks of eight elements, inlined by force (as w4_superblock's).
    auto chunk = [&](auto c) __attribute__((always_inline)) {
      constexpr int kC = decltype(c)::value;
      const uint8_t* at = base + off + kChunks + kC * 64;
      for (int v = 0; v < V; ++v) {
        auto col = [&](int r) { return at + r * w.tile_bytes + v * S::N * 4; };
        const FifthBits<S, kC> fifth{base + off + kHighs + v * S::N * 4, w.tile_bytes};
        nibble_chunk<S, RT, NT>(ah, al, v, kb * 8 + 2 * kC, col, x4, fifth);
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
        for (int t = 0; t < NT; ++t) {
          const I dv = S::addv(S::template slli<8>(ah[r][t][v]), al[r][t][v]);
          y[r][t][v] = S::fma(S::cvt(dv), S::mul(d, S::set1(scale(t, kb))), y[r][t][v]);
        }
        if constexpr (kAsym) {
          const F m = S::from_f16(blk + 32 + v * S::N * 2);
          for (int t = 0; t < NT; ++t)
            y[r][t][v] = S::fma(m, S::set1(scale(t, kb) * static_cast<float>(sums(t, kb)[0])), y[r][t][v]);
        }
      }
    }
  }
  for (int r = 0; r < RT; ++r)
    for (int t = 0; t < NT; ++t) store_tile<S>(w, e, tile + r, t0 + t, y[r][t]);
}

}  // namespace
}  // namespace kiln::cpu
