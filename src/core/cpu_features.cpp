#include "core/cpu_features.h"

#include <cstdio>
#include <cstdlib>

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
    {kCpuArmFp16, "fp16"},    {kCpuBestTable, "best"},
};

#if defined(__x86_64__)
// XCR0's state components (Intel SDM vol. 1, 13.1).
constexpr uint64_t kXcr0Avx = (1u << 1) | (1u << 2);                   // SSE, AVX (YMM upper halves)
constexpr uint64_t kXcr0Avx512 = kXcr0Avx | (1u << 5) | (1u << 6) | (1u << 7);  // opmask, ZMM_Hi256, Hi16_ZMM
constexpr uint64_t kXcr0Amx = (1u << 17) | (1u << 18);                 // XTILECFG, XTILEDATA
constexpr uint64_t kAvxFamily = kCpuAvx2 | kCpuFma | kCpuF16c | kCpuAvxVnni;
constexpr uint64_t kAvx512Family = kCpuAvx512f | kCpuAvx512bw | kCpuAvx512vl | kCpuAvx512vnni | kCpuAvx512bf16;
constexpr uint64_t kAmxFamily = kCpuAmxTile | kCpuAmxBf16 | kCpuAmxInt8;

// XGETBV by its encoding, so that this baseline file needs no -mxsave; only called where
// CPUID says the OS set CR4.OSXSAVE.
uint64_t read_xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}

void detect(HostCpu& h) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  uint64_t f = 0;
  bool osxsave = false;
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    if (c & (1u << 12)) f |= kCpuFma;
    if (c & (1u << 29)) f |= kCpuF16c;
    osxsave = (c & (1u << 27)) != 0;
  }
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    if (b & (1u << 5)) f |= kCpuAvx2;
    if (b & (1u << 16)) f |= kCpuAvx512f;
    if (b & (1u << 30)) f |= kCpuAvx512bw;
    if (b & (1u << 31)) f |= kCpuAvx512vl;
    if (c & (1u << 11)) f |= kCpuAvx512vnni;
    if (d & (1u << 22)) f |= kCpuAmxBf16;
    if (d & (1u << 24)) f |= kCpuAmxTile;
    if (d & (1u << 25)) f |= kCpuAmxInt8;
    const unsigned max_sub = a;
    if (max_sub >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) {
      if (a & (1u << 4)) f |= kCpuAvxVnni;
      if (a & (1u << 5)) f |= kCpuAvx512bf16;
    }
  }
  h.reported = f;
  // A feature counts only where the OS saves its registers: a kernel using state the OS does
  // not enable faults (SIGILL) even though CPUID lists the instructions.
  h.xcr0 = osxsave ? read_xcr0() : 0;
  uint64_t e = f;
  if ((h.xcr0 & kXcr0Avx) != kXcr0Avx) e &= ~(kAvxFamily | kAvx512Family | kAmxFamily);
  if ((h.xcr0 & kXcr0Avx512) != kXcr0Avx512) e &= ~(kAvx512Family | kAmxFamily);
  if ((h.xcr0 & kXcr0Amx) != kXcr0Amx) e &= ~kAmxFamily;
  if (e & kCpuAmxTile) {
#if defined(__linux__)
    // Linux hands out the tile data state per process on request (ARCH_REQ_XCOMP_PERM), and
    // ARCH_GET_XCOMP_PERM says whether it was granted.
    constexpr int kArchGetXcompPerm = 0x1022, kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    uint64_t granted = 0;
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0 &&
        syscall(SYS_arch_prctl, kArchGetXcompPerm, &granted) == 0)
      h.amx_permitted = (granted >> kXfeatureXtiledata) & 1u;
#endif
    if (!h.amx_permitted) e &= ~kAmxFamily;
  }
  h.enabled = e;
}
#elif defined(__aarch64__)
void detect(HostCpu& h) {
  uint64_t f = kCpuNeon;
#if defined(__linux__)
  const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  if (hw & (1ul << 20)) f |= kCpuDotprod;  // HWCAP_ASIMDDP
  if (hw & (1ul << 10)) f |= kCpuArmFp16;  // HWCAP_ASIMDHP
  if (hw2 & (1ul << 13)) f |= kCpuI8mm;    // HWCAP2_I8MM
#endif
  h.reported = h.enabled = f;  // the hwcaps are the kernel's own word: enabled by definition
}
#else
void detect(HostCpu&) {}
#endif

