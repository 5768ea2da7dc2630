#include "engine/defaults.h"

#include <random>

namespace kiln {

Result<OverridesFile> source_scheme(std::string_view scheme, int group_size) {
  return overrides_from_flags(scheme, group_size, /*symmetric=*/true, /*auto_fallback=*/true);
}

uint64_t resolve_seed(std::optional<uint64_t> given) {
  if (given) return *given;
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace kiln
