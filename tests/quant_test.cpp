// Quantization schemes: storage layout, round-trip error bounds, and the reference matmul.
//
// Bounds checked here (s is the scale actually stored: f32 for W8, FP16 for W4):
//   f32                 exact
//   f16                 |err| <= max(2^-11 |w|, 2^-25)  (round to nearest; 2^-25 in the subnormals)
//   bf16                |err| <= 2^-8 |w|
//   w8 (per row)        |err| <= s/2, s = absmax(row)/127
//   w4 sym (per group)  |err| <= s/2, absmax/7 <= s <= (absmax/7)(1 + 2^-10)
//   w4 asym (per group) |err| <= s/2, (max-min)/15 <= s
// each plus a few f32 ulps of the value for the arithmetic. ref_matmul:
//   A16 and float schemes against the f64 product of the dequantized weights:
//       |err| <= (cols + 2) 2^-24 sum_c |w_c x_c|      (the f32 summation bound)
//   A8 against the f64 product of dequantized weights and dequantized activations qx*sx:
//       the same summation bound (the integer sums are exact);
//   A8 against the f64 product of dequantized weights and the original activations:
//       |err| <= (sx/2) sum_c |w_c| + the summation bound  (each |x - qx sx| <= sx/2).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backends/ref/ref_matmul.h"
#include "core/dtype.h"
#include "layout/ggml_blocks.h"
#include "layout/weight_layout.h"
#include "quant/scheme_flag.h"
#include "quant/weight_quantizer.h"

namespace kiln {
namespace {

constexpr double kU = 1.0 / (1 << 24);  // f32 unit roundoff

const Scheme kAllSchemes[] = {Scheme::kF32,  Scheme::kF16,  Scheme::kBF16, Scheme::kW8A16,
                              Scheme::kW4A16, Scheme::kW8A8, Scheme::kW4A8, Scheme::kW6A16, Scheme::kW5A16};

// Every parameter set worth testing: each scheme, and for 4-bit each group and symmetry.
std::vector<QuantParams> all_params() {
  std::vector<QuantParams> out;
  for (Scheme s : kAllSchemes) {
    if (!is_4bit(s)) {
      out.push_back({s});
      continue;
    }
    for (int g : {32, 64, 128})
      for (bool sym : {true, false}) out.push_back({s, g, sym});
  }
  for (int g : {32, 64, 128}) out.push_back({Scheme::kW8A16, 0, true, g});  // w8a16 with 8-bit groups
  out.push_back({Scheme::kW4A16, 256, false});  // GGML's Q4_K super-blocks (w6a16, Q6_K's, is above)
  out.push_back({Scheme::kW4A16, 256, true});   // and IQ4_XS's
  out.push_back({Scheme::kW5A16, 0, true, 0, 32});   // GGML's Q5_0 blocks of 32
  out.push_back({Scheme::kW5A16, 0, false, 0, 32});  // and Q5_1's
  return out;
}

enum class Dist { kLlm, kUniform, kOffset };

// LLM-like weights (normal, sd 0.02, with a few outliers), uniform [-1, 1], or an offset cloud
// (3 + normal) that stresses the asymmetric minimum.
std::vector<float> random_matrix(int64_t rows, int64_t cols, Dist d, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (auto& v : w) {
    switch (d) {
      case Dist::kLlm: v = normal(rng); break;
      case Dist::kUniform: v = uni(rng); break;
      case Dist::kOffset: v = 3.0f + normal(rng); break;
    }
  }
  if (d == Dist::kLlm)
    for (size_t i = 0; i < w.size(); i += 97) w[i] *= 20.0f;  // outliers
  return w;
}

std::vector<uint8_t> quantize_or_die(const QuantParams& p, const std::vector<float>& w, int64_t rows, int64_t cols) {
  auto size = quantized_size(p, rows, cols);
  EXPECT_TRUE(size.has_value()) << describe(p);
  std::vector<uint8_t> q(size.value_or(0));
  Status st = round_to_nearest().quantize(p, w.data(), rows, cols, q);
  EXPECT_TRUE(st) << describe(p) << ": " << st.message();
  return q;
}

std::vector<float> dequantize_or_die(const QuantParams& p, const std::vector<uint8_t>& q, int64_t rows, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(rows * cols), std::nanf(""));
  Status st = dequantize_matrix(p, q, rows, cols, out.data());
  EXPECT_TRUE(st) << describe(p) << ": " << st.message();
  return out;
}

float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}
float f32_at(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, 4);
  return f;
}

// ---- names, sizes, parameters ----

TEST(QuantScheme, NamesRoundTrip) {
  for (Scheme s : kAllSchemes) {
    auto back = parse_scheme(scheme_name(s));
    ASSERT_TRUE(back.has_value()) << scheme_name(s);
    EXPECT_EQ(*back, s);
  }
  EXPECT_EQ(scheme_name(Scheme::kW4A16), "w4a16");
  EXPECT_EQ(scheme_name(Scheme::kBF16), "bf16");
  EXPECT_FALSE(parse_scheme("W4A16"));
  EXPECT_FALSE(parse_scheme("int4"));
  EXPECT_FALSE(parse_scheme(""));
}

TEST(QuantScheme, Properties) {
  EXPECT_EQ(weight_bits(Scheme::kF32), 32);
  EXPECT_EQ(weight_bits(Scheme::kBF16), 16);
  EXPECT_EQ(weight_bits(Scheme::kW8A8), 8);
  EXPECT_EQ(weight_bits(Scheme::kW4A8), 4);
  EXPECT_TRUE(quantizes_activations(Scheme::kW8A8));
  EXPECT_TRUE(quantizes_activations(Scheme::kW4A8));
  EXPECT_FALSE(quantizes_activations(Scheme::kW4A16));
  EXPECT_EQ(widen_to_w8(Scheme::kW4A16), Scheme::kW8A16);
  EXPECT_EQ(widen_to_w8(Scheme::kW4A8), Scheme::kW8A8);
  EXPECT_EQ(widen_to_w8(Scheme::kF16), Scheme::kF16);
  QuantParams def;
  EXPECT_EQ(def.scheme, Scheme::kW4A16);
  EXPECT_EQ(def.group_size, 32);
  EXPECT_TRUE(def.symmetric);
  EXPECT_EQ(describe({Scheme::kW4A16, 128, false}), "w4a16 g128 asym");
  EXPECT_EQ(describe({Scheme::kW8A8, 64, false}), "w8a8");
  EXPECT_EQ(canonical({Scheme::kW8A16, 64, false}), (QuantParams{Scheme::kW8A16, 0, true}));
  EXPECT_EQ(canonical({Scheme::kW4A8, 64, false}), (QuantParams{Scheme::kW4A8, 64, false}));
  EXPECT_EQ(round_to_nearest().name(), "rtn");
  // 8-bit groups: w8a16 only, kept by canonical, named as the 4-bit schemes are.
  EXPECT_EQ(def.w8_group, 0);
  EXPECT_EQ(describe({Scheme::kW8A16, 0, true, 32}), "w8a16 g32");
  EXPECT_EQ(canonical({Scheme::kW8A16, 64, false, 32}), (QuantParams{Scheme::kW8A16, 0, true, 32}));
  EXPECT_EQ(canonical({Scheme::kW8A8, 64, false, 32}), (QuantParams{Scheme::kW8A8, 0, true, 0}));
  EXPECT_EQ(scale_group({Scheme::kW8A16, 0, true, 128}), 128);
  EXPECT_EQ(scale_group({Scheme::kW8A16}), 0);
  EXPECT_EQ(scale_group({Scheme::kW4A8, 64, true}), 64);
  EXPECT_FALSE(validate_params({Scheme::kW8A8, 0, true, 32}));   // groups are a w8a16 layout
  EXPECT_FALSE(validate_params({Scheme::kW8A16, 0, true, 48}));  // not a group size
}

