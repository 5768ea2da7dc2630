#include "grammar/gbnf_parser.h"

#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>

#include "core/utf8.h"

namespace kiln {

namespace {

constexpr size_t kNone = std::numeric_limits<size_t>::max();
constexpr uint32_t kMaxCodePoint = 0x10FFFF;

using Seq = std::vector<GrammarElem>;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

class GbnfParser {
 public:
  GbnfParser(std::string_view text, const GrammarLimits& limits) : text_(text), limits_(limits) {}

  Result<Grammar> parse() {
    if (text_.size() > limits_.max_text_bytes)
      return invalid_argument("gbnf: the grammar is " + std::to_string(text_.size()) + " bytes, more than the limit of " +
                              std::to_string(limits_.max_text_bytes));
    skip_space(true);
    while (pos_ < text_.size()) {
      KILN_RETURN_IF_ERROR(parse_rule());
      skip_space(true);
    }
    for (size_t r = 0; r < rules_.size(); ++r)
      if (!rules_[r].defined)
        return error_at(rules_[r].origin, "rule '" + rules_[r].name + "' is used but not defined");
    auto root = ids_.find("root");
    if (root == ids_.end()) return invalid_argument("gbnf: the grammar has no 'root' rule (where the text starts)");
    KILN_RETURN_IF_ERROR(check_left_recursion());
    return build(root->second);
  }

 private:
  struct RuleDraft {
    std::string name;
    size_t origin = 0;  // where it is defined (or first used, while undefined)
    bool defined = false;
    bool generated = false;  // a group's or a repetition's rule
    std::vector<Seq> alts;
  };

  // "gbnf: line L, column C: what" at byte offset `off` (columns count bytes, from 1).
  Status error_at(size_t off, const std::string& what) const {
    return invalid_argument("gbnf: " + where(off) + ": " + what);
  }
  std::string found() const {
    if (pos_ >= text_.size()) return "the end of the grammar";
    const char c = text_[pos_];
    if (c == '\n') return "the end of the line";
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) return "byte " + std::to_string(static_cast<unsigned char>(c));
    return std::string("'") + c + "'";
  }

  // Blanks and comments; newlines too when `newlines` (between rules, inside parentheses, after |).
  void skip_space(bool newlines) {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || ((c == '\n' || c == '\r') && newlines)) {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else if (c == '\r' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '\n' && newlines) {
        pos_ += 2;
      } else {
        break;
      }
    }
  }

  std::string_view parse_name() {
    const size_t b = pos_;
    while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
    return text_.substr(b, pos_ - b);
  }

  Result<uint32_t> rule_id(std::string_view name, size_t where) {
    auto it = ids_.find(std::string(name));
    if (it != ids_.end()) return it->second;
    return new_rule(std::string(name), where);
  }
  Result<uint32_t> new_rule(std::string name, size_t where) {
    if (rules_.size() >= limits_.max_rules)
      return error_at(where, "the grammar needs more than " + std::to_string(limits_.max_rules) +
                                 " rules (repetitions and groups count) — the limit");
    const auto id = static_cast<uint32_t>(rules_.size());
    RuleDraft d;
    d.name = name;
    d.origin = where;
    rules_.push_back(std::move(d));
    ids_.emplace(std::move(name), id);
    return id;
  }
  // A rule made for a group or a repetition inside `parent`, defined at `where`.
  Result<uint32_t> generated(uint32_t parent, size_t where) {
    // '~' cannot appear in a rule name of the text, so no user's rule takes this one.
    KILN_ASSIGN_OR_RETURN(uint32_t id, new_rule(rules_[parent].name + "~" + std::to_string(++n_generated_), where));
    rules_[id].defined = true;
    rules_[id].generated = true;
    return id;
  }

