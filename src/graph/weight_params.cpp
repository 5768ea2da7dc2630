#include "graph/weight_params.h"

namespace kiln {

Result<QuantParams> weight_params(const WeightDesc& w) {
  QuantParams p;
  p.scheme = w.scheme;
  p.group_size = w.group_size;
  p.symmetric = w.symmetric;
  // A .kiln keeps a w8a16 tensor's group in group_size (0, per row, in every older file).
  if (w.scheme == Scheme::kW8A16) p.w8_group = w.group_size;
  // ... and a w5a16 tensor's: 32 for GGML's Q5_0/Q5_1 blocks, else (256) Q5_K's super-blocks.
  if (w.scheme == Scheme::kW5A16 && w.group_size == 32) p.w5_group = 32;
  if (!is_4bit(w.scheme)) p = canonical(p);
  KILN_RETURN_IF_ERROR(validate_params(p).with_context("weight '" + w.name + "'"));
  const int64_t rows = w.shape.size() == 2 ? w.shape[0] : 1;
  const int64_t cols = w.shape.back();
  KILN_RETURN_IF_ERROR(check_shape(p, rows, cols).with_context("weight '" + w.name + "'"));
  return p;
}

void set_weight_params(WeightDesc& w, const QuantParams& p) {
  const QuantParams c = canonical(p);
  w.scheme = c.scheme;
  w.group_size = scale_group(c);
  w.symmetric = c.symmetric;
}

}  // namespace kiln
