// AVX-512 with AMX (Intel's tile matrix units): the AVX-512 table, with the prefill of every A16
// and 16-bit scheme on the tiles. Compiled with the AVX-512 flags and -mavx512bf16 -mamx-tile
// -mamx-bf16.
//
// Per 16 weight rows, 16 tokens and 32 input elements, TDPBF16PS multiplies the activations,
// split into two bf16 parts hi + lo (|x - hi - lo| <= 2^-17 |x|), with weights that bf16 holds
// exactly, and sums the products in f32:
//   w4a16  the nibbles as bf16 integers (u - 8, or u for asymmetric groups) times its rounded
//          activations s X (backends/ref/ref_matmul.h), split the same way; each group's sum is scaled
//          by its f16 scale on the AVX-512 side: y += d * C (+ m * sum_group s X);
//   w8a16  the int8 values (|q| <= 127 is exact in bf16's 8 significant bits); y = s * C;
//   bf16   the weights themselves;
//   f16    each weight split as w = wh + wl, both bf16 (wh rounded to 8 significant bits, wl the
//          at most 3 bits left of f16's 11), and all four products summed: y = C exactly as
//          for the other schemes, at twice their tile work.
#include <immintrin.h>

#include "backends/cpu/microkernels.h"
#include "backends/cpu/x86/amx_tile_config.h"
#include "backends/cpu/x86/avx512_traits.h"
#include "core/cpu_features.h"

#if defined(KILN_AMX_EMULATION)
#include "backends/cpu/x86/amx_emulation.h"
#define KILN_FILL_AMX fill_amx_emulated
#else
#define KILN_FILL_AMX fill_amx
#endif

namespace kiln::cpu {

namespace {

inline void configure_tiles() { _tile_loadconfig(&kAmxTileConfig); }

// The avx512 table's kernels (x86/avx512.cpp), where the tiles do not pay (decode, few tokens):
// taken from that file rather than instantiated here a second time (they dominate build time).
decltype(KernelTable::matmul) avx512_matmul = {};

constexpr int kTileTokens = 16;
constexpr int kChunkBlocks = 4;  // token blocks whose sums stay in one stack buffer

// The A tiles of n tokens: per block of 16 tokens and 32 elements, hi then lo, each 16 rows of
// 32 bf16 in the order of the B tiles' pairs: (8c + j, 8c + 4 + j) for c = 0..3, j = 0..3.
// load(t, k) gives token t's 16 values from element k.
template <typename Load>
void fill_bf16_tiles(int n, int64_t cols, uint16_t* tiles, Load&& load) {
  const int64_t kb = cols / 32;
  const int blocks = (n + kTileTokens - 1) / kTileTokens;
  const __m512i order = _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
  for (int tb = 0; tb < blocks; ++tb)
    for (int64_t b = 0; b < kb; ++b) {
      uint16_t* hi = tiles + ((tb * kb + b) * 2) * (kTileTokens * 32);
      uint16_t* lo = hi + kTileTokens * 32;
      for (int m = 0; m < kTileTokens; ++m) {
        const int t = tb * kTileTokens + m;
        for (int half = 0; half < 2; ++half) {
          __m512 v = t < n ? load(t, b * 32 + half * 16) : _mm512_setzero_ps();
          v = _mm512_permutexvar_ps(order, v);
          const __m256i h = (__m256i)_mm512_cvtneps_pbh(v);
          const __m512 hf = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
          const __m256i l = (__m256i)_mm512_cvtneps_pbh(_mm512_sub_ps(v, hf));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi + m * 32 + half * 16), h);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo + m * 32 + half * 16), l);
        }
      }
    }
}

void make_bf16_tiles(const float* x, int64_t x_stride, int n, int64_t cols, uint16_t* tiles) {
  fill_bf16_tiles(n, cols, tiles, [&](int t, int64_t k) { return _mm512_loadu_ps(x + t * x_stride + k); });
}

