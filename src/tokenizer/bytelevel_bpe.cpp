#include "tokenizer/bytelevel_bpe.h"

#include <algorithm>
#include <climits>
#include <cstdio>

#include "tokenizer/unicode_text.h"

namespace kiln {

const char* const kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

struct ByteMaps {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 324> to_byte{};  // code points 0..323 cover the whole map
  ByteMaps() {
    to_byte.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
      to_cp[static_cast<size_t>(b)] = printable ? static_cast<uint32_t>(b) : next++;
      to_byte[to_cp[static_cast<size_t>(b)]] = static_cast<int16_t>(b);
    }
  }
};

const ByteMaps& byte_maps() {
  static const ByteMaps m;
  return m;
}

}  // namespace

uint32_t byte_to_unicode(uint8_t b) { return byte_maps().to_cp[b]; }

int unicode_to_byte(uint32_t cp) { return cp < 324 ? byte_maps().to_byte[cp] : -1; }

bool byte_level_decode(std::string_view token, std::string& out) {
  out.clear();
  if (unicode::invalid_utf8_offset(token) != unicode::kNpos) return false;
  for (size_t i = 0; i < token.size();) {
    const int b = unicode_to_byte(unicode::next_code_point(token, i));
    if (b < 0) return false;
    out += static_cast<char>(b);
  }
  return true;
}

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) unicode::append_utf8(out, byte_to_unicode(static_cast<uint8_t>(c)));
  return out;
}

// Working storage of one encode() call.
struct ByteLevelBpeTokenizer::Scratch {
  std::string norm_buf, norm_tmp, word_buf;
  std::vector<std::pair<uint32_t, uint32_t>> pieces, next_pieces, matches;
  struct Split {
    uint32_t begin, end;
    bool is_match;
  };
  std::vector<Split> splits, kept;
  std::vector<BpeSymbol> syms;
  std::vector<BpeCandidate> queue;
  // Words seen in this call and their ids (words repeat: most of a long text hits). The ids sit
  // in `cached_ids` at [first, first + count).
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>> word_cache;
  std::vector<int> cached_ids;
  // Pair lookups seen in this call, direct-mapped: the merge table is megabytes, and the same
  // pairs (the bytes of common characters) come back again and again. id -1: no merge.
  struct PairHit {
    uint64_t key = ~0ull;
    int32_t rank = 0;
    int32_t id = -1;
  };
  static constexpr size_t kPairCache = 1 << 15;
  std::vector<PairHit> pair_cache;
  bool use_caches = false;  // worth their set-up only for longer texts
};

namespace {
constexpr size_t kCacheWordBytes = 48;   // longer words are merged every time
constexpr size_t kCacheWords = 1 << 16;  // entries per encode() call
}  // namespace

Result<std::unique_ptr<ByteLevelBpeTokenizer>> ByteLevelBpeTokenizer::create(ByteLevelSpec spec) {
  std::unique_ptr<ByteLevelBpeTokenizer> t(new ByteLevelBpeTokenizer());
  t->spec_ = std::move(spec);
  KILN_RETURN_IF_ERROR(t->build());
  return t;
}

ByteLevelBpeTokenizer::~ByteLevelBpeTokenizer() = default;

const ByteLevelBpeTokenizer::PairSlot* ByteLevelBpeTokenizer::find_pair(int a, int b) const {
  const uint64_t key = static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32 | static_cast<uint32_t>(b);
  uint64_t h = (key * 0x9E3779B97F4A7C15ull) >> pair_shift_;  // the product's high bits
  for (;; ++h) {
    const PairSlot& s = pairs_[h & pair_mask_];
    if (s.key == key) return &s;
    if (s.key == ~0ull) return nullptr;
  }
}

Status ByteLevelBpeTokenizer::build() {
  KILN_RETURN_IF_ERROR(check_spec());
  std::unordered_map<std::string_view, int> by_spelling;
  KILN_RETURN_IF_ERROR(build_vocabulary(by_spelling));
  KILN_RETURN_IF_ERROR(build_merges(by_spelling));
  KILN_RETURN_IF_ERROR(compile_regexes());
  build_added_matchers();
  return Status::ok();
}

