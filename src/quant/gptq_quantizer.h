// GPTQ (Frantar et al., 2022): rounds a weight matrix column by column, each column's rounding
// error spread over the columns not yet rounded in proportion to the calibration inputs'
// second moments H = E[x x^T], so that the layer's output error E|(W - Q) x|^2 is least rather
// than each weight's own. Columns go in blocks of 128 (the error of a block reaches the rest in
// one product: the "lazy batch" update), with H's off-diagonal halved and H damped by 10 % of its
// mean diagonal (for the few calibration tokens kiln takes; the .cpp says what was measured) and
// inverted through Cholesky factors in float (gptq_linalg.h). Each scale group's grid is chosen when the
// sweep reaches it, from the weights as updated so far, clipped to the range of least
// H-diagonal-weighted error; the result is written by round-to-nearest in the same layout
// (weight_quantizer.h's RoundingGrid), so everything downstream is shared.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "quant/weight_quantizer.h"

namespace kiln {

class ThreadPool;

// The factor GPTQ sweeps with, of one input width (shared by the weights that read the same input):
// the upper U with H^-1 = U^T U, H's diagonal, and the columns no calibration input reached.
struct GptqFactor {
  int64_t cols = 0;
  std::vector<float> u;         // [cols][cols], upper, row-major
  std::vector<float> h_diag;    // H's diagonal before damping
  std::vector<uint8_t> dead;    // 1: H_jj == 0 (the column's weights are set to 0)
  // The order the sweep takes the columns in (u is in that order): theirs, or with act_order
  // the largest H_jj first, each group's grid then chosen before the sweep.
  std::vector<int64_t> order;
  bool act_order = false;
};

// H = X^T X / rows from the calibration inputs x ([rows][cols] f32), damped and factored. An
// error when the rows are none or the damped H is still not positive definite.
Result<std::shared_ptr<const GptqFactor>> gptq_factor(std::span<const float> x, int64_t rows, int64_t cols,
                                                      ThreadPool* pool, bool act_order = false);

class GptqQuantizer final : public WeightQuantizer {
 public:
  // pool (may be null) runs the products; it must outlive the quantizer's calls.
  GptqQuantizer(std::shared_ptr<const GptqFactor> factor, ThreadPool* pool);
  Status quantize(const QuantParams& p, const float* w, int64_t rows, int64_t cols, std::span<uint8_t> out) const override;
  std::string_view name() const override { return "gptq"; }

  // Whether quantize does more than round-to-nearest for `p` (the schemes with a grid per group
  // or row: weight_quantizer.h's has_rounding_grid).
  static bool sweeps(const QuantParams& p) { return has_rounding_grid(p); }

 private:
  std::shared_ptr<const GptqFactor> factor_;
  ThreadPool* pool_;
};

}  // namespace kiln
