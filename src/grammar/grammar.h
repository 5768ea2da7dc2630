// A context-free grammar over Unicode code points, compiled to the flat form the matcher walks:
// each rule is a list of alternatives, each alternative a run of elements ended by kEnd. Groups
// and repetitions of the source text are already rewritten into generated rules.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

// A set of code points: sorted, disjoint, inclusive ranges, with an ASCII bitmap for the common case.
class CharClass {
 public:
  CharClass() = default;
  // `ranges` in any order, overlapping or not; `negated` takes the complement in [0, 0x10FFFF].
  CharClass(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negated);

  bool contains(uint32_t cp) const {
    if (cp < 128) return (ascii_[cp >> 6] >> (cp & 63)) & 1u;
    return contains_slow(cp);
  }
  // Whether some code point in [lo, hi] is in the set.
  bool intersects(uint32_t lo, uint32_t hi) const;
  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return ranges_; }
  bool operator==(const CharClass& o) const { return ranges_ == o.ranges_; }

 private:
  bool contains_slow(uint32_t cp) const;
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;
  uint64_t ascii_[2] = {0, 0};
};

struct GrammarElem {
  enum Kind : uint8_t { kChars, kRule, kEnd };
  Kind kind = kEnd;
  uint32_t arg = 0;  // kChars: index into classes; kRule: index into rules
};

struct GrammarRule {
  std::string name;                 // generated rules: "<parent>~<n>"
  std::vector<uint32_t> alts;       // each alternative's first element in elems
};

struct Grammar {
  std::vector<GrammarElem> elems;
  std::vector<GrammarRule> rules;
  std::vector<CharClass> classes;
  uint32_t root = 0;   // the rule the whole text must match
  uint32_t start = 0;  // elems[start] refers to root, elems[start + 1] ends: the matcher's first stack
};

// What a grammar may be before the parser refuses it (a grammar that would blow up).
struct GrammarLimits {
  size_t max_text_bytes = 1u << 20;    // the source text
  size_t max_rules = 20000;            // rules, generated ones included
  size_t max_elements = 1u << 20;      // elements of all alternatives
  int max_nesting = 64;                // parentheses inside parentheses
  int max_repetition = 1000;           // m and n of {m,n}
};

}  // namespace kiln