// The ids the spec names (BOS, EOS, unknown, post-processor tokens) and its pre-tokenizer order.
Status ByteLevelBpeTokenizer::check_spec() const {
  const ByteLevelSpec& s = spec_;
  const std::string& name = s.name;
  if (s.tokens.empty()) return corrupt(name + ": the vocabulary is empty");
  if (s.tokens.size() > static_cast<size_t>(INT32_MAX / 2)) return corrupt(name + ": the vocabulary is too large");
  const int n = static_cast<int>(s.tokens.size());
  auto check_optional_id = [&](int id, const char* what) -> Status {
    if (id < -1 || id >= n)
      return corrupt(name + ": " + what + " id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(n));
    return Status::ok();
  };
  KILN_RETURN_IF_ERROR(check_optional_id(s.bos_id, "BOS"));
  KILN_RETURN_IF_ERROR(check_optional_id(s.eos_id, "EOS"));
  KILN_RETURN_IF_ERROR(check_optional_id(s.unk_id, "unknown-token"));
  for (const auto* list : {&s.special_prefix, &s.special_suffix})
    for (int id : *list)
      if (id < 0 || id >= n) return corrupt(name + ": post-processor token id " + std::to_string(id) + " is outside the vocabulary");
  if (s.pre_tokenizer.empty() || s.pre_tokenizer.back().kind != PreTokenizerStep::Kind::kByteLevel)
    return unsupported(name + ": a byte-level BPE needs the ByteLevel pre-tokenizer last");
  for (size_t i = 0; i + 1 < s.pre_tokenizer.size(); ++i)
    if (s.pre_tokenizer[i].kind == PreTokenizerStep::Kind::kByteLevel)
      return unsupported(name + ": pre-tokenizers after ByteLevel are not supported");
  return Status::ok();
}

// Each id's bytes, the model's tokens by spelling (for merges and byte fallback), by bytes (for
// encoding) and the id of each single byte.
Status ByteLevelBpeTokenizer::build_vocabulary(std::unordered_map<std::string_view, int>& by_spelling) {
  ByteLevelSpec& s = spec_;
  const std::string& name = s.name;
  const int n = static_cast<int>(s.tokens.size());
  const auto ns = s.tokens.size();
  // Which ids the model's own vocabulary holds (the others are added tokens beyond it).
  std::vector<uint8_t> in_model(ns, 1);
  special_.assign(ns, 0);
  for (const AddedToken& a : s.added) {
    if (a.id < 0 || a.id >= n)
      return corrupt(name + ": added token '" + a.content + "' has id " + std::to_string(a.id) +
                     ", outside the vocabulary of " + std::to_string(n));
    if (a.content.empty()) return corrupt(name + ": added token " + std::to_string(a.id) + " is empty");
    if (s.tokens[static_cast<size_t>(a.id)] != a.content)
      return corrupt(name + ": added token '" + a.content + "' has id " + std::to_string(a.id) + ", which is '" +
                     s.tokens[static_cast<size_t>(a.id)] + "'");
    if (a.special) special_[static_cast<size_t>(a.id)] = 1;
  }
  if (s.model_vocab_size >= 0)
    for (size_t id = static_cast<size_t>(s.model_vocab_size); id < ns; ++id) in_model[id] = 0;

  // What each id stands for.
  bytes_.resize(ns);
  by_bytes_.reserve(ns);
  by_spelling.reserve(ns);
  std::string tmp;
  std::vector<uint8_t> reachable(ns, 0);  // by text: in the model and spelled in the byte alphabet
  for (size_t id = 0; id < ns; ++id) {
    const std::string& tok = s.tokens[id];
    if (tok.empty()) continue;
    if (in_model[id]) by_spelling.emplace(tok, static_cast<int>(id));
    if (byte_level_decode(tok, tmp)) {
      bytes_[id] = tmp;
      reachable[id] = in_model[id];
    } else {
      bytes_[id] = tok;  // HF's ByteLevel decoder passes such a token through as it is spelled
    }
  }
  for (size_t id = 0; id < ns; ++id)
    if (reachable[id]) by_bytes_.emplace(std::string_view(bytes_[id]), static_cast<int>(id));
  byte_ids_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    auto it = by_bytes_.find(std::string_view(&c, 1));
    if (it != by_bytes_.end()) byte_ids_[static_cast<size_t>(b)] = it->second;
    if (s.byte_fallback) {
      // HF's BPE byte fallback looks up "<0xXX>" for each UTF-8 byte of the missing character,
      // here the character that stands for byte b.
      std::vector<int> ids;
      for (char u : byte_level_encode(std::string_view(&c, 1))) {
        char nm[8];
        std::snprintf(nm, sizeof nm, "<0x%02X>", static_cast<unsigned>(static_cast<uint8_t>(u)));
        auto f = by_spelling.find(nm);
        if (f == by_spelling.end()) {
          ids.clear();
          break;
        }
        ids.push_back(f->second);
      }
      byte_fallback_ids_[static_cast<size_t>(b)] = std::move(ids);
    }
  }
  return Status::ok();
}

