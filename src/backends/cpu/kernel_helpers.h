// What every kernel of microkernels.h builds on: compile-time loops, the epilogue that stores a
// tile's outputs, prefetching ahead of the packed weights, and the geometry of 4-bit groups.
// Like every kernel header here, include only from the instruction-set files (through
// microkernels.h), which define the SIMD traits S.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

#include "backends/cpu/kernels.h"
#include "backends/cpu/layouts.h"
#include "core/dtype.h"

// Everything here has internal linkage: each instruction-set file gets its own copy, compiled
// with its own flags, and the linker can never hand one file's copy to another.
namespace kiln::cpu {
namespace {

// Keeps v as computed here, in a register: GCC reassociates chains of integer vector adds into
// trees of all the products first, which spills them (kquant_kernels.h's decode). Nothing is
// emitted; elsewhere than x86 and ARM64 it is a no-op.
template <class T>
inline void keep_order(T& v) {
#if defined(__x86_64__)
  __asm__("" : "+x"(v));
#elif defined(__aarch64__)
  __asm__("" : "+w"(v));
#else
  (void)v;
#endif
}

template <int... Is, typename Fn>
inline void static_for_impl(std::integer_sequence<int, Is...>, Fn&& f) {
  (f(std::integral_constant<int, Is>{}), ...);
}
// f(std::integral_constant<int, i>) for i = 0 .. n-1, unrolled.
template <int n, typename Fn>
inline void static_for(Fn&& f) {
  static_for_impl(std::make_integer_sequence<int, n>{}, f);
}

// Every element of a [A][B][C] array (a block's sums) set to v.
template <class T, size_t A, size_t B, size_t C>
inline void fill_all(T (&a)[A][B][C], const T& v) {
  for (auto& x : a)
    for (auto& y : x)
      for (auto& z : y) z = v;
}

inline int32_t load_i32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// ---- the epilogue: y = residual + (acc + bias), for the valid rows of a tile ----

template <class S>
inline void store_tile(const PackedMatrix& w, const Epilogue& e, int64_t tile, int t, const typename S::F* y) {
  constexpr int V = kTileRows / S::N;
  alignas(64) float tmp[kTileRows];
  for (int v = 0; v < V; ++v) S::store(tmp + v * S::N, y[v]);
  const int64_t r0 = tile * kTileRows;
  const int nr = static_cast<int>(std::min<int64_t>(kTileRows, w.rows - r0));
  float* out = e.y + t * e.y_stride + r0;
  if (e.bias)
    for (int i = 0; i < nr; ++i) tmp[i] += e.bias[r0 + i];
  if (e.residual) {
    const float* res = e.residual + t * e.residual_stride + r0;
    for (int i = 0; i < nr; ++i) out[i] = res[i] + tmp[i];
  } else {
    for (int i = 0; i < nr; ++i) out[i] = tmp[i];
  }
}

// The hardware prefetchers stop at 4 KiB boundaries, and a decode kernel that reads RT tiles at
// once is RT streams that each cross one every few microseconds: asking for the bytes
// kPrefetchBytes ahead of the ones being read keeps them coming (TinyLlama W4A16 decode, 2
// threads: 79 -> 84 % of the measured read bandwidth). prefetcht0: NTA hints halved the speed.
// Near a tile's end the bytes ahead are those of the tile this stream reads next, `next` bytes
// further on (the next block of RT tiles): a 2048-wide W4A16 tile is 18 KiB, and its first 2 KiB
// would otherwise come in unasked every time.
// `end`: the matrix's end (packed_end), past which nothing is asked for.
constexpr int64_t kPrefetchBytes = 2048;
inline const uint8_t* packed_end(const PackedMatrix& w) { return w.data + (w.rows + kTileRows - 1) / kTileRows * w.tile_bytes; }
inline void prefetch_ahead(const PackedMatrix& w, const uint8_t* tile, int64_t off, int64_t bytes, int64_t next,
                           const uint8_t* end) {
  for (int64_t o = off + kPrefetchBytes; o < off + kPrefetchBytes + bytes; o += 64) {
    const uint8_t* q = o < w.tile_bytes ? tile + o : tile + next + (o - w.tile_bytes);
    if (q < end) __builtin_prefetch(q, 0, 3);
  }
}

// ---- 4-bit weights' groups ----

inline uint64_t w4_group_bytes(const QuantParams& p) { return (p.symmetric ? 32u : 64u) + 8u * static_cast<uint64_t>(p.group_size); }

// A 4-bit matrix's groups (layouts.h): elements per group, symmetric, groups per row, bytes per
// group of one tile, and the bytes of scales (and mins) that open each.
struct W4Groups {
  int g;
  bool sym;
  int64_t groups;
  uint64_t gb;
  int hdr;
};
inline W4Groups w4_groups(const PackedMatrix& w) {
  const int g = w.params.group_size;
  return {g, w.params.symmetric, w.cols / g, w4_group_bytes(w.params), w.params.symmetric ? 32 : 64};
}

// An asymmetric group's activation term: sum over its blocks k of scale(k) sum(k), in block order
// (the word and digit kernels share it, and so their bits).
template <class Scale, class Sum>
inline float group_x_sum(int64_t first, int blocks, Scale&& scale, Sum&& sum) {
  float s = 0.0f;
  for (int64_t k = first; k < first + blocks; ++k) s += scale(k) * static_cast<float>(sum(k));
  return s;
}

}  // namespace
}  // namespace kiln::cpu
