#include "perf/bandwidth.h"

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

#include "perf/sample_stats.h"

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

// Sums n 64-bit words read as kStreams contiguous runs side by side, each with the bytes 2 KiB
// ahead asked for (kStreams 1: one sequential read). Which is faster depends on the core: on an
// Ice Lake VM one stream was held back by the few misses a core keeps in flight (9.3 GB/s for one
// thread against 10.1 for eight, as the decode kernels read), on an AMD EPYC (Zen 4) eight
// streams reach 12-15 GB/s and one 30. A pass times both and keeps the faster: the machine's
// read bandwidth is what the best way of reading gets.
template <int kStreams>
uint64_t sum_words(const uint64_t* p, size_t n) {
  constexpr size_t kAhead = 2048 / sizeof(uint64_t);
  const size_t per = n / kStreams / 8 * 8;
  uint64_t acc[kStreams] = {};
  for (size_t i = 0; i < per; i += 8)
    for (int s = 0; s < kStreams; ++s) {
      const uint64_t* q = p + static_cast<size_t>(s) * per + i;
      if (i + kAhead < per) __builtin_prefetch(q + kAhead, 0, 3);
      acc[s] += (q[0] + q[4]) + (q[1] + q[5]) + (q[2] + q[6]) + (q[3] + q[7]);
    }
  uint64_t total = 0;
  for (uint64_t a : acc) total += a;
  for (size_t i = per * kStreams; i < n; ++i) total += p[i];
  return total;
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

uint64_t default_probe_bytes() {
  uint64_t bytes = std::max<uint64_t>(1ull << 30, 4 * last_level_cache_bytes());
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) bytes = std::min<uint64_t>(bytes, static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 4);
  return bytes;
}

Result<std::unique_ptr<BandwidthProbe>> BandwidthProbe::create(uint64_t bytes, int threads) {
  if (threads < 1 || threads > 1024) return invalid_argument("bandwidth probe: threads must be 1..1024");
  if (bytes == 0) bytes = default_probe_bytes();
  const uint64_t unit = 64 * static_cast<uint64_t>(threads);
  bytes = std::max<uint64_t>(unit, bytes / unit * unit);
  // On 2 MiB pages where the kernel gives them: with 4 KiB pages the reads also wait on page
  // walks (here 33 against 36 GB/s), which is the TLB's limit, not the memory's. The weights a
  // model reads are file pages that the kernel maps 2 MiB at a time where it can, too.
  constexpr uint64_t kHuge = 2ull << 20;
  const uint64_t map_bytes = bytes + kHuge;
  void* map = ::mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED)
    return io_error("bandwidth probe: cannot map " + std::to_string(bytes >> 20) + " MiB: " + std::strerror(errno));
  auto* aligned = reinterpret_cast<uint64_t*>((reinterpret_cast<uintptr_t>(map) + kHuge - 1) & ~(kHuge - 1));
#ifdef MADV_HUGEPAGE
  (void)::madvise(aligned, bytes, MADV_HUGEPAGE);  // a hint; without it the probe still runs
#endif
  std::unique_ptr<BandwidthProbe> p(new BandwidthProbe());
  p->map_ = map;
  p->map_bytes_ = map_bytes;
  p->words_ = aligned;
  p->bytes_ = bytes;
  p->threads_ = threads;
  // Each thread writes its own share (real pages, placed near the thread that will read them).
  const size_t per = bytes / 8 / static_cast<size_t>(threads);
  auto fill = [&](int t) {
    uint64_t* w = p->words_ + per * static_cast<size_t>(t);
    for (size_t i = 0; i < per; ++i) w[i] = i * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(t);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(fill, t);
  fill(0);
  for (auto& th : pool) th.join();
  return p;
}

BandwidthProbe::~BandwidthProbe() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

double BandwidthProbe::pass_gbs() {
  const size_t per = bytes_ / 8 / static_cast<size_t>(threads_);
  std::atomic<uint64_t> sink{0};
  std::barrier start(threads_), done(threads_);
  double seconds[2] = {0, 0};
  auto worker = [&](int t) {
    const uint64_t* mine = words_ + per * static_cast<size_t>(t);
    for (int way = 0; way < 2; ++way) {
      start.arrive_and_wait();
      const auto t0 = std::chrono::steady_clock::now();
      sink.fetch_add(way == 0 ? sum_words<8>(mine, per) : sum_words<1>(mine, per), std::memory_order_relaxed);
      done.arrive_and_wait();
      if (t == 0) seconds[way] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads_; ++t) pool.emplace_back(worker, t);
  worker(0);
  for (auto& th : pool) th.join();
  sink_ += sink.load();  // keeps the sums alive
  const double best = std::min(seconds[0], seconds[1]);
  return best > 0 ? static_cast<double>(bytes_) / best / 1e9 : 0.0;
}

BandwidthResult summarize_bandwidth(std::vector<double> passes, uint64_t bytes, int threads) {
  BandwidthResult r;
  r.pass_gbs = passes;
  r.bytes = bytes;
  r.threads = threads;
  r.llc_bytes = last_level_cache_bytes();
  if (passes.empty()) return r;
  const SampleStats st = summarize_samples(std::move(passes));
  r.min_gbs = st.min;
  r.max_gbs = st.max;
  r.median_gbs = st.median;
  return r;
}

Result<BandwidthResult> measure_read_bandwidth(const BandwidthOptions& o) {
  if (o.passes < 1) return invalid_argument("bandwidth probe: at least one pass");
  KILN_ASSIGN_OR_RETURN(auto probe, BandwidthProbe::create(o.bytes, o.threads));
  probe->pass_gbs();  // warm-up: TLB, caches, frequency
  std::vector<double> passes;
  for (int i = 0; i < o.passes; ++i) passes.push_back(probe->pass_gbs());
  return summarize_bandwidth(std::move(passes), probe->bytes(), probe->threads());
}

}  // namespace kiln
