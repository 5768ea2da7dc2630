#include "grammar/matcher.h"

#include <algorithm>
#include <limits>

#include "core/utf8.h"

namespace kiln {

namespace {
constexpr uint32_t kNotComputed = std::numeric_limits<uint32_t>::max();
// Past this many interned stacks the arena is rebuilt from the current state alone.
constexpr size_t kCompactAt = 1u << 20;
}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  nodes_.push_back({0, kEmpty});
  succ_begin_.push_back(kNotComputed);
  succ_size_.push_back(0);
  stamp_.push_back(0);
  normalize(intern(grammar_->start, kEmpty), state_.stacks);
}

uint32_t GrammarMatcher::intern(uint32_t pos, uint32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(pos) << 32) | parent;
  auto [it, fresh] = interned_.emplace(key, static_cast<uint32_t>(nodes_.size()));
  if (fresh) {
    nodes_.push_back({pos, parent});
    succ_begin_.push_back(kNotComputed);
    succ_size_.push_back(0);
    stamp_.push_back(0);
  }
  return it->second;
}

void GrammarMatcher::normalize(uint32_t s, std::vector<uint32_t>& out) {
  const Grammar& g = *grammar_;
  norm_todo_.assign(1, s);
  norm_seen_.clear();
  const size_t out_begin = out.size();
  while (!norm_todo_.empty()) {
    const uint32_t id = norm_todo_.back();
    norm_todo_.pop_back();
    // A node reached twice expands the same way twice: once is enough (diamonds of empty alternatives).
    if (std::find(norm_seen_.begin(), norm_seen_.end(), id) != norm_seen_.end()) continue;
    norm_seen_.push_back(id);
    const GrammarElem e = id == kEmpty ? GrammarElem{} : g.elems[nodes_[id].pos];
    if (id == kEmpty || e.kind == GrammarElem::kChars) {
      if (std::find(out.begin() + static_cast<std::ptrdiff_t>(out_begin), out.end(), id) == out.end()) out.push_back(id);
      continue;
    }
    // A rule on top: its continuation stays below, each alternative goes on top.
    const uint32_t pos = nodes_[id].pos;
    const uint32_t parent = nodes_[id].parent;
    const uint32_t below = g.elems[pos + 1].kind == GrammarElem::kEnd ? parent : intern(pos + 1, parent);
    for (uint32_t alt : g.rules[e.arg].alts)
      norm_todo_.push_back(g.elems[alt].kind == GrammarElem::kEnd ? below : intern(alt, below));
  }
}

std::pair<const uint32_t*, size_t> GrammarMatcher::successors(uint32_t s) {
  if (succ_begin_[s] == kNotComputed) {
    const Node n = nodes_[s];
    const uint32_t next = grammar_->elems[n.pos + 1].kind == GrammarElem::kEnd ? n.parent : intern(n.pos + 1, n.parent);
    norm_out_.clear();
    normalize(next, norm_out_);
    succ_begin_[s] = static_cast<uint32_t>(succ_.size());
    succ_size_[s] = static_cast<uint32_t>(norm_out_.size());
    succ_.insert(succ_.end(), norm_out_.begin(), norm_out_.end());
  }
  return {succ_.data() + succ_begin_[s], succ_size_[s]};
}

void GrammarMatcher::step_code_point(const std::vector<uint32_t>& in, uint32_t cp, std::vector<uint32_t>& out) {
  out.clear();
  if (++tick_ == 0) {
    std::fill(stamp_.begin(), stamp_.end(), 0u);
    tick_ = 1;
  }
  const Grammar& g = *grammar_;
  for (uint32_t s : in) {
    if (s == kEmpty) continue;
    if (!g.classes[g.elems[nodes_[s].pos].arg].contains(cp)) continue;
    auto [p, n] = successors(s);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t t = p[i];
      if (stamp_[t] == tick_) continue;
      stamp_[t] = tick_;
      out.push_back(t);
    }
  }
}

bool GrammarMatcher::viable(const std::vector<uint32_t>& stacks, uint32_t lo, uint32_t hi) const {
  const Grammar& g = *grammar_;
  for (uint32_t s : stacks)
    if (s != kEmpty && g.classes[g.elems[nodes_[s].pos].arg].intersects(lo, hi)) return true;
  return false;
}