TEST(QuantScheme, Sizes) {
  EXPECT_EQ(quantized_size({Scheme::kF32}, 3, 64), 3u * 64 * 4);
  EXPECT_EQ(quantized_size({Scheme::kF16}, 3, 64), 3u * 64 * 2);
  EXPECT_EQ(quantized_size({Scheme::kBF16}, 3, 64), 3u * 64 * 2);
  EXPECT_EQ(quantized_size({Scheme::kW8A16}, 3, 65), 3u * (4 + 65));
  EXPECT_EQ(quantized_size({Scheme::kW8A8}, 3, 65), 3u * (4 + 65));
  EXPECT_EQ(quantized_size({Scheme::kW4A16, 32, true}, 3, 64), 3u * 2 * 18);   // Q4_0-sized blocks
  EXPECT_EQ(quantized_size({Scheme::kW4A16, 32, false}, 3, 64), 3u * 2 * 20);  // Q4_1-sized blocks
  EXPECT_EQ(quantized_size({Scheme::kW4A8, 64, true}, 3, 128), 3u * 2 * 34);
  EXPECT_EQ(quantized_size({Scheme::kW4A8, 128, false}, 2, 384), 2u * 3 * 68);
  EXPECT_EQ(quantized_size({Scheme::kW4A16}, 0, 64), 0u);
  EXPECT_EQ(quantized_row_size({Scheme::kW4A16, 64, false}, 128), 2u * 36);
  // Refusals.
  EXPECT_FALSE(quantized_size({Scheme::kW4A16, 32, true}, 3, 48));  // cols not a multiple of the group
  EXPECT_FALSE(quantized_size({Scheme::kW4A16, 48, true}, 3, 96));  // not a group size
  EXPECT_FALSE(quantized_size({Scheme::kW4A16, 0, true}, 3, 96));
  EXPECT_FALSE(quantized_size({Scheme::kF32}, -1, 4));
  EXPECT_FALSE(quantized_size({Scheme::kF32}, 4, -1));
  EXPECT_FALSE(quantized_size({Scheme::kF32}, int64_t{1} << 62, int64_t{1} << 20));  // overflows 64 bits
  // Group size is ignored by the schemes that have none.
  EXPECT_EQ(quantized_size({Scheme::kW8A16, 48, false}, 1, 10), 14u);
  // w8a16 g32: GGML Q8_0's 34 bytes per block of 32; g128: 130 per 128.
  EXPECT_EQ(quantized_size({Scheme::kW8A16, 0, true, 32}, 3, 64), 3u * 2 * 34);
  EXPECT_EQ(quantized_row_size({Scheme::kW8A16, 0, true, 128}, 256), 2u * 130);
  EXPECT_FALSE(quantized_size({Scheme::kW8A16, 0, true, 32}, 3, 48));  // cols not a multiple of the group
}

// w8a16 g32 round to nearest: an f16 scale = absmax / 127 rounded up per group of 32, then
// q = round(w / scale), in Q8_0's block order; and the reference product reads it.
TEST(QuantScheme, W8GroupsAreQ8Blocks) {
  const QuantParams p{Scheme::kW8A16, 0, true, 32};
  std::vector<float> w(64);
  for (int i = 0; i < 32; ++i) w[static_cast<size_t>(i)] = static_cast<float>(i - 16) * 0.5f;  // absmax 8
  for (int i = 32; i < 64; ++i) w[static_cast<size_t>(i)] = i == 40 ? -1.0f : 0.0f;         // absmax 1
  auto q = quantize_or_die(p, w, 1, 64);
  ASSERT_EQ(q.size(), 68u);
  EXPECT_EQ(f16_at(q.data()), f16_to_f32(f16_round_up(8.0f / 127.0f)));
  EXPECT_EQ(f16_at(q.data() + 34), f16_to_f32(f16_round_up(1.0f / 127.0f)));
  EXPECT_EQ(static_cast<int8_t>(q[2]), -127);       // -8 / scale, scale rounded up: -126.98 -> -127
  EXPECT_EQ(static_cast<int8_t>(q[34 + 2 + 8]), -127);  // w[40]
  EXPECT_EQ(static_cast<int8_t>(q[34 + 2 + 9]), 0);
  auto d = dequantize_or_die(p, q, 1, 64);
  for (int i = 0; i < 64; ++i)
    EXPECT_EQ(d[static_cast<size_t>(i)], static_cast<float>(static_cast<int8_t>(q[static_cast<size_t>(i / 32 * 34 + 2 + i % 32)])) *
                                             f16_at(q.data() + i / 32 * 34));
}

TEST(QuantScheme, ShapeErrorsSayWhy) {
  Status st = check_shape({Scheme::kW4A16, 128, true}, 4, 200);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("200"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("128"), std::string::npos) << st.message();
  st = validate_params({Scheme::kW4A8, 16, true});
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("32, 64, 128"), std::string::npos) << st.message();
  EXPECT_TRUE(validate_params({Scheme::kW8A8, 16, true}));  // ignored there
}

// ---- FP16 directed rounding ----

TEST(QuantScheme, F16DirectedRounding) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mag(-30.0f, 15.0f);
  for (int i = 0; i < 20000; ++i) {
    float v = std::exp2(mag(rng)) * (i % 2 ? -1.0f : 1.0f);
    if (i % 50 == 0) v = f16_to_f32(f32_to_f16(v));  // exactly representable values too
    const float up = f16_to_f32(f16_round_up(v)), down = f16_to_f32(f16_round_down(v));
    ASSERT_GE(up, v) << v;
    ASSERT_LE(down, v) << v;
    // Tight: nothing representable lies strictly between; equal when v is representable.
    if (up == down) {
      EXPECT_EQ(up, v);
    } else {
      EXPECT_LT(down, v);
      EXPECT_GT(up, v);
      const uint16_t hd = f16_round_down(v), hu = f16_round_up(v);
      // One step apart (in the ordering of FP16 values).
      auto ordinal = [](uint16_t h) { return (h & 0x8000) ? -static_cast<int>(h & 0x7fff) : static_cast<int>(h); };
      EXPECT_EQ(ordinal(hu) - ordinal(hd), 1) << v;
    }
  }
  EXPECT_EQ(f16_to_f32(f16_round_up(0.0f)), 0.0f);
  EXPECT_EQ(f16_to_f32(f16_round_down(0.0f)), 0.0f);
  EXPECT_GT(f16_to_f32(f16_round_up(1e-9f)), 0.0f);
  EXPECT_LT(f16_to_f32(f16_round_down(-1e-9f)), 0.0f);
  EXPECT_EQ(f16_to_f32(f16_round_up(65504.0f)), 65504.0f);
}

// ---- round-trip error bounds on random data ----

struct Shape {
  int64_t rows, cols;
};

// Shapes for a given group size g: one row, many rows, cols = g, cols = 3g, wide rows.
std::vector<Shape> shapes_for(int g) {
  return {{1, g}, {1, 3 * g}, {5, g}, {7, 3 * g}, {67, 2 * g}, {3, 8 * g}};
}

