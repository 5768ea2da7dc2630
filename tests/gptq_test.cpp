// GPTQ (quant/gptq_quantizer.h) and its linear algebra (quant/gptq_linalg.h): the blocked
// products, Cholesky factor and triangular inverse against their definitions at sizes no block
// divides; on a layer with correlated inputs, GPTQ's output error E|(W - Q) x|^2 below round-to-
// nearest's for every scheme it sweeps, the same bytes on any thread count, and dead columns 0.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "core/thread_pool.h"
#include "quant/gptq_linalg.h"
#include "quant/gptq_quantizer.h"

namespace kiln {
namespace {

std::vector<float> random_matrix(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0, 1);
  std::vector<float> m(static_cast<size_t>(rows * cols));
  for (float& v : m) v = n(rng);
  return m;
}

TEST(GptqLinalg, ProductMatchesItsDefinition) {
  ThreadPool pool(2);
  for (const bool lower : {false, true}) {
    const int64_t M = 131, N = lower ? 131 : 77, P = 300;  // edges of every tile and depth pass
    const auto a = random_matrix(M, P, 1), b = random_matrix(P, N, 2), c0 = random_matrix(M, N, 3);
    std::vector<float> c = c0;
    gemm_sub(&pool, c.data(), N, a.data(), P, b.data(), N, M, N, P, lower);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < (lower ? m + 1 : N); ++n) {
        double want = c0[static_cast<size_t>(m * N + n)];
        for (int64_t p = 0; p < P; ++p) want -= static_cast<double>(a[static_cast<size_t>(m * P + p)]) * b[static_cast<size_t>(p * N + n)];
        ASSERT_NEAR(c[static_cast<size_t>(m * N + n)], want, 1e-3) << m << "," << n << (lower ? " lower" : "");
      }
  }
}

TEST(GptqLinalg, CholeskyAndInverseMatchTheirDefinitions) {
  ThreadPool pool(2);
  const int64_t n = 150;  // two full panels of 64 and a part
  const auto x = random_matrix(400, n, 4);
  std::vector<double> h(static_cast<size_t>(n * n), 0.0);
  for (int64_t t = 0; t < 400; ++t)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) h[static_cast<size_t>(i * n + j)] += x[static_cast<size_t>(t * n + i)] * x[static_cast<size_t>(t * n + j)] / 400.0;
  std::vector<float> l(h.begin(), h.end());
  ASSERT_TRUE(cholesky_lower(&pool, l.data(), n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j <= i; ++j) {
      double s = 0;
      for (int64_t p = 0; p <= j; ++p) s += static_cast<double>(l[static_cast<size_t>(i * n + p)]) * l[static_cast<size_t>(j * n + p)];
      ASSERT_NEAR(s, h[static_cast<size_t>(i * n + j)], 1e-4) << i << "," << j;
    }
  std::vector<float> inv = l;
  invert_lower(&pool, inv.data(), n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < n; ++p)
        s += static_cast<double>(p <= i ? l[static_cast<size_t>(i * n + p)] : 0.0f) * inv[static_cast<size_t>(p * n + j)];
      ASSERT_NEAR(s, i == j ? 1.0 : 0.0, 1e-4) << i << "," << j;
      if (j > i) {
        ASSERT_EQ(inv[static_cast<size_t>(i * n + j)], 0.0f);
      }
    }
  // Not positive definite: named, not a NaN factor.
  std::vector<float> bad(static_cast<size_t>(n * n), 0.0f);
  for (int64_t i = 0; i < n; ++i) bad[static_cast<size_t>(i * n + i)] = i == 70 ? -1.0f : 1.0f;
  auto s = cholesky_lower(&pool, bad.data(), n);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("at column 70"), std::string::npos) << s.message();
}

// Inputs with correlated channels (mixed by a random matrix) and a few loud ones, as a trained
// layer's are; the output error sum over tokens of |(W - deq) x|^2.
struct Layer {
  int64_t rows = 40, cols = 256, tokens = 512;
  std::vector<float> x, w;
  Layer() {
    const auto z = random_matrix(tokens, cols, 5), mix = random_matrix(cols, cols, 6);
    x.assign(static_cast<size_t>(tokens * cols), 0.0f);
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t j = 0; j < cols; ++j) {
        double s = 0;
        for (int64_t k = 0; k < cols; ++k) s += z[static_cast<size_t>(t * cols + k)] * mix[static_cast<size_t>(k * cols + j)] / 16.0;
        x[static_cast<size_t>(t * cols + j)] = static_cast<float>(s * (j % 37 == 0 ? 8.0 : 1.0));
      }
    w = random_matrix(rows, cols, 7);
  }
  double output_error(const QuantParams& p, std::span<const uint8_t> q) const {
    std::vector<float> back(w.size());
    EXPECT_TRUE(dequantize_matrix(p, q, rows, cols, back.data()));
    double e = 0;
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t r = 0; r < rows; ++r) {
        double d = 0;
        for (int64_t c = 0; c < cols; ++c)
          d += (w[static_cast<size_t>(r * cols + c)] - back[static_cast<size_t>(r * cols + c)]) * x[static_cast<size_t>(t * cols + c)];
        e += d * d;
      }
    return e;
  }
};