std::string cap_names() {
  std::string s;
  for (const CpuCap& c : kCpuCaps) s += (s.empty() ? "" : ", ") + std::string(c.name);
  return s;
}

std::string why_lacks(const HostCpu& h, uint64_t wanted);

void apply_cap(HostCpu& h) {
  h.usable = h.enabled;
  const char* v = std::getenv("KILN_CPU");
  if (v == nullptr || *v == '\0') return;
  h.cap = v;
  for (const CpuCap& c : kCpuCaps) {
    if (h.cap != c.name) continue;
    if ((c.features & ~h.enabled) != 0) {
      h.cap_error = "KILN_CPU=" + h.cap + ": this machine cannot run that table (" + why_lacks(h, c.features) + ")";
      break;
    }
    h.usable = h.enabled & c.features;
    return;
  }
  if (h.cap_error.empty()) h.cap_error = "KILN_CPU=" + h.cap + " is not a kernel table (" + cap_names() + ")";
  h.usable = 0;  // never more than asked: the entry points refuse to start (check_cpu_cap)
}

// The reasons for one kind of missing bits, appended to `out`.
void add_reason(std::string& out, uint64_t missing, const char* what) {
  if (missing == 0) return;
  out += (out.empty() ? "" : "; ") + std::string(what) + " " + cpu_feature_names(missing);
}

// Why `h` may not use `wanted`, in the order a user can act on: hardware, OS, the cap.
std::string why_lacks(const HostCpu& h, uint64_t wanted) {
  wanted &= ~kCpuBestTable;
  std::string out;
  add_reason(out, wanted & ~h.reported, "the CPU lacks");
  const uint64_t off = wanted & h.reported & ~h.enabled;
#if defined(__x86_64__)
  char xcr0[48];
  std::snprintf(xcr0, sizeof xcr0, " (XCR0 0x%llx)", static_cast<unsigned long long>(h.xcr0));
  if (off & ~kAmxFamily) {
    add_reason(out, off & ~kAmxFamily, "the OS does not enable the register state of");
    out += xcr0;
  }
  if (off & kAmxFamily) {
    out += out.empty() ? "" : "; ";
    if ((h.xcr0 & kXcr0Amx) != kXcr0Amx) out += std::string("the OS does not enable the AMX tile state") + xcr0;
    else if (!h.amx_permitted) out += "Linux did not grant this process the AMX tile data (ARCH_REQ_XCOMP_PERM)";
    else out += "the AVX-512 state it builds on is off";
  }
#else
  add_reason(out, off, "the OS does not enable");
#endif
  const uint64_t capped = wanted & h.enabled & ~h.usable;
  if (capped != 0) out += (out.empty() ? "" : "; ") + ("KILN_CPU=" + h.cap + " caps it");
  return out;
}

}  // namespace

const HostCpu& host_cpu() {
  static const HostCpu h = [] {
    HostCpu x;
    detect(x);
    apply_cap(x);
    return x;
  }();
  return h;
}

uint64_t host_cpu_features() { return host_cpu().usable; }

Status check_cpu_cap() {
  const HostCpu& h = host_cpu();
  return h.cap_error.empty() ? Status::ok() : invalid_argument(h.cap_error);
}

std::string why_cpu_lacks(uint64_t wanted) { return why_lacks(host_cpu(), wanted); }

bool host_reads_one_stream_faster() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_is("amd");
#else
  return false;
#endif
}

std::string cpu_feature_names(uint64_t bits) {
  std::string s;
  for (const auto& n : kNames) {
    if ((bits & n.bit) == 0) continue;
    if (!s.empty()) s += ',';
    s += n.name;
  }
  return s;
}

}  // namespace kiln
