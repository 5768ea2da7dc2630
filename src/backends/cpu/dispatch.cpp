// The one dispatch point: which instruction-set table runs, for a set of CPU features.
#include "backends/cpu/kernels.h"
#include "core/cpu_features.h"

namespace kiln::cpu {

namespace {

struct Tables {
  KernelTable generic;
#if defined(__x86_64__)
  KernelTable avx2, avx512, amx;
#elif defined(__aarch64__)
  KernelTable neon, dotprod, i8mm;
#endif
  Tables() {
    fill_generic(generic);
#if defined(__x86_64__)
    fill_avx2(avx2);
    fill_avx512(avx512);
    fill_amx(amx);
#elif defined(__aarch64__)
    fill_neon(neon);
    fill_dotprod(dotprod);
    fill_i8mm(i8mm);
#endif
  }
  // Best first.
  int list(const KernelTable** out) const {
    int n = 0;
#if defined(__x86_64__)
    out[n++] = &amx;
    out[n++] = &avx512;
    out[n++] = &avx2;
#elif defined(__aarch64__)
    out[n++] = &i8mm;
    out[n++] = &dotprod;
    out[n++] = &neon;
#endif
    out[n++] = &generic;
    return n;
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const KernelTable& generic_kernels() { return tables().generic; }

uint64_t target_kernel_features(uint64_t wanted) {
  // The features of every table of every architecture, best first within each (the x86 and ARM
  // sets share no bit); must agree with the fill_* functions, as a test checks.
  constexpr uint64_t kAll[] = {kCpuSetAmx, kCpuSetAvx512, kCpuSetAvx2, kCpuSetI8mm, kCpuSetDotprod, kCpuSetNeon};
  for (uint64_t f : kAll)
    if ((f & ~wanted) == 0) return f;
  return 0;
}

int available_kernel_tables(uint64_t cpu_features, const KernelTable** out, int max) {
  const KernelTable* all[8];
  const int n = tables().list(all);
  int k = 0;
  for (int i = 0; i < n && k < max; ++i)
    if ((all[i]->features & ~cpu_features) == 0) out[k++] = all[i];
  return k;
}

const KernelTable& select_kernels(uint64_t cpu_features) {
  const KernelTable* best[1];
  return available_kernel_tables(cpu_features, best, 1) == 1 ? *best[0] : generic_kernels();
}

}  // namespace kiln::cpu
