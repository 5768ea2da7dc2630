#include "engine/memory_budget.h"

#include <cstdio>
#include <limits>

namespace kiln {

namespace {
std::string mib(uint64_t b) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
  return s;
}

bool kept(const Evictable* e, std::span<const Evictable* const> keep) {
  return std::find(keep.begin(), keep.end(), e) != keep.end();
}
}  // namespace

void MemoryBudget::add_model(std::weak_ptr<Evictable> model) {
  std::erase_if(models_, [](const auto& w) { return w.expired(); });
  models_.push_back(std::move(model));
}

std::vector<std::shared_ptr<Evictable>> MemoryBudget::live_models() {
  std::vector<std::shared_ptr<Evictable>> out;
  for (const auto& w : models_)
    if (auto m = w.lock()) out.push_back(std::move(m));
  alive_.insert(alive_.end(), out.begin(), out.end());
  return out;
}

void MemoryBudget::make_room(uint64_t bytes, uint64_t limit, int priority, std::span<const Evictable* const> keep) {
  // Idle things of this priority or lower, lowest priority and least recently used first; a
  // model's sessions are candidates of their own, and a model goes only with all of them.
  std::vector<std::shared_ptr<Evictable>> cands;
  for (auto& m : live_models()) {
    std::vector<std::shared_ptr<Evictable>> sessions;
    m->sessions(sessions);
    alive_.insert(alive_.end(), sessions.begin(), sessions.end());
    for (auto& s : sessions)
      if (!kept(s.get(), keep) && s->holds_memory() && s->eviction_priority() <= priority) cands.push_back(s);
    if (!kept(m.get(), keep) && m->holds_memory() && m->eviction_priority() <= priority) cands.push_back(m);
  }
  std::stable_sort(cands.begin(), cands.end(), [](const auto& a, const auto& b) {
    return a->eviction_priority() != b->eviction_priority() ? a->eviction_priority() < b->eviction_priority()
                                                            : a->last_used() < b->last_used();
  });
  for (auto& c : cands) {
    if (held_ + bytes <= limit) break;
    if (!c->holds_memory() || !c->try_hold(keep)) continue;  // gone with its model, or in use
    held_ -= std::min(held_, c->evict_held());
    c->release_hold();
    ++evictions_;
  }
}

Status MemoryBudget::reserve(uint64_t bytes, int priority, const std::string& what,
                             std::span<const Evictable* const> keep) {
  if (budget_ != 0 && held_ + bytes > budget_) {
    make_room(bytes, budget_, priority, keep);
    if (held_ + bytes > budget_)
      return over_budget(what + " needs " + mib(bytes) + ", but the memory budget is " + mib(budget_) + " and " +
                         mib(held_) + " of it is held by models and sessions in use or of higher priority");
  }
  held_ += bytes;
  peak_ = std::max(peak_, held_);
  return Status::ok();
}

uint64_t MemoryBudget::trim() {
  const uint64_t before = held_;
  // Everything idle goes: room for more than all that is held, under a limit of nothing.
  make_room(before + 1, 0, std::numeric_limits<int>::max(), {});
  return before - std::min(before, held_);
}

void MemoryBudget::count(int& n_models, int& n_sessions) {
  n_models = n_sessions = 0;
  for (auto& m : live_models()) {
    ++n_models;
    std::vector<std::shared_ptr<Evictable>> sessions;
    m->sessions(sessions);
    n_sessions += static_cast<int>(sessions.size());
    alive_.insert(alive_.end(), sessions.begin(), sessions.end());
  }
}

}  // namespace kiln
