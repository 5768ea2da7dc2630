// A software model of the AMX tile instructions and of AVX512-BF16's float-to-bf16 conversion,
// for testing the amx kernels on CPUs without them: amx_emulated.cpp compiles amx.cpp once more
// with these in place of the intrinsics (tests only; nothing in kiln runs it).
//
// Semantics as Intel's SDM gives them: TDPBF16PS adds, per C element, the products of bf16 pairs
// (exact in f32) one after the other in f32; VCVTNEPS2BF16 rounds to nearest even and keeps NaNs
// quiet. The hardware's flush of denormals is not modelled (it moves results by less than the
// smallest normal float).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace kiln::cpu::amx_emulation {

struct Tiles {
  alignas(64) uint8_t data[8][16][64];
  int rows[8];
  int colsb[8];
  uint8_t config[64];  // the bytes the last LDTILECFG read, for the tests to check
};

inline Tiles& tiles() {
  thread_local Tiles t;
  return t;
}

// As the hardware does, a palette other than 1 leaves every tile unconfigured (0 rows).
inline void loadconfig(const void* config) {
  const auto* c = static_cast<const uint8_t*>(config);
  std::memcpy(tiles().config, c, 64);
  for (int i = 0; i < 8; ++i) {
    if (c[0] != 1) {
      tiles().colsb[i] = tiles().rows[i] = 0;
      continue;
    }
    uint16_t colsb;
    std::memcpy(&colsb, c + 16 + 2 * i, 2);
    tiles().colsb[i] = colsb;
    tiles().rows[i] = c[48 + i];
  }
}

inline void zero(int i) { std::memset(tiles().data[i], 0, sizeof(tiles().data[i])); }

inline void loadd(int i, const void* base, long stride) {
  for (int r = 0; r < tiles().rows[i]; ++r)
    std::memcpy(tiles().data[i][r], static_cast<const uint8_t*>(base) + r * stride, static_cast<size_t>(tiles().colsb[i]));
}

inline void stored(int i, void* base, long stride) {
  for (int r = 0; r < tiles().rows[i]; ++r)
    std::memcpy(static_cast<uint8_t*>(base) + r * stride, tiles().data[i][r], static_cast<size_t>(tiles().colsb[i]));
}

inline float bf16_to_f32(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// C (f32 M x N) += A (M x K pairs of bf16) . B (K rows of N pairs of bf16).
inline void dpbf16ps(int c, int a, int b) {
  Tiles& t = tiles();
  const int m_rows = t.rows[a], k_pairs = t.colsb[a] / 4, n_cols = t.colsb[c] / 4;
  for (int m = 0; m < m_rows; ++m)
    for (int n = 0; n < n_cols; ++n) {
      float acc;
      std::memcpy(&acc, &t.data[c][m][4 * n], 4);
      for (int k = 0; k < k_pairs; ++k) {
        acc += bf16_to_f32(&t.data[a][m][4 * k]) * bf16_to_f32(&t.data[b][k][4 * n]);
        acc += bf16_to_f32(&t.data[a][m][4 * k + 2]) * bf16_to_f32(&t.data[b][k][4 * n + 2]);
      }
      std::memcpy(&t.data[c][m][4 * n], &acc, 4);
    }
}

inline __m256i cvtneps_pbh(__m512 v) {
  alignas(64) uint32_t in[16];
  alignas(32) uint16_t out[16];
  _mm512_store_si512(in, _mm512_castps_si512(v));
  for (int i = 0; i < 16; ++i) {
    const uint32_t x = in[i];
    if ((x & 0x7fffffffu) > 0x7f800000u) out[i] = static_cast<uint16_t>((x >> 16) | 0x40u);
    else out[i] = static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
  }
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(out));
}

}  // namespace kiln::cpu::amx_emulation

#undef _tile_loadconfig
#undef _tile_zero
#undef _tile_loadd
#undef _tile_stored
#undef _tile_dpbf16ps
#undef _tile_release
#define _tile_loadconfig(config) ::kiln::cpu::amx_emulation::loadconfig(config)
#define _tile_zero(i) ::kiln::cpu::amx_emulation::zero(i)
#define _tile_loadd(i, base, stride) ::kiln::cpu::amx_emulation::loadd(i, base, stride)
#define _tile_stored(i, base, stride) ::kiln::cpu::amx_emulation::stored(i, base, stride)
#define _tile_dpbf16ps(c, a, b) ::kiln::cpu::amx_emulation::dpbf16ps(c, a, b)
#define _tile_release() ((void)0)
#define _mm512_cvtneps_pbh(v) ::kiln::cpu::amx_emulation::cvtneps_pbh(v)