Status ByteLevelBpeTokenizer::build_merges(const std::unordered_map<std::string_view, int>& by_spelling) {
  ByteLevelSpec& s = spec_;
  const std::string& name = s.name;
  const int n = static_cast<int>(s.tokens.size());
  // Merges: the pair becomes the token spelled by the two joined; a later duplicate of a pair
  // takes its rank (HF builds its merge map by inserting in order).
  if (s.merges.size() > static_cast<size_t>(INT32_MAX)) return corrupt(name + ": too many merges");
  size_t cap = 16;
  pair_shift_ = 60;
  while (cap < s.merges.size() * 2 + 16) {
    cap <<= 1;
    --pair_shift_;
  }
  pairs_.assign(cap, PairSlot{});
  pair_mask_ = cap - 1;
  std::string joined;
  for (size_t r = 0; r < s.merges.size(); ++r) {
    const auto [a, b] = s.merges[r];
    if (a < 0 || a >= n || b < 0 || b >= n)
      return corrupt(name + ": merge " + std::to_string(r) + " names a token outside the vocabulary");
    joined = s.tokens[static_cast<size_t>(a)] + s.tokens[static_cast<size_t>(b)];
    auto it = by_spelling.find(joined);
    if (it == by_spelling.end())
      return corrupt(name + ": merge " + std::to_string(r) + " ('" + s.tokens[static_cast<size_t>(a)] + "' + '" +
                     s.tokens[static_cast<size_t>(b)] + "') makes '" + joined + "', which is not in the vocabulary");
    const uint64_t key = static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32 | static_cast<uint32_t>(b);
    uint64_t h = (key * 0x9E3779B97F4A7C15ull) >> pair_shift_;
    for (;; ++h) {
      PairSlot& slot = pairs_[h & pair_mask_];
      if (slot.key == ~0ull || slot.key == key) {
        slot.key = key;
        slot.rank = static_cast<int32_t>(r);
        slot.id = it->second;
        break;
      }
    }
  }
  return Status::ok();
}

Status ByteLevelBpeTokenizer::compile_regexes() {
  ByteLevelSpec& s = spec_;
  const std::string& name = s.name;
  // Regexes, compiled once.
  regexes_.resize(s.pre_tokenizer.size());
  for (size_t i = 0; i < s.pre_tokenizer.size(); ++i) {
    const PreTokenizerStep& p = s.pre_tokenizer[i];
    if (p.kind == PreTokenizerStep::Kind::kSplit && p.regex) {
      KILN_ASSIGN_OR_RETURN(regexes_[i], Regex::compile(p.pattern, name + ": pre_tokenizer Split"));
    }
    if (p.kind == PreTokenizerStep::Kind::kByteLevel && p.use_regex) {
      KILN_ASSIGN_OR_RETURN(gpt2_regex_, Regex::compile(kGpt2Regex, name + ": ByteLevel"));
    }
  }
  normalizer_regexes_.resize(s.normalizers.size());
  for (size_t i = 0; i < s.normalizers.size(); ++i) {
    const TextNormalizer& z = s.normalizers[i];
    if (z.kind == TextNormalizer::Kind::kReplace) {
      if (z.pattern.empty()) return invalid_argument(name + ": a Replace normalizer replaces the empty string");
      if (z.regex) {
        KILN_ASSIGN_OR_RETURN(normalizer_regexes_[i], Regex::compile(z.pattern, name + ": normalizer Replace"));
      }
    }
  }
  return Status::ok();
}

