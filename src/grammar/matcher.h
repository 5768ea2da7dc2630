// Where a text stands in a grammar: the set of pushdown stacks of grammar positions that the text
// so far can be in (as GBNF engines do), advanced one code point or one UTF-8 byte at a time.
//
// Stacks are persistent: a stack is a node {position, parent} interned in an arena, so that equal
// stacks are one id, a state is a short list of ids, and what follows a stack's top once it has
// matched (its successors, rule references expanded) is computed once per stack and cached.
// Every stack in a state has a character class on top, or is the empty stack (the text may end).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace kiln {

// A state: its stacks, and the UTF-8 sequence begun but not finished (a token may end inside a
// character; the next one finishes it).
struct MatchState {
  std::vector<uint32_t> stacks;
  uint32_t partial = 0;       // the bits of the pending character so far
  uint8_t need = 0;           // continuation bytes still missing (0: none pending)
  uint8_t second_lo = 0x80, second_hi = 0xbf;  // the allowed range of the next byte, when it is the second
  uint8_t have = 0;           // bytes of the pending character seen
};

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);

  // Advances by one code point; false (the state unchanged) when the grammar refuses it.
  bool accept_code_point(uint32_t cp);
  // Advances by UTF-8 bytes (a character may be split between calls); false (unchanged) when
  // any byte is refused or the bytes are not UTF-8.
  bool accept_bytes(std::string_view bytes);
  // Whether `bytes` would be accepted, leaving the state as it is.
  bool would_accept_bytes(std::string_view bytes);
  // The text so far is a whole match of the grammar (no character pending).
  bool is_complete() const { return complete(state_); }
  // Some character may still follow.
  bool can_continue() const;

  // The low level the token mask walks with (token_mask.h).
  const MatchState& state() const { return state_; }
  // `in` advanced by one byte into `out` (out's storage reused); false when refused.
  bool step_byte(const MatchState& in, uint8_t byte, MatchState& out);
  bool complete(const MatchState& s) const { return s.need == 0 && has_empty(s); }
  // Bumped when the arena is compacted: stack ids of before mean nothing after.
  uint64_t epoch() const { return epoch_; }
  size_t arena_size() const { return nodes_.size(); }
  const Grammar& grammar() const { return *grammar_; }

 private:
  struct Node {
    uint32_t pos;     // the element on top (never kEnd)
    uint32_t parent;  // the stack below; kEmpty at the bottom
  };
  static constexpr uint32_t kEmpty = 0;  // node 0: the empty stack

  uint32_t intern(uint32_t pos, uint32_t parent);
  // The stacks with a class (or nothing) on top that stack `s` stands for, appended to `out` (deduplicated).
  void normalize(uint32_t s, std::vector<uint32_t>& out);
  // The normalized stacks once the class on top of `s` has matched (cached).
  std::pair<const uint32_t*, size_t> successors(uint32_t s);
  // `in`'s stacks whose top contains `cp`, advanced, into out.stacks.
  void step_code_point(const std::vector<uint32_t>& in, uint32_t cp, std::vector<uint32_t>& out);
  // Some stack of `stacks` has a top that could take a code point in [lo, hi].
  bool viable(const std::vector<uint32_t>& stacks, uint32_t lo, uint32_t hi) const;
  static bool has_empty(const MatchState& s);
  bool commit(MatchState&& next);
  void compact();

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> interned_;
  std::vector<uint32_t> succ_begin_;  // per node: its successors in succ_ (UINT32_MAX: not computed)
  std::vector<uint32_t> succ_size_;
  std::vector<uint32_t> succ_;
  std::vector<uint32_t> stamp_;       // dedup of a step's output: stamp_[id] == tick_
  uint32_t tick_ = 0;
  std::vector<uint32_t> norm_todo_, norm_seen_, norm_out_;
  MatchState state_, scratch_, scratch2_;
  uint64_t epoch_ = 0;
};

}  // namespace kiln
