// The reference back end: runs every op of the graph with the scalar kernels and the reference
// quantized products. It supports everything, so it is also the fallback of every partition.
#pragma once

#include "backends/api/backend.h"

namespace kiln {

class RefBackend final : public Backend {
 public:
  std::string_view name() const override { return "ref"; }
  bool supports(const Node&, const Graph&) const override { return true; }
  Result<std::unique_ptr<Kernel>> prepare(const Node& node, const Graph& graph, std::span<const BoundWeight> weights,
                                          std::span<const int64_t> value_offsets, int max_tokens) const override;
  size_t scratch_bytes(const Graph& graph, int max_tokens, int n_ctx) const override;
};

}  // namespace kiln
