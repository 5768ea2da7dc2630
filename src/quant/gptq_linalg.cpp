#include "quant/gptq_linalg.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"

namespace kiln {

namespace {

typedef float v4 __attribute__((vector_size(16)));

v4 load4(const float* p) {
  v4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
void store4(float* p, v4 v) { std::memcpy(p, &v, sizeof v); }

// One tile of C, rows [m0, m1) and columns [n0, n1), minus A B over p < P: 4 x 8 blocks in
// registers (8 accumulators, two loads of B and four broadcasts of A per step), the edges scalar.
void tile_sub(float* C, int64_t ldc, const float* A, int64_t lda, const float* B, int64_t ldb, int64_t m0, int64_t m1,
              int64_t n0, int64_t n1, int64_t P) {
  int64_t m = m0;
  for (; m + 4 <= m1; m += 4) {
    int64_t n = n0;
    for (; n + 8 <= n1; n += 8) {
      v4 c[4][2];
      for (int r = 0; r < 4; ++r) {
        c[r][0] = load4(C + (m + r) * ldc + n);
        c[r][1] = load4(C + (m + r) * ldc + n + 4);
      }
      const float* a0 = A + m * lda;
      for (int64_t p = 0; p < P; ++p) {
        const v4 b0 = load4(B + p * ldb + n), b1 = load4(B + p * ldb + n + 4);
        for (int r = 0; r < 4; ++r) {
          const float a = a0[r * lda + p];
          c[r][0] -= a * b0;
          c[r][1] -= a * b1;
        }
      }
      for (int r = 0; r < 4; ++r) {
        store4(C + (m + r) * ldc + n, c[r][0]);
        store4(C + (m + r) * ldc + n + 4, c[r][1]);
      }
    }
    for (; n < n1; ++n)
      for (int r = 0; r < 4; ++r) {
        float s = C[(m + r) * ldc + n];
        for (int64_t p = 0; p < P; ++p) s -= A[(m + r) * lda + p] * B[p * ldb + n];
        C[(m + r) * ldc + n] = s;
      }
  }
  for (; m < m1; ++m)
    for (int64_t n = n0; n < n1; ++n) {
      float s = C[m * ldc + n];
      for (int64_t p = 0; p < P; ++p) s -= A[m * lda + p] * B[p * ldb + n];
      C[m * ldc + n] = s;
    }
}

constexpr int64_t kRowBlock = 64;   // rows of C per task
constexpr int64_t kColBlock = 256;  // columns of B kept in cache while a row block runs
constexpr int64_t kDepth = 256;     // rows of B (and columns of A) per pass
constexpr int64_t kPanel = 64;      // the Cholesky's and the inverse's block

}  // namespace

void gemm_sub(ThreadPool* pool, float* C, int64_t ldc, const float* A, int64_t lda, const float* B, int64_t ldb,
              int64_t M, int64_t N, int64_t P, bool lower) {
  if (M <= 0 || N <= 0 || P <= 0) return;
  const int64_t blocks = (M + kRowBlock - 1) / kRowBlock;
  auto run = [&](int64_t b, int64_t e, int) {
    for (int64_t blk = b; blk < e; ++blk) {
      const int64_t m0 = blk * kRowBlock, m1 = std::min(M, m0 + kRowBlock);
      const int64_t n_end = lower ? std::min(N, m1) : N;
      for (int64_t p0 = 0; p0 < P; p0 += kDepth) {
        const int64_t pn = std::min(kDepth, P - p0);
        for (int64_t n0 = 0; n0 < n_end; n0 += kColBlock)
          tile_sub(C, ldc, A + p0, lda, B + p0 * ldb, ldb, m0, m1, n0, std::min(n_end, n0 + kColBlock), pn);
      }
    }
  };
  if (pool == nullptr) run(0, blocks, 0);
  else pool->parallel_chunks(blocks, 1, run);
}

Status cholesky_lower(ThreadPool* pool, float* a, int64_t n) {
  std::vector<float> panel;
  for (int64_t k0 = 0; k0 < n; k0 += kPanel) {
    const int64_t k1 = std::min(n, k0 + kPanel);
    // The diagonal block, unblocked (the trailing updates of earlier panels are in it).
    for (int64_t j = k0; j < k1; ++j) {
      double d = a[j * n + j];
      for (int64_t p = k0; p < j; ++p) d -= static_cast<double>(a[j * n + p]) * a[j * n + p];
      if (!(d > 0) || !std::isfinite(d))
        return invalid_argument("the matrix is not positive definite (pivot " + std::to_string(d) + " at column " +
                                std::to_string(j) + ")");
      const float ljj = static_cast<float>(std::sqrt(d));
      a[j * n + j] = ljj;
      for (int64_t i = j + 1; i < k1; ++i) {
        double s = a[i * n + j];
        for (int64_t p = k0; p < j; ++p) s -= static_cast<double>(a[i * n + p]) * a[j * n + p];
        a[i * n + j] = static_cast<float>(s / ljj);
      }
    }
    if (k1 == n) break;
    // The panel below it: each row solves against the diagonal block.
    const int64_t rows = n - k1, width = k1 - k0;
    auto solve = [&](int64_t b, int64_t e, int) {
      for (int64_t i = k1 + b; i < k1 + e; ++i)
        for (int64_t j = k0; j < k1; ++j) {
          float s = a[i * n + j];
          for (int64_t p = k0; p < j; ++p) s -= a[i * n + p] * a[j * n + p];
          a[i * n + j] = s / a[j * n + j];
        }
    };
    if (pool == nullptr) solve(0, rows, 0);
    else pool->parallel_for(rows, solve);
    // The trailing matrix minus the panel times its transpose (lower part): the product loop
    // reads the transpose as a copy, row after row.
    panel.resize(static_cast<size_t>(width * rows));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t p = 0; p < width; ++p) panel[static_cast<size_t>(p * rows + i)] = a[(k1 + i) * n + k0 + p];
    gemm_sub(pool, a + k1 * n + k1, n, a + k1 * n + k0, n, panel.data(), rows, rows, rows, width, /*lower=*/true);
  }
  return Status::ok();
}

void invert_lower(ThreadPool* pool, float* l, int64_t n) {
  // Row blocks I = [i0, i1) in order: X[I][0:i0] = -L_II^-1 (L[I][0:i0] X[0:i0][0:i0]) and
  // X_II = L_II^-1, with X (= L^-1) written over L behind the current block. The product is
  // taken per column block J, whose rows of X start at J (X is lower), into T.
  std::vector<float> t, lii;
  for (int64_t i0 = 0; i0 < n; i0 += kPanel) {
    const int64_t i1 = std::min(n, i0 + kPanel), h = i1 - i0;
    // L_II's inverse, unblocked (forward substitution per column), before L_II is overwritten.
    lii.assign(static_cast<size_t>(h * h), 0.0f);
    for (int64_t j = 0; j < h; ++j) {
      lii[static_cast<size_t>(j * h + j)] = 1.0f / l[(i0 + j) * n + i0 + j];
      for (int64_t i = j + 1; i < h; ++i) {
        double s = 0;
        for (int64_t p = j; p < i; ++p) s += static_cast<double>(l[(i0 + i) * n + i0 + p]) * lii[static_cast<size_t>(p * h + j)];
        lii[static_cast<size_t>(i * h + j)] = static_cast<float>(-s / l[(i0 + i) * n + i0 + i]);
      }
    }
    if (i0 > 0) {
      // T = -(L[I][0:i0] X[0:i0][0:i0]), then X[I][0:i0] = L_II^-1 T.
      t.assign(static_cast<size_t>(h * i0), 0.0f);
      const int64_t jblocks = (i0 + kPanel - 1) / kPanel;
      auto product = [&](int64_t b, int64_t e, int) {
        for (int64_t jb = b; jb < e; ++jb) {
          const int64_t j0 = jb * kPanel, j1 = std::min(i0, j0 + kPanel);
          gemm_sub(nullptr, t.data() + j0, i0, l + i0 * n + j0, n, l + j0 * n + j0, n, h, j1 - j0, i0 - j0);
        }
      };
      if (pool == nullptr) product(0, jblocks, 0);
      else pool->parallel_chunks(jblocks, 1, product);
      for (int64_t i = 0; i < h; ++i)
        for (int64_t j = 0; j < i0; ++j) {
          float s = 0;
          for (int64_t p = 0; p <= i; ++p) s += lii[static_cast<size_t>(i * h + p)] * t[static_cast<size_t>(p * i0 + j)];
          l[(i0 + i) * n + j] = s;
        }
    }
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < h; ++j) l[(i0 + i) * n + i0 + j] = j <= i ? lii[static_cast<size_t>(i * h + j)] : 0.0f;
    for (int64_t i = i0; i < i1; ++i) std::fill(l + i * n + i1, l + (i + 1) * n, 0.0f);
  }
}

}  // namespace kiln
