// A model's files in the page cache: how much of them is resident, and dropping them (for a
// cold-start measurement).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

// The files a model consists of (a folder: every regular file in it, sorted; else the path).
std::vector<std::string> model_files(const std::string& path);

struct Residency {
  uint64_t resident = 0, pages = 0;
};
// Which pages of the files are in the page cache now (mincore on a fresh map; touches nothing).
Residency page_cache_residency(const std::vector<std::string>& files);

// Drops the files from the page cache with posix_fadvise(DONTNEED) (unprivileged; works for clean
// pages nobody maps), and with `all` the whole cache through /proc/sys/vm/drop_caches where this
// process may write it (root; evicts everyone's files). Returns how it was done.
std::string drop_from_page_cache(const std::vector<std::string>& files, bool all);

}  // namespace kiln
