// W8A16 matmul blocks: 8-bit weights times f32 activations (prefill), or times the 21-bit
// fixed-point digits of one token (decode), summed exactly in int32.
#pragma once

#include "backends/cpu/kernel_helpers.h"

namespace kiln::cpu {
namespace {

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
  const uint8_t* end = packed_end(w);
  const int64_t k4 = (w.cols + 3) / 4;
  for (int64_t c = 0; c < k4; ++c) {
    // The first block of tokens reads the run from memory (a batched decode step's logits): ask ahead.
    if (t0 == 0 && c % 8 == 0)
      for (int r = 0; r < RT; ++r) prefetch_ahead(w, base + r * w.tile_bytes, 128 + c * 64, 512, RT * w.tile_bytes, end);
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

}  // namespace
}  // namespace kiln::cpu
