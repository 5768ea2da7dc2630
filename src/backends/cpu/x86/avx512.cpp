// AVX-512 (F, BW, VL) with VNNI: 16 lanes, one vector per tile column; 4-bit columns through a
// 16-entry permute, int8 dot products with vpdpbusd. Compiled with -mavx512f -mavx512bw
// -mavx512vl -mavx512vnni -mavx2 -mfma -mf16c.
#include <immintrin.h>

#include "backends/cpu/microkernels.h"
#include "backends/cpu/table_parts.h"
#include "backends/cpu/x86/avx512_traits.h"
#include "core/cpu_features.h"

namespace kiln::cpu {

void fill_avx512(KernelTable& t) {
  t.name = "avx512";
  t.features = kCpuSetAvx512;
  fill_table_common<Avx512>(t);
  fill_avx512_float(t);
  fill_avx512_w4a16(t);
  fill_avx512_a8(t);
  fill_avx512_superblocks(t);
}

}  // namespace kiln::cpu
