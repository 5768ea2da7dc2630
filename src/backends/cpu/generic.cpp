// The portable table (generic_traits.h), for machines without the instruction sets below and as
// the scalar twin every SIMD table is tested against.
#include "backends/cpu/microkernels.h"
#include "backends/cpu/generic_traits.h"
#include "backends/cpu/table_parts.h"

namespace kiln::cpu {

void fill_generic(KernelTable& t) {
  t.name = "generic";
  t.features = 0;
  fill_table_common<Generic>(t);
  fill_generic_float(t);
  fill_generic_w4a16(t);
  fill_generic_a8(t);
  fill_generic_superblocks(t);
}

}  // namespace kiln::cpu
