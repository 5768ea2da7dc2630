// The matmul entry points of the kernel table: over a range of tiles for every token, in runs
// of the blocks the kernel templates were made for.
#pragma once

#include "backends/cpu/kernel_helpers.h"
#include "backends/cpu/a8_kernels.h"
#include "backends/cpu/dense_kernels.h"
#include "backends/cpu/kquant_kernels.h"
#include "backends/cpu/q5_kernels.h"
#include "backends/cpu/w4a16_kernels.h"
#include "backends/cpu/w8a16_kernels.h"

namespace kiln::cpu {
namespace {

// ---- drivers: a range of tiles for every token, in blocks the templates were made for ----

// Calls block<RT>(tile) over [tb, te) in runs of kRT tiles, then the remainder one size down.
template <int kRT, typename Block>
inline void over_tiles(int64_t tb, int64_t te, Block&& block) {
  int64_t t = tb;
  for (; t + kRT <= te; t += kRT) block(std::integral_constant<int, kRT>{}, t);
  if constexpr (kRT > 1) {
    const int64_t rest = te - t;
    static_for<kRT>([&](auto r) {
      if (r.value > 0 && rest == r.value) block(std::integral_constant<int, (r.value > 0 ? r.value : 1)>{}, t);
    });
  }
}
// Decode: over_tiles in runs of kRT tiles side by side, or of one where the host reads one
// stream faster (decode_one_stream). x86 only: no ARM core has asked for it, and there the
// compiler contracts the generic table's products into FMAs differently per run length, so the
// bits would depend on the choice.
template <int kRT, typename Block>
inline void over_decode_tiles(const PackedMatrix& w, int64_t tb, int64_t te, Block&& block) {
#if defined(__x86_64__)
  if (w.decode_one_stream) {
    over_tiles<1>(tb, te, block);
    return;
  }
#else
  (void)w;
#endif
  over_tiles<kRT>(tb, te, block);
}
// Calls block<NT>(t0) over the tokens [0, n) in runs of kNT, then the remainder.
template <int kNT, typename Block>
inline void over_tokens(int n, Block&& block) {
  int t = 0;
  for (; t + kNT <= n; t += kNT) block(std::integral_constant<int, kNT>{}, t);
  const int rest = n - t;
  static_for<kNT>([&](auto r) {
    if (r.value > 0 && rest == r.value) block(std::integral_constant<int, (r.value > 0 ? r.value : 1)>{}, t);
  });
}

// Prefill: the tiles [tb, te) in runs of about 256 KiB of weights, and in each run every block of
// kNT tokens over all the run's tiles. The run's weights stay in L2 while the blocks of
// activations pass, instead of every pair of tiles streaming all the tokens' activations again
// (for a 5632-wide matrix and 64 tokens, 1.4 MiB of f32 panels per pair: more than L2, read from
// L3 each time). Each output comes from the same call as before, so the bits do not change.
template <int kRT, int kNT, typename Block>
inline void over_tile_runs(const PackedMatrix& w, int64_t tb, int64_t te, int n, Block&& block) {
  const int64_t run = std::max<int64_t>(kRT, (int64_t{256} << 10) / std::max<int64_t>(w.tile_bytes, 1) / kRT * kRT);
  for (int64_t r0 = tb; r0 < te; r0 += run) {
    const int64_t r1 = std::min(te, r0 + run);
    over_tokens<kNT>(n, [&](auto nt, int t0) { over_tiles<kRT>(r0, r1, [&](auto rt, int64_t t) { block(rt, nt, t, t0); }); });
  }
}

// Each run of kRT tiles widened once, then every block of tokens over it (from L2).
template <class S, int kRT>
void matmul_w4a16_words(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tb, int64_t te,
                        int64_t stride, uint8_t* words) {
  static_assert(S::kPrefillNT % S::kA16WordsNT == 0, "a block of tokens lies within one panel");
  // While the blocks of tokens run, each asks for a slice of the next run's packed tiles, a
  // line or two per block of 32 elements, so that widening them reads L2 rather than memory
  // (one burst of prefetches stalled on the fill buffers instead).
  const int64_t blocks = (a.n + S::kA16WordsNT - 1) / S::kA16WordsNT;
  over_tiles<kRT>(tb, te, [&](auto rt, int64_t t) {
    for (int r = 0; r < rt.value; ++r) prepare_w4_words<S>(w, t + r, words + r * stride);
    const uint8_t* next = w.data + (t + rt.value) * w.tile_bytes;
    const int64_t next_bytes = std::min<int64_t>(kRT, te - t - rt.value) * w.tile_bytes;
    const int64_t slice = (next_bytes / blocks + 63) / 64 * 64;
    int64_t at = 0;
    over_tokens<S::kA16WordsNT>(a.n, [&](auto nt, int t0) {
      const uint8_t* pf = next + at;
      const int64_t pf_bytes = std::max<int64_t>(0, std::min(slice, next_bytes - at));
      at += slice;
      w4a16_words_block<S, rt.value, nt.value>(w, a, e, t, t0, words, stride, pf, pf_bytes);
    });
  });
}

// GGML's k-quant super-blocks (is_ggml_superblock) read the a16 rows of every token: one token over
// runs of tiles, more in the prefill blocks (the rows of a block of tokens stay in L1).
// IQ4_XS (kIq4Xs), Q4_K, Q5_K (kFive).
template <class S, bool kIq4Xs, bool kFive = false>
void matmul_w4_superblocks(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tb, int64_t te) {
  auto block = [&](auto rt, auto nt, int64_t t, int t0) { w4_superblock<S, rt.value, nt.value, kIq4Xs, kFive>(w, a, e, t, t0); };
  if constexpr (!kIq4Xs && !kFive && has_u4_sum16<S>) {  // Q4_K on int16 sums: one tile at a time
    if (a.n == 1) {
      over_tiles<1>(tb, te, [&](auto, int64_t t) { q4k_decode<S>(w, a, e, t); });
      return;
    }
    over_tile_runs<1, S::kKRowsNT>(w, tb, te, a.n, [&](auto, auto nt, int64_t t, int t0) { q4k_rows<S, nt.value>(w, a, e, t, t0); });
    return;
  }
  if (a.n == 1) {
    over_decode_tiles<S::kA16DecodeRT>(w, tb, te, [&](auto rt, int64_t t) { block(rt, std::integral_constant<int, 1>{}, t, 0); });
    return;
  }
  over_tile_runs<S::kA16RT, S::kA16NT>(w, tb, te, a.n, block);
}

// GGML's Q5_0 (kAsym false) and Q5_1 blocks of 32, as matmul_w4_superblocks.
template <class S, bool kAsym>
void matmul_q5_32(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tb, int64_t te) {
  auto block = [&](auto rt, auto nt, int64_t t, int t0) { q5_32_block<S, rt.value, nt.value, kAsym>(w, a, e, t, t0); };
  if (a.n == 1) {
    over_decode_tiles<S::kA16DecodeRT>(w, tb, te, [&](auto rt, int64_t t) { block(rt, std::integral_constant<int, 1>{}, t, 0); });
    return;
  }
  over_tile_runs<S::kA16RT, S::kA16NT>(w, tb, te, a.n, block);
}

template <class S>
void matmul_w5a16(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tb, int64_t te, uint8_t* work) {
  (void)work;  // the min term takes the a16 rows' own block sums: no scratch
  if (is_q5_block32(w.params)) {  // Q5_0 (symmetric) or Q5_1
    if (w.params.symmetric) matmul_q5_32<S, false>(w, a, e, tb, te);
    else matmul_q5_32<S, true>(w, a, e, tb, te);
    return;
  }
  matmul_w4_superblocks<S, false, true>(w, a, e, tb, te);
}

template <class S>
void matmul_w6a16(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tb, int64_t te, uint8_t* work) {
  auto* half_sums = reinterpret_cast<int32_t*>(work);  // matmul_work_bytes: [n][cols / 16][2]
  q6k_half_sums(a, w.cols, half_sums);
  // Decode: at most four tiles side by side, as the six-bit values take four more registers each.
  constexpr int kRT = S::kA16DecodeRT < 4 ? S::kA16DecodeRT : 4;
  if constexpr (has_u4_sum16<S>) {  // on int16 sums: one tile at a time
    if (a.n == 1) {
      over_tiles<1>(tb, te, [&](auto, int64_t t) { q6k_decode<S>(w, a, e, t, half_sums); });
      return;
    }
    over_tile_runs<1, 2 * S::kKRowsNT>(w, tb, te, a.n, [&](auto, auto nt, int64_t t, int t0) { q6k_rows<S, nt.value>(w, a, e, t, t0, half_sums); });
    return;
  }
  if (a.n == 1) {
    over_decode_tiles<kRT>(w, tb, te, [&](auto rt, int64_t t) { q6k_block<S, rt.value, 1>(w, a, e, t, 0, half_sums); });
    return;
  }
  over_tile_runs<S::kA16RT, S::kA16NT>(w, tb, te, a.n, [&](auto rt, auto nt, int64_t t, int t0) {
    q6k_block<S, rt.value, nt.value>(w, a, e, t, t0, half_sums);
  });
}

template <class S>
void matmul_w4a16(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tb, int64_t te, uint8_t* work) {
  (void)work;  // only the 16-bit products' prefill uses it
  if (is_ggml_superblock(w.params)) {  // GGML's IQ4_XS (symmetric) or Q4_K
    if (w.params.symmetric) matmul_w4_superblocks<S, true>(w, a, e, tb, te);
    else matmul_w4_superblocks<S, false>(w, a, e, tb, te);
    return;
  }
  if (a.format == ActivationFormat::kA16Rows) {
    if (a.n == 1) {
      over_decode_tiles<S::kA16DecodeRT>(w, tb, te, [&](auto rt, int64_t t) { w4a16_block<S, rt.value, 1, false>(w, a, e, t, 0); });
      return;
    }
    // A few tokens (rows_max_tokens): the prefill blocks, reading each token's row.
    over_tile_runs<S::kA16RT, S::kA16NT>(w, tb, te, a.n, [&](auto rt, auto nt, int64_t t, int t0) {
      w4a16_block<S, rt.value, nt.value, false>(w, a, e, t, t0);
    });
    return;
  }
  if constexpr (has_a16_words<S>) {
    if (a.format == ActivationFormat::kA16Words) {
      // Runs of four widened tiles where they leave L2 room for the next run's packed tiles and
      // the tokens' panels (2048 wide: 4 x 64 KiB), else three (5632 wide: 3 x 176 KiB).
      const int64_t stride = w4_words(w).bytes;
      // `work` holds four (matmul_work_bytes), planned with the session's scratch.
      if (4 * stride <= S::kA16WordsRunBytes) matmul_w4a16_words<S, 4>(w, a, e, tb, te, stride, work);
      else matmul_w4a16_words<S, 3>(w, a, e, tb, te, stride, work);
      return;
    }
  }
  static_assert(S::kPrefillNT % S::kA16NT == 0, "a block of tokens lies within one panel");
  // kA16Panels.
  over_tile_runs<S::kA16RT, S::kA16NT>(w, tb, te, a.n, [&](auto rt, auto nt, int64_t t, int t0) {
    w4a16_block<S, rt.value, nt.value, true>(w, a, e, t, t0);
  });
}

template <class S, Scheme kScheme>
void matmul_dense(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tb, int64_t te, uint8_t* /*work*/) {
  if (a.format == ActivationFormat::kRows) {
    over_decode_tiles<S::kDecodeRT>(w, tb, te, [&](auto rt, int64_t t) { dense_block<S, kScheme, rt.value, 1, false>(w, a, e, t, 0); });
    return;
  }
  over_tile_runs<S::kPrefillRT, S::kPrefillNT>(w, tb, te, a.n, [&](auto rt, auto nt, int64_t t, int t0) {
    dense_block<S, kScheme, rt.value, nt.value, true>(w, a, e, t, t0);
  });
}

template <class S, bool kGrouped>
void matmul_w8a16_of(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tb, int64_t te) {
  if (a.format == ActivationFormat::kDigits) {
    if (a.n == 1) {
      over_decode_tiles<S::kDigitRT>(w, tb, te, [&](auto rt, int64_t t) { w8a16_digits<S, rt.value, 1, kGrouped>(w, a, e, t, 0); });
      return;
    }
    // A few tokens (rows_max_tokens): one tile by four tokens' three sums each fills the registers.
    if constexpr (requires { S::kRowsMaxNT; }) {
      over_tile_runs<1, 4>(w, tb, te, a.n, [&](auto rt, auto nt, int64_t t, int t0) {
        w8a16_digits<S, rt.value, nt.value, kGrouped>(w, a, e, t, t0);
      });
      return;
    }
  }
  over_tile_runs<S::kPrefillRT, S::kPrefillNT>(w, tb, te, a.n, [&](auto rt, auto nt, int64_t t, int t0) {
    w8a16_prefill<S, rt.value, nt.value, kGrouped>(w, a, e, t, t0);
  });
}

template <class S>
void matmul_w8a16(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tb, int64_t te, uint8_t* /*work*/) {
  if (w.params.w8_group != 0)
    matmul_w8a16_of<S, true>(w, a, e, tb, te);
  else
    matmul_w8a16_of<S, false>(w, a, e, tb, te);
}

template <class S>
void matmul_w4a8(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tb, int64_t te, uint8_t* /*work*/) {
  if (a.format == ActivationFormat::kQRows && a.n == 1) {
    over_decode_tiles<S::kDecodeRT>(w, tb, te, [&](auto rt, int64_t t) { w4a8_block<S, rt.value, 1, false, false>(w, a, e, t, 0); });
    return;
  }
  static_assert(S::kPrefillNT % S::kA8NT == 0, "a block of tokens lies within one panel");
  // The prefill blocks, over the panels or (a few tokens: rows_max_tokens) each token's row.
  auto run = [&](auto g32, auto panels) {
    over_tile_runs<S::kA8RT, S::kA8NT>(w, tb, te, a.n, [&](auto rt, auto nt, int64_t t, int t0) {
      w4a8_block<S, rt.value, nt.value, panels.value, g32.value>(w, a, e, t, t0);
    });
  };
  auto run_g = [&](auto panels) {
    if (w.params.group_size == 32) run(std::true_type{}, panels);
    else run(std::false_type{}, panels);
  };
  if (a.format == ActivationFormat::kQRows) run_g(std::false_type{});
  else run_g(std::true_type{});
}

template <class S>
void matmul_w8a8(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tb, int64_t te, uint8_t* /*work*/) {
  if (a.format == ActivationFormat::kQRows && a.n == 1) {
    over_decode_tiles<S::kDecodeRT>(w, tb, te, [&](auto rt, int64_t t) { w8a8_block<S, rt.value, 1, false>(w, a, e, t, 0); });
    return;
  }
  // The prefill blocks, over the panels or (a few tokens: rows_max_tokens) each token's row.
  auto run = [&](auto panels) {
    over_tile_runs<S::kA8RT, S::kA8NT>(w, tb, te, a.n, [&](auto rt, auto nt, int64_t t, int t0) {
      w8a8_block<S, rt.value, nt.value, panels.value>(w, a, e, t, t0);
    });
  };
  if (a.format == ActivationFormat::kQRows) run(std::false_type{});
  else run(std::true_type{});
}

}  // namespace
}  // namespace kiln::cpu
