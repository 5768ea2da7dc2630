// The dense float linear algebra GPTQ needs (quant/gptq_quantizer.h): C -= A B, a Cholesky
// factorization and a triangular inverse, blocked so that the bulk of the work is one register-
// tiled product loop, spread over a thread pool. Row-major matrices with leading dimensions;
// portable code (GCC vector extensions: SSE2 on x86-64's baseline, NEON on ARM64), since the
// compiler runs wherever kiln does.
#pragma once

#include <cstdint>

#include "core/status.h"

namespace kiln {

class ThreadPool;

// C[m][n] -= sum_p A[m][p] * B[p][n] for m < M, n < N, p < P. With `lower`, C is a square block on
// the diagonal of a symmetric matrix and only its lower part (n <= m, rounded out to tiles) is
// computed. pool may be null (inline).
void gemm_sub(ThreadPool* pool, float* C, int64_t ldc, const float* A, int64_t lda, const float* B, int64_t ldb,
              int64_t M, int64_t N, int64_t P, bool lower = false);

// A (n x n, lower part read) = L L^T in place: L in the lower part (the upper is left as it was).
// Fails, naming the column, where A is not positive definite (a pivot <= 0 or not finite).
Status cholesky_lower(ThreadPool* pool, float* a, int64_t n);

// L (n x n lower, in place) = L^-1, lower (the upper part is set to 0).
void invert_lower(ThreadPool* pool, float* l, int64_t n);

}  // namespace kiln
