// The instruction-set features of the machine kiln runs on, as bits a .kiln target records, and
// the one place that decides which of them kiln may use (CPUID, the OS's state, the user's cap).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace kiln {

enum CpuFeature : uint64_t {
  kCpuAvx2 = 1ull << 0,
  kCpuFma = 1ull << 1,
  kCpuF16c = 1ull << 2,
  kCpuAvx512f = 1ull << 3,
  kCpuAvx512bw = 1ull << 4,
  kCpuAvx512vl = 1ull << 5,
  kCpuAvx512vnni = 1ull << 6,
  kCpuAvx512bf16 = 1ull << 7,
  kCpuAvxVnni = 1ull << 8,
  kCpuAmxTile = 1ull << 9,  // reported only where the OS lets this process use the tiles
  kCpuAmxBf16 = 1ull << 10,
  kCpuAmxInt8 = 1ull << 11,
  kCpuNeon = 1ull << 16,
  kCpuDotprod = 1ull << 17,
  kCpuI8mm = 1ull << 18,
  kCpuArmFp16 = 1ull << 19,
  // Not an instruction set: in a .kiln's target, "the file needs only the other bits and runs
  // the best table of the machine that opens it" (the default `kiln compile --target auto`). Every
  // host "has" it, so a file carrying it is never refused for it.
  kCpuBestTable = 1ull << 63,
};

// What each kernel table of the cpu back end needs: the one home of these sets, for the tables
// themselves, the dispatch point and the `.kiln` targets named after them.
inline constexpr uint64_t kCpuSetAvx2 = kCpuAvx2 | kCpuFma | kCpuF16c;
inline constexpr uint64_t kCpuSetAvx512 = kCpuSetAvx2 | kCpuAvx512f | kCpuAvx512bw | kCpuAvx512vl | kCpuAvx512vnni;
inline constexpr uint64_t kCpuSetAmx = kCpuSetAvx512 | kCpuAvx512bf16 | kCpuAmxTile | kCpuAmxBf16;
inline constexpr uint64_t kCpuSetNeon = kCpuNeon;
inline constexpr uint64_t kCpuSetDotprod = kCpuSetNeon | kCpuDotprod;
inline constexpr uint64_t kCpuSetI8mm = kCpuSetDotprod | kCpuI8mm;

// The `.kiln` targets (`kiln compile --target`), each the most its kernels may use.
struct CpuTarget {
  const char* name;
  uint64_t features;
};
inline constexpr CpuTarget kCpuTargets[] = {
    {"generic", 0},
    {"x86-avx2", kCpuSetAvx2},
    {"x86-avx512", kCpuSetAvx512},
    {"x86-amx", kCpuSetAmx},
    {"arm64-dotprod", kCpuSetDotprod},
    {"arm64-i8mm", kCpuSetI8mm},
};

// The names KILN_CPU takes, each capping the kernels at one table's features: for tests, and
// for machines that misreport. "portable" (or "generic") is the plain C++ table.
struct CpuCap {
  const char* name;
  uint64_t features;
};
inline constexpr CpuCap kCpuCaps[] = {
    {"portable", 0},         {"generic", 0},           {"avx2", kCpuSetAvx2}, {"avx512", kCpuSetAvx512},
    {"amx", kCpuSetAmx},     {"neon", kCpuSetNeon},    {"dotprod", kCpuSetDotprod}, {"i8mm", kCpuSetI8mm},
};

// This machine, read once: what CPUID (or the ARM hwcaps) reports, what the OS lets this process
// use of it (XCR0's register state for AVX and AVX-512, the tile state and Linux's permission for
// AMX), and what kiln may use after the KILN_CPU cap.
struct HostCpu {
  uint64_t reported = 0;
  uint64_t enabled = 0;  // reported, less what the OS does not enable
  uint64_t usable = 0;   // enabled, capped by KILN_CPU
  uint64_t xcr0 = 0;     // x86: XCR0 where the OS exposes it (OSXSAVE), else 0
  bool amx_permitted = false;  // x86 Linux: ARCH_GET_XCOMP_PERM grants XTILEDATA
  std::string cap;             // KILN_CPU's value, "" when unset
  std::string cap_error;       // why that value was refused ("": it was not); usable is then 0
};
const HostCpu& host_cpu();
// What kiln's kernels may use here: host_cpu().usable.
uint64_t host_cpu_features();
// What the kernels use here for a program whose target records `target`: all of it that this
// machine may use, or, where it carries kCpuBestTable, whatever this machine may use.
inline uint64_t cpu_features_for(uint64_t target) {
  return (target & kCpuBestTable) ? host_cpu_features() : target & host_cpu_features();
}
// An error naming the problem when KILN_CPU is set to an unknown name or to a table this machine
// cannot run; every entry point (the CLI, the C API's runtime) checks it before any work.
Status check_cpu_cap();
// Why this machine may not use `wanted`: "the CPU lacks avx512f, avx512bw", "the OS does not
// enable the AVX-512 register state (XCR0 0x7)", "KILN_CPU=avx2 caps it"; "" when it may.
std::string why_cpu_lacks(uint64_t wanted);

// Whether one core of this CPU reads memory faster as one sequential stream than as several
// side by side. AMD Zen (4 Dec 2026, 2 vCPUs of an EPYC, 1 GiB, one core): one stream 30 GB/s,
// eight 12-15 GB/s; Intel (Ice Lake VM) the other way, 9.3 against 10.1. By vendor: AMD yes,
// everything else no.
bool host_reads_one_stream_faster();
// "avx2,fma": one name per set bit, in ascending bit order.
std::string cpu_feature_names(uint64_t bits);

}  // namespace kiln