// The same for W4A16's rounded activations s X from their digits (X = 256 hi + lo, exact in f32).
void make_bf16_tiles_a16(const int8_t* digits, const float* scales, int n, int64_t cols, uint16_t* tiles) {
  fill_bf16_tiles(n, cols, tiles, [&](int t, int64_t k) {
    const int8_t* d = digits + t * 2 * cols + k;
    const __m512i h = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(d)));
    const __m512i l = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(d + cols)));
    const __m512 X = _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_slli_epi32(h, 8), l));
    return _mm512_mul_ps(X, _mm512_set1_ps(scales[t * (cols / 32) + k / 32]));
  });
}

// B tile p = (chunk c, byte j) of a block: per row n the pair (u[k0 + 8c + j], u[k0 + 8c + 4 + j])
// as bf16 through a 32-entry word table indexed by the nibble (bit 4 is the next nibble's).
template <int j>
inline __m512i b_row(__m512i v, __m512i lut) {
  const __m512i lo = _mm512_srli_epi32(v, 8 * j);
  const __m512i hi = (12 - 8 * j) >= 0 ? _mm512_slli_epi32(v, (12 - 8 * j) >= 0 ? 12 - 8 * j : 0)
                                        : _mm512_srli_epi32(v, (8 * j - 12) >= 0 ? 8 * j - 12 : 0);
  return _mm512_permutexvar_epi16(_mm512_mask_blend_epi16(0xAAAAAAAAu, lo, hi), lut);
}

void matmul_w4a16_amx(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tb, int64_t te, uint8_t* work) {
  if (a.format != ActivationFormat::kA16Bf16Tiles) {
    avx512_matmul[static_cast<int>(Scheme::kW4A16)](w, a, e, tb, te, work);
    return;
  }
  configure_tiles();
  const int g = w.params.group_size;
  const bool sym = w.params.symmetric;
  const int64_t groups = w.cols / g, kb = w.cols / 32;
  const uint64_t gb = w4_group_bytes(w.params);
  const int hdr = sym ? 32 : 64;
  alignas(64) uint16_t table[32];
  for (int i = 0; i < 32; ++i) {
    const float u = static_cast<float>(i & 15) - (sym ? 8.0f : 0.0f);
    uint32_t bits;
    std::memcpy(&bits, &u, 4);
    table[i] = static_cast<uint16_t>(bits >> 16);  // small integers: exact in bf16
  }
  const __m512i lut = _mm512_load_si512(table);
  // The group's sum of the rounded activations, for the min term: sum over its blocks of s * sum X.
  auto group_sum = [&](int t, int64_t b) {
    float s = 0.0f;
    for (int blk = 0; blk < g / 32; ++blk) {
      const int64_t i = t * kb + b * (g / 32) + blk;
      s += a.a16_scale[i] * static_cast<float>(a.a16_sums[3 * i]);
    }
    return s;
  };
  const int blocks = (a.n + kTileTokens - 1) / kTileTokens;
  for (int64_t tile = tb; tile < te; ++tile) {
    const uint8_t* base = w.data + tile * w.tile_bytes;
    for (int c0 = 0; c0 < blocks; c0 += kChunkBlocks) {
      const int c1 = std::min(blocks, c0 + kChunkBlocks);
      alignas(64) float y[kChunkBlocks][kTileTokens][16];
      for (int i = 0; i < c1 - c0; ++i)
        for (int m = 0; m < kTileTokens; ++m) _mm512_store_ps(y[i][m], _mm512_setzero_ps());
      for (int64_t b = 0; b < groups; ++b) {
        const uint8_t* grp = base + b * gb;
        alignas(64) uint16_t bt[4][16][32];  // the group's B tiles, g / 32 of them
        for (int blk = 0; blk < g / 32; ++blk)
          for (int c = 0; c < 4; ++c) {
            const __m512i v = _mm512_loadu_si512(grp + hdr + (blk * 4 + c) * 64);
            static_for<4>([&](auto j) { _mm512_store_si512(bt[blk][c * 4 + j], b_row<j.value>(v, lut)); });
          }
        const __m512 d = Avx512::from_f16(grp);
        const __m512 mn = sym ? _mm512_setzero_ps() : Avx512::from_f16(grp + 32);
        for (int tbk = c0; tbk < c1; ++tbk) {
          _tile_zero(0);
          for (int blk = 0; blk < g / 32; ++blk) {
            const uint16_t* at = a.bf16_tiles + ((tbk * kb + b * (g / 32) + blk) * 2) * (kTileTokens * 32);
            _tile_loadd(1, bt[blk], 64);
            _tile_loadd(2, at, 64);
            _tile_loadd(3, at + kTileTokens * 32, 64);
            _tile_dpbf16ps(0, 2, 1);
            _tile_dpbf16ps(0, 3, 1);
          }
          alignas(64) float cbuf[kTileTokens][16];
          _tile_stored(0, cbuf, 64);
          float (*yb)[16] = y[tbk - c0];
          for (int m = 0; m < kTileTokens; ++m) {
            __m512 acc = _mm512_fmadd_ps(_mm512_load_ps(cbuf[m]), d, _mm512_load_ps(yb[m]));
            const int t = tbk * kTileTokens + m;
            if (!sym && t < a.n) acc = _mm512_fmadd_ps(mn, _mm512_set1_ps(group_sum(t, b)), acc);
            _mm512_store_ps(yb[m], acc);
          }
        }
      }
      for (int tbk = c0; tbk < c1; ++tbk)
        for (int m = 0; m < kTileTokens; ++m) {
          const int t = tbk * kTileTokens + m;
          if (t >= a.n) break;
          const __m512 v = _mm512_load_ps(y[tbk - c0][m]);
          store_tile<Avx512>(w, e, tile, t, &v);
        }
    }
  }
  _tile_release();
}

