// Slots and the queue: one mutex, a ticket per waiting request so that they are served in order.
#include "server/slot_pool.h"

#include <algorithm>

namespace kiln::server {

namespace {

size_t shared_prefix(const std::string& a, const std::string& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

SlotPool::SlotPool(std::vector<kiln_session*> sessions, int max_queue) : max_queue_(max_queue) {
  for (kiln_session* s : sessions) slots_.push_back(Slot{s, {}, false, 0});
}

SlotPool::~SlotPool() {
  for (Slot& s : slots_) kiln_session_free(s.session);
}

int SlotPool::pick_locked(const std::string& key) const {
  // A slot whose held conversation the request mostly continues (at least half of it, as
  // llama-server's slot similarity) is worth its cache; otherwise the least recently used slot,
  // so that a cache another request may come back to survives longest.
  int reuse = -1, lru = -1;
  size_t reuse_len = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (s.busy) continue;
    const size_t len = shared_prefix(s.key, key);
    if (!s.key.empty() && 2 * len >= s.key.size() && len > reuse_len) {
      reuse = static_cast<int>(i);
      reuse_len = len;
    }
    if (lru < 0 || s.last_used < slots_[static_cast<size_t>(lru)].last_used) lru = static_cast<int>(i);
  }
  return reuse >= 0 ? reuse : lru;
}

std::optional<int> SlotPool::acquire(const std::string& key) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool line_empty = next_ticket_ == serving_ticket_;
  if (line_empty) {
    if (const int i = pick_locked(key); i >= 0) {
      slots_[static_cast<size_t>(i)].busy = true;
      return i;
    }
  }
  if (waiting_ >= max_queue_) return std::nullopt;
  const uint64_t ticket = next_ticket_++;
  ++waiting_;
  cv_.wait(lock, [&] { return ticket == serving_ticket_ && pick_locked(key) >= 0; });
  --waiting_;
  ++serving_ticket_;
  const int i = pick_locked(key);
  slots_[static_cast<size_t>(i)].busy = true;
  lock.unlock();
  cv_.notify_all();  // the next in line may find another idle slot
  return i;
}

void SlotPool::release(int slot, std::string key) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Slot& s = slots_[static_cast<size_t>(slot)];
    s.busy = false;
    s.key = std::move(key);
    s.last_used = ++clock_;
  }
  cv_.notify_all();
}

int SlotPool::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.busy; }));
}

int SlotPool::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_;
}

std::string prefix_key_for_prompt(const std::string& prompt) { return "P\x1f" + prompt; }

std::string prefix_key_for_chat(const std::vector<std::pair<std::string, std::string>>& role_content) {
  std::string k = "C";
  for (const auto& [role, content] : role_content) k += "\x1f" + role + "\x1e" + content;
  return k;
}

}  // namespace kiln::server
