#include "backends/ref/ref_matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.h"

namespace kiln {

namespace {

float load_f16(const uint8_t* p) { return f16_to_f32(load_unaligned<uint16_t>(p)); }

// A16 and float schemes: dequantize one weight row at a time, multiply in f32.
void matmul_dequantized(const QuantParams& p, std::span<const uint8_t> w, int64_t rows, int64_t cols,
                        const float* x, int64_t n, float* y, float* row_scratch) {
  const uint64_t row_bytes = *quantized_row_size(p, cols);
  float* wr = row_scratch;
  for (int64_t r = 0; r < rows; ++r) {
    (void)dequantize_row(p, w.subspan(static_cast<uint64_t>(r) * row_bytes, row_bytes), cols, wr);
    for (int64_t t = 0; t < n; ++t) {
      const float* xt = x + t * cols;
      float s = 0.0f;
      for (int64_t c = 0; c < cols; ++c) s += wr[c] * xt[c];
      y[t * rows + r] = s;
    }
  }
}

// W8A8: y = (sum qw * qx) * sw * sx.
float dot_w8a8(const uint8_t* row, const int8_t* qx, float sx, int64_t cols) {
  const float sw = load_unaligned<float>(row);
  const auto* qw = reinterpret_cast<const int8_t*>(row + 4);
  int64_t acc = 0;
  for (int64_t c = 0; c < cols; ++c) acc += static_cast<int32_t>(qw[c]) * static_cast<int32_t>(qx[c]);
  return static_cast<float>(acc) * sw * sx;
}

// W4A8: per group an integer dot product times the group's scale (plus the min term when
// asymmetric), summed over the groups, times sx.
float dot_w4a8(const uint8_t* row, const int8_t* qx, float sx, int64_t cols, int g, bool symmetric) {
  const int half = g / 2;
  const uint8_t* b = row;
  float acc = 0.0f;
  for (int64_t c0 = 0; c0 < cols; c0 += g) {
    const float d = load_f16(b);
    const float m = symmetric ? 0.0f : load_f16(b + 2);
    const uint8_t* nib = b + (symmetric ? 2 : 4);
    const int8_t* xg = qx + c0;
    const int offset = symmetric ? 8 : 0;  // symmetric nibbles hold q + 8
    int64_t dot = 0;   // sum over the group of q * qx
    int64_t xsum = 0;  // sum over the group of qx (for the min term)
    for (int j = 0; j < half; ++j) {
      const int lo = (nib[j] & 0x0f) - offset, hi = (nib[j] >> 4) - offset;
      dot += lo * xg[j] + hi * xg[j + half];
      xsum += xg[j] + xg[j + half];
    }
    acc += d * static_cast<float>(dot);
    if (!symmetric) acc += m * static_cast<float>(xsum);
    b = nib + half;
  }
  return acc * sx;
}

}  // namespace

void quantize_activation_row(const float* x, int64_t n, int8_t* q, float* scale) {
  float absmax = 0.0f;
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) finite = false;
    else absmax = std::max(absmax, std::fabs(x[i]));
  }
  if (!finite || absmax == 0.0f) {
    std::memset(q, 0, static_cast<size_t>(n));
    *scale = finite ? 0.0f : std::nanf("");
    return;
  }
  *scale = absmax / 127.0f;
  const float inv = 127.0f / absmax;
  for (int64_t i = 0; i < n; ++i) q[i] = static_cast<int8_t>(std::clamp(std::round(x[i] * inv), -127.0f, 127.0f));
}

void quantize_activation_a16(const float* x, int64_t n, int16_t* X, float* scales) {
  for (int64_t b0 = 0; b0 < n; b0 += 32) {
    const int64_t len = std::min<int64_t>(32, n - b0);
    float absmax = 0.0f;
    bool finite = true;
    for (int64_t i = 0; i < len; ++i) {
      if (!std::isfinite(x[b0 + i])) finite = false;
      else absmax = std::max(absmax, std::fabs(x[b0 + i]));
    }
    if (!finite || absmax == 0.0f) {
      std::fill(X + b0, X + b0 + len, int16_t{0});
      scales[b0 / 32] = finite ? 0.0f : std::nanf("");
      continue;
    }
    scales[b0 / 32] = absmax / 127.0f / 256.0f;
    const float inv = 127.0f / absmax;
    for (int64_t i = 0; i < len; ++i) {
      const float r = x[b0 + i] * inv;
      X[b0 + i] = static_cast<int16_t>(std::clamp(std::nearbyint(r * 256.0f), -32512.0f, 32512.0f));
    }
  }
}

