#include "runtime/numerics_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace kiln {

namespace {

const float* value_rows(const Program& p, const StepContext& ctx, int v) {
  return reinterpret_cast<const float*>(ctx.arena + p.plan.offsets[static_cast<size_t>(v)]);
}

NumericsFault::Range range_of(const Program& p, const StepContext& ctx, int v, int rows) {
  NumericsFault::Range r;
  r.value = p.graph.values[static_cast<size_t>(v)].name;
  const size_t n = static_cast<size_t>(p.graph.values[static_cast<size_t>(v)].width) * static_cast<size_t>(rows);
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  if (v == p.graph.tokens_input) {
    // Token ids, not floats.
    const auto* ids = reinterpret_cast<const int32_t*>(ctx.arena + p.plan.offsets[static_cast<size_t>(v)]);
    for (size_t i = 0; i < n; ++i) {
      lo = std::min(lo, static_cast<float>(ids[i]));
      hi = std::max(hi, static_cast<float>(ids[i]));
    }
  } else {
    const float* x = value_rows(p, ctx, v);
    for (size_t i = 0; i < n; ++i) {
      if (!std::isfinite(x[i])) {
        ++r.nonfinite;
        continue;
      }
      lo = std::min(lo, x[i]);
      hi = std::max(hi, x[i]);
    }
  }
  r.min = n > static_cast<size_t>(r.nonfinite) ? lo : 0.0f;
  r.max = n > static_cast<size_t>(r.nonfinite) ? hi : 0.0f;
  return r;
}

}  // namespace

std::optional<NumericsFault> scan_outputs(const Program& p, int index, const StepContext& ctx, int rows,
                                          int first_position, int first_row) {
  const Node& node = p.graph.nodes[static_cast<size_t>(index)];
  for (int row = first_row; row < rows; ++row)
    for (int v : node.outputs) {
      if (p.plan.sizes[static_cast<size_t>(v)] == 0) continue;
      const size_t width = static_cast<size_t>(p.graph.values[static_cast<size_t>(v)].width);
      const float* x = value_rows(p, ctx, v) + static_cast<size_t>(row) * width;
      for (size_t i = 0; i < width; ++i) {
        if (std::isfinite(x[i])) continue;
        NumericsFault f;
        f.node = index;
        f.op = node.op;
        f.layer = node.layer;
        f.row = row;
        // A tail node that ran on the last token alone wrote it to row 0.
        f.position = first_position + (node.tail && !ctx.all_logits ? ctx.n_tokens - 1 : row);
        f.value = p.graph.values[static_cast<size_t>(v)].name;
        f.index = static_cast<int64_t>(i);
        f.found = x[i];
        const std::vector<bool> tail = tail_values(p.graph);
        for (int in : node.inputs) {
          if (p.plan.sizes[static_cast<size_t>(in)] == 0) continue;
          f.inputs.push_back(range_of(p, ctx, in, tail[static_cast<size_t>(in)] ? rows : ctx.n_tokens));
        }
        return f;
      }
    }
  return std::nullopt;
}

}  // namespace kiln
