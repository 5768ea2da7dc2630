// What a Runtime's models and sessions share, inside the engine (engine/runtime.h's classes hold
// it; callers of the runtime never see it): the lock, the memory budget, the step executor that
// runs every session's steps, and the clock that orders uses for eviction.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <utility>

#include "engine/memory_budget.h"
#include "runtime/perf_mode.h"
#include "runtime/step_executor.h"

namespace kiln {

struct RuntimeCore {
  RuntimeCore(uint64_t memory_budget, const ThreadPlan& p)
      : budget(memory_budget), plan(p), executor(std::make_shared<StepExecutor>(p.n_threads, p.pool)) {}

  // The runtime's lock: guards the budget and every model's and session's resident state. What
  // the budget's passes held alive is dropped after unlocking.
  class Lock {
   public:
    explicit Lock(RuntimeCore& c) : c_(c), l_(c.mu) {}
    ~Lock() {
      auto alive = c_.budget.take_alive();
      l_.unlock();
    }
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;

   private:
    RuntimeCore& c_;
    std::unique_lock<std::mutex> l_;
  };

  uint64_t touch() { return ++clock; }

  std::mutex mu;
  MemoryBudget budget;  // guarded by mu
  ThreadPlan plan;
  std::shared_ptr<StepExecutor> executor;
  std::atomic<uint64_t> clock{0};
};

}  // namespace kiln