TEST(QuantRoundTrip, ErrorBoundsPerScheme) {
  for (const QuantParams& p : all_params()) {
    const int g = scale_group(p) != 0 ? scale_group(p) : 32;
    double worst_ratio = 0.0;  // largest |err| / bound seen, for the log
    double err2 = 0.0, w2 = 0.0;  // squared error and squared weights on the LLM-like data
    for (Dist dist : {Dist::kLlm, Dist::kUniform, Dist::kOffset}) {
      for (const Shape& sh : shapes_for(g)) {
        auto w = random_matrix(sh.rows, sh.cols, dist, static_cast<uint32_t>(sh.rows * 131 + sh.cols));
        auto q = quantize_or_die(p, w, sh.rows, sh.cols);
        auto d = dequantize_or_die(p, q, sh.rows, sh.cols);
        const uint64_t row_bytes = *quantized_row_size(p, sh.cols);
        for (int64_t r = 0; r < sh.rows; ++r) {
          const uint8_t* qr = q.data() + r * row_bytes;
          for (int64_t c = 0; c < sh.cols; ++c) {
            const float x = w[r * sh.cols + c], y = d[r * sh.cols + c];
            const double err = std::fabs(static_cast<double>(x) - y);
            double bound = 0.0;
            switch (p.scheme) {
              case Scheme::kF32: bound = 0.0; break;
              case Scheme::kF16: bound = std::max(std::ldexp(std::fabs(static_cast<double>(x)), -11), std::ldexp(1.0, -25)); break;
              case Scheme::kBF16: bound = std::ldexp(std::fabs(x), -8); break;
              case Scheme::kW8A16:
              case Scheme::kW8A8:
                bound = p.w8_group != 0 ? f16_at(qr + c / p.w8_group * (2 + p.w8_group)) / 2 : f32_at(qr) / 2;
                break;
              case Scheme::kW6A16: {  // half the sub-block's step d sc_i: nothing is clipped
                const uint8_t* blk = qr + c / 256 * kQ6KBlockBytes;
                bound = f16_at(blk + 208) * static_cast<int8_t>(blk[192 + c % 256 / 16]) / 2;
                break;
              }
              default: {
                if (is_q5_block32(p)) {  // Q5_0, Q5_1: half the block's step d, nothing clipped
                  bound = f16_at(qr + c / 32 * (p.symmetric ? kQ5_0BlockBytes : kQ5_1BlockBytes)) / 2;
                  break;
                }
                if (is_ggml_superblock(p) && p.scheme == Scheme::kW4A16 && p.symmetric) {  // IQ4_XS: within the levels, half the widest
                  const uint8_t* blk = qr + c / 256 * kIq4XsBlockBytes;  // gap (24) times the step; past 113
                  const double d = f16_at(blk);                          // (the far side is -127) 14 steps, plus
                  bound = std::fabs(d * iq4_xs_scale(blk, static_cast<int>(c % 256 / 32))) * 14 + 127 * d / 2;  // the step's rounding
                  break;
                }
                if (is_ggml_superblock(p)) {  // Q4_K, Q5_K: half the step d sc_j, plus what a capped sc_j clips
                  const uint8_t* blk = qr + c / 256 * dtype_info(ggml_block_type(p)).block_bytes;
                  uint8_t sc, m;
                  q4_k_scale_min(blk, static_cast<int>(c % 256 / 32), &sc, &m);
                  bound = f16_at(blk) * sc / 2 + (sc == 63 ? f16_at(blk + 2) : 0.0);
                  break;
                }
                const int64_t grp = c / p.group_size;
                const uint8_t* gb = qr + grp * ((p.symmetric ? 2 : 4) + p.group_size / 2);
                bound = f16_at(gb) / 2;
              }
            }
            const double slack = 4 * kU * (std::fabs(x) + bound);  // f32 arithmetic
            ASSERT_LE(err, bound + slack) << describe(p) << " row " << r << " col " << c << ": " << x << " -> " << y;
            if (bound > 0) worst_ratio = std::max(worst_ratio, err / bound);
            if (dist == Dist::kLlm) {
              err2 += err * err;
              w2 += static_cast<double>(x) * x;
            }
          }
        }
      }
    }
    std::printf("[ bound    ] %-16s max |err| / bound = %.4f, LLM-like weights: rms err / rms w = %.2e\n",
                describe(p).c_str(), worst_ratio, std::sqrt(err2 / w2));
  }
}

TEST(QuantRoundTrip, ScalesAreWhatTheLayoutSays) {
  const int64_t rows = 9, cols = 384;
  auto w = random_matrix(rows, cols, Dist::kLlm, 99);
  {  // W8: scale = absmax / 127 exactly (f32).
    auto q = quantize_or_die({Scheme::kW8A16}, w, rows, cols);
    for (int64_t r = 0; r < rows; ++r) {
      float absmax = 0;
      for (int64_t c = 0; c < cols; ++c) absmax = std::max(absmax, std::fabs(w[r * cols + c]));
      EXPECT_EQ(f32_at(q.data() + r * (4 + cols)), absmax / 127.0f);
      // The largest element maps to +-127.
      const auto* qs = reinterpret_cast<const int8_t*>(q.data() + r * (4 + cols) + 4);
      int qmax = 0;
      for (int64_t c = 0; c < cols; ++c) qmax = std::max(qmax, std::abs(static_cast<int>(qs[c])));
      EXPECT_EQ(qmax, 127);
    }
  }
  for (int g : {32, 64, 128}) {
    for (bool sym : {true, false}) {
      const QuantParams p{Scheme::kW4A16, g, sym};
      auto q = quantize_or_die(p, w, rows, cols);
      const int gb = (sym ? 2 : 4) + g / 2;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c0 = 0; c0 < cols; c0 += g) {
          const uint8_t* b = q.data() + (r * (cols / g) + c0 / g) * gb;
          float lo = w[r * cols + c0], hi = lo, absmax = 0;
          for (int j = 0; j < g; ++j) {
            const float v = w[r * cols + c0 + j];
            lo = std::min(lo, v);
            hi = std::max(hi, v);
            absmax = std::max(absmax, std::fabs(v));
          }
          const float s = f16_at(b);
          if (sym) {
            EXPECT_GE(s, absmax / 7.0f);
            EXPECT_LE(s, absmax / 7.0f * (1.0f + 1.0f / 1024));
          } else {
            const float mn = f16_at(b + 2);
            EXPECT_LE(mn, lo);
            EXPECT_GE(s * 15.0f, hi - mn);
          }
        }
    }
  }
}

// ---- exact results on hand-made inputs ----

TEST(QuantExact, W8RowOfMultiplesOfTheScale) {
  // absmax 63.5 -> scale 0.5 exactly; every value is an integer multiple of it.
  std::vector<float> w = {-63.5f, -0.5f, 0.0f, 2.5f, 63.5f, 10.0f, -31.0f};
  const int64_t cols = static_cast<int64_t>(w.size());
  for (Scheme s : {Scheme::kW8A16, Scheme::kW8A8}) {
    auto q = quantize_or_die({s}, w, 1, cols);
    ASSERT_EQ(q.size(), 4u + w.size());
    EXPECT_EQ(f32_at(q.data()), 0.5f);
    const auto* qs = reinterpret_cast<const int8_t*>(q.data() + 4);
    const int expect[] = {-127, -1, 0, 5, 127, 20, -62};
    for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(qs[i], expect[i]) << i;
    EXPECT_EQ(dequantize_or_die({s}, q, 1, cols), w);
  }
}

