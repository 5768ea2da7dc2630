// The grammar layer: the GBNF parser (each construct, errors with line and column, limits), the
// matcher (code points, UTF-8 split across calls) and the token mask against a brute-force check.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"

namespace kiln {
namespace {

std::shared_ptr<const Grammar> compile(const std::string& text) {
  auto g = parse_gbnf(text);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  if (!g.is_ok()) return nullptr;
  return std::make_shared<const Grammar>(std::move(*g));
}

// Whether the whole of `text` is a match of `grammar`.
bool matches(const std::shared_ptr<const Grammar>& grammar, std::string_view text) {
  GrammarMatcher m(grammar);
  return m.accept_bytes(text) && m.is_complete();
}

std::string parse_error(const std::string& text, const GrammarLimits& limits = GrammarLimits{}) {
  auto g = parse_gbnf(text, limits);
  EXPECT_FALSE(g.is_ok()) << "parsed: " << text;
  return g.is_ok() ? "" : g.status().message();
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(GbnfParser, LiteralsAndAlternatives) {
  auto g = compile("root ::= \"ab\" | \"c\" \"d\"\n");
  EXPECT_TRUE(matches(g, "ab"));
  EXPECT_TRUE(matches(g, "cd"));
  EXPECT_FALSE(matches(g, "a"));
  EXPECT_FALSE(matches(g, "abc"));
  EXPECT_FALSE(matches(g, "ac"));
}

TEST(GbnfParser, Escapes) {
  auto g = compile(R"(root ::= "\n\t\r\\\"\x41\u00e9\U0001F600[]")");
  EXPECT_TRUE(matches(g, "\n\t\r\\\"A\xc3\xa9\xf0\x9f\x98\x80[]"));
  EXPECT_FALSE(matches(g, "\n\t\r\\\"A\xc3\xa9"));
}

TEST(GbnfParser, CharacterClasses) {
  auto g = compile(R"(root ::= [a-c0-9_] [^a-z\n] [\]\\-] [é-ê] .)");
  EXPECT_TRUE(matches(g, "b!]\xc3\xa9x"));
  EXPECT_TRUE(matches(g, "_Z-\xc3\xaa\xe4\xb8\xad"));
  EXPECT_TRUE(matches(g, "9Z\\\xc3\xa9\n"));
  EXPECT_FALSE(matches(g, "dZ]\xc3\xa9x"));   // d is not in [a-c0-9_]
  EXPECT_FALSE(matches(g, "az]\xc3\xa9x"));   // z is in a-z
  EXPECT_FALSE(matches(g, "a\n]\xc3\xa9x"));  // \n negated
  EXPECT_FALSE(matches(g, "aZ]\xc3\xabx"));   // ë past the range
}

TEST(GbnfParser, GroupsAndRepetition) {
  auto g = compile("root ::= (\"a\" | \"b\")* \"c\"+ \"d\"? \"e\"{2} \"f\"{1,} \"g\"{1,3} (\"h\" \"i\"){0,2}\n");
  EXPECT_FALSE(matches(g, "cee f g"));  // spaces are not in the grammar
  EXPECT_TRUE(matches(g, "abbaccdeefffggghihi"));
  EXPECT_TRUE(matches(g, "ceefg"));
  EXPECT_TRUE(matches(g, "ceefghi"));
  EXPECT_FALSE(matches(g, "eefg"));        // c+ needs one
  EXPECT_FALSE(matches(g, "cefg"));        // e{2}
  EXPECT_FALSE(matches(g, "ceeg"));        // f{1,}
  EXPECT_FALSE(matches(g, "ceefgggg"));    // g{1,3}
  EXPECT_FALSE(matches(g, "ceefghihihi"));  // (hi){0,2}
  EXPECT_FALSE(matches(g, "ceefgh"));
}

TEST(GbnfParser, CommentsNewlinesAndRuleReferences) {
  auto g = compile(
      "# a comment\n"
      "root ::= greeting (\n"
      "    \" \" name # inside the group\n"
      "  )? |\n"
      "  \"bye\"\n"
      "\n"
      "greeting ::= \"hi\"   # after a rule\n"
      "name ::= [A-Z] [a-z]*\r\n");
  EXPECT_TRUE(matches(g, "hi"));
  EXPECT_TRUE(matches(g, "hi Ann"));
  EXPECT_TRUE(matches(g, "bye"));
  EXPECT_FALSE(matches(g, "hi ann"));
}

TEST(GbnfParser, EmptyAlternativesAndNullableRules) {
  auto g = compile("root ::= ws \"x\" ws\nws ::= | \" \" | \"\\n\" [ \\t]{0,3}\n");
  EXPECT_TRUE(matches(g, "x"));
  EXPECT_TRUE(matches(g, " x\n\t\t"));
  EXPECT_FALSE(matches(g, "  x"));
  EXPECT_FALSE(matches(g, "x\n    "));
}

TEST(GbnfParser, ErrorsNameLineAndColumn) {
  EXPECT_EQ(parse_error("root ::= \"a\"\nfoo ::= [a-\n"),
            "gbnf: line 2, column 9: the character class that starts here is not closed with ']'");
  EXPECT_EQ(parse_error("root ::= \"abc\n"), "gbnf: line 1, column 14: the string that starts here is not closed with '\"'");
  EXPECT_EQ(parse_error("root ::= (\"a\" \"b\"\n"),
            "gbnf: line 2, column 1: expected ')' to close the '(' at line 1, column 10, found the end of the grammar");
  EXPECT_EQ(parse_error("root := \"a\"\n"), "gbnf: line 1, column 6: expected '::=' after the rule name 'root', found ':'");
  EXPECT_EQ(parse_error("root ::= item\n"), "gbnf: line 1, column 10: rule 'item' is used but not defined");
  EXPECT_EQ(parse_error("item ::= \"a\"\n"), "gbnf: the grammar has no 'root' rule (where the text starts)");
  EXPECT_EQ(parse_error("root ::= \"a\" )\n"),
            "gbnf: line 1, column 14: expected a symbol, '|' or the end of the line in rule 'root', found ')'");
  EXPECT_EQ(parse_error("root ::= * \"a\"\n"), "gbnf: line 1, column 10: '*' has nothing before it to repeat");
  EXPECT_EQ(parse_error("root ::= \"a\"{3,2}\n"), "gbnf: line 1, column 13: {3,2}: the maximum is below the minimum");
  EXPECT_EQ(parse_error("root ::= [z-a]\n"), "gbnf: line 1, column 11: the range ends before it starts");
  EXPECT_EQ(parse_error("root ::= \"\\q\"\n"),
            "gbnf: line 1, column 11: unknown escape '\\q' (known: \\n \\t \\r \\\\ \\\" \\[ \\] \\xHH \\uHHHH \\UHHHHHHHH)");
  EXPECT_EQ(parse_error("root ::= \"\\uD800\"\n"),
            "gbnf: line 1, column 11: the escape names no Unicode scalar value (a surrogate or above U+10FFFF)");
  EXPECT_EQ(parse_error("root ::= \"a\"\nroot ::= \"b\"\n"), "gbnf: line 2, column 1: rule 'root' is defined twice");
  EXPECT_EQ(parse_error("root ::= <think>\n"),
            "gbnf: line 1, column 10: token references (<...>, !<...>) are not supported: write the text the token stands for");
  EXPECT_EQ(parse_error("root ::= []\n"), "gbnf: line 1, column 10: an empty character class matches nothing");
}

TEST(GbnfParser, LeftRecursionIsRefused) {
  EXPECT_EQ(parse_error("root ::= expr\nexpr ::= expr \"+\" num | num\nnum ::= [0-9]\n"),
            "gbnf: line 2, column 1: rule 'expr' is left-recursive (expr -> expr): it can reach itself before matching a "
            "character; rewrite it with repetition, e.g. x ::= y (\"+\" y)*");
  // Through a rule that can match nothing.
  EXPECT_EQ(parse_error("root ::= a\na ::= b c \"x\"\nb ::= \"\" | \"y\"\nc ::= a | \"z\"\n"),
            "gbnf: line 2, column 1: rule 'a' is left-recursive (a -> c -> a): it can reach itself before matching a "
            "character; rewrite it with repetition, e.g. x ::= y (\"+\" y)*");
  // A repetition of something that can be empty loops without consuming.
  EXPECT_EQ(parse_error("root ::= (\"a\"?)*\n"),
            "gbnf: line 1, column 16: this group or repetition can come back to itself without matching a character "
            "(is something that can be empty repeated?)");
  // A named rule reached through a group.
  EXPECT_EQ(parse_error("root ::= x\nx ::= (\"\" | \"a\") x \"b\" | \"c\"\n"),
            "gbnf: line 2, column 1: rule 'x' is left-recursive (x -> x): it can reach "
            "itself before matching a character; rewrite it with repetition, e.g. x ::= y (\"+\" y)*");
}

TEST(GbnfParser, LimitsRefuseGrammarsThatWouldBlowUp) {
  GrammarLimits small;
  small.max_repetition = 100;
  EXPECT_EQ(parse_error("root ::= \"a\"{0,101}\n", small), "gbnf: line 1, column 16: a repetition count above 100 — the limit");
  small.max_elements = 1000;
  EXPECT_EQ(parse_error("root ::= (\"abcdefghij\"{100}){100}\n", small),
            "gbnf: line 1, column 23: the grammar expands to more than 1000 elements (repetition counts multiply) — the limit");
  small.max_nesting = 3;
  EXPECT_EQ(parse_error("root ::= ((((\"a\"))))\n", small), "gbnf: line 1, column 13: parentheses nest deeper than 3 — the limit");
  small.max_text_bytes = 10;
  EXPECT_EQ(parse_error("root ::= \"aaaaaaaaaa\"\n", small), "gbnf: the grammar is 22 bytes, more than the limit of 10");
}

TEST(GbnfParser, LlamaCppExampleGrammarsParseAndMatch) {
  const std::string dir = std::string(KILN_TEST_DATA_DIR) + "/grammars/";
  auto json = compile(read_file(dir + "json.gbnf"));
  EXPECT_TRUE(matches(json, "{\"a\": [1, -2.5e3, \"x\\n\\u00e9\", true, null, {}], \"b\":{\"c\":false}}"));
  EXPECT_FALSE(matches(json, "{\"a\": 01}"));
  EXPECT_FALSE(matches(json, "[1]"));  // root is an object
  auto arith = compile(read_file(dir + "arithmetic.gbnf"));
  EXPECT_TRUE(matches(arith, "x +2 *y = (a -1)\n"));
  EXPECT_TRUE(matches(arith, "1+2=3\n"));
  EXPECT_FALSE(matches(arith, "1+2=3"));
  auto list = compile(read_file(dir + "list.gbnf"));
  EXPECT_TRUE(matches(list, "- milk\n- eggs \xe2\x9c\x93\n"));
  EXPECT_FALSE(matches(list, "- milk\r\n"));
  auto chess = compile(read_file(dir + "chess.gbnf"));
  EXPECT_TRUE(matches(chess, "1. e4 e5\n2. Nf3 Nc6\n3. O-O-O Qxd8#\n"));
  EXPECT_FALSE(matches(chess, "1. e4 e5\n"));  // at least one more move line
  auto c = compile(read_file(dir + "c.gbnf"));
  EXPECT_TRUE(matches(c, "int main(){int x = 1;while(x<10){x = x+1;}return x;}"));
  EXPECT_TRUE(matches(c, "float f(int a){/* note */return a*2;}"));
  EXPECT_FALSE(matches(c, "int main(){x = ;}"));
}

TEST(GrammarMatcher, CharactersSplitAcrossCallsAndRefusalsLeaveTheState) {
  auto g = compile("root ::= \"\xc3\xa9\" [\xe4\xb8\x80-\xe9\xbe\xa5]+ \"!\"\n");
  GrammarMatcher m(g);
  EXPECT_TRUE(m.accept_bytes("\xc3"));
  EXPECT_FALSE(m.is_complete());
  EXPECT_FALSE(m.accept_bytes("\xa8"));  // è, not é: refused, the first byte still pending
  EXPECT_TRUE(m.accept_bytes("\xa9\xe4"));
  EXPECT_TRUE(m.accept_bytes("\xb8\xad"));  // 中
  EXPECT_FALSE(m.accept_bytes("\xc3\xa9"));
  EXPECT_FALSE(m.accept_bytes("\xff"));     // not UTF-8
  EXPECT_FALSE(m.accept_bytes("\xed\xa0\x80"));  // a surrogate
  EXPECT_TRUE(m.would_accept_bytes("!"));
  EXPECT_FALSE(m.is_complete());
  EXPECT_TRUE(m.accept_code_point('!'));
  EXPECT_TRUE(m.is_complete());
  EXPECT_FALSE(m.can_continue());
  GrammarMatcher copy = m;  // a clone goes its own way
  EXPECT_FALSE(copy.accept_code_point('!'));
  EXPECT_TRUE(copy.is_complete());
}

TEST(GrammarMatcher, AmbiguousGrammarKeepsEveryReading) {
  auto g = compile("root ::= a* \"b\" | \"a\"+ \"c\"\na ::= \"a\" | \"aa\"\n");
  EXPECT_TRUE(matches(g, "aaaab"));
  EXPECT_TRUE(matches(g, "aaaac"));
  EXPECT_TRUE(matches(g, "b"));
  EXPECT_FALSE(matches(g, "c"));
}

// A vocabulary of every string of up to 3 bytes over an alphabet that includes the bytes of
// multi-byte characters, so tokens split characters every possible way.
std::vector<std::string> small_vocabulary() {
  const std::vector<std::string> alphabet = {"a", "b", "-", "{", "}", "\"", ":", " ", "1", "\n", "\xc3", "\xa9", "\xe4", "\xb8", "\xad", "\\"};
  std::vector<std::string> v = {""};  // id 0: a special token (no bytes)
  for (const auto& x : alphabet) {
    v.push_back(x);
    for (const auto& y : alphabet) {
      v.push_back(x + y);
      for (const auto& z : alphabet) v.push_back(x + y + z);
    }
  }
  v.push_back("ab");  // a duplicate of another token's bytes
  return v;
}

TEST(TokenMask, EqualsABruteForceCheckAlongARandomWalk) {
  const std::string dir = std::string(KILN_TEST_DATA_DIR) + "/grammars/";
  for (const std::string name : {"json.gbnf", "list.gbnf"}) {
    auto g = compile(read_file(dir + name));
    const std::vector<std::string> vocab = small_vocabulary();
    auto trie = std::make_shared<const TokenTrie>(vocab);
    const int eos = 0;
    TokenMask mask(g, trie, {eos});
    GrammarMatcher reference(g);
    std::mt19937 rng(7);
    for (int step = 0; step < 40; ++step) {
      const std::vector<uint64_t>& bits = mask.allowed();
      std::vector<int> allowed;
      for (size_t id = 0; id < vocab.size(); ++id) {
        const bool got = (bits[id >> 6] >> (id & 63)) & 1u;
        // Brute force: a copy of the reference matcher fed the token's bytes.
        bool want;
        if (static_cast<int>(id) == eos) {
          want = reference.is_complete();
        } else {
          want = reference.would_accept_bytes(vocab[id]);  // token by token, no trie
        }
        ASSERT_EQ(got, want) << name << " step " << step << " token " << id << " '" << vocab[id] << "'";
        EXPECT_EQ(mask.allows(static_cast<int>(id)), want);
        if (want) allowed.push_back(static_cast<int>(id));
      }
      ASSERT_FALSE(allowed.empty()) << name << " step " << step;
      // The stop token only when nothing else is allowed, so that the walk goes deep.
      if (allowed.size() > 1 && allowed[0] == eos) allowed.erase(allowed.begin());
      const int pick = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
      if (pick == eos) break;
      ASSERT_TRUE(mask.accept(pick));
      ASSERT_TRUE(reference.accept_bytes(vocab[static_cast<size_t>(pick)]));
    }
  }
}

TEST(TokenMask, ALeadByteIsAllowedOnlyWhereItsCharacterCanFollow) {
  // E0 starts U+0800..U+0FFF only (E0 80..9F would be overlong), F0 starts U+10000 and up.
  auto trie = std::make_shared<const TokenTrie>(
      std::vector<std::string>{"", "\xe0", "\xe0\x9f", "\xe0\xa0", "\xf0", "\xed", "\xc3", "a"});
  TokenMask ascii(compile("root ::= [a-z{]\n"), trie, {0});
  EXPECT_EQ(ascii.allowed()[0], 1u << 7);
  TokenMask mid(compile("root ::= [\\u0700-\\u0FFF]\n"), trie, {0});
  EXPECT_EQ(mid.allowed()[0], (1u << 1) | (1u << 3));
  TokenMask high(compile("root ::= [\\U00010000-\\U0010FFFF]\n"), trie, {0});
  EXPECT_EQ(high.allowed()[0], 1u << 4);
  TokenMask surrogate_gap(compile("root ::= [\\uD000-\\uD7FF] | [\\uE000-\\uEFFF]\n"), trie, {0});
  EXPECT_EQ(surrogate_gap.allowed()[0], 1u << 5);  // ED: U+D000..U+D7FF
}

TEST(TokenMask, StopTokensOnlyWhereTheGrammarMayEnd) {
  auto g = compile("root ::= \"ab\"\n");
  auto trie = std::make_shared<const TokenTrie>(std::vector<std::string>{"", "a", "b", "ab", "abc", ""});
  TokenMask mask(g, trie, {0, 5});
  EXPECT_FALSE(mask.allows(0));
  EXPECT_FALSE(mask.allows(5));
  EXPECT_TRUE(mask.allows(1));
  EXPECT_TRUE(mask.allows(3));
  EXPECT_FALSE(mask.allows(4));
  EXPECT_EQ(mask.allowed()[0], (1u << 1) | (1u << 3));
  ASSERT_TRUE(mask.accept(3));
  EXPECT_EQ(mask.allowed()[0], (1u << 0) | (1u << 5));
  EXPECT_TRUE(mask.allows(0));
  EXPECT_FALSE(mask.accept(2));
}

}  // namespace
}  // namespace kiln
