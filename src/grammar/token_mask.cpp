#include "grammar/token_mask.h"

#include <algorithm>
#include <cstring>

namespace kiln {

namespace {
// Masks kept; past this the cache starts over (each is vocab_size / 8 bytes: 19 KB for 150 k tokens).
constexpr size_t kCachedMasks = 64;
// DFA states kept (1 KB of transitions each); past this the DFA starts over.
constexpr size_t kDfaStates = 4096;
constexpr int32_t kUnknown = -2, kDead = -1;

std::string serialize(const MatchState& s) {
  std::vector<uint32_t> stacks = s.stacks;
  std::sort(stacks.begin(), stacks.end());
  std::string key(8 + stacks.size() * sizeof(uint32_t), '\0');
  key[0] = static_cast<char>(s.need);
  key[1] = static_cast<char>(s.have);
  key[2] = static_cast<char>(s.second_lo);
  key[3] = static_cast<char>(s.second_hi);
  std::memcpy(key.data() + 4, &s.partial, sizeof s.partial);
  if (!stacks.empty()) std::memcpy(key.data() + 8, stacks.data(), stacks.size() * sizeof(uint32_t));
  return key;
}
}  // namespace

TokenMask::TokenMask(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> vocabulary,
                     std::vector<int> stop_ids)
    : matcher_(std::move(grammar)), vocab_(std::move(vocabulary)), stop_ids_(std::move(stop_ids)) {
  depth_ids_.resize(vocab_->max_depth() + 1);
}

void TokenMask::reset_dfa() {
  dfa_ids_.clear();
  dfa_states_.clear();
  dfa_next_.clear();
  dfa_epoch_ = matcher_.epoch();
}

int32_t TokenMask::dfa_state(const MatchState& s) {
  auto [it, fresh] = dfa_ids_.emplace(serialize(s), static_cast<int32_t>(dfa_states_.size()));
  if (fresh) {
    dfa_states_.push_back(s);
    dfa_next_.resize(dfa_next_.size() + 256, kUnknown);
  }
  return it->second;
}

bool TokenMask::is_stop(int id) const { return std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end(); }

bool TokenMask::allows(int id) {
  if (is_stop(id)) return matcher_.is_complete();
  if (id < 0 || id >= vocab_->vocab_size() || vocab_->bytes(id).empty()) return false;
  if (current_) return ((*current_)[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1u;
  return matcher_.would_accept_bytes(vocab_->bytes(id));
}

bool TokenMask::accept(int id) {
  if (is_stop(id)) return matcher_.is_complete();
  if (id < 0 || id >= vocab_->vocab_size() || vocab_->bytes(id).empty()) return false;
  if (!matcher_.accept_bytes(vocab_->bytes(id))) return false;
  current_ = nullptr;
  return true;
}

bool TokenMask::accept_text(std::string_view bytes) {
  if (!matcher_.accept_bytes(bytes)) return false;
  current_ = nullptr;
  return true;
}

std::string TokenMask::state_key() const {
  // Stack ids are interned, so equal states have equal keys (within one arena epoch).
  const uint64_t epoch = matcher_.epoch();
  return std::string(reinterpret_cast<const char*>(&epoch), sizeof epoch) + serialize(matcher_.state());
}

const std::vector<uint64_t>& TokenMask::allowed() {
  if (current_) return *current_;
  std::string key = state_key();
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    if (cache_.size() >= kCachedMasks) cache_.clear();
    std::vector<uint64_t> bits;
    walk(bits);
    it = cache_.emplace(std::move(key), std::move(bits)).first;
  }
  current_ = &it->second;
  return *current_;
}

void TokenMask::walk(std::vector<uint64_t>& bits) {
  ++walks_;
  const size_t n_vocab = static_cast<size_t>(vocab_->vocab_size());
  bits.assign((n_vocab + 63) / 64, 0);
  auto set = [&bits](int id) { bits[static_cast<size_t>(id) >> 6] |= 1ull << (id & 63); };
  if (matcher_.is_complete())
    for (int id : stop_ids_)
      if (id >= 0 && static_cast<size_t>(id) < n_vocab) set(id);
  // The DFA's ids name arena stacks: a compacted arena, or too many states, start it over.
  if (dfa_epoch_ != matcher_.epoch() || dfa_states_.size() > kDfaStates) reset_dfa();
  const std::vector<TokenTrie::Node>& nodes = vocab_->nodes();
  const std::vector<int>& ids = vocab_->ids();
  depth_ids_[0] = dfa_state(matcher_.state());
  MatchState next;
  for (size_t i = 0; i < nodes.size();) {
    const TokenTrie::Node& n = nodes[i];
    const size_t from = static_cast<size_t>(depth_ids_[n.depth - 1]) * 256 + n.byte;
    int32_t to = dfa_next_[from];
    if (to == kUnknown) {
      to = matcher_.step_byte(dfa_states_[from >> 8], n.byte, next) ? dfa_state(next) : kDead;
      dfa_next_[from] = to;
    }
    if (to == kDead) {
      i = n.skip;  // no token under this prefix can come next
      continue;
    }
    depth_ids_[n.depth] = to;
    for (uint32_t k = n.tok_begin; k < n.tok_end; ++k)
      if (!is_stop(ids[k])) set(ids[k]);
    ++i;
  }
}

}  // namespace kiln