TEST(QuantExact, W4SymmetricLayoutAndValues) {
  // One group of 32: element j is (j % 15 - 7) * 0.25, absmax 1.75 -> scale 0.25 exactly.
  std::vector<float> w(32);
  for (int j = 0; j < 32; ++j) w[j] = static_cast<float>(j % 15 - 7) * 0.25f;
  auto q = quantize_or_die({Scheme::kW4A16, 32, true}, w, 1, 32);
  ASSERT_EQ(q.size(), 18u);
  EXPECT_EQ(f16_at(q.data()), 0.25f);
  // Byte j: element j in the low nibble, element j + 16 in the high nibble, each as q + 8.
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(q[2 + j] & 0x0f, j % 15 - 7 + 8) << j;
    EXPECT_EQ(q[2 + j] >> 4, (j + 16) % 15 - 7 + 8) << j;
  }
  EXPECT_EQ(dequantize_or_die({Scheme::kW4A16, 32, true}, q, 1, 32), w);
}

TEST(QuantExact, W4AsymmetricLayoutAndValues) {
  // Group of 64: element j is -1.5 + (j % 16) * 0.125: min -1.5, scale (0.375 + 1.5) / 15 = 0.125.
  std::vector<float> w(64);
  for (int j = 0; j < 64; ++j) w[j] = -1.5f + static_cast<float>(j % 16) * 0.125f;
  const QuantParams p{Scheme::kW4A8, 64, false};
  auto q = quantize_or_die(p, w, 1, 64);
  ASSERT_EQ(q.size(), 36u);
  EXPECT_EQ(f16_at(q.data()), 0.125f);
  EXPECT_EQ(f16_at(q.data() + 2), -1.5f);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(q[4 + j] & 0x0f, j % 16) << j;
    EXPECT_EQ(q[4 + j] >> 4, (j + 32) % 16) << j;
  }
  EXPECT_EQ(dequantize_or_die(p, q, 1, 64), w);
}

TEST(QuantExact, FloatSchemesOnRepresentableValues) {
  std::vector<float> w = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 0.000061035156f /*2^-14*/, 3.140625f, -1024.0f};
  for (Scheme s : {Scheme::kF32, Scheme::kF16}) {
    auto q = quantize_or_die({s}, w, 2, 4);
    EXPECT_EQ(dequantize_or_die({s}, q, 2, 4), w) << scheme_name(s);
  }
  std::vector<float> b = {1.0f, -2.5f, 3.140625f, 1e30f, -1.5e-20f, 0.0f};  // bf16-representable
  for (float& v : b) v = bf16_to_f32(f32_to_bf16(v));
  auto q = quantize_or_die({Scheme::kBF16}, b, 1, 6);
  EXPECT_EQ(dequantize_or_die({Scheme::kBF16}, q, 1, 6), b);
  // F32 keeps what it is given, non-finite values included.
  std::vector<float> odd = {std::numeric_limits<float>::infinity(), 1.0f};
  auto qf = quantize_or_die({Scheme::kF32}, odd, 1, 2);
  EXPECT_EQ(dequantize_or_die({Scheme::kF32}, qf, 1, 2), odd);
}

TEST(QuantExact, ZeroAndConstantRows) {
  std::vector<float> zero(256, 0.0f);  // every group divides it, the k-quants' 256 too
  for (const QuantParams& p : all_params()) {
    auto q = quantize_or_die(p, zero, 1, 256);
    EXPECT_EQ(dequantize_or_die(p, q, 1, 256), zero) << describe(p);
  }
  // A constant row that FP16 cannot hold: asymmetric W4 still lands within half a (tiny) step.
  std::vector<float> c(32, 0.3f);
  const QuantParams p{Scheme::kW4A16, 32, false};
  auto q = quantize_or_die(p, c, 1, 32);
  auto d = dequantize_or_die(p, q, 1, 32);
  const float s = f16_at(q.data());
  for (float v : d) EXPECT_LE(std::fabs(v - 0.3f), s / 2 + 1e-7f);
  EXPECT_LT(s, 1e-4f);
}

// With g = 32 the W4 groups are GGML's Q4_0 / Q4_1 blocks byte for byte.
TEST(QuantExact, W4Group32IsGgmlQ4_0AndQ4_1) {
  const int64_t rows = 4, cols = 96;
  auto w = random_matrix(rows, cols, Dist::kUniform, 5);
  for (bool sym : {true, false}) {
    const QuantParams p{Scheme::kW4A16, 32, sym};
    auto q = quantize_or_die(p, w, rows, cols);
    auto ours = dequantize_or_die(p, q, rows, cols);
    std::vector<float> ggml(ours.size());
    Status st = dequantize(sym ? DType::kQ4_0 : DType::kQ4_1, q, ggml);
    ASSERT_TRUE(st) << st.message();
    EXPECT_EQ(ours, ggml) << (sym ? "Q4_0" : "Q4_1");
  }
}

