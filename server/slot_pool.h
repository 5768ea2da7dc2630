// The sessions of one model that requests run on (--parallel N), and the bounded queue in front
// of them. A request goes to the idle slot whose conversation shares the longest prefix with its
// own, so that the runtime reuses that slot's KV cache (a shared system prompt, earlier turns).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::server {

class SlotPool {
 public:
  // Takes the sessions (freed with the pool). `max_queue`: requests that may wait for a slot.
  SlotPool(std::vector<kiln_session*> sessions, int max_queue);
  ~SlotPool();
  SlotPool(const SlotPool&) = delete;
  SlotPool& operator=(const SlotPool&) = delete;

  // The slot index, or nullopt when every slot is busy and the queue is full. Waits in line
  // (first come, first served) while slots are busy and the queue has room.
  std::optional<int> acquire(const std::string& key);
  // Gives the slot back; `key` is what its KV cache now holds (empty after a failure: no reuse).
  void release(int slot, std::string key);

  kiln_session* session(int slot) const { return slots_[static_cast<size_t>(slot)].session; }
  int size() const { return static_cast<int>(slots_.size()); }
  int busy() const;
  int queued() const;

 private:
  struct Slot {
    kiln_session* session = nullptr;
    std::string key;  // the conversation its cache holds, as prefix_key() spells it
    bool busy = false;
    uint64_t last_used = 0;
  };
  // The idle slot to use for `key`, or -1 when none is idle. mu_ held.
  int pick_locked(const std::string& key) const;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Slot> slots_;
  int max_queue_;
  int waiting_ = 0;
  uint64_t next_ticket_ = 0, serving_ticket_ = 0, clock_ = 0;
};

// The text a request's cache would hold, in a form where a shared prefix means shared tokens:
// a completion's prompt; a chat's messages as role/content records.
std::string prefix_key_for_prompt(const std::string& prompt);
std::string prefix_key_for_chat(const std::vector<std::pair<std::string, std::string>>& role_content);

}  // namespace kiln::server
