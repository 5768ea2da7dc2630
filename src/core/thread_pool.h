// A persistent pool of worker threads for the per-token path: the workers are created once, and
// parallel_for neither allocates nor takes a lock. The calling thread is worker 0 and takes its
// share of every loop; the others spin briefly after each loop (the next one usually follows
// within microseconds) and then sleep on an atomic wait, so an idle process burns no CPU.
//
// Work is split statically: parallel_for(n, f) gives thread t of T the range
// [n * t / T, n * (t + 1) / T). Which thread computes an index therefore never depends on timing,
// and a kernel that writes each output from one index gives the same bits at every thread count.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace kiln {

class ThreadPool {
 public:
  // n_threads counts the caller: 1 runs everything inline and starts no thread.
  explicit ThreadPool(int n_threads);
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
    run(n, &invoke<F>, &f);
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

  void run(int64_t n, Fn fn, void* f);
  void worker(int index);
  void do_share(int index);

  int n_threads_ = 1;
  std::vector<std::thread> threads_;
  // The current loop, published by bumping generation_ (release) after these are written.
  Fn fn_ = nullptr;
  void* f_ = nullptr;
  int64_t n_ = 0;
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<int> pending_{0};   // workers still inside the current loop
  alignas(64) std::atomic<int> sleepers_{0};  // workers blocked in generation_.wait
  std::atomic<bool> stop_{false};
};

}  // namespace kiln
