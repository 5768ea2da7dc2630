// A vocabulary's token bytes in a trie laid out in depth-first order, so that the token mask walks
// it once per step with the grammar state advanced along shared prefixes, skipping a whole
// subtree where the grammar refuses its prefix.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

class TokenTrie {
 public:
  struct Node {
    uint32_t skip;       // the index just past this node's subtree
    uint32_t tok_begin;  // the tokens whose bytes end here: ids()[tok_begin, tok_end)
    uint32_t tok_end;
    uint32_t depth;      // 1 for a first byte
    uint8_t byte;
  };

  // `bytes[id]`: what token id stands for in a text; an empty string leaves the token out (it is
  // never allowed: special and control tokens).
  explicit TokenTrie(std::vector<std::string> bytes);

  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int>& ids() const { return ids_; }
  const std::string& bytes(int id) const { return bytes_[static_cast<size_t>(id)]; }
  int vocab_size() const { return static_cast<int>(bytes_.size()); }
  size_t max_depth() const { return max_depth_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<Node> nodes_;
  std::vector<int> ids_;  // token ids sorted by their bytes
  size_t max_depth_ = 0;
};

}  // namespace kiln
