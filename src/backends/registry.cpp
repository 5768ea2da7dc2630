#include "backends/registry.h"

#include "backends/ref/ref_backend.h"

namespace kiln {

namespace {
const RefBackend kRef;
const Backend* const kBackends[] = {&kRef};
}  // namespace

std::span<const Backend* const> registered_backends() { return kBackends; }

const Backend* find_backend(std::string_view name) {
  for (const Backend* b : kBackends)
    if (b->name() == name) return b;
  return nullptr;
}

}  // namespace kiln
