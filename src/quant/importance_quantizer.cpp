#include "quant/importance_quantizer.h"

#include <algorithm>
#include <cmath>

namespace kiln {

void clip_group(const float* w, int g, bool symmetric, float c, float* out) {
  float lo = w[0], hi = w[0], absmax = 0;
  for (int j = 0; j < g; ++j) {
    lo = std::min(lo, w[j]);
    hi = std::max(hi, w[j]);
    absmax = std::max(absmax, std::fabs(w[j]));
  }
  if (symmetric) {
    lo = -absmax;
    hi = absmax;
  }
  lo = lo < 0 ? lo * c : lo;
  hi = hi > 0 ? hi * c : hi;
  for (int j = 0; j < g; ++j) out[j] = std::clamp(w[j], lo, hi);
}

ImportanceQuantizer::ImportanceQuantizer(std::span<const float> importance) : importance_(importance.begin(), importance.end()) {
  // Each column's weight is its importance plus the mean one: the few channels whose activations
  // are hundreds of times the others' (the "massive activations" of trained LLMs) then lead the
  // choice without the error of every other column counting for nothing, which the uncorrelated-
  // channels model the importance rests on does not warrant.
  double mean = 0;
  for (float v : importance_) mean += v;
  mean /= importance_.empty() ? 1.0 : static_cast<double>(importance_.size());
  for (float& v : importance_) v += static_cast<float>(mean);
}

bool ImportanceQuantizer::searches(const QuantParams& p) {
  if (is_float_scheme(p.scheme) || is_ggml_superblock(p)) return false;
  return is_4bit(p.scheme) || p.scheme == Scheme::kW8A16 || p.scheme == Scheme::kW8A8;
}

Status ImportanceQuantizer::quantize(const QuantParams& p, const float* w, int64_t rows, int64_t cols,
                                     std::span<uint8_t> out) const {
  if (static_cast<int64_t>(importance_.size()) != cols)
    return invalid_argument("the importance has " + std::to_string(importance_.size()) + " values for a matrix of " +
                            std::to_string(cols) + " columns");
  if (!searches(p)) return round_to_nearest().quantize(p, w, rows, cols, out);
  const int64_t group = scale_group(p) > 0 ? scale_group(p) : cols;  // 0: one scale per row
  const bool symmetric = !is_4bit(p.scheme) || p.symmetric;
  // One group alone is a 1 x group matrix of the same parameters (a per-row scale: the whole row).
  auto one = quantized_size(p, 1, group);
  if (!one || cols % group != 0) return round_to_nearest().quantize(p, w, rows, cols, out);  // RTN names the problem
  std::vector<float> clipped(static_cast<size_t>(rows * cols)), candidate(static_cast<size_t>(group)),
      back(static_cast<size_t>(group));
  std::vector<uint8_t> q(static_cast<size_t>(*one));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c0 = 0; c0 < cols; c0 += group) {
      const float* src = w + r * cols + c0;
      const float* imp = importance_.data() + c0;
      float* best_out = clipped.data() + r * cols + c0;
      double best = INFINITY;
      for (float c : kClipFractions) {
        clip_group(src, static_cast<int>(group), symmetric, c, candidate.data());
        // Round-to-nearest names a weight it cannot store (not finite, too large): the caller's
        // plain round-to-nearest of the whole matrix reports it.
        if (!round_to_nearest().quantize(p, candidate.data(), 1, group, q) || !dequantize_row(p, q, group, back.data()))
          return round_to_nearest().quantize(p, w, rows, cols, out);
        double e = 0;
        for (int64_t j = 0; j < group; ++j) {
          const double d = static_cast<double>(src[j]) - back[static_cast<size_t>(j)];
          e += static_cast<double>(imp[j]) * d * d;
        }
        if (e < best) {
          best = e;
          std::copy(candidate.begin(), candidate.end(), best_out);
        }
      }
    }
  }
  return round_to_nearest().quantize(p, clipped.data(), rows, cols, out);
}

}  // namespace kiln
