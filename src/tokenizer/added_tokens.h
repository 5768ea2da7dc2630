// Added tokens (tokenizer.json's added_tokens, GGUF control and user-defined tokens) and how a
// text is cut at them, as HF tokenizers' AddedVocabulary does.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace kiln {

struct AddedToken {
  std::string content;
  int id = -1;
  bool lstrip = false;       // swallows whitespace before it
  bool rstrip = false;       // swallows whitespace after it
  bool single_word = false;  // matches only between non-word characters
  bool special = false;      // a control token: skipped by decode, and by encode's `plain`
  bool normalized = false;   // matched on the normalized text (byte-level BPE; see AddedTokenMatcher)
};

// Leftmost-longest matching of a set of added tokens in a text, as HF's AddedVocabulary::
// find_matches: non-overlapping matches (a discarded one still consumes its span), single_word
// with Unicode \w, lstrip/rstrip with Unicode whitespace, and special tokens discarded where the
// caller's rule says (HF's encode_special_tokens; plain ranges).
class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `contents[i]` is what token `tokens[i]` matches (its content, or its normalized content).
  AddedTokenMatcher(const std::vector<AddedToken>& tokens, const std::vector<std::string>& contents);
  bool empty() const { return nodes_.empty(); }

  // Cuts `text` (valid UTF-8): calls on_text(segment) for the text between tokens (only
  // non-empty segments) and on_token(index into the constructor's `tokens`) for each token, in order.
  // `special` says what a special token's match at [begin, end) of `text` is (tokenizer.h).
  using SpecialRule = std::function<SpecialMatch(size_t begin, size_t end)>;
  void split(std::string_view text, const SpecialRule& special, const std::function<void(std::string_view)>& on_text,
             const std::function<void(size_t)>& on_token) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;
    int32_t token = -1;
  };
  std::vector<Node> nodes_;
  std::vector<AddedToken> tokens_;
  bool first_byte_[256] = {};
};

}  // namespace kiln
