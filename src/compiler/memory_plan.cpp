#include <algorithm>
#include <numeric>

#include "compiler/passes.h"

namespace kiln {

MemoryPlan plan_memory(const Graph& g, int max_tokens) {
  const size_t nv = g.values.size();
  constexpr int64_t kAlign = 64;
  MemoryPlan plan;
  plan.max_tokens = max_tokens;
  plan.logit_rows = std::min(max_tokens, kLogitRows);
  const std::vector<bool> tail = tail_values(g);
  plan.offsets.assign(nv, 0);
  plan.sizes.assign(nv, 0);
  // Live range [first, last] of each value in node indices; the tokens live from the start and
  // the logits to the end, where the caller reads them.
  const int end = static_cast<int>(g.nodes.size());
  std::vector<int> first(nv, -1), last(nv, -1);
  first[static_cast<size_t>(g.tokens_input)] = 0;
  for (int i = 0; i < end; ++i) {
    for (int v : g.nodes[static_cast<size_t>(i)].outputs)
      if (first[static_cast<size_t>(v)] < 0) first[static_cast<size_t>(v)] = i;
    for (int v : g.nodes[static_cast<size_t>(i)].inputs) last[static_cast<size_t>(v)] = i;
  }
  last[static_cast<size_t>(g.logits_output)] = end;
  std::vector<size_t> order;
  for (size_t v = 0; v < nv; ++v) {
    if (first[v] < 0) continue;  // removed by fusion
    last[v] = std::max(last[v], first[v]);
    plan.sizes[v] = (g.values[v].width * 4 * planned_rows(plan, tail, v) + kAlign - 1) / kAlign * kAlign;
    plan.total_bytes += plan.sizes[v];
    order.push_back(v);
  }
  // Largest first; each takes the lowest offset free of every placed value it overlaps in time.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return plan.sizes[a] > plan.sizes[b]; });
  std::vector<size_t> placed;
  for (size_t v : order) {
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t p : placed)
      if (first[p] <= last[v] && first[v] <= last[p]) busy.push_back({plan.offsets[p], plan.offsets[p] + plan.sizes[p]});
    std::sort(busy.begin(), busy.end());
    int64_t off = 0;
    for (auto [b, e] : busy) {
      if (off + plan.sizes[v] <= b) break;
      off = std::max(off, e);
    }
    plan.offsets[v] = off;
    plan.arena_bytes = std::max(plan.arena_bytes, off + plan.sizes[v]);
    placed.push_back(v);
  }
  return plan;
}

}  // namespace kiln
