// The thread pool that runs program steps, shared by every session of a runtime: a step holds it
// from its first kernel to its last, so that sessions generating at once take turns step by step
// and never run more threads than the pool has.
//
// Decode tokens are batched (decode_shared): a session decoding one token queues a request and
// waits for the pool; whoever gets the pool runs one step for every request of the same model
// waiting by then (each weight read once for all of them; the rows run in
// runtime/batched_decode.cpp), and the others find theirs done when the pool comes to them.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <span>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"

namespace kiln {

class Session;

// One session's next token, waiting for a step.
struct DecodeRequest {
  Session* session = nullptr;
  int token = 0;
  bool done = false;
  Status status;                   // when done
  std::span<const float> logits;   // when done and ok
};

class StepExecutor {
 public:
  // The most tokens one batched decode step carries.
  static constexpr size_t kMaxBatch = 64;

  explicit StepExecutor(int n_threads, PoolOptions options = {}) : pool_(n_threads, std::move(options)) {
    queue_.reserve(kMaxBatch * 4);  // decoding allocates nothing once sessions are running
  }
  int n_threads() const { return pool_.size(); }

  // Held for the length of one step (a std::unique_lock works it). Its release wakes the
  // sessions waiting in wait_done_or_free, so that one of them can lead the next step: they
  // sleep through a step instead of polling, which on a phone's few cores took them from the
  // step's own threads (with 4 sessions on 2 cores, a wake-up every 100 us each cost the
  // batched step a third of its speed).
  class StepLock {
   public:
    explicit StepLock(StepExecutor& e) : e_(e) {}
    void lock() {
      e_.mutex_.lock();
      e_.set_busy(true);
    }
    bool try_lock() {
      if (!e_.mutex_.try_lock()) return false;
      e_.set_busy(true);
      return true;
    }
    void unlock() {
      e_.set_busy(false);
      e_.mutex_.unlock();
      e_.queued_.notify_all();
    }

   private:
    StepExecutor& e_;
  };
  StepLock& step_lock() { return step_lock_; }
  // The pool for a step's kernels; null with one thread (kernels then run on the caller).
  ThreadPool* pool() { return pool_.size() > 1 ? &pool_ : nullptr; }

  // Decode steps run so far and the tokens they carried (a batched step carries several).
  void count_decode_step(int tokens) {
    decode_steps_.fetch_add(1, std::memory_order_relaxed);
    decode_tokens_.fetch_add(static_cast<uint64_t>(tokens), std::memory_order_relaxed);
  }
  uint64_t decode_steps() const { return decode_steps_.load(std::memory_order_relaxed); }
  uint64_t decode_tokens() const { return decode_tokens_.load(std::memory_order_relaxed); }

  // One session's token through a shared step: queues `r` and returns once it is done, either by
  // another session's step or by one this thread leads, when it gets the pool first. A leader
  // waits (briefly) for the other decoding sessions' tokens, takes every waiting request that
  // `same` accepts (at most `most`, `r` first) and runs them with `run(batch)`, which writes each
  // request's status and logits; their sessions are then woken. A session served needs no pool to
  // learn it, so it samples its next token while the next step's leader waits for it.
  template <typename Same, typename Run>
  void decode_shared(DecodeRequest& r, size_t most, Same&& same, Run&& run) {
    enqueue(&r);
    for (;;) {
      std::unique_lock<StepLock> hold(step_lock_, std::try_to_lock);
      if (!hold.owns_lock()) {
        if (wait_done_or_free(r)) return;
        continue;
      }
      if (is_done(r)) return;
      if (decoding_.load(std::memory_order_relaxed) > 1) wait_for_decoders(std::chrono::microseconds(2000));
      std::array<DecodeRequest*, kMaxBatch> batch;
      const size_t n = take(&r, most, same, batch);
      const std::span<DecodeRequest* const> rows(batch.data(), n);
      count_decode_step(static_cast<int>(n));
      run(rows);
      complete(rows);
      return;
    }
  }

  // The decode queue; a request stays valid until it is done. (A test queues requests here for
  // sessions that do not call decode_shared themselves: the next step of their model serves them.)
  void enqueue(DecodeRequest* r) {
    {
      std::lock_guard<std::mutex> l(queue_mutex_);
      queue_.push_back(r);
    }
    queued_.notify_all();
  }

 private:
  // True once `r` is done; false when the step lock is free first (the caller may then lead).
  bool wait_done_or_free(const DecodeRequest& r) {
    std::unique_lock<std::mutex> l(queue_mutex_);
    queued_.wait(l, [&] { return r.done || !busy_; });
    return r.done;
  }
  bool is_done(const DecodeRequest& r) {
    std::lock_guard<std::mutex> l(queue_mutex_);
    return r.done;
  }
  // Marks a step's requests done (their results written) and wakes their sessions.
  void complete(std::span<DecodeRequest* const> batch) {
    {
      std::lock_guard<std::mutex> l(queue_mutex_);
      for (DecodeRequest* r : batch) r->done = true;
    }
    queued_.notify_all();
  }

 public:
  // Sessions past their prompt, decoding token by token (generate() counts itself here): a step's
  // leader waits for their next tokens, so that they share its step instead of taking turns.
  std::atomic<int>& decoding() { return decoding_; }

 private:
  // Under the step lock: waits until every other decoding session has queued a token, at most `limit`.
  void wait_for_decoders(std::chrono::microseconds limit) {
    std::unique_lock<std::mutex> l(queue_mutex_);
    queued_.wait_for(l, limit, [&] {
      return static_cast<int>(queue_.size()) >= decoding_.load(std::memory_order_relaxed);
    });
  }
  // Under the step lock: takes `mine` and then, in arrival order, up to `max - 1` (at most
  // kMaxBatch - 1) other requests that `same` accepts (the same model) into `out`; returns how
  // many. `mine` must be queued and not done. Allocates nothing.
  template <typename Same>
  size_t take(DecodeRequest* mine, size_t max, Same&& same, std::array<DecodeRequest*, kMaxBatch>& out) {
    std::lock_guard<std::mutex> l(queue_mutex_);
    max = std::min(max, kMaxBatch);
    size_t n = 0;
    out[n++] = mine;
    size_t kept = 0;
    for (DecodeRequest* r : queue_) {
      if (r == mine) continue;
      if (n < max && same(*r)) out[n++] = r;
      else queue_[kept++] = r;
    }
    queue_.resize(kept);
    return n;
  }

 private:
  void set_busy(bool busy) {
    std::lock_guard<std::mutex> l(queue_mutex_);
    busy_ = busy;
  }

  std::mutex mutex_;
  StepLock step_lock_{*this};
  bool busy_ = false;  // under queue_mutex_: the step lock is held
  ThreadPool pool_;
  std::mutex queue_mutex_;
  std::vector<DecodeRequest*> queue_;
  std::atomic<uint64_t> decode_steps_{0}, decode_tokens_{0};
  std::atomic<int> decoding_{0};
  std::condition_variable queued_;
};

}  // namespace kiln
