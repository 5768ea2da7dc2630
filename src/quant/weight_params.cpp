#include "quant/weight_params.h"

namespace kiln {

Result<QuantParams> weight_params(const WeightDesc& w) {
  QuantParams p;
  p.scheme = w.scheme;
  p.group_size = w.group_size;
  p.symmetric = w.symmetric;
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
  w.group_size = c.group_size;
  w.symmetric = c.symmetric;
}

}  // namespace kiln
