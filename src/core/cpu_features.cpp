#include "core/cpu_features.h"

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace kiln {

namespace {
constexpr struct {
  uint64_t bit;
  const char* name;
} kNames[] = {
    {kCpuAvx2, "avx2"},       {kCpuFma, "fma"},         {kCpuF16c, "f16c"},
    {kCpuAvx512f, "avx512f"}, {kCpuAvx512bw, "avx512bw"}, {kCpuAvx512vl, "avx512vl"},
    {kCpuAvx512vnni, "avx512vnni"}, {kCpuAvx512bf16, "avx512bf16"}, {kCpuAvxVnni, "avxvnni"},
    {kCpuAmxTile, "amx_tile"}, {kCpuAmxBf16, "amx_bf16"}, {kCpuAmxInt8, "amx_int8"},
    {kCpuNeon, "neon"},       {kCpuDotprod, "dotprod"}, {kCpuI8mm, "i8mm"},
    {kCpuArmFp16, "fp16"},
};
}  // namespace

bool host_reads_one_stream_faster() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_is("amd");
#else
  return false;
#endif
}

uint64_t host_cpu_features() {
  uint64_t f = 0;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) f |= kCpuAvx2;
  if (__builtin_cpu_supports("fma")) f |= kCpuFma;
  unsigned a, b, c, d;
  if (__get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29))) f |= kCpuF16c;  // clang lacks "f16c" here
  if (__builtin_cpu_supports("avx512f")) f |= kCpuAvx512f;
  if (__builtin_cpu_supports("avx512bw")) f |= kCpuAvx512bw;
  if (__builtin_cpu_supports("avx512vl")) f |= kCpuAvx512vl;
  if (__builtin_cpu_supports("avx512vnni")) f |= kCpuAvx512vnni;
  if (__builtin_cpu_supports("avx512bf16")) f |= kCpuAvx512bf16;
  // AMX: CPUID leaf 7 EDX bits 24 (tile), 22 (bf16), 25 (int8), and Linux's permission to use
  // the tile state (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA), asked for once.
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 24))) {
#if defined(__linux__)
    static const bool permitted = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
#else
    const bool permitted = false;
#endif
    if (permitted) {
      f |= kCpuAmxTile;
      if (d & (1u << 22)) f |= kCpuAmxBf16;
      if (d & (1u << 25)) f |= kCpuAmxInt8;
    }
  }
#elif defined(__aarch64__)
  f |= kCpuNeon;
#if defined(__linux__)
  const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  if (hw & (1ul << 20)) f |= kCpuDotprod;  // HWCAP_ASIMDDP
  if (hw & (1ul << 10)) f |= kCpuArmFp16;  // HWCAP_ASIMDHP
  if (hw2 & (1ul << 13)) f |= kCpuI8mm;    // HWCAP2_I8MM
#endif
#endif
  return f;
}

std::string cpu_feature_names(uint64_t bits) {
  std::string s;
  for (const auto& n : kNames)
    if (bits & n.bit) s += (s.empty() ? "" : ",") + std::string(n.name);
  return s;
}

}  // namespace kiln
