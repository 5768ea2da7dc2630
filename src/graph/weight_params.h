// The quantization parameters a graph weight is stored with, and back.
#pragma once

#include "graph/graph.h"
#include "layout/weight_layout.h"

namespace kiln {

Result<QuantParams> weight_params(const WeightDesc& w);
void set_weight_params(WeightDesc& w, const QuantParams& p);

}  // namespace kiln
