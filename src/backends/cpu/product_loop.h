// The arithmetic ceiling of the many-token kernels (kiln bench's prefill roofline): rounds of
// the instruction each multiplies with, on independent sums.
#pragma once

#include "backends/cpu/kernel_helpers.h"
#include "backends/cpu/w4a16_kernels.h"

namespace kiln::cpu {
namespace {

// ---- the arithmetic ceiling: kiln bench's prefill roofline ----

// Keeps x in a register here, so that the compiler cannot fold a loop of the same products into
// one multiplication (the loops below multiply the same values every round).
template <class T>
inline void opaque(T& x) {
  if constexpr (std::is_class_v<T>) {
    asm volatile("" : "+m"(x));  // the generic table's plain arrays
  } else {
#if defined(__x86_64__)
    asm volatile("" : "+v"(x));
#elif defined(__aarch64__)
    asm volatile("" : "+w"(x));
#else
    asm volatile("" : "+m"(x));
#endif
  }
}

// `rounds` rounds of op(acc) on kProductChains independent sums, back to back, nothing else. Named
// sums, not an array: GCC keeps a 768-byte array of them on the stack.
inline constexpr int kProductChains = 12;  // enough to cover each instruction's latency
template <class V, class Op>
inline void product_chains(V start, int64_t rounds, Op op) {
  V a0 = start, a1 = start, a2 = start, a3 = start, a4 = start, a5 = start;
  V a6 = start, a7 = start, a8 = start, a9 = start, a10 = start, a11 = start;
  for (int64_t r = 0; r < rounds; ++r) {
    a0 = op(a0), a1 = op(a1), a2 = op(a2), a3 = op(a3), a4 = op(a4), a5 = op(a5);
    a6 = op(a6), a7 = op(a7), a8 = op(a8), a9 = op(a9), a10 = op(a10), a11 = op(a11);
    opaque(a0), opaque(a1), opaque(a2), opaque(a3), opaque(a4), opaque(a5);
    opaque(a6), opaque(a7), opaque(a8), opaque(a9), opaque(a10), opaque(a11);
  }
}

// The most tokens whose activation rows S's kernels read (kRowsMaxNT; else one).
template <class S>
constexpr int rows_max_nt() {
  if constexpr (requires { S::kRowsMaxNT; }) return S::kRowsMaxNT;
  return 1;
}

// The instruction that the kernel of scheme s for `tokens` tokens multiplies with, run for
// `rounds` rounds on kProductChains sums (no loads, no stores, none of the kernel's other work):
// the most products that kernel could do per second, whatever its blocking. Returns the scheme's
// products done (weight times activation): through int8 digits a 16-bit activation takes two
// products (W4A16 on dot_u4), a W8A16 one three (decoding, and the few-token steps).
template <class S>
double product_loop(Scheme s, int tokens, int64_t rounds) {
  using I = typename S::I;
  using F = typename S::F;
  I w = S::set1i(0x01010101);
  F a = S::set1(1e-3f);
  opaque(w);
  opaque(a);
  const double ops = static_cast<double>(rounds) * kProductChains;
  // The lambdas take w and a by value: a reference would load them from the stack every time.
  auto digits = [&] { product_chains(S::zeroi(), rounds, [w](I acc) { return S::dot_u4(acc, w, 0x01010101); }); };
  switch (s) {
    case Scheme::kW4A16:
      if constexpr (has_a16_words<S>)
        if (tokens >= S::kA16WordsMinRows) {
          product_chains(S::zeroi(), rounds, [w](I acc) { return S::dot_w16(acc, w, 0x00010001); });
          return ops * 2 * S::N;
        }
      digits();
      return ops * 4 * S::N / 2;
    case Scheme::kW6A16:  // q6k_block, q45k_block: two digit sums per 16-bit activation, as W4A16's
    case Scheme::kW5A16:
      digits();
      return ops * 4 * S::N / 2;
    case Scheme::kW4A8:
      digits();
      return ops * 4 * S::N;
    case Scheme::kW8A8:
      product_chains(S::zeroi(), rounds, [w](I acc) { return S::dot_s8(acc, w, 0x01010101); });
      return ops * 4 * S::N;
    case Scheme::kW8A16:
      // w8a16_digits: three digits of x times the int8 weights, for one token or a few.
      if (tokens == 1 || tokens <= rows_max_nt<S>()) {
        const I w8 = S::w8_prep(w);
        product_chains(S::zeroi(), rounds, [w8](I acc) { return S::dot_w8(acc, w8, 0x01010101); });
        return ops * 4 * S::N / 3;
      }
      [[fallthrough]];
    case Scheme::kF32:
    case Scheme::kF16:
    case Scheme::kBF16:
      product_chains(S::zero(), rounds, [a](F acc) { return S::fma(a, a, acc); });
      return ops * S::N;
  }
  return 0;
}

}  // namespace
}  // namespace kiln::cpu
