#include "perf/weight_summary.h"

#include <algorithm>
#include <map>

#include "graph/weight_params.h"
#include "runtime/model.h"

namespace kiln {

std::string weight_scheme_label(const WeightDesc& w) {
  auto p = weight_params(w);
  return p ? describe(*p) : std::string(scheme_name(w.scheme));
}

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
  std::map<std::string, SchemeShare> mix;
  for (size_t i = 0; i < g.weights.size(); ++i) {
    const WeightDesc& w = g.weights[i];
    const uint64_t bytes = m.image().weights[i].size();
    uint64_t elems = 1;
    for (int64_t d : w.shape) elems *= static_cast<uint64_t>(d);
    s.parameters += elems;
    s.weight_bytes += bytes;
    const int64_t rows = w.shape.size() == 2 ? w.shape[0] : 1;
    SchemeShare& part = mix[weight_scheme_label(w)];
    part.bytes += bytes;
    if (!used[i]) continue;
    const uint64_t read = gathered_only[i] ? bytes / static_cast<uint64_t>(std::max<int64_t>(rows, 1)) : bytes;
    s.read_per_token += read;
    part.read_per_token += read;
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
  for (auto& [label, part] : mix) {
    part.scheme = label;
    s.mix.push_back(part);
  }
  std::stable_sort(s.mix.begin(), s.mix.end(), [](const SchemeShare& a, const SchemeShare& b) { return a.bytes > b.bytes; });
  return s;
}

}  // namespace kiln