// The B tile rows of block `blk` (32 elements) of one 16-row tile of a w8a16, bf16 or f16 matrix,
// in the pair order of make_bf16_tiles: row 4c + j pairs elements 8c + j and 8c + 4 + j, lower
// word first. bt[0] gets the weights (f16: their high parts), bt[1] the low parts of f16.
template <Scheme kS>
inline void wide_b_tiles(const uint8_t* tile, int64_t blk, uint16_t (*bt0)[32], uint16_t (*bt1)[32]) {
  const __m512i high_word = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  auto pair = [&](__m512i lo_word_src, __m512i hi_word_src) {  // f32 bits of bf16-exact values
    return _mm512_or_si512(_mm512_srli_epi32(lo_word_src, 16), _mm512_and_si512(hi_word_src, high_word));
  };
  for (int c = 0; c < 4; ++c) {
    if constexpr (kS == Scheme::kW8A16) {
      // Chunks of 4 elements per row after the 128-byte header of scales and row sums.
      const __m512i va = _mm512_loadu_si512(tile + 128 + (8 * blk + 2 * c) * 64);
      const __m512i vb = _mm512_loadu_si512(tile + 128 + (8 * blk + 2 * c + 1) * 64);
      static_for<4>([&](auto j) {
        constexpr int up = 24 - 8 * j.value;
        const __m512 fa = _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(va, up), 24));
        const __m512 fb = _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(vb, up), 24));
        _mm512_store_si512(bt0[c * 4 + j], pair(_mm512_castps_si512(fa), _mm512_castps_si512(fb)));
      });
    } else {
      for (int j = 0; j < 4; ++j) {
        // Column k of the r16 layout: the 16 rows' element k.
        const uint8_t* ca = tile + (blk * 32 + 8 * c + j) * 32;
        const uint8_t* cb = tile + (blk * 32 + 8 * c + 4 + j) * 32;
        const __m256i ha = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ca));
        const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cb));
        if constexpr (kS == Scheme::kBF16) {
          _mm512_store_si512(bt0[c * 4 + j],
                             _mm512_or_si512(_mm512_cvtepu16_epi32(ha), _mm512_slli_epi32(_mm512_cvtepu16_epi32(hb), 16)));
        } else {
          const __m512 fa = _mm512_cvtph_ps(ha), fb = _mm512_cvtph_ps(hb);
          const __m512i wa = _mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(fa)), 16);
          const __m512i wb = _mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(fb)), 16);
          const __m512 la = _mm512_sub_ps(fa, _mm512_castsi512_ps(wa)), lb = _mm512_sub_ps(fb, _mm512_castsi512_ps(wb));
          _mm512_store_si512(bt0[c * 4 + j], pair(wa, wb));
          _mm512_store_si512(bt1[c * 4 + j], pair(_mm512_castps_si512(la), _mm512_castps_si512(lb)));
        }
      }
    }
  }
}

