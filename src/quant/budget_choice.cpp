#include "quant/budget_choice.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>

namespace kiln {

namespace {

// Tensor t's options on the lower convex hull of (bytes, loss), smallest first: indices into its
// options, losses strictly falling, and each step saving less per byte than the one before.
std::vector<int> lower_hull(const std::vector<ChoiceOption>& o) {
  std::vector<int> order(o.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return o[a].bytes != o[b].bytes ? o[a].bytes < o[b].bytes : o[a].loss < o[b].loss;
  });
  std::vector<int> h;
  for (int i : order) {
    if (!h.empty() && o[i].loss >= o[h.back()].loss) continue;  // more bytes, no less loss
    // b above (or on) the line from a to i: never worth stopping at.
    while (h.size() >= 2) {
      const ChoiceOption& a = o[h[h.size() - 2]];
      const ChoiceOption& b = o[h.back()];
      const double cross = (static_cast<double>(b.bytes) - static_cast<double>(a.bytes)) * (o[i].loss - a.loss) -
                           (b.loss - a.loss) * (static_cast<double>(o[i].bytes) - static_cast<double>(a.bytes));
      if (cross > 0) break;
      h.pop_back();
    }
    h.push_back(i);
  }
  return h;
}

struct Step {
  size_t tensor;
  size_t to;             // hull position reached
  double saved_per_byte;
};

}  // namespace

Result<BudgetChoice> choose_under_budget(const std::vector<std::vector<ChoiceOption>>& options, uint64_t fixed_bytes,
                                         const ChoiceBudget& budget) {
  if (budget.bytes.has_value() == budget.max_loss.has_value())
    return invalid_argument("a budget is a size or a loss target: give exactly one");
  std::vector<std::vector<int>> hulls;
  BudgetChoice c;
  c.bytes = fixed_bytes;
  for (size_t t = 0; t < options.size(); ++t) {
    if (options[t].empty()) return invalid_argument("tensor " + std::to_string(t) + " has no scheme to choose from");
    for (const ChoiceOption& o : options[t])
      if (!std::isfinite(o.loss) || o.loss < 0)
        return invalid_argument("tensor " + std::to_string(t) + " has a loss of " + std::to_string(o.loss));
    hulls.push_back(lower_hull(options[t]));
    const ChoiceOption& first = options[t][static_cast<size_t>(hulls.back().front())];
    c.pick.push_back(hulls.back().front());
    c.bytes += first.bytes;
    c.loss += first.loss;
  }
  if (budget.bytes && c.bytes > *budget.bytes)
    return invalid_argument("the budget of " + std::to_string(*budget.bytes) + " bytes is below the smallest choice (" +
                            std::to_string(c.bytes) + " bytes: every tensor at its smallest scheme)");
  c.front.push_back({c.bytes, c.loss});
  std::vector<Step> steps;
  for (size_t t = 0; t < hulls.size(); ++t)
    for (size_t j = 1; j < hulls[t].size(); ++j) {
      const ChoiceOption& a = options[t][static_cast<size_t>(hulls[t][j - 1])];
      const ChoiceOption& b = options[t][static_cast<size_t>(hulls[t][j])];
      steps.push_back({t, j, (a.loss - b.loss) / static_cast<double>(b.bytes - a.bytes)});
    }
  // Along a hull the savings per byte fall, so this order takes each tensor's steps in turn.
  std::stable_sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) { return a.saved_per_byte > b.saved_per_byte; });
  std::vector<size_t> at(hulls.size(), 0);
  std::vector<bool> blocked(hulls.size(), false);
  for (const Step& s : steps) {
    if (budget.max_loss && c.loss <= *budget.max_loss) break;
    if (blocked[s.tensor] || at[s.tensor] + 1 != s.to) continue;
    const ChoiceOption& a = options[s.tensor][static_cast<size_t>(hulls[s.tensor][s.to - 1])];
    const ChoiceOption& b = options[s.tensor][static_cast<size_t>(hulls[s.tensor][s.to])];
    if (budget.bytes && c.bytes + (b.bytes - a.bytes) > *budget.bytes) {
      blocked[s.tensor] = true;  // its later steps cost more still
      continue;
    }
    at[s.tensor] = s.to;
    c.pick[s.tensor] = hulls[s.tensor][s.to];
    c.bytes += b.bytes - a.bytes;
    c.loss -= a.loss - b.loss;
    c.front.push_back({c.bytes, c.loss});
  }
  if (budget.max_loss && c.loss > *budget.max_loss)
  {
    char m[160];
    std::snprintf(m, sizeof m, "a loss of %g cannot be reached: every tensor at its best option gives %g", *budget.max_loss, c.loss);
    return invalid_argument(m);
  }
  if (budget.bytes) {
    // What the budget has left: the single change that saves the most loss and still fits, again
    // and again (options off the hull included).
    for (;;) {
      size_t best_t = options.size();
      int best_i = -1;
      double best_saved = 0;
      for (size_t t = 0; t < options.size(); ++t) {
        const ChoiceOption& now = options[t][static_cast<size_t>(c.pick[t])];
        for (size_t i = 0; i < options[t].size(); ++i) {
          const ChoiceOption& o = options[t][i];
          const double saved = now.loss - o.loss;
          if (saved <= best_saved) continue;
          if (c.bytes - now.bytes + o.bytes > *budget.bytes) continue;
          best_t = t, best_i = static_cast<int>(i), best_saved = saved;
        }
      }
      if (best_i < 0) break;
      const ChoiceOption& now = options[best_t][static_cast<size_t>(c.pick[best_t])];
      const ChoiceOption& o = options[best_t][static_cast<size_t>(best_i)];
      c.bytes = c.bytes - now.bytes + o.bytes;
      c.loss -= now.loss - o.loss;
      c.pick[best_t] = best_i;
    }
  }
  return c;
}

}  // namespace kiln
