// Which tokens a grammar allows next, over a model's whole vocabulary: one walk of the token trie
// per step (token_trie.h) with the matcher's state advanced along shared prefixes, a character
// split between tokens carried over. A stop token (EOS, end of turn) is allowed only where the
// grammar may end. `allows` checks one token (the sampler's pick: the early accept) without the
// walk; masks are cached by state, since a grammar keeps coming back to the same states (inside
// a JSON string every character leads back to where it was). The walk itself runs on a lazily
// built DFA: each distinct matcher state gets an id and its byte transitions are computed once,
// so that a walk over states seen before is a table lookup per trie node.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/matcher.h"
#include "grammar/token_trie.h"

namespace kiln {

class TokenMask {
 public:
  TokenMask(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> vocabulary,
            std::vector<int> stop_ids);

  // Whether token `id` may come next.
  bool allows(int id);
  // The allowed tokens as bits (bit id % 64 of word id / 64), vocab_size bits.
  const std::vector<uint64_t>& allowed();
  // Advances past token `id`; false (the state unchanged) when the grammar refuses it.
  bool accept(int id);
  // Advances past `bytes` (text the reply already holds: a lazy grammar's trigger and what came
  // with it); false (the state unchanged) when the grammar refuses them.
  bool accept_text(std::string_view bytes);
  bool is_complete() const { return matcher_.is_complete(); }
  bool is_stop(int id) const;
  const GrammarMatcher& matcher() const { return matcher_; }
  // How many allowed() calls walked the trie (the others came from the cache).
  uint64_t walks() const { return walks_; }
  // allowed() of the present state into `bits`, always by a walk (what a cache miss costs: benchmarks).
  void walk(std::vector<uint64_t>& bits);

 private:
  std::string state_key() const;
  // The DFA state id of `s` (added when new).
  int32_t dfa_state(const MatchState& s);
  void reset_dfa();

  GrammarMatcher matcher_;
  std::shared_ptr<const TokenTrie> vocab_;
  std::vector<int> stop_ids_;
  std::unordered_map<std::string, std::vector<uint64_t>> cache_;
  const std::vector<uint64_t>* current_ = nullptr;  // allowed() of the present state, once asked
  std::unordered_map<std::string, int32_t> dfa_ids_;
  std::vector<MatchState> dfa_states_;
  std::vector<int32_t> dfa_next_;  // [state * 256 + byte]: the next state, kUnknown or kDead
  std::vector<int32_t> depth_ids_;
  uint64_t dfa_epoch_ = 0;
  uint64_t walks_ = 0;
};

}  // namespace kiln
