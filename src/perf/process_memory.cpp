#include "perf/process_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>

namespace kiln {

uint64_t peak_rss_bytes() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<uint64_t>(ru.ru_maxrss) * 1024;  // KiB on Linux
}

uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), size = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(size) : 0;
}

uint64_t children_peak_rss_bytes() {
  struct rusage ru {};
  ::getrusage(RUSAGE_CHILDREN, &ru);
  return static_cast<uint64_t>(ru.ru_maxrss) * 1024;
}

ResidentSplit resident_split_now() {
  ResidentSplit r;
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return r;
  char line[256];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long long kb = 0;
    if (std::sscanf(line, "VmRSS: %llu kB", &kb) == 1) r.total = kb * 1024;
    else if (std::sscanf(line, "RssAnon: %llu kB", &kb) == 1) r.anon = kb * 1024;
    else if (std::sscanf(line, "RssFile: %llu kB", &kb) == 1) r.file = kb * 1024;
  }
  std::fclose(f);
  return r;
}

}  // namespace kiln