// GGML's k-quant super-blocks: w4a16 g256 asymmetric is Q4_K, w6a16 is Q6_K, byte for byte (the
// reference dequantization is GGML's own, which the GGUF tests check against gguf-py), with the
// element packing of layout/ggml_blocks.h; their names, sizes and refusals.
TEST(QuantKQuant, LayoutsAreGgmlBlocks) {
  const QuantParams q4k{Scheme::kW4A16, 256, false}, q6k = canonical({Scheme::kW6A16});
  EXPECT_TRUE(is_ggml_superblock(q4k));
  EXPECT_TRUE(is_ggml_superblock(q6k));
  EXPECT_FALSE(is_ggml_superblock({Scheme::kW4A16, 128, false}));
  EXPECT_EQ(describe(q4k), "w4a16 g256 asym");
  EXPECT_EQ(describe(q6k), "w6a16");
  EXPECT_EQ(weight_bits(Scheme::kW6A16), 6);
  EXPECT_TRUE(a16_activations(Scheme::kW6A16));
  EXPECT_FALSE(a16_activations(Scheme::kW8A16));
  EXPECT_EQ(widen_to_w8(Scheme::kW6A16), Scheme::kW8A16);
  EXPECT_EQ(scale_group(q6k), 256);
  EXPECT_EQ(canonical({Scheme::kW6A16, 64, false}), q6k);
  EXPECT_EQ(quantized_size(q4k, 3, 512), 3u * 2 * 144);
  EXPECT_EQ(quantized_size(q6k, 3, 512), 3u * 2 * 210);
  const QuantParams iq4{Scheme::kW4A16, 256, true};
  EXPECT_TRUE(is_ggml_superblock(iq4));
  EXPECT_EQ(describe(iq4), "w4a16 g256 sym");
  EXPECT_EQ(ggml_block_type(q4k), DType::kQ4_K);
  EXPECT_EQ(ggml_block_type(iq4), DType::kIQ4_XS);
  EXPECT_EQ(ggml_block_type(q6k), DType::kQ6_K);
  EXPECT_EQ(quantized_size(iq4, 3, 512), 3u * 2 * 136);
  Status st = validate_params({Scheme::kW4A8, 256, false});
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("w4a16 layout only"), std::string::npos) << st.message();
  st = check_shape(q6k, 2, 576);  // SmolLM2's width: llama.cpp falls back to other blocks there
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("576"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("256"), std::string::npos) << st.message();

  // Element packing against a hand-made block: Q4_K sub-block 5 (scale and min split over three
  // bytes), elements 37 (low nibble) and 100 (high); Q6_K element 200 (nibble and bit pair).
  std::vector<uint8_t> b4(kQ4KBlockBytes, 0), b6(kQ6KBlockBytes, 0);
  q4_k_set_scale_min(b4.data(), 5, 45, 50);
  q4_k_set_scale_min(b4.data(), 1, 7, 9);
  uint8_t sc, m;
  q4_k_scale_min(b4.data(), 5, &sc, &m);
  EXPECT_EQ(sc, 45);
  EXPECT_EQ(m, 50);
  q4_k_scale_min(b4.data(), 1, &sc, &m);  // sharing bytes with 5: untouched
  EXPECT_EQ(sc, 7);
  EXPECT_EQ(m, 9);
  q4_k_set_nibble(b4.data(), 37, 11);
  q4_k_set_nibble(b4.data(), 100, 6);
  // Sub-block 5's scale 45 and min 50 in GGML's packing: low halves in byte 9, high bits at the top
  // of bytes 1 and 5 (beside sub-block 1's 7 and 9). Element 37: the high nibble of byte 5 of the
  // first 32 bytes; element 100: the high nibble of byte 4 of the next 32.
  EXPECT_EQ(b4[4 + 9], 0x2d);
  EXPECT_EQ(b4[4 + 1], 0x87);
  EXPECT_EQ(b4[4 + 5], 0xc9);
  EXPECT_EQ(b4[16 + 5], 0xb0);
  EXPECT_EQ(b4[16 + 32 + 4], 0x60);
  EXPECT_EQ(q4_k_nibble(b4.data(), 37), 11u);
  EXPECT_EQ(q4_k_nibble(b4.data(), 100), 6u);
  // IQ4_XS sub-block 5's scale -7 (ls 25 = 0b011001): low 4 bits in the high nibble of byte 4 + 2,
  // high 2 at bits 10-11 of the u16 at byte 2; element 40: the low nibble of byte 8 + 16 + 8.
  std::vector<uint8_t> bx(kIq4XsBlockBytes, 0);
  iq4_xs_set_scale(bx.data(), 5, -7);
  iq4_xs_set_scale(bx.data(), 4, 31);
  EXPECT_EQ(iq4_xs_scale(bx.data(), 5), -7);
  EXPECT_EQ(iq4_xs_scale(bx.data(), 4), 31);
  EXPECT_EQ(bx[4 + 2], 0x9f);  // 25 & 15 = 9 high, 63 & 15 = 15 low
  EXPECT_EQ(bx[3], 0x07);      // 25 >> 4 = 1 at bits 2-3 of byte 3, 63 >> 4 = 3 at bits 0-1
  iq4_xs_set_nibble(bx.data(), 40, 13);
  EXPECT_EQ(bx[8 + 16 + 8], 13);
  EXPECT_EQ(iq4_xs_nibble(bx.data(), 40), 13u);
  q6_k_set_value(b6.data(), 200, 0x2b);
  EXPECT_EQ(q6_k_value(b6.data(), 200), 0x2bu);
  for (int e = 0; e < 256; ++e)
    if (e != 200) {
      ASSERT_EQ(q6_k_value(b6.data(), e), 0u) << e;
    }

  // Round to nearest then GGML's dequantization: what dequantize_row gives.
  const int64_t rows = 3, cols = 512;
  auto w = random_matrix(rows, cols, Dist::kLlm, 17);
  for (const QuantParams& p : {q4k, iq4, q6k}) {
    auto q = quantize_or_die(p, w, rows, cols);
    auto ours = dequantize_or_die(p, q, rows, cols);
    std::vector<float> ggml(ours.size());
    ASSERT_TRUE(dequantize(ggml_block_type(p), q, ggml));
    EXPECT_EQ(ours, ggml) << describe(p);
    if (p != iq4) continue;
    // IQ4_XS round to nearest: each element on the level nearest it under its sub-block's scale.
    for (int64_t i = 0; i < rows * cols; ++i) {
      const uint8_t* blk = q.data() + (i / 256) * kIq4XsBlockBytes;
      const float step = f16_at(blk) * static_cast<float>(iq4_xs_scale(blk, static_cast<int>(i % 256 / 32)));
      for (int8_t level : kIq4Levels) ASSERT_LE(std::fabs(ours[i] - w[i]), std::fabs(step * level - w[i]) * (1 + 1e-6f)) << i;
    }
  }
}

// w5a16 is GGML's Q5_K block byte for byte: Q4_K's d, dmin and 6-bit scales and mins, each
// value's fifth bit in 32 bytes before the nibbles (layout/ggml_blocks.h); round to nearest over
// 31 levels, dequantized by GGML's own Q5_K code.
TEST(QuantKQuant, W5A16IsGgmlQ5K) {
  const QuantParams q5k = canonical({Scheme::kW5A16, 64, false});
  EXPECT_EQ(q5k, (QuantParams{Scheme::kW5A16, 0, true}));
  EXPECT_TRUE(is_ggml_superblock(q5k));
  EXPECT_EQ(ggml_block_type(q5k), DType::kQ5_K);
  EXPECT_EQ(describe(q5k), "w5a16");
  EXPECT_EQ(scheme_name(Scheme::kW5A16), "w5a16");
  EXPECT_EQ(parse_scheme("w5a16"), Scheme::kW5A16);
  auto alias = parse_scheme_flag("Q5_K", 32, true);  // -q q5_k
  ASSERT_TRUE(alias) << alias.status().message();
  EXPECT_EQ(canonical(*alias), q5k);
  EXPECT_EQ(weight_bits(Scheme::kW5A16), 5);
  EXPECT_TRUE(a16_activations(Scheme::kW5A16));
  EXPECT_FALSE(quantizes_activations(Scheme::kW5A16));
  EXPECT_EQ(widen_to_w8(Scheme::kW5A16), Scheme::kW8A16);
  EXPECT_EQ(scale_group(q5k), 256);
  EXPECT_EQ(quantized_size(q5k, 3, 512), 3u * 2 * 176);
  EXPECT_FALSE(quantized_size(q5k, 3, 640));
  Status st = check_shape(q5k, 2, 576);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("256"), std::string::npos) << st.message();

  // Element packing against a hand-made block: element 70 (sub-block 2: the low nibble of byte 6
  // of the second 32 nibble bytes, fifth bit 2 of byte 6 of qh) and 255 (sub-block 7: the high
  // nibble of the last byte, bit 7 of qh's last byte).
  std::vector<uint8_t> b(kQ5KBlockBytes, 0);
  q5_k_set_value(b.data(), 70, 0x1b);
  q5_k_set_value(b.data(), 255, 0x16);
  EXPECT_EQ(b[48 + 32 + 6], 0x0b);
  EXPECT_EQ(b[16 + 6], 0x04);
  EXPECT_EQ(b[48 + 127], 0x60);
  EXPECT_EQ(b[16 + 31], 0x80);
  EXPECT_EQ(q5_k_value(b.data(), 70), 0x1bu);
  EXPECT_EQ(q5_k_value(b.data(), 255), 0x16u);
  for (int e = 0; e < 256; ++e)
    if (e != 70 && e != 255) {
      ASSERT_EQ(q5_k_value(b.data(), e), 0u) << e;
    }
  q5_k_set_value(b.data(), 70, 0x05);  // clears the fifth bit, leaves the neighbours
  EXPECT_EQ(b[16 + 6], 0x00);
  EXPECT_EQ(q5_k_value(b.data(), 255), 0x16u);
  // A block's value: d sc_j u - dmin m_j, as GGML computes it.
  q4_k_set_scale_min(b.data(), 2, 17, 3);
  const uint16_t d = f32_to_f16(0.25f), dmin = f32_to_f16(0.5f);
  std::memcpy(b.data(), &d, 2);
  std::memcpy(b.data() + 2, &dmin, 2);
  q5_k_set_value(b.data(), 70, 29);
  std::vector<float> y(256);
  ASSERT_TRUE(dequantize_row(q5k, b, 256, y.data()));
  EXPECT_EQ(y[70], 0.25f * 17 * 29 - 0.5f * 3);
  EXPECT_EQ(y[69], -0.5f * 3);

  // Round to nearest then GGML's dequantization: what dequantize_row gives; and 31 levels halve
  // Q4_K's error on the same weights.
  const int64_t rows = 5, cols = 768;
  auto w = random_matrix(rows, cols, Dist::kLlm, 23);
  auto q = quantize_or_die(q5k, w, rows, cols);
  auto ours = dequantize_or_die(q5k, q, rows, cols);
  std::vector<float> ggml(ours.size());
  ASSERT_TRUE(dequantize(DType::kQ5_K, q, ggml));
  EXPECT_EQ(ours, ggml);
  auto four = dequantize_or_die({Scheme::kW4A16, 256, false}, quantize_or_die({Scheme::kW4A16, 256, false}, w, rows, cols),
                                rows, cols);
  double e5 = 0, e4 = 0;
  int top = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    e5 += std::pow(static_cast<double>(ours[i]) - w[i], 2);
    e4 += std::pow(static_cast<double>(four[i]) - w[i], 2);
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) top = std::max(top, static_cast<int>(q5_k_value(q.data() + (r * 3 + c / 256) * 176, c % 256)));
  EXPECT_EQ(top, 31);  // the levels are used
  EXPECT_LT(e5, 0.35 * e4) << e5 << " " << e4;
}

