#include "core/thread_pool.h"

#if defined(__linux__)
#include <sched.h>
#endif

#include <algorithm>
#include <chrono>

namespace kiln {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace

ThreadPool::ThreadPool(int n_threads, PoolOptions options)
    : n_threads_(std::max(1, n_threads)), options_(std::move(options)), shares_(new Share[static_cast<size_t>(std::max(1, n_threads))]) {
  threads_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_seq_cst);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  generation_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ThreadPool::do_share(int index) {
  if (grain_ > 0) return do_chunks(index);
  const int64_t b = share_begin(n_, index, n_threads_), e = share_begin(n_, index + 1, n_threads_);
  if (b < e) fn_(f_, b, e, index);
}

namespace {

// Claims up to `grain` indices of an open range [front, back) packed as front << 32 | back: from
// the front (its owner) or from the back (another thread). False once the range is empty.
bool claim(std::atomic<uint64_t>& range, uint64_t grain, bool from_front, uint64_t& begin, uint64_t& end) {
  for (uint64_t r = range.load(std::memory_order_relaxed);;) {
    const uint64_t front = r >> 32, back = r & 0xffffffffu;
    if (front >= back) return false;
    const uint64_t take = std::min(back - front, grain);
    begin = from_front ? front : back - take;
    end = begin + take;
    const uint64_t rest = from_front ? (end << 32 | back) : (front << 32 | begin);
    if (range.compare_exchange_weak(r, rest, std::memory_order_relaxed)) return true;
  }
}

}  // namespace

void ThreadPool::do_chunks(int index) {
  const auto grain = static_cast<uint64_t>(grain_);
  uint64_t b = 0, e = 0;
  // Its own share from the front, then the others' from the back, nearest neighbour first.
  for (int k = 0; k < n_threads_; ++k) {
    std::atomic<uint64_t>& range = shares_[static_cast<size_t>((index + k) % n_threads_)].range;
    while (claim(range, grain, k == 0, b, e)) fn_(f_, static_cast<int64_t>(b), static_cast<int64_t>(e), index);
  }
}

void ThreadPool::run(int64_t n, int64_t grain, Fn fn, void* f) {
  fn_ = fn;
  f_ = f;
  n_ = n;
  grain_ = grain;
  if (grain > 0)
    for (int t = 0; t < n_threads_; ++t)
      shares_[static_cast<size_t>(t)].range.store(
          static_cast<uint64_t>(share_begin(n, t, n_threads_)) << 32 | static_cast<uint64_t>(share_begin(n, t + 1, n_threads_)),
          std::memory_order_relaxed);
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_seq_cst);  // publishes the loop (release)
  if (sleepers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();
  do_share(0);
  for (uint32_t spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    cpu_relax();
    if (spins > 4096) std::this_thread::yield();  // a worker lost its core: let it have ours
  }
}

void ThreadPool::worker(int index) {
#if defined(__linux__)
  if (!options_.cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : options_.cpus)
      if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
    (void)sched_setaffinity(0, sizeof set, &set);  // best effort: a refused set leaves the default
  }
#endif
  uint32_t seen = 0;
  for (;;) {
    uint32_t g = generation_.load(std::memory_order_acquire);
    if (g == seen) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(options_.spin_us);
      for (int i = 0; (g = generation_.load(std::memory_order_acquire)) == seen; ++i) {
        cpu_relax();
        if ((i & 15) == 15 && std::chrono::steady_clock::now() > until) break;
      }
    }
    if (g == seen) {
      // Sleep. The seq_cst order of (sleepers_++, load generation_) here against
      // (generation_++, load sleepers_) in run() means a new loop is either seen here or notified.
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      while ((g = generation_.load(std::memory_order_seq_cst)) == seen) generation_.wait(seen, std::memory_order_seq_cst);
      sleepers_.fetch_sub(1, std::memory_order_seq_cst);
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    do_share(index);
    pending_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace kiln
