// The back ends this build of kiln has, in order of preference. Listed here explicitly.
#pragma once

#include <span>
#include <string_view>

#include "backends/api/backend.h"

namespace kiln {

// Preferred first; the last, "ref", supports every op and is the fallback of every partition.
std::span<const Backend* const> registered_backends();
const Backend* find_backend(std::string_view name);
// The reference bytes of a weight stored in any layout a registered back end knows.
Status unpack_weight(const WeightDesc& w, std::span<const uint8_t> stored, std::vector<uint8_t>& ref);
// The inverse: reference bytes stored in w.layout by the first back end that knows it.
Status pack_weight(const WeightDesc& w, std::span<const uint8_t> ref, std::vector<uint8_t>& stored);

}  // namespace kiln
