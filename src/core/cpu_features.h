// The instruction-set features of the machine kiln runs on, as bits a .kiln target records.
#pragma once

#include <cstdint>
#include <string>

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

uint64_t host_cpu_features();
// Whether one core of this CPU reads memory faster as one sequential stream than as several
// side by side. AMD Zen (4 Dec 2026, 2 vCPUs of an EPYC, 1 GiB, one core): one stream 30 GB/s,
// eight 12-15 GB/s; Intel (Ice Lake VM) the other way, 9.3 against 10.1. By vendor: AMD yes,
// everything else no.
bool host_reads_one_stream_faster();
// "avx2,fma": one name per set bit, in ascending bit order.
std::string cpu_feature_names(uint64_t bits);

}  // namespace kiln
