// Matmul blocks of the float schemes (f32, f16, bf16 weights, f32 activations, FMA).
#pragma once

#include "backends/cpu/kernel_helpers.h"

namespace kiln::cpu {
namespace {

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
  fill_all(y, S::zero());
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

}  // namespace
}  // namespace kiln::cpu
