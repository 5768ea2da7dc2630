// ARM64 NEON with dotprod and the int8 matrix multiply extension (i8mm): the dotprod table, with
// the prefill of the A8 schemes on SMMLA. Compiled with -march=armv8.2-a+dotprod+i8mm and
// KILN_ARM_DOTPROD.
//
// SMMLA multiplies a 2x8 int8 matrix by the transpose of another 2x8 and adds the 2x2 int32
// result: 32 products per instruction where SDOT does 16. Two rows of weights, eight elements
// each, come out of the r16k4 layouts (layouts.h) with one zip of two 4-element chunks (w8: two
// chunks; w4: the low and high nibbles of one), two tokens' eight int8 activations are loaded
// side by side, and the accumulator holds (row r, token t), (r, t+1), (r+1, t), (r+1, t+1). The
// sums are exact int32 sums of the same products as the dotprod kernels, so the results are the
// same bits.
#include "backends/cpu/microkernels.h"
#include "backends/cpu/arm/neon_traits.h"
#include "core/cpu_features.h"

namespace kiln::cpu {

namespace {

constexpr int kPairs = kTileRows / 2;  // row pairs per tile
constexpr int kTokenPairs = 2;         // token pairs per block: 8 x 2 accumulators

// Eight int8 activations of tokens t and t2 from element k: [t | t2].
inline int8x16_t token_pair(const Activations& a, int t, int t2, int64_t k) {
  return vcombine_s8(vld1_s8(a.q + t * a.q_stride + k), vld1_s8(a.q + t2 * a.q_stride + k));
}
// Four (the last, odd chunk of a w8 row): the upper four lanes zero.
inline int8x16_t token_pair4(const Activations& a, int t, int t2, int64_t k) {
  int32_t lo, hi;
  std::memcpy(&lo, a.q + t * a.q_stride + k, 4);
  std::memcpy(&hi, a.q + t2 * a.q_stride + k, 4);
  return vreinterpretq_s8_s64(vcombine_s64(vcreate_s64(static_cast<uint32_t>(lo)), vcreate_s64(static_cast<uint32_t>(hi))));
}

// Rows 2p, 2p+1 of 8 elements from two u32 vectors holding elements 0..3 (lo) and 4..7 (hi) of
// rows 4v .. 4v+3: zip1 gives rows 4v and 4v+1, zip2 rows 4v+2 and 4v+3.
inline void row_pairs(uint32x4_t lo, uint32x4_t hi, int8x16_t* out) {
  out[0] = vreinterpretq_s8_u32(vzip1q_u32(lo, hi));
  out[1] = vreinterpretq_s8_u32(vzip2q_u32(lo, hi));
}

// The tokens of pair j of a block starting at t0 (an odd count repeats the last token; its
// results are not stored).
inline void pair_tokens(int t0, int nt, int j, int& t, int& t2) {
  t = t0 + std::min(2 * j, nt - 1);
  t2 = t0 + std::min(2 * j + 1, nt - 1);
}

// acc[p][j] -> the int32 sums of token (2j or 2j+1) for rows 4v .. 4v+3.
inline int32x4_t rows_of_token(const int32x4_t (*acc)[kTokenPairs], int v, int j, bool second) {
  return second ? vuzp2q_s32(acc[2 * v][j], acc[2 * v + 1][j]) : vuzp1q_s32(acc[2 * v][j], acc[2 * v + 1][j]);
}

// W8A8: y = float(sum q_w q_x) * s_w * s_x, as w8a8_block.
void w8a8_mmla_block(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tile, int t0, int nt) {
  int32x4_t acc[kPairs][kTokenPairs];
  for (auto& row : acc)
    for (auto& v : row) v = vdupq_n_s32(0);
  const uint8_t* base = w.data + tile * w.tile_bytes + 128;
  const int64_t k4 = (w.cols + 3) / 4;
  int64_t c = 0;
  for (; c + 2 <= k4; c += 2) {
    int8x16_t wp[kPairs];
    for (int v = 0; v < 4; ++v)
      row_pairs(vld1q_u32(reinterpret_cast<const uint32_t*>(base + c * 64 + v * 16)),
                vld1q_u32(reinterpret_cast<const uint32_t*>(base + (c + 1) * 64 + v * 16)), wp + 2 * v);
    for (int j = 0; j < kTokenPairs; ++j) {
      int t, t2;
      pair_tokens(t0, nt, j, t, t2);
      const int8x16_t x = token_pair(a, t, t2, 4 * c);
      for (int p = 0; p < kPairs; ++p) acc[p][j] = vmmlaq_s32(acc[p][j], wp[p], x);
    }
  }
  if (c < k4) {  // an odd chunk count: the last chunk against zeros
    int8x16_t wp[kPairs];
    for (int v = 0; v < 4; ++v)
      row_pairs(vld1q_u32(reinterpret_cast<const uint32_t*>(base + c * 64 + v * 16)), vdupq_n_u32(0), wp + 2 * v);
    for (int j = 0; j < kTokenPairs; ++j) {
      int t, t2;
      pair_tokens(t0, nt, j, t, t2);
      const int8x16_t x = token_pair4(a, t, t2, 4 * c);
      for (int p = 0; p < kPairs; ++p) acc[p][j] = vmmlaq_s32(acc[p][j], wp[p], x);
    }
  }
  const float* sw = reinterpret_cast<const float*>(w.data + tile * w.tile_bytes);
  for (int i = 0; i < nt; ++i) {
    float32x4_t y[4];
    for (int v = 0; v < 4; ++v)
      y[v] = vmulq_f32(vmulq_f32(vcvtq_f32_s32(rows_of_token(acc, v, i / 2, i % 2)), vld1q_f32(sw + 4 * v)),
                       vdupq_n_f32(a.q_scale[t0 + i]));
    store_tile<Neon>(w, e, tile, t0 + i, y);
  }
}

// W4A8: per group the exact sum of u * q, then y += d * (sum - 8 qsum) (symmetric) or
// d * sum + m * qsum, and at the end y *= the token's activation scale, as w4a8_block.
void w4a8_mmla_block(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tile, int t0, int nt) {
  const int g = w.params.group_size;
  const bool sym = w.params.symmetric;
  const int64_t groups = w.cols / g;
  const uint64_t gb = w4_group_bytes(w.params);
  const int hdr = sym ? 32 : 64;
  const uint8_t* base = w.data + tile * w.tile_bytes;
  float32x4_t y[2 * kTokenPairs][4];
  for (auto& row : y)
    for (auto& v : row) v = vdupq_n_f32(0.0f);
  const uint32x4_t mask = vdupq_n_u32(0x0f0f0f0fu);
  for (int64_t b = 0; b < groups; ++b) {
    const uint8_t* grp = base + b * gb;
    int32x4_t acc[kPairs][kTokenPairs];
    for (auto& row : acc)
      for (auto& v : row) v = vdupq_n_s32(0);
    for (int c = 0; c < g / 8; ++c) {
      int8x16_t wp[kPairs];
      for (int v = 0; v < 4; ++v) {
        const uint32x4_t q = vld1q_u32(reinterpret_cast<const uint32_t*>(grp + hdr + c * 64 + v * 16));
        row_pairs(vandq_u32(q, mask), vandq_u32(vshrq_n_u32(q, 4), mask), wp + 2 * v);
      }
      for (int j = 0; j < kTokenPairs; ++j) {
        int t, t2;
        pair_tokens(t0, nt, j, t, t2);
        const int8x16_t x = token_pair(a, t, t2, b * g + c * 8);
        for (int p = 0; p < kPairs; ++p) acc[p][j] = vmmlaq_s32(acc[p][j], wp[p], x);
      }
    }
    for (int i = 0; i < nt; ++i) {
      const int32_t qs = a.q_group_sums[(t0 + i) * groups + b];
      for (int v = 0; v < 4; ++v) {
        const int32x4_t s = rows_of_token(acc, v, i / 2, i % 2);
        const float32x4_t d = Neon::from_f16(grp + v * 8);
        if (sym) {
          y[i][v] = vfmaq_f32(y[i][v], vcvtq_f32_s32(vsubq_s32(s, vdupq_n_s32(8 * qs))), d);
        } else {
          const float32x4_t m = Neon::from_f16(grp + 32 + v * 8);
          y[i][v] = vfmaq_f32(vfmaq_f32(y[i][v], vcvtq_f32_s32(s), d), m, vdupq_n_f32(static_cast<float>(qs)));
        }
      }
    }
  }
  for (int i = 0; i < nt; ++i) {
    for (int v = 0; v < 4; ++v) y[i][v] = vmulq_f32(y[i][v], vdupq_n_f32(a.q_scale[t0 + i]));
    store_tile<Neon>(w, e, tile, t0 + i, y[i]);
  }
}

// The dotprod table's kernels (arm/dotprod.cpp), taken from that file rather than instantiated
// here a second time.
decltype(KernelTable::matmul) dotprod_matmul = {};

// One token (decoding) stays on the dotprod kernels: it streams the weights, and SMMLA's second
// token would be wasted work.
template <void (*Block)(const PackedMatrix&, const Activations&, const Epilogue&, int64_t, int, int), Scheme kS>
void matmul_mmla(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tb, int64_t te, uint8_t* work) {
  if (a.n == 1) {
    dotprod_matmul[static_cast<int>(kS)](w, a, e, tb, te, work);
    return;
  }
  constexpr int kNT = 2 * kTokenPairs;
  for (int64_t t = tb; t < te; ++t)
    for (int t0 = 0; t0 < a.n; t0 += kNT) Block(w, a, e, t, t0, std::min(kNT, a.n - t0));
}

decltype(KernelTable::product_loop) dotprod_product_loop = nullptr;

// SMMLA's ceiling for the A8 schemes it runs (32 products each); the dotprod table's for the rest.
double product_loop_i8mm(Scheme s, int tokens, int64_t rounds) {
  if ((s != Scheme::kW8A8 && s != Scheme::kW4A8) || tokens == 1) return dotprod_product_loop(s, tokens, rounds);
  int8x16_t a = vdupq_n_s8(1);
  opaque(a);
  product_chains(vdupq_n_s32(0), rounds, [a](int32x4_t acc) { return vmmlaq_s32(acc, a, a); });
  return static_cast<double>(rounds) * kProductChains * 32;
}

}  // namespace

void fill_i8mm(KernelTable& t) {
  fill_dotprod(t);
  std::copy(std::begin(t.matmul), std::end(t.matmul), dotprod_matmul);
  t.name = "i8mm";
  t.features = kCpuSetI8mm;
  t.matmul[static_cast<int>(Scheme::kW8A8)] = &matmul_mmla<&w8a8_mmla_block, Scheme::kW8A8>;
  t.matmul[static_cast<int>(Scheme::kW4A8)] = &matmul_mmla<&w4a8_mmla_block, Scheme::kW4A8>;
  t.make_q_panel = nullptr;  // the SMMLA blocks read the rows
  dotprod_product_loop = t.product_loop;
  t.product_loop = &product_loop_i8mm;
}

}  // namespace kiln::cpu
