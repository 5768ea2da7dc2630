// The GBNF parser on arbitrary text; an accepted grammar is then run: a matcher fed text and a
// token mask over a small vocabulary, the mask checked against token-by-token acceptance.
//
// The input is the grammar, optionally followed by "\n%%\n" and text to feed the matcher.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"

namespace {

std::vector<std::string> small_vocabulary() {
  std::vector<std::string> v = {"", "a", "b", "ab", " ", "\n", "{", "}", "\"", "0", "1", "12", "-", "x", "\xc3", "\xa9",
                                "\xc3\xa9", "\xe4\xb8\xad", "\xe4", "\xb8\xad", "true", "null", ",", ":", "[", "]"};
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find("\n%%\n");
  const std::string_view text = split == std::string_view::npos ? input : input.substr(0, split);
  const std::string_view feed = split == std::string_view::npos ? std::string_view() : input.substr(split + 4);
  kiln::GrammarLimits limits;
  limits.max_elements = 1u << 14;  // keeps each run short; the limits themselves are what is tested
  limits.max_rules = 2000;
  auto g = kiln::parse_gbnf(text, limits);
  if (!g.is_ok()) {
    if (g.status().message().empty()) std::abort();
    return 0;
  }
  auto grammar = std::make_shared<const kiln::Grammar>(std::move(*g));
  kiln::GrammarMatcher m(grammar);
  for (size_t i = 0; i < feed.size() && i < 256; ++i) (void)m.accept_bytes(feed.substr(i, 1));
  (void)m.is_complete();

  const std::vector<std::string> vocab = small_vocabulary();
  kiln::TokenMask mask(grammar, std::make_shared<const kiln::TokenTrie>(vocab), {0});
  kiln::GrammarMatcher reference(grammar);
  for (int step = 0; step < 8; ++step) {
    const std::vector<uint64_t>& bits = mask.allowed();
    int next = -1;
    for (size_t id = 1; id < vocab.size(); ++id) {
      const bool got = (bits[0] >> id) & 1u;
      if (got != reference.would_accept_bytes(vocab[id])) std::abort();  // the trie walk disagrees
      if (got && next < 0) next = static_cast<int>(id);
    }
    if (((bits[0] & 1u) != 0) != reference.is_complete()) std::abort();
    if (next < 0) break;
    if (!mask.accept(next) || !reference.accept_bytes(vocab[static_cast<size_t>(next)])) std::abort();
  }
  return 0;
}
