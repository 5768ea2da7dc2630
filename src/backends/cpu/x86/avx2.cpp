// AVX2 + FMA + F16C: 8 lanes, two vectors per tile column. Compiled with -mavx2 -mfma -mf16c.
#include <immintrin.h>

#include "backends/cpu/microkernels.h"
#include "backends/cpu/table_parts.h"
#include "backends/cpu/x86/avx2_traits.h"
#include "core/cpu_features.h"

namespace kiln::cpu {

void fill_avx2(KernelTable& t) {
  t.name = "avx2";
  t.features = kCpuSetAvx2;
  fill_table_common<Avx2>(t);
  fill_avx2_float(t);
  fill_avx2_w4a16(t);
  fill_avx2_a8(t);
  fill_avx2_superblocks(t);
}

}  // namespace kiln::cpu
