// The thread pool that runs program steps, shared by every session of a runtime: a step holds it
// from its first kernel to its last, so that sessions generating at once take turns step by step
// and never run more threads than the pool has.
#pragma once

#include <mutex>

#include "core/thread_pool.h"

namespace kiln {

class StepExecutor {
 public:
  explicit StepExecutor(int n_threads, PoolOptions options = {}) : pool_(n_threads, std::move(options)) {}
  int n_threads() const { return pool_.size(); }
  // Held for the length of one step.
  std::mutex& mutex() { return mutex_; }
  // The pool for a step's kernels; null with one thread (kernels then run on the caller).
  ThreadPool* pool() { return pool_.size() > 1 ? &pool_ : nullptr; }

 private:
  std::mutex mutex_;
  ThreadPool pool_;
};

}  // namespace kiln
