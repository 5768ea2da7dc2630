// The CPU kernels, written once over a SIMD traits type S and instantiated per instruction set:
// its own thin file (x86/avx2.cpp, ...) calls fill_table_common<S> and the matmul parts
// (table_parts.h), each in its own generated file. Include only from those files.
// The kernels live in one header per job (kernel_helpers.h, w4a16_kernels.h, dense_kernels.h,
// w8a16_kernels.h, kquant_kernels.h, a8_kernels.h, matmul_drivers.h, activation_kernels.h, float_ops.h,
// attention_kernel.h, product_loop.h); this one fills a table with them.
//
// S provides, for N f32 lanes (16 / N vectors make one 16-row tile column):
//   F, I               float and int32 vectors
//   zero set1 load store fma(a,b,c)=a*b+c mul add sub min max sum hmax (the largest lane)
//   pow2i(F)           2^n for lanes holding integers n in [-126, 127]
//   loadi(p)           N u32 from p
//   srli<s>(I)         logical right shift of each u32
//   floor(F)           round toward -infinity
//   from_f16/bf16/s8(p) N values at p as floats
//   lo_nibbles(I), hi_nibbles(I)   v & 0x0f0f0f0f, (v >> 4) & 0x0f0f0f0f
//   andv(I, I), orv(I, I)          bitwise and, or
//   from_u8(p)         N bytes at p, each widened to a u32 lane
//   lookup16(I, t)     each byte b (0..15) replaced by the int8 t[b]
//   dot_u4(acc, w, x4) acc[i] += sum_j u8(w[4i+j]) * s8(x4[j])      (w: nibbles 0..15)
//   dot_s8(acc, w, x4) acc[i] += sum_j s8(w[4i+j]) * s8(x4[j]) + kW8Bias * sum_j s8(w[4i+j])
//   zeroi set1i(int32) subi(I, int32) addv(I, I) subv(I, I) slli<s>(I) cvt(I)
//   sext_byte<j>(I)    byte j of each u32, sign-extended
//   w8_prep(I), dot_w8(acc, w', x4)   acc[i] += sum_j s8(w[4i+j]) * s8(x4[j]) + kW8DigitBias *
//                                     sum_j s8(x4[j]), with w' = w8_prep(w) computed once
//   dot_lv(acc, w', x4)                the same for w in [-127, 127] and any int8 x4 (IQ4_XS's levels
//                                     times a16 digits, whose low one reaches -128)
//   kDecodeRT, kDigitRT, kPrefillNT   tiles per decode block (float, digit kernels), tokens
//                                     per prefill block
//   kPrefillRT         tiles per float prefill block (each activation broadcast serves them all)
//   kA8RT, kA8NT       tiles and tokens per W4A8 prefill block (kA8NT divides kPrefillNT)
//   kA16RT, kA16NT     the same for W4A16 (two integer sums per output)
#pragma once

#include "backends/cpu/activation_kernels.h"
#include "backends/cpu/attention_kernel.h"
#include "backends/cpu/float_ops.h"
#include "backends/cpu/kernel_helpers.h"
#include "backends/cpu/matmul_drivers.h"
#include "backends/cpu/product_loop.h"

namespace kiln::cpu {
namespace {

// ---- the table, in parts ----
// Each instruction set fills its table from these templates. The matmul parts instantiate the
// most code (every tile and token count of every scheme's blocks), so each is compiled in its own
// translation unit per instruction set (table_parts.h; cmake/cpu_table_parts.cmake writes them),
// and a build spreads them over its cores; the instruction set's own file fills the rest.

// The float schemes and W8A16.
template <class S>
void fill_float_matmuls(KernelTable& t) {
  t.matmul[static_cast<int>(Scheme::kF32)] = &matmul_dense<S, Scheme::kF32>;
  t.matmul[static_cast<int>(Scheme::kF16)] = &matmul_dense<S, Scheme::kF16>;
  t.matmul[static_cast<int>(Scheme::kBF16)] = &matmul_dense<S, Scheme::kBF16>;
  t.matmul[static_cast<int>(Scheme::kW8A16)] = &matmul_w8a16<S>;
}

// W4A16, GGML's Q4_K and IQ4_XS among its variants.
template <class S>
void fill_w4a16_matmul(KernelTable& t) {
  t.matmul[static_cast<int>(Scheme::kW4A16)] = &matmul_w4a16<S>;
}

// The int8-activation schemes.
template <class S>
void fill_a8_matmuls(KernelTable& t) {
  t.matmul[static_cast<int>(Scheme::kW8A8)] = &matmul_w8a8<S>;
  t.matmul[static_cast<int>(Scheme::kW4A8)] = &matmul_w4a8<S>;
}

// GGML's other super-block schemes: Q6_K, Q5_K.
template <class S>
void fill_superblock_matmuls(KernelTable& t) {
  t.matmul[static_cast<int>(Scheme::kW6A16)] = &matmul_w6a16<S>;
  t.matmul[static_cast<int>(Scheme::kW5A16)] = &matmul_w5a16<S>;
}

// Everything but the matmuls: the activations' preparation, norms, attention, the product loop.
template <class S>
void fill_table_common(KernelTable& t) {
  t.quantize_rows = &quantize_rows<S>;
  static_assert(S::kPrefillNT <= 16, "the back end's scratch holds panels of at most 16 tokens");
  t.panel_tokens = S::kPrefillNT;
  t.make_x_panels = &make_x_panels<S::kPrefillNT>;
  t.make_q_panel = &make_q_panel<S::kPrefillNT>;
  t.make_digits = &make_digits<S>;
  t.make_a16 = &make_a16<S>;
  t.make_a16_panel = &make_a16_panel<S::kPrefillNT>;
  if constexpr (has_a16_words<S>) {
    t.make_a16_word_panel = &make_a16_word_panel<S::kPrefillNT>;
    t.a16_words_min_rows = S::kA16WordsMinRows;
  }
  if constexpr (requires { S::kRowsMaxNT; }) {
    static_assert(S::kRowsMaxNT <= KernelTable::kMaxRowsTokens, "the scratch holds the digits of kMaxRowsTokens tokens");
    t.rows_max_tokens = S::kRowsMaxNT;
  }
  t.rmsnorm = &rmsnorm<S>;
  t.head_rmsnorm = &head_rmsnorm<S>;
  t.swiglu = &swiglu;
  t.add = &add;
  t.rope = &rope;
  t.attention = &attention<S>;
  t.product_loop = &product_loop<S>;
}

}  // namespace
}  // namespace kiln::cpu
