#include "backends/registry.h"

#include "backends/cpu/cpu_backend.h"
#include "backends/ref/ref_backend.h"

namespace kiln {

namespace {
const CpuBackend kCpu;
const RefBackend kRef;
// Preferred first: partitioning gives each node to the first that supports it.
const Backend* const kBackends[] = {&kCpu, &kRef};
}  // namespace

std::span<const Backend* const> registered_backends() { return kBackends; }

const Backend* find_backend(std::string_view name) {
  for (const Backend* b : kBackends)
    if (b->name() == name) return b;
  return nullptr;
}

Status unpack_weight(const WeightDesc& w, std::span<const uint8_t> stored, std::vector<uint8_t>& ref) {
  for (const Backend* b : kBackends)
    if (b->layout_bytes(w) == stored.size()) return b->unpack(w, stored, ref);
  return unsupported("weight '" + w.name + "': no back end of this build stores layout '" + w.layout + "' in " +
                     std::to_string(stored.size()) + " bytes");
}

Status pack_weight(const WeightDesc& w, std::span<const uint8_t> ref, std::vector<uint8_t>& stored) {
  for (const Backend* b : kBackends)
    if (b->layout_bytes(w)) return b->pack(w, ref, stored);
  return unsupported("weight '" + w.name + "': no back end of this build stores layout '" + w.layout + "'");
}

}  // namespace kiln