TEST(Gptq, LessOutputErrorThanRoundToNearestOnEveryGrid) {
  const Layer layer;
  ThreadPool pool(2);
  for (const bool act_order : {false, true}) {
  auto factor = gptq_factor(layer.x, layer.tokens, layer.cols, &pool, act_order);
  ASSERT_TRUE(factor) << factor.status().message();
  const GptqQuantizer gptq(*factor, &pool), alone(*factor, nullptr);
  for (const QuantParams& p :
       {QuantParams{Scheme::kW4A16, 32, true, 0}, QuantParams{Scheme::kW4A16, 128, true, 0},
        QuantParams{Scheme::kW4A16, 64, false, 0}, QuantParams{Scheme::kW4A8, 32, true, 0},
        QuantParams{Scheme::kW8A16, 0, true, 0}, QuantParams{Scheme::kW8A16, 0, true, 32},
        QuantParams{Scheme::kW8A8, 0, true, 0}, QuantParams{Scheme::kW5A16, 0, true, 0, 32},
        QuantParams{Scheme::kW5A16, 0, false, 0, 32}}) {
    ASSERT_TRUE(GptqQuantizer::sweeps(p)) << describe(p);
    std::vector<uint8_t> rtn(*quantized_size(p, layer.rows, layer.cols)), ours(rtn.size()), one_thread(rtn.size());
    ASSERT_TRUE(round_to_nearest().quantize(p, layer.w.data(), layer.rows, layer.cols, rtn));
    ASSERT_TRUE(gptq.quantize(p, layer.w.data(), layer.rows, layer.cols, ours));
    ASSERT_TRUE(alone.quantize(p, layer.w.data(), layer.rows, layer.cols, one_thread));
    EXPECT_EQ(ours, one_thread) << describe(p) << ": the bytes depend on the threads";
    const double e_rtn = layer.output_error(p, rtn), e_gptq = layer.output_error(p, ours);
    std::printf("[ gptq     ] %s%-16s output error %.4g, round-to-nearest's %.4g (%.2fx)\n", act_order ? "act-order " : "", describe(p).c_str(), e_gptq, e_rtn,
                e_gptq / e_rtn);
    EXPECT_LT(e_gptq, 0.8 * e_rtn) << describe(p);
  }
  // GGML's super-blocks and the float schemes: round-to-nearest, byte for byte.
  for (const QuantParams& p : {QuantParams{Scheme::kW4A16, 256, false, 0}, QuantParams{Scheme::kF16, 0, true, 0}}) {
    EXPECT_FALSE(GptqQuantizer::sweeps(p));
    std::vector<uint8_t> a(*quantized_size(p, layer.rows, layer.cols)), b(a.size());
    ASSERT_TRUE(round_to_nearest().quantize(p, layer.w.data(), layer.rows, layer.cols, a));
    ASSERT_TRUE(gptq.quantize(p, layer.w.data(), layer.rows, layer.cols, b));
    EXPECT_EQ(a, b);
  }
  }
}

TEST(Gptq, DeadColumnsAreZeroAndShapesAreChecked) {
  Layer layer;
  for (int64_t t = 0; t < layer.tokens; ++t) layer.x[static_cast<size_t>(t * layer.cols + 9)] = 0.0f;  // no input reaches column 9
  auto factor = gptq_factor(layer.x, layer.tokens, layer.cols, nullptr);
  ASSERT_TRUE(factor) << factor.status().message();
  const QuantParams p{Scheme::kW4A16, 32, true, 0};
  std::vector<uint8_t> q(*quantized_size(p, layer.rows, layer.cols));
  ASSERT_TRUE(GptqQuantizer(*factor, nullptr).quantize(p, layer.w.data(), layer.rows, layer.cols, q));
  std::vector<float> back(layer.w.size());
  ASSERT_TRUE(dequantize_matrix(p, q, layer.rows, layer.cols, back.data()));
  for (int64_t r = 0; r < layer.rows; ++r) EXPECT_EQ(back[static_cast<size_t>(r * layer.cols + 9)], 0.0f) << r;
  // A matrix of another width than the inputs, and inputs that are not whole rows.
  std::vector<uint8_t> narrow(*quantized_size(p, layer.rows, 128));
  auto wrong = GptqQuantizer(*factor, nullptr).quantize(p, layer.w.data(), layer.rows, 128, narrow);
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.message(), "gptq: the calibration inputs have 256 columns, the matrix 128");
  auto partial = gptq_factor(std::span<const float>(layer.x).first(100), 1, layer.cols, nullptr);
  ASSERT_FALSE(partial);
  EXPECT_EQ(partial.status().message(), "gptq: 100 calibration values for 1 rows of 256");
}

}  // namespace
}  // namespace kiln
