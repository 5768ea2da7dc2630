// Data-aware rounding with an importance per input column (llama.cpp's "importance matrix": the
// mean square of each input channel's activation over calibration text, from `kiln compile
// --calib` or a `llama-imatrix` file). Each scale group chooses how far to clip its range so that
// the importance-weighted squared error sum_j (imp_j + mean imp) (w_j - deq_j)^2 is least (the
// error a layer's output gets, E[(dW x)^2], when the channels are uncorrelated; the mean added so
// that no column counts for nothing), and is then written by
// round-to-nearest in the same layout: everything downstream is shared. Schemes with their own
// block search (GGML's super-blocks) and the float ones are plain round-to-nearest.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "quant/weight_quantizer.h"

namespace kiln {

// The data-aware rounding methods, after round-to-nearest ("rtn"): the importance-weighted
// clipping below ("imatrix") and GPTQ ("gptq", quant/gptq_quantizer.h).
enum class QuantMethod { kRtn, kImatrix, kGptq };

// The statistics a compile rounds with, per weight (its graph name): one importance per input column.
struct ImportanceStats {
  std::map<std::string, std::vector<float>> per_weight;
  std::string source;  // what they came from, for the quantization record: "calib FILE", "imatrix FILE"
  std::string hash;    // of the calibration tokens (or the imatrix file's bytes), 16 hex digits
  int64_t tokens = 0;  // calibration tokens behind them
  // The calibration inputs themselves, per weight ([tokens][its input width] f32, shared by the
  // weights that read one input), where a method needs more than their mean squares (GPTQ's
  // second moments): only --calib has them, an imatrix file does not.
  std::map<std::string, std::shared_ptr<const std::vector<float>>> inputs;
};

// How much of a group's range a search may keep: 1 (round-to-nearest's choice) first, so that a tie keeps it.
inline constexpr float kClipFractions[] = {1.0f, 0.97f, 0.94f, 0.91f, 0.88f, 0.85f, 0.82f, 0.78f, 0.74f, 0.70f, 0.65f, 0.60f};

// `g` values clipped to `c` of their range: to [-c max|w|, c max|w|], or for an asymmetric
// group each end moved towards zero by c. Round-to-nearest then takes the clipped range for its
// scale: the values inside it round as with a smaller scale, those outside to the end.
void clip_group(const float* w, int g, bool symmetric, float c, float* out);

class ImportanceQuantizer final : public WeightQuantizer {
 public:
  // One importance per column of the matrices it quantizes (non-negative, finite).
  explicit ImportanceQuantizer(std::span<const float> importance);
  Status quantize(const QuantParams& p, const float* w, int64_t rows, int64_t cols, std::span<uint8_t> out) const override;
  std::string_view name() const override { return "imatrix"; }

  // Whether quantize does more than round-to-nearest for `p`.
  static bool searches(const QuantParams& p);

 private:
  std::vector<float> importance_;
};

}  // namespace kiln