// The tile intrinsics take tile numbers as literals (they are pasted into the instruction): OP(c)
// for C tile j of 0..3.
#define KILN_ON_C_TILE(j, OP) \
  switch (j) {                \
    case 0: OP(0); break;     \
    case 1: OP(1); break;     \
    case 2: OP(2); break;     \
    default: OP(3); break;    \
  }

// w8a16, bf16, f16 prefill: no per-group scale, so each of up to four token blocks keeps its C
// tile over the whole row, and the B tiles of a step of four blocks serve all four.
template <Scheme kS>
void matmul_wide_amx(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tb, int64_t te, uint8_t* work) {
  if (a.format != ActivationFormat::kBf16Tiles) {
    avx512_matmul[static_cast<int>(kS)](w, a, e, tb, te, work);
    return;
  }
  configure_tiles();
  constexpr int kStep = 4;
  const int64_t kb = w.cols / 32;
  const int blocks = (a.n + kTileTokens - 1) / kTileTokens;
  for (int64_t tile = tb; tile < te; ++tile) {
    const uint8_t* base = w.data + tile * w.tile_bytes;
    for (int c0 = 0; c0 < blocks; c0 += kChunkBlocks) {
      const int nc = std::min(blocks - c0, kChunkBlocks);
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int64_t s0 = 0; s0 < kb; s0 += kStep) {
        const int ns = static_cast<int>(std::min<int64_t>(kStep, kb - s0));
        alignas(64) uint16_t bt[2][kStep][16][32];
        for (int i = 0; i < ns; ++i) wide_b_tiles<kS>(base, s0 + i, bt[0][i], bt[1][i]);
        for (int i = 0; i < ns; ++i) {
          _tile_loadd(4, bt[0][i], 64);
          if constexpr (kS == Scheme::kF16) _tile_loadd(5, bt[1][i], 64);
          for (int j = 0; j < nc; ++j) {
            const uint16_t* at = a.bf16_tiles + (((c0 + j) * kb + s0 + i) * 2) * (kTileTokens * 32);
            _tile_loadd(6, at, 64);
            _tile_loadd(7, at + kTileTokens * 32, 64);
#define KILN_WIDE_DP(c)                    \
  do {                                     \
    _tile_dpbf16ps(c, 6, 4);               \
    _tile_dpbf16ps(c, 7, 4);               \
    if constexpr (kS == Scheme::kF16) {    \
      _tile_dpbf16ps(c, 6, 5);             \
      _tile_dpbf16ps(c, 7, 5);             \
    }                                      \
  } while (0)
            KILN_ON_C_TILE(j, KILN_WIDE_DP)
#undef KILN_WIDE_DP
          }
        }
      }
      alignas(64) float cbuf[kChunkBlocks][kTileTokens][16];
#define KILN_STORE_C(c) _tile_stored(c, cbuf[j], 64)
      for (int j = 0; j < nc; ++j) KILN_ON_C_TILE(j, KILN_STORE_C)
#undef KILN_STORE_C
      const __m512 scale = kS == Scheme::kW8A16 ? _mm512_loadu_ps(reinterpret_cast<const float*>(base)) : _mm512_set1_ps(1.0f);
      for (int j = 0; j < nc; ++j)
        for (int m = 0; m < kTileTokens; ++m) {
          const int t = (c0 + j) * kTileTokens + m;
          if (t >= a.n) break;
          const __m512 v = _mm512_mul_ps(_mm512_load_ps(cbuf[j][m]), scale);
          store_tile<Avx512>(w, e, tile, t, &v);
        }
    }
  }
  _tile_release();
}

