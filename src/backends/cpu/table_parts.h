// The matmul parts of each instruction set's kernel table (microkernels.h's fill_*_matmul(s)),
// each compiled in its own file (cmake/cpu_table_parts.cmake writes one per set and part); the
// set's own file (generic.cpp, x86/avx2.cpp, ...) fills the rest of the table and calls these.
// Like that file, each part holds the set's instructions and runs only after the dispatch point
// chose the set.
#pragma once

#include "backends/cpu/kernels.h"

#define KILN_CPU_TABLE_PARTS(isa)               \
  void fill_##isa##_float(KernelTable& t);       \
  void fill_##isa##_w4a16(KernelTable& t);       \
  void fill_##isa##_a8(KernelTable& t);          \
  void fill_##isa##_superblocks(KernelTable& t);

namespace kiln::cpu {

KILN_CPU_TABLE_PARTS(generic)
#if defined(__x86_64__) || defined(_M_X64)
KILN_CPU_TABLE_PARTS(avx2)
KILN_CPU_TABLE_PARTS(avx512)
#elif defined(__aarch64__)
KILN_CPU_TABLE_PARTS(neon)
KILN_CPU_TABLE_PARTS(dotprod)
#endif

}  // namespace kiln::cpu

#undef KILN_CPU_TABLE_PARTS