void ByteLevelBpeTokenizer::build_added_matchers() {
  const ByteLevelSpec& s = spec_;
  // Added tokens: matched on the raw text, or (normalized=true) on the normalized text, with
  // their content normalized as the text is.
  std::vector<AddedToken> raw, norm;
  std::vector<std::string> raw_c, norm_c;
  for (const AddedToken& a : s.added) {
    if (a.normalized) {
      std::string b1, b2;
      norm_c.emplace_back(normalize(a.content, b1, b2));
      norm.push_back(a);
      normalized_added_ids_.push_back(a.id);
    } else {
      raw_c.push_back(a.content);
      raw.push_back(a);
      raw_added_ids_.push_back(a.id);
    }
  }
  raw_added_ = AddedTokenMatcher(raw, raw_c);
  normalized_added_ = AddedTokenMatcher(norm, norm_c);
}

std::string_view ByteLevelBpeTokenizer::normalize(std::string_view text, std::string& buf, std::string& tmp) const {
  std::string_view cur = text;
  for (size_t k = 0; k < spec_.normalizers.size(); ++k) {
    const TextNormalizer& z = spec_.normalizers[k];
    using K = TextNormalizer::Kind;
    bool changed = false;
    tmp.clear();
    switch (z.kind) {
      case K::kNfc: case K::kNfd: case K::kNfkc: case K::kNfkd: {
        const auto form = z.kind == K::kNfc ? unicode::NormalForm::kNfc
                          : z.kind == K::kNfd ? unicode::NormalForm::kNfd
                          : z.kind == K::kNfkc ? unicode::NormalForm::kNfkc : unicode::NormalForm::kNfkd;
        changed = unicode::normalize(cur, form, tmp);
        break;
      }
      case K::kLowercase:
        tmp = unicode::lowercase(cur);
        changed = true;
        break;
      case K::kStrip: {
        size_t b = 0, e = cur.size();
        if (z.left) {
          while (b < e) {
            size_t at = b;
            if (!unicode::is_whitespace(unicode::next_code_point(cur, at))) break;
            b = at;
          }
        }
        if (z.right) {
          while (e > b) {
            size_t p = e - 1;
            while (p > b && (static_cast<unsigned char>(cur[p]) & 0xc0) == 0x80) --p;
            size_t at = p;
            if (!unicode::is_whitespace(unicode::next_code_point(cur, at))) break;
            e = p;
          }
        }
        if (b != 0 || e != cur.size()) {
          tmp.assign(cur.substr(b, e - b));
          changed = true;
        }
        break;
      }
      case K::kReplace: {
        std::vector<std::pair<uint32_t, uint32_t>> hits;
        if (z.regex) {
          if (!normalizer_regexes_[k]->find_all(cur, hits).is_ok()) hits.clear();
        } else {
          for (size_t at = cur.find(z.pattern); at != std::string_view::npos; at = cur.find(z.pattern, at + z.pattern.size()))
            hits.emplace_back(static_cast<uint32_t>(at), static_cast<uint32_t>(at + z.pattern.size()));
        }
        if (hits.empty()) break;
        size_t pos = 0;
        for (const auto& [hb, he] : hits) {
          tmp.append(cur.substr(pos, hb - pos));
          tmp += z.content;
          pos = he;
        }
        tmp.append(cur.substr(pos));
        changed = true;
        break;
      }
      case K::kPrepend:
        if (!cur.empty()) {
          tmp = z.content;
          tmp.append(cur);
          changed = true;
        }
        break;
    }
    if (changed) {
      buf.swap(tmp);
      cur = buf;
    }
  }
  return cur;
}