// w5a16 in blocks of 32 is GGML's Q5_0 (symmetric) and Q5_1 (asymmetric) block byte for byte:
// [f16 d]([f16 m])[u32 of fifth bits][16 bytes of nibbles, Q4_0's order] (layout/ggml_blocks.h);
// round to nearest over 31 levels, dequantized by GGML's own code; w5a16 alone stays Q5_K.
TEST(QuantKQuant, W5A16G32IsGgmlQ5_0AndQ5_1) {
  auto q50 = parse_scheme_flag("q5_0", 32, true), q51 = parse_scheme_flag("Q5_1", 32, true);
  ASSERT_TRUE(q50 && q51);
  EXPECT_EQ(*q50, (QuantParams{Scheme::kW5A16, 0, true, 0, 32}));
  EXPECT_EQ(*q51, (QuantParams{Scheme::kW5A16, 0, false, 0, 32}));
  EXPECT_EQ(canonical(*q50), *q50);
  EXPECT_EQ(canonical(*q51), *q51);
  EXPECT_FALSE(parse_scheme_flag("q5_0", 64, true));  // the block is GGML's: no other group
  EXPECT_EQ(canonical(*parse_scheme_flag("w5a16", 32, false)), canonical({Scheme::kW5A16}));  // Q5_K whatever --group says
  EXPECT_EQ(canonical({Scheme::kW5A16, 32, false, 0, 64}), canonical({Scheme::kW5A16}));  // only 32 is a block
  EXPECT_FALSE(validate_params({Scheme::kW4A16, 32, true, 0, 32}));  // blocks of 32 are w5a16's only
  EXPECT_TRUE(is_q5_block32(*q50));
  EXPECT_FALSE(is_ggml_superblock(*q50));
  EXPECT_TRUE(is_ggml_block(*q51));
  EXPECT_EQ(ggml_block_type(*q50), DType::kQ5_0);
  EXPECT_EQ(ggml_block_type(*q51), DType::kQ5_1);
  EXPECT_EQ(describe(*q50), "w5a16 g32 sym");
  EXPECT_EQ(describe(*q51), "w5a16 g32 asym");
  EXPECT_EQ(scale_group(*q50), 32);
  EXPECT_EQ(quantized_size(*q50, 3, 96), 3u * 3 * 22);
  EXPECT_EQ(quantized_size(*q51, 3, 96), 3u * 3 * 24);
  EXPECT_FALSE(quantized_size(*q50, 3, 100));

  // Element packing against a hand-made block: element 5 (low nibble of byte 5, bit 5 of qh) and
  // 30 (high nibble of byte 14, bit 6 of qh's byte 3).
  for (bool asym : {false, true}) {
    SCOPED_TRACE(asym);
    std::vector<uint8_t> b(asym ? kQ5_1BlockBytes : kQ5_0BlockBytes, 0);
    const int qh = asym ? 4 : 2;
    q5_block32_set_value(b.data(), asym, 5, 0x1b);
    q5_block32_set_value(b.data(), asym, 30, 0x16);
    EXPECT_EQ(b[qh + 4 + 5], 0x0b);
    EXPECT_EQ(b[qh + 0], 0x20);
    EXPECT_EQ(b[qh + 4 + 14], 0x60);
    EXPECT_EQ(b[qh + 3], 0x40);
    for (int e = 0; e < 32; ++e) ASSERT_EQ(q5_block32_value(b.data(), asym, e), e == 5 ? 0x1bu : e == 30 ? 0x16u : 0u) << e;
    q5_block32_set_value(b.data(), asym, 5, 0x05);  // clears the fifth bit, leaves the neighbours
    EXPECT_EQ(b[qh + 0], 0x00);
    EXPECT_EQ(q5_block32_value(b.data(), asym, 30), 0x16u);
    const uint16_t d = f32_to_f16(0.25f), m = f32_to_f16(-0.5f);
    std::memcpy(b.data(), &d, 2);
    if (asym) std::memcpy(b.data() + 2, &m, 2);
    std::vector<float> y(32);
    ASSERT_TRUE(dequantize_row(asym ? *q51 : *q50, b, 32, y.data()));
    EXPECT_EQ(y[30], asym ? 0.25f * 22 - 0.5f : 0.25f * (22 - 16));
    EXPECT_EQ(y[5], asym ? 0.25f * 5 - 0.5f : 0.25f * (5 - 16));
  }

  // Round to nearest then GGML's dequantization: what dequantize_row gives; 31 levels are used,
  // and beat W4's 15 on the same weights.
  const int64_t rows = 5, cols = 384;
  auto w = random_matrix(rows, cols, Dist::kLlm, 29);
  for (const QuantParams& p : {*q50, *q51}) {
    SCOPED_TRACE(describe(p));
    auto q = quantize_or_die(p, w, rows, cols);
    auto ours = dequantize_or_die(p, q, rows, cols);
    std::vector<float> ggml(ours.size());
    ASSERT_TRUE(dequantize(ggml_block_type(p), q, ggml));
    EXPECT_EQ(ours, ggml);
    const QuantParams w4{Scheme::kW4A16, 32, p.symmetric};
    auto four = dequantize_or_die(w4, quantize_or_die(w4, w, rows, cols), rows, cols);
    double e5 = 0, e4 = 0;
    unsigned top = 0, bottom = 31;
    const int bytes = p.symmetric ? kQ5_0BlockBytes : kQ5_1BlockBytes;
    for (size_t i = 0; i < w.size(); ++i) {
      e5 += std::pow(static_cast<double>(ours[i]) - w[i], 2);
      e4 += std::pow(static_cast<double>(four[i]) - w[i], 2);
      const unsigned u = q5_block32_value(q.data() + i / 32 * bytes, !p.symmetric, static_cast<int>(i % 32));
      top = std::max(top, u);
      bottom = std::min(bottom, u);
    }
    EXPECT_EQ(top, 31u);
    EXPECT_EQ(bottom, p.symmetric ? 1u : 0u);
    EXPECT_LT(e5, 0.35 * e4) << e5 << " " << e4;
  }
}

