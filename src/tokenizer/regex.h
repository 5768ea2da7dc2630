// The pre-tokenizer regexes of tokenizer.json files, on PCRE2 (UTF mode, Unicode properties,
// JIT where the build has it). Patterns are written for Oniguruma, which HF tokenizers uses; the
// few places where PCRE2 reads them differently are rewritten at compile time (see regex.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace kiln {

class Regex {
 public:
  // Compiles once; `where` names the pattern's place in messages.
  static Result<std::unique_ptr<Regex>> compile(std::string_view pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // The matches in `subject` (valid UTF-8) as find_iter of Rust's onig crate yields them:
  // leftmost-first, non-overlapping, an empty match only where it does not touch the previous
  // match's end. Appends [begin, end) byte offsets to `out`. Thread-safe.
  Status find_all(std::string_view subject, std::vector<std::pair<uint32_t, uint32_t>>& out) const;

  const std::string& pattern() const { return pattern_; }
  bool jit() const { return jit_; }

 private:
  Regex() = default;
  std::string pattern_;  // as given
  void* code_ = nullptr;  // pcre2_code_8
  bool jit_ = false;
};

// The PCRE2 pattern kiln compiles for an Oniguruma pattern (exposed for tests).
std::string onig_to_pcre2(std::string_view pattern);

}  // namespace kiln