Result<std::vector<int>> ByteLevelBpeTokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  if (text.size() > (size_t{1} << 30))
    return invalid_argument("the text to encode is " + std::to_string(text.size()) + " bytes; at most 1 GiB is supported");
  if (const size_t bad = unicode::invalid_utf8_offset(text); bad != unicode::kNpos) {
    char b[8];
    std::snprintf(b, sizeof b, "0x%02X", static_cast<unsigned>(static_cast<uint8_t>(text[bad])));
    return invalid_argument("the text is not valid UTF-8 (byte " + std::string(b) + " at offset " + std::to_string(bad) +
                            "); a byte-level BPE tokenizer encodes text, as Hugging Face's does");
  }
  std::vector<int> out;
  out.reserve(text.size() / 3 + 8);
  if (options.add_special) out.insert(out.end(), spec_.special_prefix.begin(), spec_.special_prefix.end());
  Scratch s;
  s.use_caches = text.size() >= cache_min_bytes_;
  Status st;
  raw_added_.split(
      text, [&](size_t b, size_t e) { return special_match(options, b, e); },
      [&](std::string_view seg) {
        if (st.is_ok()) st = encode_normalized(seg, static_cast<size_t>(seg.data() - text.data()), options, s, out);
      },
      [&](size_t i) { out.push_back(raw_added_ids_[i]); });
  KILN_RETURN_IF_ERROR(st);
  if (options.add_special) out.insert(out.end(), spec_.special_suffix.begin(), spec_.special_suffix.end());
  return out;
}

Status ByteLevelBpeTokenizer::encode_normalized(std::string_view text, size_t offset, const EncodeOptions& options,
                                                Scratch& s, std::vector<int>& out) const {
  std::string norm_buf;  // owned here: normalized_added_ may hand out pieces of it
  std::string_view norm = spec_.normalizers.empty() ? text : normalize(text, norm_buf, s.norm_tmp);
  // Offsets in normalized text are not the caller's: there a plain range anywhere in the
  // segment makes the whole segment plain.
  const bool whole = !spec_.normalizers.empty() &&
                     special_match(options, offset, offset + text.size()) != SpecialMatch::kToken;
  Status st;
  normalized_added_.split(
      norm,
      [&](size_t b, size_t e) {
        if (spec_.normalizers.empty()) return special_match(options, offset + b, offset + e);
        return whole ? SpecialMatch::kTextConsumed : SpecialMatch::kToken;
      },
      [&](std::string_view seg) {
        if (st.is_ok()) st = pre_tokenize(seg, s, out);
      },
      [&](size_t i) { out.push_back(normalized_added_ids_[i]); });
  return st;
}