// ---- refusals ----

TEST(QuantErrors, QuantizeRefusesBadInput) {
  std::vector<float> w(64, 0.5f);
  w[37] = std::nanf("");
  for (QuantParams p : {QuantParams{Scheme::kW8A16}, QuantParams{Scheme::kW4A8, 32, false}}) {
    std::vector<uint8_t> q(*quantized_size(p, 2, 32));
    Status st = round_to_nearest().quantize(p, w.data(), 2, 32, q);
    ASSERT_FALSE(st) << describe(p);
    EXPECT_NE(st.message().find("row 1"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("column 5"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("not finite"), std::string::npos) << st.message();
  }
  {
    std::vector<float> big = {1.0f, 70000.0f};
    std::vector<uint8_t> q(4);
    Status st = round_to_nearest().quantize({Scheme::kF16}, big.data(), 1, 2, q);
    ASSERT_FALSE(st);
    EXPECT_NE(st.message().find("FP16"), std::string::npos) << st.message();
    EXPECT_TRUE(round_to_nearest().quantize({Scheme::kBF16}, big.data(), 1, 2, q));
  }
  {
    std::vector<float> big(32, 1e6f);  // scale 1e6 / 7 does not fit FP16
    std::vector<uint8_t> q(18);
    EXPECT_FALSE(round_to_nearest().quantize({Scheme::kW4A16}, big.data(), 1, 32, q));
    std::vector<uint8_t> q8(36);
    EXPECT_TRUE(round_to_nearest().quantize({Scheme::kW8A16}, big.data(), 1, 32, q8));  // f32 scale
  }
  std::vector<float> ok(96, 0.1f);
  std::vector<uint8_t> q(1000);
  EXPECT_FALSE(round_to_nearest().quantize({Scheme::kW4A16, 64, true}, ok.data(), 1, 96, q));  // 96 % 64
  EXPECT_FALSE(round_to_nearest().quantize({Scheme::kW8A16}, ok.data(), 1, 96, q));  // wrong buffer size
  std::vector<float> out(96);
  EXPECT_FALSE(dequantize_matrix({Scheme::kW8A16}, std::span<const uint8_t>(q.data(), 99), 1, 96, out.data()));
  EXPECT_TRUE(dequantize_matrix({Scheme::kW8A16}, std::span<const uint8_t>(q.data(), 100), 1, 96, out.data()));
  EXPECT_FALSE(dequantize_matrix({Scheme::kW4A16, 32, true}, std::span<const uint8_t>(q.data(), 54), 1, 95, out.data()));
}

// A data-aware method plugs in through the same interface and shares everything downstream.
class ZeroQuantizer final : public WeightQuantizer {
 public:
  Status quantize(const QuantParams& p, const float*, int64_t rows, int64_t cols,
                  std::span<uint8_t> out) const override {
    KILN_RETURN_IF_ERROR(check_shape(p, rows, cols));
    std::memset(out.data(), 0, out.size());
    return Status::ok();
  }
  std::string_view name() const override { return "zero"; }
};

TEST(QuantErrors, QuantizerInterfaceIsPolymorphic) {
  ZeroQuantizer z;
  const WeightQuantizer* methods[] = {&round_to_nearest(), &z};
  std::vector<float> w(64, 1.0f);
  for (const WeightQuantizer* m : methods) {
    std::vector<uint8_t> q(*quantized_size({Scheme::kW8A16}, 1, 64));
    ASSERT_TRUE(m->quantize({Scheme::kW8A16}, w.data(), 1, 64, q)) << m->name();
    std::vector<float> d(64);
    ASSERT_TRUE(dequantize_matrix({Scheme::kW8A16}, q, 1, 64, d.data()));
    EXPECT_EQ(d[0], m->name() == "rtn" ? 1.0f : 0.0f);
  }
}

// ---- activation quantization ----

TEST(QuantActivations, QuantizeRow) {
  std::vector<float> x = {0.5f, -1.27f, 0.0f, 1.0f, 0.005f, 0.0049f};
  std::vector<int8_t> q(x.size());
  float s = 0;
  quantize_activation_row(x.data(), static_cast<int64_t>(x.size()), q.data(), &s);
  EXPECT_FLOAT_EQ(s, 0.01f);
  EXPECT_EQ(q[0], 50);
  EXPECT_EQ(q[1], -127);
  EXPECT_EQ(q[2], 0);
  EXPECT_EQ(q[3], 100);
  EXPECT_EQ(q[4], 1);  // 0.5 rounds away from zero
  EXPECT_EQ(q[5], 0);

  auto w = random_matrix(1, 1000, Dist::kUniform, 3);
  std::vector<int8_t> qq(1000);
  quantize_activation_row(w.data(), 1000, qq.data(), &s);
  for (int i = 0; i < 1000; ++i) ASSERT_LE(std::fabs(w[i] - qq[i] * s), s / 2 * (1 + 1e-5f)) << i;

  std::vector<float> zero(8, 0.0f);
  std::vector<int8_t> qz(8, 42);
  quantize_activation_row(zero.data(), 8, qz.data(), &s);
  EXPECT_EQ(s, 0.0f);
  for (int8_t v : qz) EXPECT_EQ(v, 0);

  zero[3] = std::nanf("");
  quantize_activation_row(zero.data(), 8, qz.data(), &s);
  EXPECT_TRUE(std::isnan(s));
  for (int8_t v : qz) EXPECT_EQ(v, 0);
}

// ---- reference matmul ----

// f64 product of W [rows][cols] and x [n][cols] -> [n][rows], plus sum |w x| per output.
void matmul_f64(const std::vector<float>& w, const std::vector<float>& x, int64_t rows, int64_t cols, int64_t n,
                std::vector<double>* y, std::vector<double>* mag) {
  y->assign(static_cast<size_t>(n * rows), 0.0);
  mag->assign(static_cast<size_t>(n * rows), 0.0);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0, m = 0;
      for (int64_t c = 0; c < cols; ++c) {
        s += static_cast<double>(w[r * cols + c]) * x[t * cols + c];
        m += std::fabs(static_cast<double>(w[r * cols + c]) * x[t * cols + c]);
      }
      (*y)[t * rows + r] = s;
      (*mag)[t * rows + r] = m;
    }
}

TEST(QuantRefMatmul, EverySchemeAgainstDequantizedProduct) {
  for (const QuantParams& p : all_params()) {
    const int g = scale_group(p) != 0 ? scale_group(p) : 32;
    double worst_rel = 0, worst_act_ratio = 0;
    std::vector<Shape> shapes = shapes_for(g);
    if (scale_group(p) == 0) shapes.push_back({3, 5});  // odd widths where no group constrains
    if (g == 256) shapes.resize(4);  // the k-quants' blocks are wide
    for (const Shape& sh : shapes) {
      for (int64_t n : {1, 4}) {
        auto w = random_matrix(sh.rows, sh.cols, Dist::kLlm, static_cast<uint32_t>(sh.cols * 7 + n));
        auto x = random_matrix(n, sh.cols, Dist::kUniform, static_cast<uint32_t>(sh.rows + 1000 * n));
        auto q = quantize_or_die(p, w, sh.rows, sh.cols);
        auto wd = dequantize_or_die(p, q, sh.rows, sh.cols);
        std::vector<float> y(static_cast<size_t>(n * sh.rows), std::nanf(""));
        Status st = ref_matmul(p, q, sh.rows, sh.cols, x.data(), n, y.data());
        ASSERT_TRUE(st) << describe(p) << ": " << st.message();

        // The activations the scheme actually multiplies: x itself, qx * sx, or W4A16's X * s,
        // and the rounding bound of each element (half its scale).
        std::vector<float> xa = x;
        std::vector<float> sx(static_cast<size_t>(n), 0.0f);
        std::vector<double> half_step(x.size(), 0.0);
        if (a16_activations(p.scheme)) {
          std::vector<int16_t> qx(static_cast<size_t>(sh.cols));
          std::vector<float> sb(static_cast<size_t>((sh.cols + 31) / 32));
          for (int64_t t = 0; t < n; ++t) {
            quantize_activation_a16(x.data() + t * sh.cols, sh.cols, qx.data(), sb.data());
            for (int64_t c = 0; c < sh.cols; ++c) {
              xa[t * sh.cols + c] = qx[c] * sb[c / 32];
              half_step[t * sh.cols + c] = sb[c / 32] / 2.0;
            }
          }
        }
        if (quantizes_activations(p.scheme)) {
          std::vector<int8_t> qx(static_cast<size_t>(sh.cols));
          for (int64_t t = 0; t < n; ++t) {
            quantize_activation_row(x.data() + t * sh.cols, sh.cols, qx.data(), &sx[t]);
            for (int64_t c = 0; c < sh.cols; ++c) xa[t * sh.cols + c] = qx[c] * sx[t];
          }
        }
        std::vector<double> exact, mag, exact_orig, mag_orig;
        matmul_f64(wd, xa, sh.rows, sh.cols, n, &exact, &mag);
        matmul_f64(wd, x, sh.rows, sh.cols, n, &exact_orig, &mag_orig);
        double ymax = 0;
        for (double v : exact) ymax = std::max(ymax, std::fabs(v));
        for (int64_t t = 0; t < n; ++t)
          for (int64_t r = 0; r < sh.rows; ++r) {
            const size_t i = static_cast<size_t>(t * sh.rows + r);
            const double sum_bound = (sh.cols + 2) * kU * mag[i] * 1.01 + 1e-30;
            const double err = std::fabs(y[i] - exact[i]);
            ASSERT_LE(err, sum_bound) << describe(p) << " [" << sh.rows << "x" << sh.cols << "] n=" << n
                                      << " t=" << t << " r=" << r;
            if (ymax > 0) worst_rel = std::max(worst_rel, err / ymax);
            if (quantizes_activations(p.scheme) || a16_activations(p.scheme)) {
              double act_bound = 0;  // sum |W| times each element's rounding bound
              for (int64_t c = 0; c < sh.cols; ++c)
                act_bound += std::fabs(wd[r * sh.cols + c]) *
                             (a16_activations(p.scheme) ? half_step[t * sh.cols + c] : sx[t] / 2.0);
              act_bound *= 1 + 1e-5;
              const double err_orig = std::fabs(y[i] - exact_orig[i]);
              ASSERT_LE(err_orig, act_bound + sum_bound * 2)
                  << describe(p) << " vs original activations, [" << sh.rows << "x" << sh.cols << "] t=" << t;
              worst_act_ratio = std::max(worst_act_ratio, err_orig / act_bound);
            }
          }
      }
    }
    std::printf("[ matmul   ] %-16s max |err| / max |y| = %.2e", describe(p).c_str(), worst_rel);
    if (quantizes_activations(p.scheme) || a16_activations(p.scheme))
      std::printf(", vs f32 x: max |err| / act bound = %.3f", worst_act_ratio);
    std::printf("\n");
    if (!quantizes_activations(p.scheme)) {
      EXPECT_LT(worst_rel, 1e-5) << describe(p);
    }
  }
}

// Integer activations with absmax 127 quantize exactly (sx = 1), so A8 products are exact.
TEST(QuantRefMatmul, A8ExactOnIntegerActivations) {
  const int64_t cols = 64, rows = 3, n = 2;
  std::vector<float> x(n * cols);
  for (int64_t i = 0; i < n * cols; ++i) x[i] = static_cast<float>((i * 37) % 255 - 127);
  x[5] = 127.0f;
  x[cols + 9] = -127.0f;
  for (QuantParams p : {QuantParams{Scheme::kW8A8}, QuantParams{Scheme::kW4A8, 32, true},
                        QuantParams{Scheme::kW4A8, 64, false}}) {
    std::vector<float> w(rows * cols);
    for (int64_t i = 0; i < rows * cols; ++i) {
      if (p.scheme == Scheme::kW8A8) w[i] = static_cast<float>(i % 255 - 127) * 0.5f;  // scale 0.5
      else if (p.symmetric) w[i] = static_cast<float>(i % 15 - 7) * 0.25f;               // scale 0.25
      else w[i] = -1.5f + static_cast<float>(i % 16) * 0.125f;                          // min, scale exact
    }
    if (p.scheme == Scheme::kW8A8)
      for (int64_t r = 0; r < rows; ++r) w[r * cols] = 63.5f;  // absmax 63.5 in every row
    auto q = quantize_or_die(p, w, rows, cols);
    ASSERT_EQ(dequantize_or_die(p, q, rows, cols), w) << describe(p);
    std::vector<float> y(n * rows);
    ASSERT_TRUE(ref_matmul(p, q, rows, cols, x.data(), n, y.data()));
    for (int64_t t = 0; t < n; ++t)
      for (int64_t r = 0; r < rows; ++r) {
        double s = 0;
        for (int64_t c = 0; c < cols; ++c) s += static_cast<double>(w[r * cols + c]) * x[t * cols + c];
        EXPECT_EQ(y[t * rows + r], static_cast<float>(s)) << describe(p) << " t=" << t << " r=" << r;
      }
  }
}

TEST(QuantRefMatmul, ZeroTokensAndErrors) {
  std::vector<float> w(64, 0.25f), x(64, 1.0f), y(2, -1.0f);
  auto q = quantize_or_die({Scheme::kW8A8}, w, 2, 32);
  EXPECT_TRUE(ref_matmul({Scheme::kW8A8}, q, 2, 32, x.data(), 0, y.data()));
  EXPECT_EQ(y[0], -1.0f);  // nothing written
  ASSERT_TRUE(ref_matmul({Scheme::kW8A8}, q, 2, 32, x.data(), 1, y.data()));
  EXPECT_FLOAT_EQ(y[0], 8.0f);
  Status st = ref_matmul({Scheme::kW8A8}, std::span<const uint8_t>(q.data(), q.size() - 1), 2, 32, x.data(), 1,
                         y.data());
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("bytes"), std::string::npos) << st.message();
  EXPECT_FALSE(ref_matmul({Scheme::kW4A16, 64, true}, q, 1, 48, x.data(), 1, y.data()));
  EXPECT_FALSE(ref_matmul({Scheme::kW8A8}, q, 2, 32, x.data(), -1, y.data()));
  // NaN activations propagate as NaN through the A8 path too.
  x[3] = std::nanf("");
  ASSERT_TRUE(ref_matmul({Scheme::kW8A8}, q, 2, 32, x.data(), 1, y.data()));
  EXPECT_TRUE(std::isnan(y[0]));
}

}  // namespace
}  // namespace kiln
