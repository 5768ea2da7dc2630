#include "perf/page_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace kiln {

std::vector<std::string> model_files(const std::string& path) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.is_regular_file(ec)) out.push_back(e.path().string());
    std::sort(out.begin(), out.end());
  } else {
    out.push_back(path);
  }
  return out;
}

Residency page_cache_residency(const std::vector<std::string>& files) {
  Residency r;
  const long page = ::sysconf(_SC_PAGESIZE);
  for (const auto& f : files) {
    const int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && st.st_size > 0) {
      const size_t size = static_cast<size_t>(st.st_size);
      void* m = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
      if (m != MAP_FAILED) {
        const size_t n = (size + static_cast<size_t>(page) - 1) / static_cast<size_t>(page);
        std::vector<unsigned char> v(n);
        if (::mincore(m, size, v.data()) == 0) {
          r.pages += n;
          for (unsigned char b : v) r.resident += b & 1;
        }
        ::munmap(m, size);
      }
    }
    ::close(fd);
  }
  return r;
}

std::string drop_from_page_cache(const std::vector<std::string>& files, bool all) {
  std::string how = "posix_fadvise";
  if (all) {
    ::sync();
    if (FILE* f = std::fopen("/proc/sys/vm/drop_caches", "w")) {
      const bool wrote = std::fputs("3\n", f) >= 0;
      if (std::fclose(f) == 0 && wrote) how = "drop_caches+posix_fadvise";
    }
  }
  for (const auto& p : files) {
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
  return how;
}

}  // namespace kiln
