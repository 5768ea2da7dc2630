// Matmul blocks of the A8 schemes (W4A8, W8A8): 4- or 8-bit weights times int8 activations.
#pragma once

#include "backends/cpu/kernel_helpers.h"

namespace kiln::cpu {
namespace {

// ---- int8 activations ----

// W4A8: per group the exact integer sum of u * q, then, as backends/ref/ref_matmul.h,
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
  fill_all(y, S::zero());
  const uint8_t* base = w.data + tile * w.tile_bytes;
  const uint8_t* end = packed_end(w);
  for (int64_t b = 0; b < groups; ++b) {
    if (NT == 1 || t0 == 0)  // the first block of tokens reads the run from memory (w4a16_block)
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
    if (NT == 1 || t0 == 0)  // the first block of tokens reads the run from memory (w4a16_block)
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

}  // namespace
}  // namespace kiln::cpu
