#include "runtime/bandwidth.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

namespace kiln {

namespace {

uint64_t parse_size(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (s.empty()) return 0;
  uint64_t mult = 1;
  const char u = s.back();
  if (u == 'K' || u == 'k') mult = 1024;
  if (u == 'M' || u == 'm') mult = 1024 * 1024;
  if (u == 'G' || u == 'g') mult = 1024ull * 1024 * 1024;
  if (mult != 1) s.pop_back();
  try {
    return std::stoull(s) * mult;
  } catch (...) {
    return 0;
  }
}

// Sums n 64-bit words with four independent chains, so that loads, not adds, set the pace.
uint64_t sum_words(const uint64_t* p, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    a += p[i] + p[i + 4];
    b += p[i + 1] + p[i + 5];
    c += p[i + 2] + p[i + 6];
    d += p[i + 3] + p[i + 7];
  }
  for (; i < n; ++i) a += p[i];
  return a + b + c + d;
}

}  // namespace

uint64_t last_level_cache_bytes() {
  uint64_t best = 0;
  int best_level = -1;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level_in(dir + "level"), size_in(dir + "size"), type_in(dir + "type");
    if (!level_in || !size_in) break;
    int level = 0;
    std::string size, type;
    level_in >> level;
    std::getline(size_in, size);
    std::getline(type_in, type);
    if (type == "Instruction") continue;
    const uint64_t bytes = parse_size(size);
    if (level > best_level || (level == best_level && bytes > best)) {
      best_level = level;
      best = bytes;
    }
  }
  return best;
}

Result<BandwidthResult> measure_read_bandwidth(const BandwidthOptions& o) {
  if (o.threads < 1 || o.threads > 1024) return invalid_argument("bandwidth probe: threads must be 1..1024");
  if (o.passes < 1) return invalid_argument("bandwidth probe: at least one pass");
  BandwidthResult r;
  r.threads = o.threads;
  r.llc_bytes = last_level_cache_bytes();
  uint64_t bytes = o.bytes;
  if (bytes == 0) {
    bytes = std::max<uint64_t>(1ull << 30, 4 * r.llc_bytes);
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) bytes = std::min<uint64_t>(bytes, static_cast<uint64_t>(pages) * page / 4);
  }
  const uint64_t line = 64 * static_cast<uint64_t>(o.threads);
  bytes = std::max<uint64_t>(line, bytes / line * line);
  r.bytes = bytes;

  void* map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) return io_error("bandwidth probe: cannot map " + std::to_string(bytes >> 20) + " MiB: " + std::strerror(errno));
  auto* words = static_cast<uint64_t*>(map);
  const size_t n_words = bytes / 8;
  const size_t per_thread = n_words / static_cast<size_t>(o.threads);

  std::atomic<uint64_t> sink{0};
  std::vector<double> seconds;
  std::barrier sync(o.threads);
  auto worker = [&](int t) {
    uint64_t* p = words + per_thread * static_cast<size_t>(t);
    // Each thread writes its own share first (real pages, placed near the thread that reads them).
    for (size_t i = 0; i < per_thread; ++i) p[i] = i * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(t);
    for (int pass = 0; pass <= o.passes; ++pass) {
      sync.arrive_and_wait();
      const auto t0 = std::chrono::steady_clock::now();
      const uint64_t s = sum_words(p, per_thread);
      sink.fetch_add(s, std::memory_order_relaxed);
      sync.arrive_and_wait();
      if (t == 0 && pass > 0) seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < o.threads; ++t) pool.emplace_back(worker, t);
  worker(0);
  for (auto& th : pool) th.join();
  ::munmap(map, bytes);

  for (double s : seconds) r.pass_gbs.push_back(s > 0 ? static_cast<double>(bytes) / s / 1e9 : 0.0);
  std::vector<double> sorted = r.pass_gbs;
  std::sort(sorted.begin(), sorted.end());
  r.min_gbs = sorted.front();
  r.max_gbs = sorted.back();
  const size_t m = sorted.size();
  r.median_gbs = m % 2 ? sorted[m / 2] : 0.5 * (sorted[m / 2 - 1] + sorted[m / 2]);
  if (sink.load() == 0x5eed) r.median_gbs += 0;  // keeps the sums alive
  return r;
}

}  // namespace kiln