Status ByteLevelBpeTokenizer::pre_tokenize(std::string_view text, Scratch& s, std::vector<int>& out) const {
  if (text.empty()) return Status::ok();
  s.pieces.clear();
  s.pieces.emplace_back(0u, static_cast<uint32_t>(text.size()));
  const size_t steps = spec_.pre_tokenizer.size();
  for (size_t k = 0; k + 1 < steps; ++k) {
    const PreTokenizerStep& step = spec_.pre_tokenizer[k];
    s.next_pieces.clear();
    for (const auto& piece : s.pieces) {
      const uint32_t pb = piece.first, pe = piece.second;  // (lambdas below capture pb)
      const std::string_view sub = text.substr(pb, pe - pb);
      // HF's find_matches: the pieces of `sub`, matched or not, in order.
      s.splits.clear();
      auto add = [&](size_t b, size_t e, bool m) {
        s.splits.push_back({static_cast<uint32_t>(pb + b), static_cast<uint32_t>(pb + e), m});
      };
      using K = PreTokenizerStep::Kind;
      SplitBehavior behavior = step.behavior;
      bool invert = step.invert;
      if (step.kind == K::kSplit) {
        s.matches.clear();
        if (step.regex) {
          KILN_RETURN_IF_ERROR(regexes_[k]->find_all(sub, s.matches));
        } else if (!step.pattern.empty()) {
          for (size_t at = sub.find(step.pattern); at != std::string_view::npos; at = sub.find(step.pattern, at + step.pattern.size()))
            s.matches.emplace_back(static_cast<uint32_t>(at), static_cast<uint32_t>(at + step.pattern.size()));
        }
        size_t prev = 0;
        for (const auto& [mb, me] : s.matches) {
          if (prev != mb) add(prev, mb, false);
          add(mb, me, true);
          prev = me;
        }
        if (prev != sub.size()) add(prev, sub.size(), false);
      } else {
        // A character predicate: each matching character is a match of its own.
        if (step.kind == K::kDigits) {
          behavior = step.individual_digits ? SplitBehavior::kIsolated : SplitBehavior::kContiguous;
          invert = false;
        } else if (step.kind == K::kWhitespaceSplit) {
          behavior = SplitBehavior::kRemoved;
          invert = false;
        } else {
          invert = false;
        }
        size_t last = 0;
        for (size_t i = 0; i < sub.size();) {
          const size_t at = i;
          const uint32_t cp = unicode::next_code_point(sub, i);
          const bool m = step.kind == K::kDigits       ? unicode::is_numeric(cp)
                         : step.kind == K::kPunctuation ? unicode::is_punctuation(cp)
                                                        : unicode::is_whitespace(cp);
          if (m) {
            if (last < at) add(last, at, false);
            add(at, i, true);
            last = i;
          }
        }
        if (last < sub.size()) add(last, sub.size(), false);
      }
      if (invert)
        for (auto& x : s.splits) x.is_match = !x.is_match;
      // The behavior decides what is kept and what joins what (HF's NormalizedString::split).
      s.kept.clear();
      switch (behavior) {
        case SplitBehavior::kIsolated:
          s.kept = s.splits;
          break;
        case SplitBehavior::kRemoved:
          for (const auto& x : s.splits)
            if (!x.is_match) s.kept.push_back(x);
          break;
        case SplitBehavior::kContiguous: {
          bool prev_match = false;
          for (const auto& x : s.splits) {
            if (x.is_match == prev_match && !s.kept.empty()) {
              s.kept.back().end = x.end;
            } else {
              s.kept.push_back(x);
            }
            prev_match = x.is_match;
          }
          break;
        }
        case SplitBehavior::kMergedWithPrevious: {
          bool prev_match = false;
          for (const auto& x : s.splits) {
            if (x.is_match && !prev_match && !s.kept.empty()) {
              s.kept.back().end = x.end;
            } else {
              s.kept.push_back(x);
            }
            prev_match = x.is_match;
          }
          break;
        }
        case SplitBehavior::kMergedWithNext: {
          bool prev_match = false;
          for (size_t i = s.splits.size(); i-- > 0;) {
            const auto& x = s.splits[i];
            if (x.is_match && !prev_match && !s.kept.empty()) {
              s.kept.back().begin = x.begin;
            } else {
              s.kept.push_back(x);
            }
            prev_match = x.is_match;
          }
          std::reverse(s.kept.begin(), s.kept.end());
          break;
        }
      }
      for (const auto& x : s.kept)
        if (x.end > x.begin) s.next_pieces.emplace_back(x.begin, x.end);
    }
    s.pieces.swap(s.next_pieces);
  }

  // ByteLevel, last: the prefix space, the GPT-2 regex, then BPE on each word's bytes.
  const PreTokenizerStep& bl = spec_.pre_tokenizer.back();
  for (const auto& [pb, pe] : s.pieces) {
    std::string_view src = text.substr(pb, pe - pb);
    if (bl.add_prefix_space && src[0] != ' ') {
      s.word_buf.assign(1, ' ');
      s.word_buf.append(src);
      src = s.word_buf;
    }
    if (!bl.use_regex) {
      encode_word(src, s, out);
      continue;
    }
    s.matches.clear();
    KILN_RETURN_IF_ERROR(gpt2_regex_->find_all(src, s.matches));
    size_t prev = 0;
    for (const auto& [mb, me] : s.matches) {
      if (prev < mb) encode_word(src.substr(prev, mb - prev), s, out);
      if (me > mb) encode_word(src.substr(mb, me - mb), s, out);
      prev = me;
    }
    if (prev < src.size()) encode_word(src.substr(prev), s, out);
  }
  return Status::ok();
}

