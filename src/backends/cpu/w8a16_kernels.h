// W8A16 matmul blocks: 8-bit weights times f32 activations (prefill), or times the 21-bit
// fixed-point digits of one token or a few (decode), summed exactly in int32.
#pragma once

#include "backends/cpu/kernel_helpers.h"

namespace kiln::cpu {
namespace {

// ---- w8a16 (layout r16k4) ----

// The RT x NT sums of a block, stored: per-row weights scaled by their row's scale first (8-bit
// groups were scaled block by block already).
template <class S, int RT, int NT, bool kGrouped, class F>
inline void store_w8_tiles(const PackedMatrix& w, const Epilogue& e, int64_t tile, int t0, F (&y)[RT][NT][kTileRows / S::N]) {
  const uint8_t* base = w.data + tile * w.tile_bytes;
  for (int r = 0; r < RT; ++r)
    for (int t = 0; t < NT; ++t) {
      if constexpr (!kGrouped)
        for (int v = 0; v < kTileRows / S::N; ++v)
          y[r][t][v] = S::mul(y[r][t][v], S::load(reinterpret_cast<const float*>(base + r * w.tile_bytes) + v * S::N));
      store_tile<S>(w, e, tile + r, t0 + t, y[r][t]);
    }
}

// Many tokens (or a width that is not a multiple of 32): each column widened to f32 exactly
// (byte j of each row's u32), multiplied into NT accumulators per tile of RT, times the row scale
// at the end. With 8-bit groups (kGrouped: blocks of 32 columns behind their 16 f16 scales) each
// widened column is first multiplied by its block's scale instead.
template <class S, int RT, int NT, bool kGrouped>
inline void w8a16_prefill(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tile, int t0) {
  using F = typename S::F;
  using I = typename S::I;
  constexpr int V = kTileRows / S::N;
  constexpr int P = S::kPrefillNT;
  F y[RT][NT][V];
  fill_all(y, S::zero());
  const uint8_t* base = w.data + tile * w.tile_bytes;
  const float* xp = a.x_panels + (t0 / P) * w.cols * P;
  const uint8_t* end = packed_end(w);
  const int64_t k4 = (w.cols + 3) / 4;
  [[maybe_unused]] F d[RT][V];  // kGrouped: the scales of the current block
  for (int64_t c = 0; c < k4; ++c) {
    const int64_t blk = (c / 8) * kW8GroupBlockBytes;  // kGrouped: block c / 8 of the tile
    const int64_t at = kGrouped ? blk + 32 + (c % 8) * 64 : 128 + c * 64;
    // The first block of tokens reads the run from memory (a batched decode step's logits): ask ahead.
    if (t0 == 0 && c % 8 == 0)
      for (int r = 0; r < RT; ++r)
        prefetch_ahead(w, base + r * w.tile_bytes, kGrouped ? blk : at, kGrouped ? kW8GroupBlockBytes : 512, RT * w.tile_bytes, end);
    if constexpr (kGrouped)
      if (c % 8 == 0)
        for (int r = 0; r < RT; ++r)
          for (int v = 0; v < V; ++v) d[r][v] = S::from_f16(base + r * w.tile_bytes + blk + v * S::N * 2);
    for (int v = 0; v < V; ++v) {
      I q[RT];
      for (int r = 0; r < RT; ++r) q[r] = S::loadi(base + r * w.tile_bytes + at + v * S::N * 4);
      static_for<4>([&](auto j) {
        if (4 * c + j.value >= w.cols) return;
        F col[RT];
        for (int r = 0; r < RT; ++r) {
          col[r] = S::cvt(S::template sext_byte<j.value>(q[r]));
          if constexpr (kGrouped) col[r] = S::mul(col[r], d[r][v]);
        }
        for (int t = 0; t < NT; ++t) {
          const F xv = S::set1(xp[(4 * c + j.value) * P + t]);
          for (int r = 0; r < RT; ++r) y[r][t][v] = S::fma(col[r], xv, y[r][t][v]);
        }
      });
    }
  }
  store_w8_tiles<S, RT, NT, kGrouped>(w, e, tile, t0, y);
}

// Decode (one token, or a few from t0: a batched step; width a multiple of 32): each token's
// activation digits, as w4_decode: per block of 32 the exact integer D = sum q X,
// y = sw * sum_blocks scale_block * D. A token's sums and their scaling are the same at every NT,
// so a batched step gives each token the bits of its step alone. With 8-bit groups (kGrouped)
// the weight scale is the block's: y = sum_blocks sw_block * (scale_block * D), in block order.
template <class S, int RT, int NT, bool kGrouped>
inline void w8a16_digits(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tile, int t0) {
  using F = typename S::F;
  using I = typename S::I;
  constexpr int V = kTileRows / S::N;
  const int64_t nb = w.cols / 32;
  // Token t's three digit planes, its block scales and plane sums.
  auto plane = [&](int t, int j) { return a.digits + ((t0 + t) * 3 + j) * w.cols; };
  auto scale = [&](int t, int64_t kb) { return a.digit_scale[(t0 + t) * nb + kb]; };
  auto psum = [&](int t, int j, int64_t kb) { return a.digit_plane_sums[((t0 + t) * 3 + j) * nb + kb]; };
  F y[RT][NT][V];
  fill_all(y, S::zero());
  const uint8_t* base = w.data + tile * w.tile_bytes;
  const uint8_t* end = packed_end(w);
  for (int64_t kb = 0; kb < nb; ++kb) {
    // Where block kb's chunks start in a tile (and, grouped, its 16 f16 scales just before).
    const int64_t blk = kGrouped ? kb * kW8GroupBlockBytes : 0;
    const int64_t quads = kGrouped ? blk + 32 : 128 + kb * 512;
    // The first block of tokens reads the tiles from memory; later ones find them in L2.
    if (NT == 1 || t0 == 0)
      for (int r = 0; r < RT; ++r)
        prefetch_ahead(w, base + r * w.tile_bytes, kGrouped ? blk : quads, kGrouped ? kW8GroupBlockBytes : 512, RT * w.tile_bytes, end);
    I i1[RT][NT][V], i2[RT][NT][V], i3[RT][NT][V];
    for (int r = 0; r < RT; ++r)
      for (int t = 0; t < NT; ++t)
        for (int v = 0; v < V; ++v) i1[r][t][v] = i2[r][t][v] = i3[r][t][v] = S::zeroi();
    static_for<8>([&](auto c) {  // unrolled, as w4a16_block's steps
      const int64_t k0 = kb * 32 + c.value * 4;
      for (int r = 0; r < RT; ++r)
        for (int v = 0; v < V; ++v) {
          const I q = S::w8_prep(S::loadi(base + r * w.tile_bytes + quads + c.value * 64 + v * S::N * 4));
          for (int t = 0; t < NT; ++t) {
            i1[r][t][v] = S::dot_w8(i1[r][t][v], q, load_i32(plane(t, 0) + k0));
            i2[r][t][v] = S::dot_w8(i2[r][t][v], q, load_i32(plane(t, 1) + k0));
            i3[r][t][v] = S::dot_w8(i3[r][t][v], q, load_i32(plane(t, 2) + k0));
          }
        }
    });
    // Each plane's sum is exact in int32 (|q d| <= 128 * 127 over 32 elements); 16384 sum1 is
    // not, so the planes are combined in f32.
    for (int t = 0; t < NT; ++t) {
      const float sc = scale(t, kb);
      const int32_t b1 = S::kW8DigitBias * psum(t, 0, kb), b2 = S::kW8DigitBias * psum(t, 1, kb),
                    b3 = S::kW8DigitBias * psum(t, 2, kb);
      const F s1 = S::set1(sc * 16384.0f), s2 = S::set1(sc * 128.0f), s3 = S::set1(sc);
      for (int r = 0; r < RT; ++r)
        for (int v = 0; v < V; ++v) {
          if constexpr (kGrouped) {
            const F block = S::fma(S::cvt(S::subi(i1[r][t][v], b1)), s1,
                                   S::fma(S::cvt(S::subi(i2[r][t][v], b2)), s2, S::mul(S::cvt(S::subi(i3[r][t][v], b3)), s3)));
            y[r][t][v] = S::fma(block, S::from_f16(base + r * w.tile_bytes + blk + v * S::N * 2), y[r][t][v]);
          } else {
            y[r][t][v] = S::fma(S::cvt(S::subi(i1[r][t][v], b1)), s1,
                                 S::fma(S::cvt(S::subi(i2[r][t][v], b2)), s2, S::fma(S::cvt(S::subi(i3[r][t][v], b3)), s3, y[r][t][v])));
          }
        }
    }
  }
  store_w8_tiles<S, RT, NT, kGrouped>(w, e, tile, t0, y);
}

}  // namespace
}  // namespace kiln::cpu
