#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/unicode_text.h"

namespace kiln {

namespace {

// Oniguruma's (and Rust's) \s is White_Space; PCRE2's, with UCP, adds U+180E. PCRE2 10.42's \w
// lacks marks and Pc. \h is a hex digit in Oniguruma, horizontal space in PCRE2.
constexpr std::string_view kSpaceSet =
    "\\t-\\r\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}";
constexpr std::string_view kWordSet = "\\p{L}\\p{Nl}\\p{Nd}\\p{M}\\p{Pc}\\x{200c}\\x{200d}";
constexpr std::string_view kHexSet = "0-9a-fA-F";

pcre2_code* code_of(void* p) { return static_cast<pcre2_code*>(p); }

// Per-thread match state: one match data block (only the whole match is read) and a JIT stack
// larger than PCRE2's 32 KiB default, so that long runs of one class match under the JIT.
struct ThreadMatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  ThreadMatchState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    if (context != nullptr && stack != nullptr) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~ThreadMatchState() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
  ThreadMatchState(const ThreadMatchState&) = delete;
  ThreadMatchState& operator=(const ThreadMatchState&) = delete;
};

ThreadMatchState& thread_state() {
  thread_local ThreadMatchState s;
  return s;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  if (pcre2_get_error_message(code, buf, sizeof buf) < 0) return "error " + std::to_string(code);
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

std::string onig_to_pcre2(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 64);
  int depth = 0;  // inside a character class (Oniguruma nests them)
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      std::string_view set;
      bool negated = false;
      switch (e) {
        case 's': set = kSpaceSet; break;
        case 'S': set = kSpaceSet; negated = true; break;
        case 'w': set = kWordSet; break;
        case 'W': set = kWordSet; negated = true; break;
        case 'h': set = kHexSet; break;
        case 'H': set = kHexSet; negated = true; break;
        default: break;
      }
      if (!set.empty() && (depth == 0 || !negated)) {
        if (depth == 0) {
          out += negated ? "[^" : "[";
          out += set;
          out += ']';
        } else {
          out += set;  // the members, inside the enclosing class
        }
      } else {
        out += c;
        out += e;  // a negated set inside a class keeps PCRE2's reading
      }
      ++i;
      continue;
    }
    if (c == '[') {
      if (depth > 0 && i + 1 < p.size() && p[i + 1] == ':') {  // [:alpha:]
        const size_t close = p.find(":]", i + 2);
        if (close != std::string_view::npos) {
          out.append(p.substr(i, close + 2 - i));
          i = close + 1;
          continue;
        }
      }
      ++depth;
      out += c;
      // A ']' right after '[' or '[^' is a literal.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (c == ']' && depth > 0) --depth;
    out += c;
  }
  return out;
}

Result<std::unique_ptr<Regex>> Regex::compile(std::string_view pattern, const std::string& where) {
  const std::string translated = onig_to_pcre2(pattern);
  int err = 0;
  PCRE2_SIZE err_at = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &err_at, nullptr);
  if (code == nullptr)
    return invalid_argument(where + ": the regex '" + std::string(pattern) + "' does not compile (" +
                            pcre2_message(err) + " at offset " + std::to_string(err_at) + " of '" + translated + "')");
  std::unique_ptr<Regex> r(new Regex());
  r->pattern_ = std::string(pattern);
  r->code_ = code;
  r->jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return r;
}

Regex::~Regex() { pcre2_code_free(code_of(code_)); }

Status Regex::find_all(std::string_view s, std::vector<std::pair<uint32_t, uint32_t>>& out) const {
  ThreadMatchState& ts = thread_state();
  if (ts.data == nullptr) return Status(StatusCode::kInternal, "out of memory for a regex match");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  const size_t n = s.size();
  size_t search_from = 0;
  size_t last_match_end = unicode::kNpos;
  while (search_from <= n) {
    int rc;
    if (jit_) {
      rc = pcre2_jit_match(code_of(code_), subject, n, search_from, 0, ts.data, ts.context);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT)  // the interpreter keeps its backtracking on the heap
        rc = pcre2_match(code_of(code_), subject, n, search_from, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, ts.data, nullptr);
    } else {
      rc = pcre2_match(code_of(code_), subject, n, search_from, PCRE2_NO_UTF_CHECK, ts.data, nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) return invalid_argument("the regex '" + pattern_ + "' failed on the text (" + pcre2_message(rc) + ")");
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(ts.data);
    const size_t b = ov[0], e = ov[1];
    if (b == e && last_match_end == e) {
      // An empty match touching the previous match: step over one character and search again.
      if (search_from >= n) break;
      search_from += unicode::utf8_length(static_cast<unsigned char>(s[search_from]));
      continue;
    }
    out.emplace_back(static_cast<uint32_t>(b), static_cast<uint32_t>(e));
    search_from = e;
    last_match_end = e;
  }
  return Status::ok();
}

}  // namespace kiln
