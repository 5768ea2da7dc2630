#include "grammar/token_trie.h"

#include <algorithm>

namespace kiln {

TokenTrie::TokenTrie(std::vector<std::string> bytes) : bytes_(std::move(bytes)) {
  for (size_t i = 0; i < bytes_.size(); ++i)
    if (!bytes_[i].empty()) ids_.push_back(static_cast<int>(i));
  std::sort(ids_.begin(), ids_.end(), [&](int a, int b) {
    const std::string& x = bytes_[static_cast<size_t>(a)];
    const std::string& y = bytes_[static_cast<size_t>(b)];
    return x != y ? x < y : a < b;
  });
  // Sorted, each token shares a prefix with the one before: close the nodes past that prefix,
  // open the rest. Equal strings are adjacent, so each node's tokens are one run of ids_.
  std::vector<uint32_t> path;
  const std::string* prev = nullptr;
  for (size_t k = 0; k < ids_.size(); ++k) {
    const std::string& b = bytes_[static_cast<size_t>(ids_[k])];
    size_t lcp = 0;
    if (prev) {
      const size_t n = std::min(prev->size(), b.size());
      while (lcp < n && (*prev)[lcp] == b[lcp]) ++lcp;
    }
    while (path.size() > lcp) {
      nodes_[path.back()].skip = static_cast<uint32_t>(nodes_.size());
      path.pop_back();
    }
    for (size_t d = lcp; d < b.size(); ++d) {
      path.push_back(static_cast<uint32_t>(nodes_.size()));
      nodes_.push_back({0, 0, 0, static_cast<uint32_t>(d + 1), static_cast<uint8_t>(b[d])});
    }
    Node& end = nodes_[path.back()];
    if (end.tok_begin == end.tok_end) end.tok_begin = static_cast<uint32_t>(k);
    end.tok_end = static_cast<uint32_t>(k + 1);
    max_depth_ = std::max(max_depth_, b.size());
    prev = &b;
  }
  while (!path.empty()) {
    nodes_[path.back()].skip = static_cast<uint32_t>(nodes_.size());
    path.pop_back();
  }
}

}  // namespace kiln
