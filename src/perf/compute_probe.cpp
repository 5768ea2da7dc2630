#include "perf/compute_probe.h"

#include <algorithm>
#include <latch>
#include <optional>
#include <thread>

#include "perf/instruction_cost.h"
#include "runtime/model.h"

namespace kiln {

Result<std::vector<ProductCount>> prefill_products(const Graph& g, int tokens, int step_tokens, int window, int depth,
                                                   std::span<const int> layer_windows) {
  if (tokens < 1 || step_tokens < 1) return invalid_argument("a prefill takes at least one token, in steps of at least one");
  if (depth < 0) return invalid_argument("a prefill starts at position 0 or later");
  std::vector<ProductCount> out;
  auto add = [&](const std::string& backend, Scheme s, int step, double products) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const ProductCount& c) { return c.backend == backend && c.scheme == s && c.step == step; });
    if (it == out.end()) out.push_back({backend, s, step, products});
    else it->products += products;
  };
  for (int first = 0; first < tokens; first += step_tokens) {
    const int n = std::min(step_tokens, tokens - first);
    for (const Node& node : g.nodes) {
      const int w = layer_windows.empty() ? window
                    : node.layer >= 0 && static_cast<size_t>(node.layer) < layer_windows.size() ? layer_windows[static_cast<size_t>(node.layer)]
                                                                                              : 0;
      KILN_RETURN_IF_ERROR(node_products(g, node, node.tail ? 1 : n, attended_positions(depth + first, n, w),
                                         [&](Scheme s, double products) { add(node.backend, s, n, products); }));
    }
  }
  return out;
}

Result<double> ComputeProbe::rate(const std::string& backend, Scheme s, int step_tokens) {
  const auto key = std::make_tuple(backend, s, step_tokens);
  if (auto it = rates_.find(key); it != rates_.end()) return it->second;
  if (threads_ < 1 || passes_ < 1 || !(seconds_ > 0))
    return invalid_argument("the compute probe needs at least one thread, one pass and a time to run");
  const Backend* b = nullptr;
  for (const Backend* c : model_.backends())
    if (c->name() == backend) b = c;
  if (b == nullptr) return invalid_argument("the program has no back end '" + backend + "'");
  PrepareOptions o;
  o.cpu_features = model_.image().cpu_features;
  std::vector<double> passes;
  for (int p = 0; p < passes_; ++p) {
    std::vector<std::optional<double>> each(static_cast<size_t>(threads_));
    std::latch start(threads_);
    {
      std::vector<std::jthread> workers;
      for (int t = 0; t < threads_; ++t)
        workers.emplace_back([&, t] {
          start.arrive_and_wait();  // all threads multiply at once, as in the prefill
          each[static_cast<size_t>(t)] = b->product_rate(s, step_tokens, o, seconds_);
        });
    }
    double sum = 0;
    for (const auto& r : each) {
      if (!r) return unsupported("back end '" + backend + "' has no measure of its " + std::string(scheme_name(s)) + " products");
      sum += *r;
    }
    passes.push_back(sum);
  }
  // The fastest pass: a ceiling, and on a shared machine noise only ever slows a pass down.
  const double best = *std::max_element(passes.begin(), passes.end());
  rates_[key] = best;
  return best;
}

Result<PrefillRoofline> ComputeProbe::prefill(int tokens, int step_tokens, int depth) {
  PrefillRoofline r;
  KILN_ASSIGN_OR_RETURN(r.counts, prefill_products(model_.program().graph, tokens, step_tokens, 0, depth,
                                                         model_.constants().layer_windows));
  double seconds = 0;
  for (const ProductCount& c : r.counts) {
    KILN_ASSIGN_OR_RETURN(double rate, this->rate(c.backend, c.scheme, c.step));
    r.rates.push_back(rate);
    seconds += c.products / rate;
  }
  if (!(seconds > 0)) return invalid_argument("the program does no products to put a prefill against");
  r.tps = tokens / seconds;
  return r;
}

}  // namespace kiln