constexpr int kMinTileTokens = 8;  // the fewest tokens the tiles pay for (bf16_tiles_min_rows)
constexpr bool runs_on_tiles(Scheme s) {
  return s == Scheme::kW4A16 || s == Scheme::kW8A16 || s == Scheme::kBF16 || s == Scheme::kF16;
}

decltype(KernelTable::product_loop) avx512_product_loop = nullptr;

// TDPBF16PS's ceiling for the schemes the tiles run (four sums of 16 x 16 outputs, 32 bf16
// products each per instruction; the activations as two bf16 parts, f16 weights as two more);
// the avx512 table's for the rest.
double product_loop_amx(Scheme s, int tokens, int64_t rounds) {
  if (!runs_on_tiles(s) || tokens < kMinTileTokens) return avx512_product_loop(s, tokens, rounds);
  alignas(64) static const uint8_t zeros[16 * 64] = {};
  configure_tiles();
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, zeros, 64);
  _tile_loadd(6, zeros, 64);
  for (int64_t r = 0; r < rounds; ++r) {
    _tile_dpbf16ps(0, 6, 4);
    _tile_dpbf16ps(1, 6, 4);
    _tile_dpbf16ps(2, 6, 4);
    _tile_dpbf16ps(3, 6, 4);
  }
  _tile_release();
  return static_cast<double>(rounds) * 4 * (16 * 16 * 32) / (s == Scheme::kF16 ? 4 : 2);
}

}  // namespace

#if defined(KILN_AMX_EMULATION)
void amx_emulated_last_config(uint8_t out[64]) { std::memcpy(out, amx_emulation::tiles().config, 64); }
void amx_emulated_forget_config() { std::memset(amx_emulation::tiles().config, 0, 64); }
#endif

void KILN_FILL_AMX(KernelTable& t) {
  fill_avx512(t);
  std::copy(std::begin(t.matmul), std::end(t.matmul), avx512_matmul);
#if defined(KILN_AMX_EMULATION)
  t.name = "amx-emulated";
  t.features = kCpuSetAvx512;  // the software tiles run on AVX-512
#else
  t.name = "amx";
  t.features = kCpuSetAmx;
#endif
  t.matmul[static_cast<int>(Scheme::kW4A16)] = &matmul_w4a16_amx;
  t.matmul[static_cast<int>(Scheme::kW8A16)] = &matmul_wide_amx<Scheme::kW8A16>;
  t.matmul[static_cast<int>(Scheme::kBF16)] = &matmul_wide_amx<Scheme::kBF16>;
  t.matmul[static_cast<int>(Scheme::kF16)] = &matmul_wide_amx<Scheme::kF16>;
  for (size_t s = 0; s < std::size(t.matmul); ++s)
    if (runs_on_tiles(static_cast<Scheme>(s))) t.bf16_tile_schemes |= 1u << s;
  t.make_bf16_tiles = &make_bf16_tiles;
  t.make_bf16_tiles_a16 = &make_bf16_tiles_a16;
  t.bf16_tiles_min_rows = kMinTileTokens;
  avx512_product_loop = t.product_loop;
  t.product_loop = &product_loop_amx;
}

}  // namespace kiln::cpu
