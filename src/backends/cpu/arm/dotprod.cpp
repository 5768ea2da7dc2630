// ARM64 NEON with the dot-product extension: int8 products with SDOT. Compiled with
// -march=armv8.2-a+dotprod and KILN_ARM_DOTPROD.
#include "backends/cpu/microkernels.h"
#include "backends/cpu/table_parts.h"
#include "backends/cpu/arm/neon_traits.h"
#include "core/cpu_features.h"

namespace kiln::cpu {

void fill_dotprod(KernelTable& t) {
  t.name = "dotprod";
  t.features = kCpuSetDotprod;
  fill_table_common<Neon>(t);
  fill_dotprod_float(t);
  fill_dotprod_w4a16(t);
  fill_dotprod_a8(t);
  fill_dotprod_superblocks(t);
}

}  // namespace kiln::cpu
