// ARM64 NEON (every ARM64 CPU): 4 lanes, int8 products through widening multiplies.
#include "backends/cpu/microkernels.h"
#include "backends/cpu/table_parts.h"
#include "backends/cpu/arm/neon_traits.h"
#include "core/cpu_features.h"

namespace kiln::cpu {

void fill_neon(KernelTable& t) {
  t.name = "neon";
  t.features = kCpuSetNeon;
  fill_table_common<Neon>(t);
  fill_neon_float(t);
  fill_neon_w4a16(t);
  fill_neon_a8(t);
  fill_neon_superblocks(t);
}

}  // namespace kiln::cpu
