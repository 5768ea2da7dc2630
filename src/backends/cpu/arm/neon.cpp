// ARM64 NEON (every ARM64 CPU): 4 lanes, int8 products through widening multiplies.
#include "backends/cpu/microkernels.h"
#include "backends/cpu/arm/neon_traits.h"
#include "core/cpu_features.h"

namespace kiln::cpu {

void fill_neon(KernelTable& t) {
  t.name = "neon";
  t.features = kCpuSetNeon;
  fill_table<Neon>(t);
}

}  // namespace kiln::cpu
