// A persistent pool of worker threads for the per-token path: the workers are created once, and
// parallel_for neither allocates nor takes a lock. The calling thread is worker 0 and takes its
// share of every loop; the others spin briefly after each loop (the next one usually follows
// within microseconds) and then sleep on an atomic wait, so an idle process burns no CPU.
//
// Work is split statically: parallel_for(n, f) gives thread t of T the range
// [n * t / T, n * (t + 1) / T). Which thread computes an index therefore never depends on timing,
// and a kernel that writes each output from one index gives the same bits at every thread count.
// parallel_chunks starts from the same shares but lets a thread that finishes early take chunks
// from the end of the others' (a core the host preempts, or that memory serves later, does not
// hold up the loop); it is for loops whose result per index does not depend on the thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

namespace kiln {

// How the workers wait and where they run (a runtime's performance mode chooses).
struct PoolOptions {
  // How long an idle worker spins before it sleeps: long enough to bridge the gap between two
  // kernels of one step, short enough that an idle session costs nothing. Longer spins answer the
  // next step sooner at the cost of power.
  int spin_us = 100;
  // The CPUs the workers may run on (sched_setaffinity); empty: wherever the process may.
  std::vector<int> cpus;
};

class ThreadPool {
 public:
  // n_threads counts the caller: 1 runs everything inline and starts no thread.
  explicit ThreadPool(int n_threads, PoolOptions options = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls f(begin, end, thread) once per thread over its static share of [0, n); empty shares
  // are skipped. Returns when every share is done. Not reentrant: f must not call parallel_for.
  template <typename F>
  void parallel_for(int64_t n, F&& f) {
    if (n <= 0) return;
    if (n_threads_ == 1 || n == 1) {
      f(int64_t{0}, n, 0);
      return;
    }
    run(n, 0, &invoke<F>, &f);
  }

  // Calls f(begin, end, thread) over chunks of at most `grain` indices covering [0, n) once
  // each: thread t first walks its static share from the front, then takes chunks from the back
  // of the shares still open. Returns when every index is done. One thread, or n <= grain: one
  // call f(0, n, 0).
  template <typename F>
  void parallel_chunks(int64_t n, int64_t grain, F&& f) {
    if (n <= 0) return;
    if (n_threads_ == 1 || n <= grain) {
      f(int64_t{0}, n, 0);
      return;
    }
    run(n, n < (int64_t{1} << 32) ? std::max<int64_t>(grain, 1) : 0, &invoke<F>, &f);
  }

  // Calls f(thread) once on every thread (for work a kernel splits itself).
  template <typename F>
  void run_on_all(F&& f) {
    parallel_for(n_threads_, [&f](int64_t b, int64_t, int t) {
      (void)b;
      f(t);
    });
  }

  // The share of [0, n) that thread t of `threads` owns.
  static int64_t share_begin(int64_t n, int t, int threads) { return n * t / threads; }

 private:
  using Fn = void (*)(void* f, int64_t begin, int64_t end, int thread);
  template <typename F>
  static void invoke(void* f, int64_t begin, int64_t end, int thread) {
    (*static_cast<std::remove_reference_t<F>*>(f))(begin, end, thread);
  }

  void run(int64_t n, int64_t grain, Fn fn, void* f);
  void worker(int index);
  void do_share(int index);
  void do_chunks(int index);

  // One thread's share in parallel_chunks: the open range [front, back) packed as front << 32 |
  // back, so that the owner (front) and a thief (back) claim chunks with one compare-exchange.
  struct alignas(64) Share {
    std::atomic<uint64_t> range{0};
  };

  int n_threads_ = 1;
  PoolOptions options_;
  std::vector<std::thread> threads_;
  // The current loop, published by bumping generation_ (release) after these are written.
  Fn fn_ = nullptr;
  void* f_ = nullptr;
  int64_t n_ = 0;
  int64_t grain_ = 0;  // 0: static shares (parallel_for)
  std::unique_ptr<Share[]> shares_;
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<int> pending_{0};   // workers still inside the current loop
  alignas(64) std::atomic<int> sleepers_{0};  // workers blocked in generation_.wait
  std::atomic<bool> stop_{false};
};

// f(i) for every i < n: over the pool's static shares where there is a pool and more than one
// index, else inline on the caller.
template <typename F>
void for_each_index(ThreadPool* pool, int64_t n, F&& f) {
  if (pool == nullptr || n <= 1) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
  pool->parallel_for(n, [&f](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) f(i);
  });
}

}  // namespace kiln
