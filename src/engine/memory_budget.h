// The process-wide memory budget of a Runtime: what is held, and what may be evicted to make room.
//
// What the budget counts is what is really held: a .kiln's mapped bytes (or a source model's
// compiled weights), and each session's KV cache, arena and scratch. When a reservation would
// pass the budget, what is idle (no call running) and of the same or lower priority is evicted
// first, lowest priority and least recently used first; nothing running is touched, and what
// cannot be made to fit is a kBudget status naming what was needed and what is held.
//
// The budget knows models and sessions only as Evictable. It is not locked itself: the runtime's
// lock guards it (RuntimeCore::Lock), and the models and sessions it holds alive during an
// eviction pass are handed back to that lock to drop after unlocking (their destructors release
// their bytes under the same lock).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace kiln {

// A model or a session, as the budget sees it.
class Evictable {
 public:
  virtual ~Evictable() = default;
  virtual int eviction_priority() const = 0;  // lower goes first
  virtual uint64_t last_used() const = 0;     // the runtime's clock at its last use
  virtual bool holds_memory() const = 0;      // resident: evicting it would release bytes
  // Holds it idle when nothing runs on it (for a model: on none of its sessions either) and it is
  // none of `keep`; it stays idle until release_hold().
  virtual bool try_hold(std::span<const Evictable* const> keep) = 0;
  // Releases what it holds (a model: its resident sessions first); the bytes released.
  virtual uint64_t evict_held() = 0;
  virtual void release_hold() = 0;
  // A model's live sessions (appended to `out`); a session has none.
  virtual void sessions(std::vector<std::shared_ptr<Evictable>>& out) { (void)out; }
};

class MemoryBudget {
 public:
  explicit MemoryBudget(uint64_t budget) : budget_(budget) {}

  // A loaded model, considered (with its sessions) by later eviction passes.
  void add_model(std::weak_ptr<Evictable> model);
  // Counts `bytes` as held for `what`, first evicting idle things of priority <= `priority`
  // (never those in `keep`).
  Status reserve(uint64_t bytes, int priority, const std::string& what, std::span<const Evictable* const> keep);
  void release(uint64_t bytes) { held_ -= std::min(held_, bytes); }
  // Evicts everything idle; returns the bytes released.
  uint64_t trim();

  uint64_t budget() const { return budget_; }
  uint64_t held() const { return held_; }
  uint64_t peak() const { return peak_; }
  int evictions() const { return evictions_; }
  // The live models and their live sessions.
  void count(int& n_models, int& n_sessions);

  // The models and sessions the last passes locked from their weak pointers: the runtime's lock
  // drops them after unlocking (a destructor run under the lock would take it again).
  std::vector<std::shared_ptr<Evictable>> take_alive() { return std::exchange(alive_, {}); }
  void keep_alive(std::shared_ptr<Evictable> e) { alive_.push_back(std::move(e)); }

 private:
  // Evicts idle things of priority <= `priority` until `bytes` more fit under `limit`.
  void make_room(uint64_t bytes, uint64_t limit, int priority, std::span<const Evictable* const> keep);
  std::vector<std::shared_ptr<Evictable>> live_models();

  uint64_t budget_ = 0;  // bytes; 0: none
  uint64_t held_ = 0, peak_ = 0;
  int evictions_ = 0;
  std::vector<std::weak_ptr<Evictable>> models_;
  std::vector<std::shared_ptr<Evictable>> alive_;
};

}  // namespace kiln
