#include "perf/weight_summary.h"

#include <algorithm>
#include <map>

#include "runtime/model.h"

namespace kiln {

WeightSummary summarize_weights(const Model& m) {
  const Program& p = m.program();
  const Graph& g = p.graph;
  std::vector<bool> gathered_only(g.weights.size(), true);
  std::vector<bool> used(g.weights.size(), false);
  for (const Node& n : g.nodes)
    for (int w : n.weights) {
      used[static_cast<size_t>(w)] = true;
      if (n.op != OpCode::kEmbed) gathered_only[static_cast<size_t>(w)] = false;
    }
  WeightSummary s;
  std::map<std::string, uint64_t> by_scheme;
  std::map<std::string, int> group_of;
  for (size_t i = 0; i < g.weights.size(); ++i) {
    const WeightDesc& w = g.weights[i];
    const uint64_t bytes = m.image().weights[i].size();
    uint64_t elems = 1;
    for (int64_t d : w.shape) elems *= static_cast<uint64_t>(d);
    s.parameters += elems;
    s.weight_bytes += bytes;
    const int64_t rows = w.shape.size() == 2 ? w.shape[0] : 1;
    if (!used[i]) continue;
    s.read_per_token += gathered_only[i] ? bytes / static_cast<uint64_t>(std::max<int64_t>(rows, 1)) : bytes;
    if (w.shape.size() == 2 && w.name != "token_embd.weight" && w.name != "output.weight") {
      const std::string name(scheme_name(w.scheme));
      by_scheme[name] += bytes;
      group_of[name] = w.group_size;
    }
  }
  uint64_t best = 0;
  for (const auto& [scheme, bytes] : by_scheme)
    if (bytes > best) {
      best = bytes;
      s.scheme = scheme;
      s.group = group_of[scheme];
    }
  if (s.scheme.empty() && !g.weights.empty()) s.scheme = scheme_name(g.weights.front().scheme);
  return s;
}

}  // namespace kiln