size_t ref_matmul_scratch_bytes(const QuantParams& p, int64_t cols, int64_t n) {
  // W4A16, W6A16: a weight row, the rounded activations X * s of every token, and one token's block
  // scales and 16-bit values.
  if (a16_activations(p.scheme))
    return static_cast<size_t>(cols) * sizeof(float) * static_cast<size_t>(n + 1) +
           static_cast<size_t>((cols + 31) / 32) * sizeof(float) + static_cast<size_t>(cols) * sizeof(int16_t);
  if (!quantizes_activations(p.scheme)) return static_cast<size_t>(cols) * sizeof(float);
  // int8 activations, then their scales, 4-byte aligned.
  return (static_cast<size_t>(n * cols) + 3) / 4 * 4 + static_cast<size_t>(n) * sizeof(float);
}

Status ref_matmul(const QuantParams& p, std::span<const uint8_t> w, int64_t rows, int64_t cols, const float* x,
                  int64_t n, float* y) {
  if (cols < 0 || n < 0) return ref_matmul(p, w, rows, cols, x, n, y, {});
  std::vector<uint8_t> scratch(ref_matmul_scratch_bytes(p, cols, n) + alignof(float));
  return ref_matmul(p, w, rows, cols, x, n, y, scratch);
}

Status ref_matmul(const QuantParams& p, std::span<const uint8_t> w, int64_t rows, int64_t cols, const float* x,
                  int64_t n, float* y, std::span<uint8_t> scratch_in) {
  KILN_RETURN_IF_ERROR(check_shape(p, rows, cols).with_context("ref_matmul"));
  if (n < 0) return invalid_argument("ref_matmul: negative token count " + std::to_string(n));
  const uint64_t want = *quantized_size(p, rows, cols);
  if (w.size() != want)
    return invalid_argument("ref_matmul " + describe(p) + ": weights [" + std::to_string(rows) + ", " +
                            std::to_string(cols) + "] need " + std::to_string(want) + " bytes, got " +
                            std::to_string(w.size()));
  if ((n > 0 && cols > 0 && x == nullptr) || (n > 0 && rows > 0 && y == nullptr))
    return invalid_argument("ref_matmul: no activations or no output given");
  // The scratch, aligned for floats.
  const size_t skip = (alignof(float) - reinterpret_cast<uintptr_t>(scratch_in.data()) % alignof(float)) % alignof(float);
  if (scratch_in.size() < skip + ref_matmul_scratch_bytes(p, cols, n))
    return invalid_argument("ref_matmul: scratch too small");
  uint8_t* scratch = scratch_in.data() + skip;
  if (a16_activations(p.scheme)) {
    auto* row = reinterpret_cast<float*>(scratch);
    float* xr = row + cols;  // [n][cols]: X * s
    auto* scales = xr + n * cols;
    auto* xq = reinterpret_cast<int16_t*>(scales + (cols + 31) / 32);
    for (int64_t t = 0; t < n; ++t) {
      quantize_activation_a16(x + t * cols, cols, xq, scales);
      for (int64_t c = 0; c < cols; ++c) xr[t * cols + c] = static_cast<float>(xq[c]) * scales[c / 32];
    }
    matmul_dequantized(p, w, rows, cols, xr, n, y, row);
    return Status::ok();
  }
  if (!quantizes_activations(p.scheme)) {
    matmul_dequantized(p, w, rows, cols, x, n, y, reinterpret_cast<float*>(scratch));
    return Status::ok();
  }

  // A8: quantize every activation row (token) once.
  auto* qx = reinterpret_cast<int8_t*>(scratch);
  auto* sx = reinterpret_cast<float*>(scratch + (static_cast<size_t>(n * cols) + 3) / 4 * 4);
  for (int64_t t = 0; t < n; ++t) quantize_activation_row(x + t * cols, cols, qx + t * cols, &sx[t]);

  const uint64_t row_bytes = *quantized_row_size(p, cols);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = w.data() + static_cast<uint64_t>(r) * row_bytes;
    for (int64_t t = 0; t < n; ++t) {
      const int8_t* qt = qx + t * cols;
      const float s = sx[t];
      y[t * rows + r] = p.scheme == Scheme::kW8A8 ? dot_w8a8(row, qt, s, cols)
                                                  : dot_w4a8(row, qt, s, cols, p.group_size, p.symmetric);
    }
  }
  return Status::ok();
}

}  // namespace kiln
