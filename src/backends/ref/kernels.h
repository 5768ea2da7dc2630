// Plain scalar kernels, written to be read: the oracle every faster back end is tested against.
#pragma once

#include <cstdint>

namespace kiln::ref {

// y[rows] = W[rows][cols] * x[cols] (+ bias[rows] when bias is non-null).
void matvec(float* y, const float* w, const float* x, const float* bias, int rows, int cols);

// y = x / rms(x) * weight
void rmsnorm(float* y, const float* x, const float* weight, int n, float eps);

// rmsnorm over each of n_heads consecutive heads of head_dim, all with the same weight[head_dim]
// (Qwen3's q_norm and k_norm). y may be x.
void head_rmsnorm(float* y, const float* x, const float* weight, int n_heads, int head_dim, float eps);

// In-place softmax over x[n].
void softmax(float* x, int n);

// Rotates each of n_heads heads of `v` (head_dim each) by position `pos`: its first rotary_dim
// elements (0: all of them; d below). inv_freq[i] is the frequency of pair i; half_split pairs
// (i, i + d/2), otherwise (2i, 2i + 1).
void rope(float* v, int n_heads, int head_dim, int pos, const float* inv_freq, bool half_split, int rotary_dim = 0);

// h[i] = silu(gate[i]) * up[i]
void swiglu(float* h, const float* gate, const float* up, int n);

// y[i] += x[i]
void add(float* y, const float* x, int n);

// One query head against cached keys/values of positions [first, last]: out = softmax(q.K^T * scale) V,
// the scaled scores soft-capped (cap * tanh(s / cap)) where cap > 0 (Gemma 2).
// k and v point at position 0 of this head's kv head; consecutive positions are `stride` floats apart.
// `scores` has room for last + 1 floats.
void attend(float* out, const float* q, const float* k, const float* v, int first, int last, int stride,
            int head_dim, float scale, float* scores, float cap = 0.0f);
// The same over an f16 cache (IEEE half), each element widened exactly to f32.
void attend(float* out, const float* q, const uint16_t* k, const uint16_t* v, int first, int last, int stride,
            int head_dim, float scale, float* scores, float cap = 0.0f);

}  // namespace kiln::ref
