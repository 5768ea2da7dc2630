#include "quant/weight_quantizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "layout/ggml_blocks.h"

namespace kiln {

namespace {

constexpr float kF16Max = 65504.0f;

void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
void store_f32(uint8_t* p, float v) { std::memcpy(p, &v, 4); }

// The FP16 value next to h in the direction of -infinity (h finite, not the most negative).
uint16_t f16_next_down(uint16_t h) {
  if (h == 0x0000u) return 0x8001u;         // +0 -> the smallest negative subnormal
  if ((h & 0x8000u) != 0) return h + 1;     // negative: grow the magnitude
  return h - 1;                             // positive: shrink the magnitude
}
uint16_t f16_next_up(uint16_t h) {
  if (h == 0x8000u) return 0x0001u;         // -0 -> the smallest positive subnormal
  if ((h & 0x8000u) != 0) return h - 1;     // negative: shrink the magnitude
  return h + 1;                             // positive: grow the magnitude
}

std::string where_row(int64_t r) { return "row " + std::to_string(r); }

// ---- per-row quantizers (round to nearest) ----

Status quantize_row_float(Scheme s, const float* w, int64_t cols, uint8_t* out, int64_t r) {
  for (int64_t c = 0; c < cols; ++c) {
    const float v = w[c];
    switch (s) {
      case Scheme::kF32:
        store_f32(out + 4 * c, v);
        break;
      case Scheme::kF16:
        if (std::isfinite(v) && std::fabs(v) > kF16Max)
          return invalid_argument(where_row(r) + ", column " + std::to_string(c) + ": " + std::to_string(v) +
                                  " does not fit in FP16 (largest 65504); use bf16 or f32 for this tensor");
        store_u16(out + 2 * c, f32_to_f16(v));
        break;
      case Scheme::kBF16:
        store_u16(out + 2 * c, f32_to_bf16(v));
        break;
      default:
        return {StatusCode::kInternal, "quantize_row_float: not a float scheme"};
    }
  }
  return Status::ok();
}

Status check_finite(const float* w, int64_t n, int64_t r, int64_t c0) {
  for (int64_t c = 0; c < n; ++c)
    if (!std::isfinite(w[c]))
      return invalid_argument(where_row(r) + ", column " + std::to_string(c0 + c) +
                              ": weight is not finite; it cannot be quantized to integers");
  return Status::ok();
}

// The grid of one group of n weights (or a W8 row): symmetric, codes in [-(levels / 2), levels / 2]
// times a scale of absmax / (levels / 2), rounded up to FP16 where `f16_scale`; asymmetric,
// codes in [0, levels] from a minimum rounded down to FP16 and a scale of the range / levels
// rounded up to FP16 (layout/weight_layout.h).
Result<RoundingGrid> choose_grid(const float* w, int64_t n, bool symmetric, int levels, bool f16_scale, int64_t r,
                                 int64_t c0, const char* unit) {
  KILN_RETURN_IF_ERROR(check_finite(w, n, r, c0));
  const auto where = [&] { return where_row(r) + ", " + unit + " at column " + std::to_string(c0); };
  RoundingGrid g;
  if (symmetric) {
    const float half = static_cast<float>(levels / 2);
    float absmax = 0.0f;
    for (int64_t j = 0; j < n; ++j) absmax = std::max(absmax, std::fabs(w[j]));
    if (!f16_scale) {
      g.scale = absmax / half;
    } else {
      if (absmax / half > kF16Max) return invalid_argument(where() + ": weights too large for an FP16 scale");
      g.scale = f16_to_f32(f16_round_up(absmax / half));
    }
    g.lo = -(levels / 2);
    g.hi = levels / 2;
    return g;
  }
  float lo = w[0], hi = w[0];
  for (int64_t j = 1; j < n; ++j) {
    lo = std::min(lo, w[j]);
    hi = std::max(hi, w[j]);
  }
  if (lo < -kF16Max || hi > kF16Max) return invalid_argument(where() + ": weights outside the FP16 range");
  g.min = f16_to_f32(f16_round_down(lo));
  const float range = (hi - g.min) / static_cast<float>(levels);
  if (range > kF16Max) return invalid_argument(where() + ": weight range too large for an FP16 scale");
  g.scale = f16_to_f32(f16_round_up(range));
  g.hi = levels;
  return g;
}

Status quantize_row_w8(const float* w, int64_t cols, uint8_t* out, int64_t r) {
  KILN_ASSIGN_OR_RETURN(const RoundingGrid g, choose_grid(w, cols, true, 254, false, r, 0, "row"));
  store_f32(out, g.scale);
  auto* q = reinterpret_cast<int8_t*>(out + 4);
  for (int64_t c = 0; c < cols; ++c) q[c] = static_cast<int8_t>(g.code(w[c]));
  return Status::ok();
}

Status quantize_group_w8(const float* w, int g, uint8_t* out, int64_t r, int64_t c0) {
  KILN_ASSIGN_OR_RETURN(const RoundingGrid grid, choose_grid(w, g, true, 254, true, r, c0, "group"));
  store_u16(out, f32_to_f16(grid.scale));
  auto* q = reinterpret_cast<int8_t*>(out + 2);
  for (int j = 0; j < g; ++j) q[j] = static_cast<int8_t>(grid.code(w[j]));
  return Status::ok();
}

// Round to nearest over `levels` steps (15: W4, 31: Q5_0 / Q5_1) of one group of g weights, as
// layout/weight_layout.h says: the FP16 scale at out (and the minimum at out + 2, asymmetric),
// each element's code u given to put(j, u) (symmetric: u = q + levels / 2 + 1, q in
// [-(levels / 2), levels / 2]; asymmetric: u in [0, levels]).
template <class Put>
Status round_group(const float* w, int g, bool symmetric, int levels, uint8_t* out, int64_t r, int64_t c0, Put&& put) {
  KILN_ASSIGN_OR_RETURN(const RoundingGrid grid, choose_grid(w, g, symmetric, levels, true, r, c0, "group"));
  store_u16(out, f32_to_f16(grid.scale));
  if (!symmetric) store_u16(out + 2, f32_to_f16(grid.min));
  for (int j = 0; j < g; ++j) put(j, static_cast<int>(grid.code(w[j])) + (symmetric ? levels / 2 + 1 : 0));
  return Status::ok();
}

Status quantize_group_w4(const float* w, int g, bool symmetric, uint8_t* out, int64_t r, int64_t c0) {
  const int half = g / 2;
  uint8_t* nibbles = out + (symmetric ? 2 : 4);
  std::memset(nibbles, 0, static_cast<size_t>(half));
  return round_group(w, g, symmetric, 15, out, r, c0, [&](int j, int u) {
    if (j < half)
      nibbles[j] = static_cast<uint8_t>(nibbles[j] | u);
    else
      nibbles[j - half] = static_cast<uint8_t>(nibbles[j - half] | (u << 4));
  });
}

// Q5_0 / Q5_1 (w5a16 g32): W4's round to nearest over 31 levels.
Status quantize_block_q5_32(const float* w, bool symmetric, uint8_t* out, int64_t r, int64_t c0) {
  std::memset(out, 0, static_cast<size_t>(symmetric ? kQ5_0BlockBytes : kQ5_1BlockBytes));
  return round_group(w, 32, symmetric, 31, out, r, c0,
                     [&](int j, int u) { q5_block32_set_value(out, !symmetric, j, static_cast<unsigned>(u)); });
}

// One Q4_K block (w4a16 g256 asym; `five` false) or Q5_K block (w5a16; true) from 256 weights,
// as layout/weight_layout.h says: the same scales and mins over 15 or 31 levels.
Status quantize_block_q45_k(const float* w, bool five, uint8_t* out, int64_t r, int64_t c0) {
  KILN_RETURN_IF_ERROR(check_finite(w, 256, r, c0));
  const float levels = five ? 31.0f : 15.0f;
  std::memset(out, 0, five ? kQ5KBlockBytes : kQ4KBlockBytes);
  float range[8], neg_min[8], top[8], max_range = 0.0f, max_neg = 0.0f;
  for (int j = 0; j < 8; ++j) {
    float lo = 0.0f, hi = w[32 * j];
    for (int i = 0; i < 32; ++i) {
      lo = std::min(lo, w[32 * j + i]);
      hi = std::max(hi, w[32 * j + i]);
    }
    range[j] = (hi - lo) / levels;
    neg_min[j] = -lo;
    top[j] = hi;
    max_range = std::max(max_range, range[j]);
    max_neg = std::max(max_neg, neg_min[j]);
  }
  if (max_range / 63.0f > kF16Max || max_neg / 63.0f > kF16Max)
    return invalid_argument(where_row(r) + ", block at column " + std::to_string(c0) + ": weights too large for FP16 scales");
  const uint16_t hd = f16_round_up(max_range / 63.0f), hm = f16_round_up(max_neg / 63.0f);
  store_u16(out, hd);
  store_u16(out + 2, hm);
  const float d = f16_to_f32(hd), dmin = f16_to_f32(hm);
  for (int j = 0; j < 8; ++j) {
    const float m = dmin == 0.0f ? 0.0f : std::min(63.0f, std::ceil(neg_min[j] / dmin));
    const float sc = d == 0.0f ? 0.0f : std::clamp(std::ceil((top[j] + dmin * m) / (levels * d)), 0.0f, 63.0f);
    q4_k_set_scale_min(out, j, static_cast<unsigned>(sc), static_cast<unsigned>(m));
    const float step = d * sc, off = dmin * m;
    for (int i = 0; i < 32; ++i) {
      const float u = step == 0.0f ? 0.0f : std::clamp(std::round((w[32 * j + i] + off) / step), 0.0f, levels);
      (five ? q5_k_set_value : q4_k_set_nibble)(out, 32 * j + i, static_cast<unsigned>(u));
    }
  }
  return Status::ok();
}
Status quantize_block_q4_k(const float* w, uint8_t* out, int64_t r, int64_t c0) { return quantize_block_q45_k(w, false, out, r, c0); }
Status quantize_block_q5_k(const float* w, uint8_t* out, int64_t r, int64_t c0) { return quantize_block_q45_k(w, true, out, r, c0); }

// One Q6_K block (w6a16) from 256 weights, as layout/weight_layout.h says.
Status quantize_block_q6_k(const float* w, uint8_t* out, int64_t r, int64_t c0) {
  KILN_RETURN_IF_ERROR(check_finite(w, 256, r, c0));
  std::memset(out, 0, kQ6KBlockBytes);
  float s[16], most = 0.0f;
  for (int i = 0; i < 16; ++i) {
    float absmax = 0.0f;
    for (int k = 0; k < 16; ++k) absmax = std::max(absmax, std::fabs(w[16 * i + k]));
    s[i] = absmax / 31.0f;
    most = std::max(most, s[i]);
  }
  if (most / 127.0f > kF16Max)
    return invalid_argument(where_row(r) + ", block at column " + std::to_string(c0) + ": weights too large for an FP16 scale");
  const uint16_t hd = f16_round_up(most / 127.0f);
  store_u16(out + 208, hd);
  const float d = f16_to_f32(hd);
  for (int i = 0; i < 16; ++i) {
    const float sc = d == 0.0f ? 0.0f : std::min(127.0f, std::ceil(s[i] / d));
    out[192 + i] = static_cast<uint8_t>(static_cast<int8_t>(sc));
    const float step = d * sc;
    for (int k = 0; k < 16; ++k) {
      const float q = step == 0.0f ? 0.0f : std::clamp(std::round(w[16 * i + k] / step), -31.0f, 31.0f);
      q6_k_set_value(out, 16 * i + k, static_cast<unsigned>(static_cast<int>(q) + 32));
    }
  }
  return Status::ok();
}

// One IQ4_XS block (w4a16 g256 sym) from 256 weights, as layout/weight_layout.h says.
Status quantize_block_iq4_xs(const float* w, uint8_t* out, int64_t r, int64_t c0) {
  KILN_RETURN_IF_ERROR(check_finite(w, 256, r, c0));
  std::memset(out, 0, kIq4XsBlockBytes);
  float s[8], most = 0.0f;
  for (int j = 0; j < 8; ++j) {  // the element of largest magnitude lands on the level -127
    float far = 0.0f;
    for (int i = 0; i < 32; ++i)
      if (std::fabs(w[32 * j + i]) > std::fabs(far)) far = w[32 * j + i];
    s[j] = far / -127.0f;
    most = std::max(most, std::fabs(s[j]));
  }
  if (most / 31.0f > kF16Max)
    return invalid_argument(where_row(r) + ", block at column " + std::to_string(c0) + ": weights too large for an FP16 scale");
  const uint16_t hd = f16_round_up(most / 31.0f);
  store_u16(out, hd);
  const float d = f16_to_f32(hd);
  for (int j = 0; j < 8; ++j) {
    const int ls = d == 0.0f ? 0 : static_cast<int>(std::clamp(std::round(s[j] / d), -31.0f, 31.0f));
    iq4_xs_set_scale(out, j, ls);
    const float step = d * static_cast<float>(ls);
    for (int i = 0; i < 32; ++i) {
      unsigned best = 8;  // level 1: the nearest to 0 when the step is 0
      float err = std::numeric_limits<float>::infinity();
      for (unsigned u = 0; u < 16 && step != 0.0f; ++u) {
        const float e = std::fabs(step * static_cast<float>(kIq4Levels[u]) - w[32 * j + i]);
        if (e < err) err = e, best = u;
      }
      iq4_xs_set_nibble(out, 32 * j + i, best);
    }
  }
  return Status::ok();
}

class RoundToNearest final : public WeightQuantizer {
 public:
  Status quantize(const QuantParams& p, const float* w, int64_t rows, int64_t cols,
                  std::span<uint8_t> out) const override {
    KILN_RETURN_IF_ERROR(check_shape(p, rows, cols));
    const uint64_t row_bytes = *quantized_row_size(p, cols);
    const uint64_t want = *quantized_size(p, rows, cols);
    if (out.size() != want)
      return invalid_argument("quantize " + describe(p) + ": output buffer is " + std::to_string(out.size()) +
                              " bytes, the matrix needs " + std::to_string(want));
    if (rows > 0 && cols > 0 && w == nullptr) return invalid_argument("quantize: no weights given");
    for (int64_t r = 0; r < rows; ++r) {
      const float* wr = w + r * cols;
      uint8_t* o = out.data() + static_cast<uint64_t>(r) * row_bytes;
      if (is_float_scheme(p.scheme)) {
        KILN_RETURN_IF_ERROR(quantize_row_float(p.scheme, wr, cols, o, r));
      } else if (is_q5_block32(p)) {
        const uint64_t bytes = *quantized_row_size(p, 32);
        for (int64_t c = 0; c < cols; c += 32) KILN_RETURN_IF_ERROR(quantize_block_q5_32(wr + c, p.symmetric, o + (c / 32) * bytes, r, c));
      } else if (is_ggml_superblock(p)) {
        const auto block = p.scheme == Scheme::kW6A16   ? quantize_block_q6_k
                           : p.scheme == Scheme::kW5A16 ? quantize_block_q5_k
                           : p.symmetric                ? quantize_block_iq4_xs
                                                        : quantize_block_q4_k;
        const uint64_t bytes = *quantized_row_size(p, 256);
        for (int64_t c = 0; c < cols; c += 256) KILN_RETURN_IF_ERROR(block(wr + c, o + (c / 256) * bytes, r, c));
      } else if (p.w8_group != 0) {
        const int g = p.w8_group;
        for (int64_t c = 0; c < cols; c += g)
          KILN_RETURN_IF_ERROR(quantize_group_w8(wr + c, g, o + static_cast<uint64_t>(c / g) * (2 + g), r, c));
      } else if (!is_4bit(p.scheme)) {
        KILN_RETURN_IF_ERROR(quantize_row_w8(wr, cols, o, r));
      } else {
        const int g = p.group_size;
        const uint64_t group_bytes = static_cast<uint64_t>((p.symmetric ? 2 : 4) + g / 2);
        for (int64_t c = 0; c < cols; c += g)
          KILN_RETURN_IF_ERROR(quantize_group_w4(wr + c, g, p.symmetric, o + static_cast<uint64_t>(c / g) * group_bytes,
                                                 r, c));
      }
    }
    return Status::ok();
  }
  std::string_view name() const override { return "rtn"; }
};

}  // namespace

WeightQuantizer::~WeightQuantizer() = default;

const WeightQuantizer& round_to_nearest() {
  static const RoundToNearest kRtn;
  return kRtn;
}

float RoundingGrid::code(float v) const {
  return scale == 0.0f ? 0.0f
                       : std::clamp(std::round((v - min) / scale), static_cast<float>(lo), static_cast<float>(hi));
}

bool has_rounding_grid(const QuantParams& p) {
  if (is_float_scheme(p.scheme) || is_ggml_superblock(p)) return false;
  return is_4bit(p.scheme) || is_q5_block32(p) || p.scheme == Scheme::kW8A16 || p.scheme == Scheme::kW8A8;
}

Result<RoundingGrid> rounding_grid(const QuantParams& p, const float* w, int64_t n) {
  if (!has_rounding_grid(p)) return invalid_argument("rounding_grid: " + describe(p) + " has no single grid per group");
  if (is_q5_block32(p)) return choose_grid(w, n, p.symmetric, 31, true, 0, 0, "group");
  if (is_4bit(p.scheme)) return choose_grid(w, n, p.symmetric, 15, true, 0, 0, "group");
  return choose_grid(w, n, true, 254, p.w8_group != 0, 0, 0, p.w8_group != 0 ? "group" : "row");
}

uint16_t f16_round_up(float v) {
  uint16_t h = f32_to_f16(v);
  if (f16_to_f32(h) < v) h = f16_next_up(h);
  return h;
}

uint16_t f16_round_down(float v) {
  uint16_t h = f32_to_f16(v);
  if (f16_to_f32(h) > v) h = f16_next_down(h);
  return h;
}

}  // namespace kiln