  Status count_elems(size_t n, size_t where) {
    n_elems_ += n;
    if (n_elems_ > limits_.max_elements)
      return error_at(where, "the grammar expands to more than " + std::to_string(limits_.max_elements) +
                                 " elements (repetition counts multiply) — the limit");
    return Status::ok();
  }

  Status parse_rule() {
    const size_t at = pos_;
    const std::string_view name = parse_name();
    if (name.empty()) return error_at(pos_, "expected a rule name, found " + found());
    skip_space(false);
    if (text_.substr(pos_, 3) != "::=") return error_at(pos_, "expected '::=' after the rule name '" + std::string(name) + "', found " + found());
    pos_ += 3;
    KILN_ASSIGN_OR_RETURN(uint32_t id, rule_id(name, at));
    if (rules_[id].defined) return error_at(at, "rule '" + std::string(name) + "' is defined twice");
    rules_[id].defined = true;
    rules_[id].origin = at;
    skip_space(true);
    KILN_RETURN_IF_ERROR(parse_alternates(id, false, 0));
    skip_space(false);
    if (pos_ < text_.size() && text_[pos_] == '\r') ++pos_;
    if (pos_ < text_.size()) {
      if (text_[pos_] != '\n')
        return error_at(pos_, "expected a symbol, '|' or the end of the line in rule '" + std::string(name) + "', found " + found());
      ++pos_;
    }
    return Status::ok();
  }

  Status parse_alternates(uint32_t rule, bool nested, int depth) {
    for (;;) {
      Seq seq;
      KILN_RETURN_IF_ERROR(parse_sequence(rule, seq, nested, depth));
      rules_[rule].alts.push_back(std::move(seq));
      if (pos_ < text_.size() && text_[pos_] == '|') {
        ++pos_;
        skip_space(true);
        continue;
      }
      return Status::ok();
    }
  }

