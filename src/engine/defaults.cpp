#include "engine/defaults.h"

#include <random>

namespace kiln {

uint64_t resolve_seed(std::optional<uint64_t> given) {
  if (given) return *given;
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace kiln
