#include "compiler/passes.h"

namespace kiln {

Result<PartitionReport> partition(Graph& g, std::span<const Backend* const> backends,
                                  std::span<const int64_t> weight_sizes) {
  if (backends.empty()) return invalid_argument("partition: no back ends");
  PartitionReport r;
  for (Node& n : g.nodes) {
    const Backend* chosen = nullptr;
    for (const Backend* b : backends)
      if (b->supports(n, g)) {
        chosen = b;
        break;
      }
    if (chosen == nullptr)
      return unsupported("no back end supports op " + std::string(op_name(n.op)) + " of layer " + std::to_string(n.layer));
    n.backend = std::string(chosen->name());
    r.nodes[n.backend]++;
    for (int w : n.weights) r.weight_bytes[n.backend] += weight_sizes[static_cast<size_t>(w)];
  }
  return r;
}

}  // namespace kiln