  Status parse_sequence(uint32_t rule, Seq& seq, bool nested, int depth) {
    size_t last = kNone;  // where the last symbol starts in seq (what a repetition repeats)
    while (pos_ < text_.size()) {
      const size_t at = pos_;
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        last = seq.size();
        size_t n = 0;
        while (pos_ < text_.size() && text_[pos_] != '"') {
          if (text_[pos_] == '\n') return error_at(pos_, "the string that starts here is not closed with '\"'");
          KILN_ASSIGN_OR_RETURN(uint32_t cp, parse_char());
          seq.push_back({GrammarElem::kChars, class_index(CharClass({{cp, cp}}, false))});
          ++n;
        }
        if (pos_ >= text_.size()) return error_at(at, "the string that starts here is not closed with '\"'");
        ++pos_;
        KILN_RETURN_IF_ERROR(count_elems(n, at));
        if (n == 0) last = kNone;  // "" is nothing to repeat
      } else if (c == '[') {
        KILN_ASSIGN_OR_RETURN(CharClass cls, parse_class());
        last = seq.size();
        seq.push_back({GrammarElem::kChars, class_index(std::move(cls))});
        KILN_RETURN_IF_ERROR(count_elems(1, at));
      } else if (c == '.') {
        ++pos_;
        last = seq.size();
        seq.push_back({GrammarElem::kChars, class_index(CharClass({{0, kMaxCodePoint}}, false))});
        KILN_RETURN_IF_ERROR(count_elems(1, at));
      } else if (is_name_char(c)) {
        const std::string_view name = parse_name();
        KILN_ASSIGN_OR_RETURN(uint32_t id, rule_id(name, at));
        last = seq.size();
        seq.push_back({GrammarElem::kRule, id});
        KILN_RETURN_IF_ERROR(count_elems(1, at));
      } else if (c == '(') {
        if (depth + 1 > limits_.max_nesting)
          return error_at(at, "parentheses nest deeper than " + std::to_string(limits_.max_nesting) + " — the limit");
        ++pos_;
        skip_space(true);
        KILN_ASSIGN_OR_RETURN(uint32_t id, generated(rule, at));
        KILN_RETURN_IF_ERROR(parse_alternates(id, true, depth + 1));
        if (pos_ >= text_.size() || text_[pos_] != ')')
          return error_at(pos_, "expected ')' to close the '(' at " + where(at) + ", found " + found());
        ++pos_;
        last = seq.size();
        seq.push_back({GrammarElem::kRule, id});
        KILN_RETURN_IF_ERROR(count_elems(1, at));
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (last == kNone) return error_at(at, std::string("'") + c + "' has nothing before it to repeat");
        int lo = 0, hi = -1;  // hi -1: no upper bound
        ++pos_;
        if (c == '+') lo = 1;
        if (c == '?') hi = 1;
        if (c == '{') KILN_RETURN_IF_ERROR(parse_braces(at, lo, hi));
        KILN_RETURN_IF_ERROR(repeat(rule, seq, last, lo, hi, at));
        last = kNone;
      } else if (c == '<' || c == '!') {
        return error_at(at, "token references (<...>, !<...>) are not supported: write the text the token stands for");
      } else {
        break;  // '|', ')', a newline, the end: the caller decides
      }
      skip_space(nested);
    }
    return Status::ok();
  }

  std::string where(size_t off) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < off && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return "line " + std::to_string(line) + ", column " + std::to_string(col);
  }

  Status parse_braces(size_t at, int& lo, int& hi) {
    skip_space(false);
    auto number = [&](int& out) -> Status {
      const size_t b = pos_;
      long long v = 0;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        v = v * 10 + (text_[pos_] - '0');
        if (v > limits_.max_repetition)
          return error_at(b, "a repetition count above " + std::to_string(limits_.max_repetition) + " — the limit");
        ++pos_;
      }
      if (pos_ == b) return error_at(pos_, "expected a number in {m,n}, found " + found());
      out = static_cast<int>(v);
      return Status::ok();
    };
    KILN_RETURN_IF_ERROR(number(lo));
    skip_space(false);
    hi = lo;
    if (pos_ < text_.size() && text_[pos_] == ',') {
      ++pos_;
      skip_space(false);
      hi = -1;
      if (pos_ < text_.size() && text_[pos_] != '}') KILN_RETURN_IF_ERROR(number(hi));
      skip_space(false);
    }
    if (pos_ >= text_.size() || text_[pos_] != '}') return error_at(pos_, "expected '}' to end the {m,n} at " + where(at) + ", found " + found());
    ++pos_;
    if (hi >= 0 && hi < lo) return error_at(at, "{" + std::to_string(lo) + "," + std::to_string(hi) + "}: the maximum is below the minimum");
    return Status::ok();
  }

  // seq[last..] repeated lo..hi times (hi -1: unbounded), rewritten into generated rules.
  Status repeat(uint32_t rule, Seq& seq, size_t last, int lo, int hi, size_t at) {
    const Seq x(seq.begin() + static_cast<std::ptrdiff_t>(last), seq.end());
    seq.resize(last);
    KILN_RETURN_IF_ERROR(count_elems(x.size() * static_cast<size_t>(std::max(lo, hi)) + 2, at));
    for (int i = 0; i < lo; ++i) seq.insert(seq.end(), x.begin(), x.end());
    if (hi < 0) {  // star ::= x star | ε
      KILN_ASSIGN_OR_RETURN(uint32_t star, generated(rule, at));
      Seq loop = x;
      loop.push_back({GrammarElem::kRule, star});
      rules_[star].alts = {std::move(loop), Seq{}};
      seq.push_back({GrammarElem::kRule, star});
    } else if (hi > lo) {  // opt_k ::= x opt_{k-1} | ε, opt_1 ::= x | ε
      uint32_t inner = 0;
      for (int k = 1; k <= hi - lo; ++k) {
        KILN_ASSIGN_OR_RETURN(uint32_t opt, generated(rule, at));
        Seq body = x;
        if (k > 1) body.push_back({GrammarElem::kRule, inner});
        rules_[opt].alts = {std::move(body), Seq{}};
        inner = opt;
      }
      seq.push_back({GrammarElem::kRule, inner});
    }
    return Status::ok();
  }

  Result<uint32_t> parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i, ++pos_) {
      if (pos_ >= text_.size()) return error_at(pos_, "expected " + std::to_string(digits) + " hex digits, found the end of the grammar");
      const char h = text_[pos_];
      int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
      if (d < 0) return error_at(pos_, "expected " + std::to_string(digits) + " hex digits, found " + found());
      v = (v << 4) | static_cast<uint32_t>(d);
    }
    return v;
  }

  // One character of a string or a class: an escape or a UTF-8 sequence.
  Result<uint32_t> parse_char() {
    const size_t at = pos_;
    if (text_[pos_] == '\\') {
      ++pos_;
      if (pos_ >= text_.size()) return error_at(at, "an escape '\\' at the end of the grammar");
      const char e = text_[pos_++];
      uint32_t cp = 0;
      switch (e) {
        case 'n': return uint32_t{'\n'};
        case 't': return uint32_t{'\t'};
        case 'r': return uint32_t{'\r'};
        case '\\': case '"': case '[': case ']': case '\'': case '-': case '^': case '/': return static_cast<uint32_t>(e);
        case 'x': { KILN_ASSIGN_OR_RETURN(cp, parse_hex(2)); break; }
        case 'u': { KILN_ASSIGN_OR_RETURN(cp, parse_hex(4)); break; }
        case 'U': { KILN_ASSIGN_OR_RETURN(cp, parse_hex(8)); break; }
        default:
          --pos_;
          return error_at(at, "unknown escape '\\" + std::string(1, e) + "' (known: \\n \\t \\r \\\\ \\\" \\[ \\] \\xHH \\uHHHH \\UHHHHHHHH)");
      }
      if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF))
        return error_at(at, "the escape names no Unicode scalar value (a surrogate or above U+10FFFF)");
      return cp;
    }
    const size_t n = utf8_sequence_length(text_, pos_);
    if (n == 0) return error_at(at, "the grammar is not valid UTF-8 here");
    const auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(text_[pos_ + i])); };
    uint32_t cp = n == 1 ? b(0) : n == 2 ? (b(0) & 0x1F) : n == 3 ? (b(0) & 0x0F) : (b(0) & 0x07);
    for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (b(i) & 0x3F);
    pos_ += n;
    return cp;
  }

  Result<CharClass> parse_class() {
    const size_t at = pos_;
    ++pos_;  // '['
    bool negated = false;
    if (pos_ < text_.size() && text_[pos_] == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    while (pos_ < text_.size() && text_[pos_] != ']') {
      if (text_[pos_] == '\n') return error_at(at, "the character class that starts here is not closed with ']'");
      const size_t c_at = pos_;
      KILN_ASSIGN_OR_RETURN(uint32_t lo, parse_char());
      uint32_t hi = lo;
      if (pos_ + 1 < text_.size() && text_[pos_] == '-' && text_[pos_ + 1] != ']') {
        ++pos_;
        if (text_[pos_] == '\n') return error_at(at, "the character class that starts here is not closed with ']'");
        KILN_ASSIGN_OR_RETURN(hi, parse_char());
        if (hi < lo) return error_at(c_at, "the range ends before it starts");
      }
      ranges.emplace_back(lo, hi);
    }
    if (pos_ >= text_.size()) return error_at(at, "the character class that starts here is not closed with ']'");
    ++pos_;
    if (ranges.empty()) return error_at(at, negated ? "[^] is not a class (for any character write .)" : "an empty character class matches nothing");
    return CharClass(std::move(ranges), negated);
  }

  uint32_t class_index(CharClass c) {
    auto [it, fresh] = class_ids_.emplace(c.ranges(), static_cast<uint32_t>(classes_.size()));
    if (fresh) classes_.push_back(std::move(c));
    return it->second;
  }

  // GBNF matches from the left: a rule that can reach itself without consuming a character would
  // expand forever. Refused with the cycle named.
  Status check_left_recursion() {
    const size_t n = rules_.size();
    std::vector<char> nullable(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const Seq& alt : rules_[r].alts) {
          bool all = true;
          for (const GrammarElem& e : alt)
            if (e.kind != GrammarElem::kRule || !nullable[e.arg]) {
              all = false;
              break;
            }
          if (all) {
            nullable[r] = 1;
            changed = true;
            break;
          }
        }
      }
    }
    std::vector<std::vector<uint32_t>> left(n);  // rules reachable at an alternative's start
    for (size_t r = 0; r < n; ++r)
      for (const Seq& alt : rules_[r].alts)
        for (const GrammarElem& e : alt) {
          if (e.kind != GrammarElem::kRule) break;
          left[r].push_back(e.arg);
          if (!nullable[e.arg]) break;
        }
    // Iterative depth-first search; a grey rule met again closes a cycle.
    std::vector<char> color(n, 0);
    std::vector<std::pair<uint32_t, size_t>> stack;
    for (size_t s = 0; s < n; ++s) {
      if (color[s]) continue;
      stack.push_back({static_cast<uint32_t>(s), 0});
      color[s] = 1;
      while (!stack.empty()) {
        auto& [r, i] = stack.back();
        if (i < left[r].size()) {
          const uint32_t next = left[r][i++];
          if (color[next] == 1) {
            if (rules_[next].generated)
              return error_at(rules_[next].origin,
                              "this group or repetition can come back to itself without matching a character "
                              "(is something that can be empty repeated?)");
            std::string path;
            size_t k = 0;
            while (stack[k].first != next) ++k;
            for (; k < stack.size(); ++k) path += display(stack[k].first) + " -> ";
            path += display(next);
            return error_at(rules_[next].origin, "rule '" + display(next) + "' is left-recursive (" + path +
                                                     "): it can reach itself before matching a character; "
                                                     "rewrite it with repetition, e.g. x ::= y (\"+\" y)*");
          }
          if (color[next] == 0) {
            color[next] = 1;
            stack.push_back({next, 0});
          }
        } else {
          color[r] = 2;
          stack.pop_back();
        }
      }
    }
    return Status::ok();
  }
  std::string display(uint32_t r) const {
    return rules_[r].generated ? "(group at " + where(rules_[r].origin) + ")" : rules_[r].name;
  }

  Grammar build(uint32_t root) {
    Grammar g;
    g.classes = std::move(classes_);
    g.root = root;
    g.rules.resize(rules_.size());
    for (size_t r = 0; r < rules_.size(); ++r) {
      g.rules[r].name = rules_[r].name;
      for (const Seq& alt : rules_[r].alts) {
        g.rules[r].alts.push_back(static_cast<uint32_t>(g.elems.size()));
        g.elems.insert(g.elems.end(), alt.begin(), alt.end());
        g.elems.push_back({GrammarElem::kEnd, 0});
      }
    }
    g.start = static_cast<uint32_t>(g.elems.size());
    g.elems.push_back({GrammarElem::kRule, root});
    g.elems.push_back({GrammarElem::kEnd, 0});
    return g;
  }

  std::string_view text_;
  GrammarLimits limits_;
  size_t pos_ = 0;
  std::vector<RuleDraft> rules_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<CharClass> classes_;
  std::map<std::vector<std::pair<uint32_t, uint32_t>>, uint32_t> class_ids_;
  size_t n_elems_ = 0;
  int n_generated_ = 0;
};

}  // namespace

Result<Grammar> parse_gbnf(std::string_view text, const GrammarLimits& limits) { return GbnfParser(text, limits).parse(); }

}  // namespace kiln
