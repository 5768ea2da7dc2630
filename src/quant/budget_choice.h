// The choice `kiln tune` makes: one scheme per tensor, under a size budget or a loss target, from
// each tensor's options (bytes it stores in, loss it adds). Losses are taken as additive over
// tensors (the sum of each tensor's KL when it alone is rounded), which makes this a
// multiple-choice knapsack; it is solved on each tensor's lower convex hull of (bytes, loss),
// taking the upgrades with the most loss saved per byte first (exact at every hull vertex, within
// one upgrade of the optimum otherwise), and then whatever else still fits.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/status.h"

namespace kiln {

struct ChoiceOption {
  uint64_t bytes = 0;
  double loss = 0;
};

// Exactly one of bytes and max_loss; the total counts fixed_bytes (what no choice changes).
struct ChoiceBudget {
  std::optional<uint64_t> bytes;
  std::optional<double> max_loss;
};

struct BudgetChoice {
  std::vector<int> pick;  // per tensor, an index into its options
  uint64_t bytes = 0;     // fixed bytes included
  double loss = 0;
  // The lower front the upgrades walk, from every tensor at its smallest option: (bytes, loss) after
  // each one taken in order, the first point included.
  std::vector<ChoiceOption> front;
};

// `options[t]` is tensor t's; each needs one option at least. Errors: no options for a tensor, a
// budget below the smallest total (every tensor at its smallest option), a negative or non-finite
// loss, neither or both budgets.
Result<BudgetChoice> choose_under_budget(const std::vector<std::vector<ChoiceOption>>& options, uint64_t fixed_bytes,
                                         const ChoiceBudget& budget);

}  // namespace kiln
