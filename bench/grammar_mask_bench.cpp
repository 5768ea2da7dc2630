// The token mask's cost on a real vocabulary (README's figures): the grammar state is walked
// along TEXT token by token; at each step the full mask is computed by a walk of the vocabulary
// (what a refused early accept costs when the state is not cached) and the early accept of the
// next token is timed.
//   kiln_bench_grammar_mask TOKENIZER(.gguf, tokenizer.json, ...) GRAMMAR.gbnf TEXT_FILE
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <vector>

#include "core/mapped_file.h"
#include "engine/constrained_output.h"
#include "engine/open_tokenizer.h"
#include "runtime/grammar_sampling.h"

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s TOKENIZER GRAMMAR.gbnf TEXT_FILE\n", argv[0]);
    return 2;
  }
  auto tok = kiln::open_tokenizer(argv[1], 0);
  auto gbnf = kiln::read_text_file(argv[2]);
  auto text = kiln::read_text_file(argv[3]);
  if (!tok || !gbnf || !text) {
    std::fprintf(stderr, "error: %s%s%s\n", tok.status().message().c_str(), gbnf.status().message().c_str(),
                 text.status().message().c_str());
    return 1;
  }
  auto grammar = kiln::grammar_from_gbnf(*gbnf);
  if (!grammar) {
    std::fprintf(stderr, "error: %s\n", grammar.status().message().c_str());
    return 1;
  }
  auto t0 = std::chrono::steady_clock::now();
  auto vocab = kiln::grammar_vocabulary(**tok);
  const double build_ms = ms_since(t0);
  auto ids = (*tok)->encode(*text, kiln::EncodeOptions{});
  if (!ids) return 1;
  kiln::TokenMask mask(*grammar, vocab, {(*tok)->eos_id()});
  std::vector<double> walks, accepts;
  std::vector<uint64_t> bits;
  size_t allowed_sum = 0;
  for (int id : *ids) {
    t0 = std::chrono::steady_clock::now();
    mask.walk(bits);
    walks.push_back(ms_since(t0));
    for (uint64_t w : bits) allowed_sum += static_cast<size_t>(__builtin_popcountll(w));
    t0 = std::chrono::steady_clock::now();
    const bool ok = mask.allows(id);
    accepts.push_back(ms_since(t0));
    if (!ok || !mask.accept(id)) {
      std::fprintf(stderr, "error: the grammar refuses token %d of the text\n", id);
      return 1;
    }
  }
  auto stat = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    double sum = 0;
    for (double x : v) sum += x;
    return std::array<double, 3>{sum / static_cast<double>(v.size()), v[v.size() / 2], v.back()};
  };
  const auto w = stat(walks), a = stat(accepts);
  std::printf("vocabulary: %d tokens, %zu trie nodes, built in %.1f ms\n", vocab->vocab_size(), vocab->nodes().size(), build_ms);
  std::printf("steps: %zu (the text's tokens), %.0f tokens allowed on average\n", walks.size(),
              static_cast<double>(allowed_sum) / static_cast<double>(walks.size()));
  std::printf("full mask (a walk of the vocabulary): mean %.3f ms, median %.3f ms, max %.3f ms\n", w[0], w[1], w[2]);
  std::printf("early accept of the next token: mean %.4f ms, median %.4f ms, max %.4f ms\n", a[0], a[1], a[2]);
  return 0;
}
