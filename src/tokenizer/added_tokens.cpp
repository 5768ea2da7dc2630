#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/unicode_text.h"

namespace kiln {

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens, const std::vector<std::string>& contents)
    : tokens_(tokens) {
  nodes_.emplace_back();
  for (size_t i = 0; i < tokens.size() && i < contents.size(); ++i) {
    const std::string& c = contents[i];
    if (c.empty()) continue;
    first_byte_[static_cast<uint8_t>(c[0])] = true;
    int32_t node = 0;
    for (char ch : c) {
      const auto b = static_cast<uint8_t>(ch);
      int32_t next = -1;
      for (const auto& [byte, child] : nodes_[static_cast<size_t>(node)].children)
        if (byte == b) next = child;
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_[static_cast<size_t>(node)].children.emplace_back(b, next);
        nodes_.emplace_back();
      }
      node = next;
    }
    // Two tokens with the same content: the first one listed wins.
    if (nodes_[static_cast<size_t>(node)].token < 0) nodes_[static_cast<size_t>(node)].token = static_cast<int32_t>(i);
  }
  if (nodes_.size() == 1) nodes_.clear();
}

namespace {

// The code point that ends s[0, end) (valid UTF-8, end > 0).
uint32_t code_point_before(std::string_view s, size_t end) {
  size_t b = end - 1;
  while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xc0) == 0x80) --b;
  size_t i = b;
  return unicode::next_code_point(s, i);
}

}  // namespace

void AddedTokenMatcher::split(std::string_view text, const SpecialRule& special,
                              const std::function<void(std::string_view)>& on_text,
                              const std::function<void(size_t)>& on_token) const {
  if (nodes_.empty()) {
    if (!text.empty()) on_text(text);
    return;
  }
  const size_t n = text.size();
  size_t start_offset = 0;  // where the text not yet handed out begins
  size_t i = 0;
  while (i < n) {
    if (!first_byte_[static_cast<uint8_t>(text[i])]) {
      ++i;
      continue;
    }
    // The longest token at i.
    int32_t node = 0, best = -1;
    size_t best_len = 0;
    for (size_t k = i; k < n; ++k) {
      int32_t next = -1;
      for (const auto& [byte, child] : nodes_[static_cast<size_t>(node)].children)
        if (byte == static_cast<uint8_t>(text[k])) next = child;
      if (next < 0) break;
      node = next;
      if (nodes_[static_cast<size_t>(node)].token >= 0) {
        best = nodes_[static_cast<size_t>(node)].token;
        best_len = k + 1 - i;
      }
    }
    if (best < 0) {
      ++i;
      continue;
    }
    const AddedToken& t = tokens_[static_cast<size_t>(best)];
    size_t start = i, stop = i + best_len;
    i = stop;  // a discarded match still consumes its span
    if (t.special) {
      const SpecialMatch m = special(start, stop);
      if (m == SpecialMatch::kTextNextByte) i = start + 1;
      if (m != SpecialMatch::kToken) continue;
    }
    if (t.single_word) {
      const bool start_space = start == 0 || !unicode::is_word_char(code_point_before(text, start));
      size_t at = stop;
      const bool stop_space = stop == n || !unicode::is_word_char(unicode::next_code_point(text, at));
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) {
      size_t s = start;
      while (s > start_offset) {
        size_t b = s - 1;
        while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xc0) == 0x80) --b;
        size_t at = b;
        if (!unicode::is_whitespace(unicode::next_code_point(text, at))) break;
        s = b;
      }
      start = s;
    }
    if (t.rstrip) {
      while (stop < n) {
        size_t at = stop;
        if (!unicode::is_whitespace(unicode::next_code_point(text, at))) break;
        stop = at;
      }
      i = stop;
    }
    if (start_offset < start) on_text(text.substr(start_offset, start - start_offset));
    on_token(static_cast<size_t>(best));
    start_offset = stop;
  }
  if (start_offset < n) on_text(text.substr(start_offset));
}

}  // namespace kiln
