// The one dispatch point: which instruction-set table runs, for a set of CPU features.
//
// The tables of the instruction-set files (x86/avx2.cpp, x86/avx512.cpp, ...) are filled by code
// compiled for that set: the compiler may store their entries with its widest registers. So a
// table is filled only the first time it is chosen, and only where the OS lets this process use
// its features (host_cpu().enabled): nothing of an ISA-flagged file runs before that test.
#include <mutex>
#include <string>

#include "backends/cpu/kernels.h"
#include "core/cpu_features.h"

namespace kiln::cpu {

namespace {

struct Slot {
  const char* name;
  uint64_t features;
  void (*fill)(KernelTable&);
  std::once_flag once;
  KernelTable table;
};

// Best first; the generic table last. Names and features are here, in baseline code, so that
// listing and naming the tables runs nothing of the instruction-set files.
struct Tables {
#if defined(__x86_64__)
  Slot slots[4] = {{"amx", kCpuSetAmx, &fill_amx, {}, {}},
                   {"avx512", kCpuSetAvx512, &fill_avx512, {}, {}},
                   {"avx2", kCpuSetAvx2, &fill_avx2, {}, {}},
                   {"generic", 0, &fill_generic, {}, {}}};
#elif defined(__aarch64__)
  Slot slots[4] = {{"i8mm", kCpuSetI8mm, &fill_i8mm, {}, {}},
                   {"dotprod", kCpuSetDotprod, &fill_dotprod, {}, {}},
                   {"neon", kCpuSetNeon, &fill_neon, {}, {}},
                   {"generic", 0, &fill_generic, {}, {}}};
#else
  Slot slots[1] = {{"generic", 0, &fill_generic, {}, {}}};
#endif
};

Tables& tables() {
  static Tables t;
  return t;
}

// The slot's table, filled on first use; null where this machine cannot run it.
const KernelTable* table_of(Slot& s) {
  if ((s.features & ~host_cpu().enabled) != 0) return nullptr;
  std::call_once(s.once, [&s] { s.fill(s.table); });
  return &s.table;
}

}  // namespace

const KernelTable& generic_kernels() { return *table_of(std::end(tables().slots)[-1]); }

uint64_t target_kernel_features(uint64_t wanted) {
  // The features of every table of every architecture, best first within each (the x86 and ARM
  // sets share no bit); must agree with the fill_* functions, as a test checks.
  constexpr uint64_t kAll[] = {kCpuSetAmx, kCpuSetAvx512, kCpuSetAvx2, kCpuSetI8mm, kCpuSetDotprod, kCpuSetNeon};
  for (uint64_t f : kAll)
    if ((f & ~wanted) == 0) return f;
  return 0;
}

const char* kernel_table_name(uint64_t cpu_features) {
  for (const Slot& s : tables().slots)
    if ((s.features & ~cpu_features) == 0) return s.name;
  return "generic";
}

int available_kernel_tables(uint64_t cpu_features, const KernelTable** out, int max) {
  int k = 0;
  for (Slot& s : tables().slots) {
    if (k >= max) break;
    if ((s.features & ~cpu_features) != 0) continue;
    if (const KernelTable* t = table_of(s)) out[k++] = t;
  }
  return k;
}

std::string kernel_choice(uint64_t target) {
  const uint64_t use = cpu_features_for(target);
  const KernelTable& chosen = select_kernels(use);
  std::string why;
  for (const Slot& s : tables().slots) {
    if (s.features == chosen.features) break;  // the tables after it are slower
    std::string reason;
    if ((target & kCpuBestTable) == 0 && (s.features & ~target) != 0)
      reason = "the file's target stops at " + std::string(kernel_table_name(target));
    else
      reason = why_cpu_lacks(s.features);
    why += (why.empty() ? " (not " : "; not ") + std::string(s.name) + ": " + reason;
  }
  return chosen.name + why + (why.empty() ? "" : ")");
}

const KernelTable& select_kernels(uint64_t cpu_features) {
  const KernelTable* best[1];
  return available_kernel_tables(cpu_features, best, 1) == 1 ? *best[0] : generic_kernels();
}

}  // namespace kiln::cpu