void ByteLevelBpeTokenizer::encode_word(std::string_view word, Scratch& s, std::vector<int>& out) const {
  if (word.size() == 1 && byte_ids_[static_cast<uint8_t>(word[0])] >= 0) {
    out.push_back(byte_ids_[static_cast<uint8_t>(word[0])]);
    return;
  }
  if (spec_.ignore_merges) {
    auto it = by_bytes_.find(word);
    if (it != by_bytes_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = s.use_caches && word.size() <= kCacheWordBytes;
  if (cacheable) {
    auto it = s.word_cache.find(std::string(word));
    if (it != s.word_cache.end()) {
      const auto [first, count] = it->second;
      out.insert(out.end(), s.cached_ids.begin() + first, s.cached_ids.begin() + first + count);
      return;
    }
  }
  const size_t out_before = out.size();
  auto& syms = s.syms;
  syms.clear();
  bool prev_unk = false;
  for (size_t i = 0; i < word.size(); ++i) {
    const auto b = static_cast<uint8_t>(word[i]);
    BpeSymbol sym;
    sym.begin = static_cast<uint32_t>(i);
    sym.len = 1;
    if (byte_ids_[b] >= 0) {
      sym.id = byte_ids_[b];
      syms.push_back(sym);
      prev_unk = false;
      continue;
    }
    if (spec_.byte_fallback && !byte_fallback_ids_[b].empty()) {
      for (int id : byte_fallback_ids_[b]) {
        sym.id = id;
        syms.push_back(sym);
      }
      prev_unk = false;
      continue;
    }
    if (spec_.unk_id >= 0) {
      if (spec_.fuse_unk && prev_unk) {
        syms.back().len += 1;
      } else {
        sym.id = spec_.unk_id;
        syms.push_back(sym);
      }
      prev_unk = true;
    }
    // Without a token for the byte and without unk, HF drops it.
  }
  if (syms.empty()) return;
  bpe_link(syms);
  if (!s.use_caches) {
    bpe_merge(
        syms,
        [this](const BpeSymbol& a, const BpeSymbol& b, BpeMerge* m) {
          const PairSlot* p = find_pair(a.id, b.id);
          if (p == nullptr) return false;
          m->id = p->id;
          m->priority = -static_cast<double>(p->rank);
          return true;
        },
        s.queue);
  } else {
    if (s.pair_cache.empty()) s.pair_cache.resize(Scratch::kPairCache);
    bpe_merge(
      syms,
      [this, &s](const BpeSymbol& a, const BpeSymbol& b, BpeMerge* m) {
        const uint64_t key = static_cast<uint64_t>(static_cast<uint32_t>(a.id)) << 32 | static_cast<uint32_t>(b.id);
        Scratch::PairHit& hit = s.pair_cache[((key * 0x9E3779B97F4A7C15ull) >> 40) & (Scratch::kPairCache - 1)];
        if (hit.key != key) {
          const PairSlot* p = find_pair(a.id, b.id);
          hit.key = key;
          hit.rank = p == nullptr ? 0 : p->rank;
          hit.id = p == nullptr ? -1 : p->id;
        }
        if (hit.id < 0) return false;
        m->id = hit.id;
        m->priority = -static_cast<double>(hit.rank);
        return true;
      },
      s.queue);
  }
  for (int32_t i = 0; i >= 0; i = syms[static_cast<size_t>(i)].next) out.push_back(syms[static_cast<size_t>(i)].id);
  if (cacheable && s.word_cache.size() < kCacheWords) {
    const auto first = static_cast<uint32_t>(s.cached_ids.size());
    s.cached_ids.insert(s.cached_ids.end(), out.begin() + static_cast<std::ptrdiff_t>(out_before), out.end());
    s.word_cache.emplace(std::string(word), std::pair<uint32_t, uint32_t>{first, static_cast<uint32_t>(out.size() - out_before)});
  }
}

std::string ByteLevelBpeTokenizer::decode_piece(int /*prev*/, int id) const {
  if (id < 0 || id >= vocab_size() || special_[static_cast<size_t>(id)]) return {};
  return bytes_[static_cast<size_t>(id)];
}

std::string ByteLevelBpeTokenizer::decode(const std::vector<int>& ids, const DecodeOptions& options) const {
  std::string out;
  for (int id : ids) {
    if (id < 0 || id >= vocab_size()) continue;
    if (options.skip_special && special_[static_cast<size_t>(id)]) continue;
    out += bytes_[static_cast<size_t>(id)];
  }
  return out;
}

bool ByteLevelBpeTokenizer::is_special(int id) const {
  return id >= 0 && id < vocab_size() && special_[static_cast<size_t>(id)] != 0;
}

std::string ByteLevelBpeTokenizer::piece(int id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return spec_.tokens[static_cast<size_t>(id)];
}

}  // namespace kiln
