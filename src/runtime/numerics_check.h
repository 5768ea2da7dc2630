// --check-numerics: after an instruction, its outputs scanned for NaN and infinity. A kernel's
// outputs are [rows][width] floats in the step's arena; a tail node's rows are the last token's
// alone unless every token's logits were asked for.
#pragma once

#include <optional>

#include "graph/program.h"
#include "runtime/step_trace.h"

namespace kiln {

// Rows of `node`'s outputs in a step of `ctx.n_tokens` tokens.
inline int output_rows(const Node& node, const StepContext& ctx) {
  return node.tail && !ctx.all_logits ? 1 : ctx.n_tokens;
}

// The first non-finite value among the outputs of node `index` in rows [first_row, rows), row by
// row, with the ranges of the node's inputs; nullopt when all are finite. The fault's position is
// first_position + its row (a tail node's single row is the step's last token).
std::optional<NumericsFault> scan_outputs(const Program& program, int index, const StepContext& ctx, int rows,
                                          int first_position, int first_row = 0);

// The error a step returns for a fault.
inline Status numerics_error(const NumericsFault& f) { return Status(StatusCode::kInternal, f.message()); }

}  // namespace kiln