bool GrammarMatcher::has_empty(const MatchState& s) {
  return std::find(s.stacks.begin(), s.stacks.end(), kEmpty) != s.stacks.end();
}

bool GrammarMatcher::can_continue() const {
  return std::any_of(state_.stacks.begin(), state_.stacks.end(), [](uint32_t s) { return s != kEmpty; });
}

bool GrammarMatcher::step_byte(const MatchState& in, uint8_t b, MatchState& out) {
  if (in.need == 0) {
    if (b < 0x80) {
      step_code_point(in.stacks, b, out.stacks);
      out.need = 0;
      return !out.stacks.empty();
    }
    const Utf8Lead lead = utf8_lead(b);
    if (lead.length < 2) return false;
    const uint32_t bits = b & (lead.length == 2 ? 0x1Fu : lead.length == 3 ? 0x0Fu : 0x07u);
    // The code points this lead can start, its second byte's range applied (no overlongs, no
    // surrogates, nothing past U+10FFFF).
    const uint32_t after = 6u * static_cast<uint32_t>(lead.length - 2);
    const uint32_t lo = (bits << (after + 6)) | (static_cast<uint32_t>(lead.lo & 0x3F) << after);
    const uint32_t hi = (bits << (after + 6)) | (static_cast<uint32_t>(lead.hi & 0x3F) << after) | ((1u << after) - 1);
    if (!viable(in.stacks, lo, hi)) return false;
    out.stacks = in.stacks;
    out.partial = bits;
    out.need = static_cast<uint8_t>(lead.length - 1);
    out.have = 1;
    out.second_lo = lead.lo;
    out.second_hi = lead.hi;
    return true;
  }
  const uint8_t lo = in.have == 1 ? in.second_lo : 0x80, hi = in.have == 1 ? in.second_hi : 0xbf;
  if (b < lo || b > hi) return false;
  const uint32_t value = (in.partial << 6) | (b & 0x3Fu);
  if (in.need == 1) {
    step_code_point(in.stacks, value, out.stacks);
    out.need = 0;
    return !out.stacks.empty();
  }
  const uint32_t rest = 6u * static_cast<uint32_t>(in.need - 1);
  if (!viable(in.stacks, value << rest, (value << rest) | ((1u << rest) - 1))) return false;
  out.stacks = in.stacks;
  out.partial = value;
  out.need = static_cast<uint8_t>(in.need - 1);
  out.have = static_cast<uint8_t>(in.have + 1);
  return true;
}

bool GrammarMatcher::commit(MatchState&& next) {
  state_ = std::move(next);
  if (nodes_.size() > kCompactAt) compact();
  return true;
}

bool GrammarMatcher::accept_code_point(uint32_t cp) {
  if (state_.need != 0) return false;
  MatchState next;
  step_code_point(state_.stacks, cp, next.stacks);
  if (next.stacks.empty()) return false;
  return commit(std::move(next));
}

bool GrammarMatcher::would_accept_bytes(std::string_view bytes) {
  scratch_ = state_;
  for (char c : bytes) {
    if (!step_byte(scratch_, static_cast<uint8_t>(c), scratch2_)) return false;
    std::swap(scratch_, scratch2_);
  }
  return true;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (!would_accept_bytes(bytes)) return false;
  return commit(std::move(scratch_));
}

void GrammarMatcher::compact() {
  // Re-interns the current state's stacks into a fresh arena; every cache starts over.
  std::vector<std::vector<uint32_t>> paths;
  for (uint32_t s : state_.stacks) {
    std::vector<uint32_t> path;
    for (uint32_t id = s; id != kEmpty; id = nodes_[id].parent) path.push_back(nodes_[id].pos);
    paths.push_back(std::move(path));
  }
  nodes_.assign(1, {0, kEmpty});
  interned_.clear();
  succ_begin_.assign(1, kNotComputed);
  succ_size_.assign(1, 0);
  succ_.clear();
  stamp_.assign(1, 0);
  tick_ = 0;
  state_.stacks.clear();
  for (const auto& path : paths) {
    uint32_t id = kEmpty;
    for (auto it = path.rbegin(); it != path.rend(); ++it) id = intern(*it, id);
    state_.stacks.push_back(id);
  }
  ++epoch_;
}

}  // namespace kiln
