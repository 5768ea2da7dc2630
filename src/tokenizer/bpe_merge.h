// The one BPE merge engine: symbols in a doubly linked list, candidate pairs in a priority queue.
//
// Every tokenizer model kind calls bpe_merge() with its own pair rule; the engine only knows
// "this adjacent pair may become token X with priority P". The highest priority merges first;
// among equal priorities the leftmost pair wins (as llama2.c's scan, llama.cpp's SPM session and
// HF tokenizers' BPE all do). Stale queue entries are skipped when popped, so a text of n
// symbols costs O(n log n); words of up to 32 symbols use a plain scan (O(n^2), faster there).
#pragma once

#include <cstdint>
#include <algorithm>
#include <utility>
#include <vector>

namespace kiln {

// BpeSymbol::id of a symbol that was merged into its left neighbour.
constexpr int kBpeAbsorbed = -2;

struct BpeSymbol {
  int id = -1;         // token id; -1 for "not a token (yet)", which a rule may still merge by text
  uint32_t begin = 0;  // the symbol's bytes in the caller's buffer: [begin, begin + len)
  uint32_t len = 0;    // may be 0 (an empty piece)
  int32_t prev = -1;   // neighbours in the list (indexes into the symbol vector), -1 at the ends
  int32_t next = -1;
};

// What a rule answers for an adjacent pair that may merge.
struct BpeMerge {
  int id = -1;            // the merged token
  double priority = 0.0;  // higher merges first (a score, or minus a merge rank)
};

// Links `syms` (already filled with id/begin/len, in order) into a list. The symbols of one
// call must be contiguous in the buffer: syms[i].begin + syms[i].len == syms[i + 1].begin.
inline void bpe_link(std::vector<BpeSymbol>& syms) {
  const auto n = static_cast<int32_t>(syms.size());
  for (int32_t i = 0; i < n; ++i) {
    syms[static_cast<size_t>(i)].prev = i - 1;
    syms[static_cast<size_t>(i)].next = i + 1 < n ? i + 1 : -1;
  }
}

// A pair waiting in the queue (exposed so that callers can keep the queue's storage).
struct BpeCandidate {
  double priority;
  int32_t left, right;
  int left_id, right_id, merged_id;
};

// Runs the merges. `rule(const BpeSymbol& left, const BpeSymbol& right, BpeMerge* out) -> bool`
// decides whether the pair merges, into which token, with what priority. The rule must be a pure
// function of the two symbols (their ids and bytes). Afterwards the live symbols are those
// reachable from syms[0] through `next` (syms[0] is never absorbed). `queue` is working storage
// (its contents on entry do not matter), so that a caller merging many words allocates once.
template <typename Rule>
void bpe_merge(std::vector<BpeSymbol>& syms, Rule&& rule, std::vector<BpeCandidate>& queue) {
  // A max-heap: higher priority on top, then the smaller left index.
  auto lower = [](const BpeCandidate& a, const BpeCandidate& b) {
    if (a.priority != b.priority) return a.priority < b.priority;
    return a.left > b.left;
  };
  queue.clear();
  if (syms.size() < 2) return;

  // Short words (most of them): a scan over the adjacent pairs instead of the queue. The same
  // choice each step (the highest priority, then the leftmost), so the same result.
  constexpr size_t kSmall = 32;
  if (syms.size() <= kSmall) {
    struct Pair {
      bool ok;
      BpeMerge m;
    };
    Pair pair[kSmall];  // pair[i]: symbol i with its right neighbour
    auto eval = [&](int32_t l) {
      Pair& p = pair[static_cast<size_t>(l)];
      const int32_t r = syms[static_cast<size_t>(l)].next;
      p.ok = r >= 0 && rule(syms[static_cast<size_t>(l)], syms[static_cast<size_t>(r)], &p.m) && p.m.priority == p.m.priority;
    };
    for (int32_t i = 0; i >= 0; i = syms[static_cast<size_t>(i)].next) eval(i);
    for (;;) {
      int32_t best = -1;
      for (int32_t i = 0; i >= 0; i = syms[static_cast<size_t>(i)].next)
        if (pair[static_cast<size_t>(i)].ok && (best < 0 || pair[static_cast<size_t>(i)].m.priority > pair[static_cast<size_t>(best)].m.priority))
          best = i;
      if (best < 0) return;
      BpeSymbol& a = syms[static_cast<size_t>(best)];
      BpeSymbol& b = syms[static_cast<size_t>(a.next)];
      a.id = pair[static_cast<size_t>(best)].m.id;
      a.len += b.len;
      a.next = b.next;
      if (b.next >= 0) syms[static_cast<size_t>(b.next)].prev = best;
      b.id = kBpeAbsorbed;
      b.next = b.prev = -1;
      if (a.prev >= 0) eval(a.prev);
      eval(best);
    }
  }

  auto consider = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const BpeSymbol& a = syms[static_cast<size_t>(l)];
    const BpeSymbol& b = syms[static_cast<size_t>(r)];
    BpeMerge m;
    if (!rule(a, b, &m)) return;
    // NaN would break the queue's ordering; such a pair never merges (as in llama2.c, where
    // "score > best" is false for NaN).
    if (m.priority != m.priority) return;
    queue.push_back({m.priority, l, r, a.id, b.id, m.id});
    std::push_heap(queue.begin(), queue.end(), lower);
  };

  for (int32_t i = 0; i + 1 < static_cast<int32_t>(syms.size()); ++i) consider(i, i + 1);

  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), lower);
    const BpeCandidate c = queue.back();
    queue.pop_back();
    BpeSymbol& a = syms[static_cast<size_t>(c.left)];
    BpeSymbol& b = syms[static_cast<size_t>(c.right)];
    // Stale when either side was absorbed (its id is kBpeAbsorbed), they are no longer
    // adjacent, or either has become another token; the same ids, still adjacent, are the same
    // pair, so the rule's answer still holds.
    if (a.next != c.right || a.id != c.left_id || b.id != c.right_id) continue;
    a.id = c.merged_id;
    a.len += b.len;
    a.next = b.next;
    if (b.next >= 0) syms[static_cast<size_t>(b.next)].prev = c.left;
    b.id = kBpeAbsorbed;
    b.next = b.prev = -1;
    consider(a.prev, c.left);
    consider(c.left, a.next);
  }
}

template <typename Rule>
void bpe_merge(std::vector<BpeSymbol>& syms, Rule&& rule) {
  std::vector<BpeCandidate> queue;
  queue.reserve(syms.size());
  bpe_merge(syms, std::forward<Rule>(rule), queue);
}

}  // namespace kiln
