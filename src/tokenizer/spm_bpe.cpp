#include "core/utf8.h"
#include "tokenizer/spm_bpe.h"

#include <climits>
#include <cstdio>

namespace kiln {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The length of the well-formed UTF-8 sequence at s[i], or 1 for a byte that starts none
// (that byte then is a character of its own).
size_t utf8_char_len(std::string_view s, size_t i) {
  const size_t len = utf8_sequence_length(s, i);
  return len == 0 ? 1 : len;
}

// run.c's grouping: a byte and up to 3 continuation bytes after it.
size_t llama2c_group_len(std::string_view s, size_t i) {
  size_t j = i + 1;
  while (j < s.size() && (static_cast<unsigned char>(s[j]) & 0xc0) == 0x80 && j - i < 4) ++j;
  return j - i;
}

bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_word_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         (static_cast<unsigned char>(c) & 0x80) != 0;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty() || s.find(from) == std::string::npos) return;
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out += to;
  }
  out.append(s, pos, std::string::npos);
  s = std::move(out);
}

std::string byte_piece_name(int b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "<0x%02X>", b);
  return buf;
}

}  // namespace

int parse_byte_piece(std::string_view p) {
  if (p.size() != 6 || p[0] != '<' || p[1] != '0' || p[2] != 'x' || p[5] != '>') return -1;
  const int hi = hex_digit(p[3]), lo = hex_digit(p[4]);
  if (hi < 0 || lo < 0) return -1;
  return hi * 16 + lo;
}

Result<std::unique_ptr<SpmBpeTokenizer>> SpmBpeTokenizer::create(SpmBpeSpec spec) {
  std::unique_ptr<SpmBpeTokenizer> t(new SpmBpeTokenizer());
  t->spec_ = std::move(spec);
  KILN_RETURN_IF_ERROR(t->build());
  return t;
}

Status SpmBpeTokenizer::build() {
  SpmBpeSpec& s = spec_;
  const std::string& name = s.name;
  if (s.pieces.empty()) return corrupt(name + ": the vocabulary is empty");
  if (s.pieces.size() > static_cast<size_t>(INT_MAX)) return corrupt(name + ": the vocabulary is too large");
  const int n = static_cast<int>(s.pieces.size());
  const auto ns = s.pieces.size();
  auto in_range = [&](int id) { return id >= 0 && id < n; };
  auto check_optional_id = [&](int id, const char* what) -> Status {
    if (id < -1 || id >= n)
      return corrupt(name + ": " + what + " id " + std::to_string(id) + " is outside the vocabulary of " +
                     std::to_string(n));
    return Status::ok();
  };

  if (s.kinds.empty()) s.kinds.assign(ns, PieceKind::kNormal);
  if (s.kinds.size() != ns)
    return corrupt(name + ": " + std::to_string(s.kinds.size()) + " token types for " + std::to_string(n) + " tokens");
  if (s.scores.empty()) s.scores.assign(ns, 0.0f);
  if (s.scores.size() != ns)
    return corrupt(name + ": " + std::to_string(s.scores.size()) + " scores for " + std::to_string(n) + " tokens");
  KILN_RETURN_IF_ERROR(check_optional_id(s.bos_id, "BOS"));
  KILN_RETURN_IF_ERROR(check_optional_id(s.eos_id, "EOS"));
  KILN_RETURN_IF_ERROR(check_optional_id(s.unk_id, "unknown-token"));
  for (const TextOp& op : s.text_ops)
    if (op.kind == TextOp::Kind::kReplace && op.from.empty())
      return invalid_argument(name + ": a normalizer replaces the empty string");

  if (!s.split_regex.empty()) {
    KILN_ASSIGN_OR_RETURN(split_regex_, Regex::compile(s.split_regex, name + ": the word split"));
  }

  // Text lookups: the first id wins where a piece is spelled twice.
  lookup_.reserve(ns);
  for (int id = 0; id < n; ++id) {
    const std::string& p = s.pieces[static_cast<size_t>(id)];
    const PieceKind k = s.kinds[static_cast<size_t>(id)];
    if (p.empty()) continue;
    if (!s.lookup_control && (k == PieceKind::kControl || k == PieceKind::kUnknown)) continue;
    if (!s.lookup_bytes && k == PieceKind::kByte) continue;
    if (lookup_.emplace(std::string_view(p), id).second) max_lookup_len_ = std::max(max_lookup_len_, p.size());
  }

  // Byte fallback table.
  if (s.byte_ids.empty()) {
    std::unordered_map<std::string_view, int> all;
    for (int id = n - 1; id >= 0; --id) all[s.pieces[static_cast<size_t>(id)]] = id;  // first id wins
    for (int b = 0; b < 256; ++b) {
      auto it = all.find(byte_piece_name(b));
      byte_ids_[static_cast<size_t>(b)] = it == all.end() ? -1 : it->second;
    }
  } else {
    if (s.byte_ids.size() != 256) return invalid_argument(name + ": the byte table must have 256 entries");
    for (int b = 0; b < 256; ++b) {
      const int id = s.byte_ids[static_cast<size_t>(b)];
      KILN_RETURN_IF_ERROR(check_optional_id(id, "byte-fallback"));
      byte_ids_[static_cast<size_t>(b)] = id;
    }
  }
  if (!s.byte_fallback) byte_ids_.fill(-1);

  // Ranked merges.
  if (s.merge_rule == MergeRule::kRank) {
    std::unordered_map<std::string_view, int> all;
    all.reserve(ns);
    for (int id = n - 1; id >= 0; --id) all[s.pieces[static_cast<size_t>(id)]] = id;
    pair_merges_.reserve(s.merges.size());
    std::string joined;
    for (size_t r = 0; r < s.merges.size(); ++r) {
      const auto [a, b] = s.merges[r];
      if (!in_range(a) || !in_range(b))
        return corrupt(name + ": merge " + std::to_string(r) + " names a token outside the vocabulary");
      joined = s.pieces[static_cast<size_t>(a)] + s.pieces[static_cast<size_t>(b)];
      auto it = all.find(joined);
      if (it == all.end())
        return corrupt(name + ": merge " + std::to_string(r) + " ('" + s.pieces[static_cast<size_t>(a)] + "' + '" +
                       s.pieces[static_cast<size_t>(b)] + "') makes '" + joined + "', which is not in the vocabulary");
      if (r > static_cast<size_t>(INT_MAX)) return corrupt(name + ": too many merges");
      pair_merges_.emplace(pair_key(a, b), PairMerge{static_cast<int>(r), it->second});  // first rank wins
    }
  }

  // What each id decodes to.
  decoded_.resize(ns);
  const bool replace_space = !s.space_piece.empty() && s.space_piece != " ";
  for (size_t id = 0; id < ns; ++id) {
    const std::string& p = s.pieces[id];
    switch (s.kinds[id]) {
      case PieceKind::kControl:
        break;
      case PieceKind::kByte: {
        const int b = parse_byte_piece(p);
        if (b < 0) return corrupt(name + ": token " + std::to_string(id) + " is a byte token but is not spelled <0xXX>");
        decoded_[id] = std::string(1, static_cast<char>(b));
        break;
      }
      case PieceKind::kNormal:
      case PieceKind::kUnknown:
        decoded_[id] = p;
        if (replace_space) replace_all(decoded_[id], s.space_piece, " ");
        break;
    }
  }

  // Added tokens.
  if (!s.added.empty()) {
    trie_.emplace_back();
    for (size_t i = 0; i < s.added.size(); ++i) {
      const AddedToken& a = s.added[i];
      if (!in_range(a.id))
        return corrupt(name + ": added token '" + a.content + "' has id " + std::to_string(a.id) +
                       ", outside the vocabulary of " + std::to_string(n));
      if (a.content.empty()) return corrupt(name + ": added token " + std::to_string(a.id) + " is empty");
      int32_t node = 0;
      for (char ch : a.content) {
        const auto c = static_cast<uint8_t>(ch);
        int32_t next = -1;
        for (const auto& [byte, child] : trie_[static_cast<size_t>(node)].children)
          if (byte == c) next = child;
        if (next < 0) {
          next = static_cast<int32_t>(trie_.size());
          trie_[static_cast<size_t>(node)].children.emplace_back(c, next);
          trie_.emplace_back();
        }
        node = next;
      }
      if (trie_[static_cast<size_t>(node)].added < 0) trie_[static_cast<size_t>(node)].added = static_cast<int32_t>(i);
    }
  }
  return Status::ok();
}

int SpmBpeTokenizer::find(std::string_view p) const {
  if (p.size() > max_lookup_len_) return -1;
  auto it = lookup_.find(p);
  return it == lookup_.end() ? -1 : it->second;
}

std::string SpmBpeTokenizer::piece(int id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return spec_.pieces[static_cast<size_t>(id)];
}

std::string SpmBpeTokenizer::decode_piece(int prev, int id) const {
  if (id < 0 || id >= vocab_size()) return {};
  const std::string& d = decoded_[static_cast<size_t>(id)];
  const bool at_start = prev == -1 || (spec_.bos_id >= 0 && prev == spec_.bos_id);
  if (spec_.strip_leading_space && at_start && !d.empty() && d[0] == ' ' &&
      spec_.kinds[static_cast<size_t>(id)] != PieceKind::kByte)
    return d.substr(1);
  return d;
}

void SpmBpeTokenizer::emit_bytes(std::string_view bytes, std::vector<int>& out) const {
  for (char ch : bytes) {
    const int id = byte_ids_[static_cast<uint8_t>(ch)];
    if (id >= 0) {
      out.push_back(id);
    } else if (spec_.unk_id >= 0) {
      out.push_back(spec_.unk_id);
    }
  }
}

void SpmBpeTokenizer::encode_word(std::string_view word, size_t prefix_len, std::vector<int>& out) const {
  if (word.empty()) return;
  std::vector<BpeSymbol> syms;
  syms.reserve(word.size());

  // kScore: the pair merges into the piece their bytes spell, if text may reach it.
  auto score_rule = [this](std::string_view buf) {
    return [this, buf](const BpeSymbol& a, const BpeSymbol& b, BpeMerge* m) {
      const int id = find(buf.substr(a.begin, static_cast<size_t>(a.len) + b.len));
      if (id < 0) return false;
      const float s = spec_.scores[static_cast<size_t>(id)];
      if (!(s > spec_.min_score)) return false;
      m->id = id;
      m->priority = s;
      return true;
    };
  };
  auto rank_rule = [this](const BpeSymbol& a, const BpeSymbol& b, BpeMerge* m) {
    if (a.id < 0 || b.id < 0) return false;
    auto it = pair_merges_.find(pair_key(a.id, b.id));
    if (it == pair_merges_.end()) return false;
    m->id = it->second.id;
    m->priority = -static_cast<double>(it->second.rank);
    return true;
  };
  auto add = [&syms](int id, size_t begin, size_t len) {
    BpeSymbol s;
    s.id = id;
    s.begin = static_cast<uint32_t>(begin);
    s.len = static_cast<uint32_t>(len);
    syms.push_back(s);
  };
  auto emit_list = [&]() {
    for (int32_t i = 0; i >= 0; i = syms[static_cast<size_t>(i)].next) {
      const BpeSymbol& s = syms[static_cast<size_t>(i)];
      if (s.id >= 0) {
        out.push_back(s.id);
      } else {
        emit_bytes(word.substr(s.begin, s.len), out);
      }
    }
  };

  switch (spec_.initial) {
    case InitialSymbols::kLlama2c: {
      // Symbols are the pieces of their tokens, laid end to end in `buf`, so that a pair's
      // concatenation (what run.c looks up) is one span of it.
      std::string buf;
      buf.reserve(word.size() + 8);
      for (size_t i = 0; i < word.size();) {
        // The prefix is grouped on its own: a continuation byte after it starts a new group.
        const size_t g = i < prefix_len ? llama2c_group_len(word.substr(0, prefix_len), i) : llama2c_group_len(word, i);
        const int id = find(word.substr(i, g));
        if (id >= 0) {
          add(id, buf.size(), g);
          buf.append(word, i, g);
        } else {
          for (size_t k = i; k < i + g; ++k) {
            int bid = byte_ids_[static_cast<uint8_t>(word[k])];
            if (bid < 0) bid = spec_.unk_id;
            if (bid < 0) continue;
            const std::string& p = spec_.pieces[static_cast<size_t>(bid)];
            add(bid, buf.size(), p.size());
            buf += p;
          }
        }
        i += g;
      }
      if (syms.empty()) return;
      bpe_link(syms);
      bpe_merge(syms, score_rule(buf));
      for (int32_t i = 0; i >= 0; i = syms[static_cast<size_t>(i)].next) out.push_back(syms[static_cast<size_t>(i)].id);
      return;
    }
    case InitialSymbols::kBytesFirst: {
      if (spec_.ignore_merges) {
        if (const int id = find(word); id >= 0) {
          out.push_back(id);
          return;
        }
      }
      bool prev_unk = false;
      for (size_t i = 0; i < word.size();) {
        const size_t len = utf8_char_len(word, i);
        const int id = find(word.substr(i, len));
        if (id >= 0) {
          add(id, i, len);
          prev_unk = false;
        } else {
          bool all_bytes = true;
          for (size_t k = i; k < i + len; ++k) all_bytes = all_bytes && byte_ids_[static_cast<uint8_t>(word[k])] >= 0;
          if (all_bytes) {
            for (size_t k = i; k < i + len; ++k) add(byte_ids_[static_cast<uint8_t>(word[k])], k, 1);
            prev_unk = false;
          } else if (spec_.unk_id >= 0) {
            if (spec_.fuse_unk && prev_unk) {
              syms.back().len += static_cast<uint32_t>(len);
            } else {
              add(spec_.unk_id, i, len);
            }
            prev_unk = true;
          }
          // Without byte fallback and without an unk token the character is dropped (as HF does).
        }
        i += len;
      }
      if (syms.empty()) return;
      bpe_link(syms);
      bpe_merge(syms, rank_rule);
      emit_list();
      return;
    }
    case InitialSymbols::kBytesLast: {
      if (spec_.whole_newline_words && word.find_first_not_of('\n') == std::string_view::npos) {
        if (const int id = find(word); id >= 0) {
          out.push_back(id);
          return;
        }
      }
      for (size_t i = 0; i < word.size();) {
        const size_t len = utf8_char_len(word, i);
        add(find(word.substr(i, len)), i, len);
        i += len;
      }
      bpe_link(syms);
      if (spec_.merge_rule == MergeRule::kRank) {
        bpe_merge(syms, rank_rule);
      } else {
        bpe_merge(syms, score_rule(word));
      }
      emit_list();
      return;
    }
  }
}

void SpmBpeTokenizer::encode_segment(std::string_view segment, bool at_start, std::vector<int>& out) const {
  if (segment.empty()) return;
  std::string s(segment);
  size_t prefix_len = 0;  // bytes a Prepend put in front (llama2.c's dummy prefix is a token of its own)
  for (const TextOp& op : spec_.text_ops) {
    switch (op.kind) {
      case TextOp::Kind::kPrepend:
      case TextOp::Kind::kPrependIfMissing:
        if (s.empty() || (op.first_segment_only && !at_start)) break;
        if (op.kind == TextOp::Kind::kPrependIfMissing && s.starts_with(op.text)) break;
        s.insert(0, op.text);
        prefix_len += op.text.size();
        break;
      case TextOp::Kind::kReplace:
        replace_all(s, op.from, op.text);
        prefix_len = 0;
        break;
    }
  }
  const std::string_view v(s);
  // PCRE2 matches valid UTF-8 only (kiln skips its check); a segment that is not stays one word,
  // its stray bytes byte tokens. A failing match can only be PCRE2 out of memory: one word too.
  if (split_regex_ && is_valid_utf8(v)) {
    std::vector<std::pair<uint32_t, uint32_t>> hits;
    if (!split_regex_->find_all(v, hits).is_ok()) hits.clear();
    size_t at = 0;
    for (const auto& [b, e] : hits) {
      if (b > at) encode_word(v.substr(at, b - at), 0, out);
      if (e > b) encode_word(v.substr(b, e - b), 0, out);
      at = e;
    }
    if (at < v.size()) encode_word(v.substr(at), 0, out);
    return;
  }
  const std::string& sep = spec_.split_at;
  if (sep.empty()) {
    encode_word(v, prefix_len, out);
    return;
  }
  // The occurrences as HF finds them: leftmost first, not overlapping.
  size_t start = 0;
  for (size_t hit = v.find(sep); hit != std::string_view::npos; hit = v.find(sep, hit + sep.size())) {
    const size_t cut = spec_.split_after ? hit + sep.size() : hit;
    if (cut > start) encode_word(v.substr(start, cut - start), 0, out);
    start = cut;
  }
  if (start < v.size()) encode_word(v.substr(start), 0, out);
}

std::string SpmBpeTokenizer::decode(const std::vector<int>& ids, const DecodeOptions& options) const {
  std::string out;
  for (int id : ids) {
    if (id < 0 || id >= vocab_size()) continue;
    if (spec_.kinds[static_cast<size_t>(id)] == PieceKind::kControl) {
      if (!options.skip_special) out += spec_.pieces[static_cast<size_t>(id)];
    } else {
      out += decoded_[static_cast<size_t>(id)];
    }
  }
  if (spec_.strip_leading_space && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

Result<std::vector<int>> SpmBpeTokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  // Symbol offsets are 32-bit, and kLlama2c may spell a byte as six.
  if (text.size() > (size_t{1} << 28))
    return invalid_argument("the text to encode is " + std::to_string(text.size()) + " bytes; at most 256 MiB is supported");
  std::vector<int> out;
  out.reserve(text.size() / 3 + 4);
  if (options.add_special) out.insert(out.end(), spec_.special_prefix.begin(), spec_.special_prefix.end());
  auto finish = [&]() {
    if (options.add_special) out.insert(out.end(), spec_.special_suffix.begin(), spec_.special_suffix.end());
  };
  if (trie_.empty()) {
    encode_segment(text, true, out);
    finish();
    return out;
  }
  size_t seg_start = 0;
  for (size_t i = 0; i < text.size();) {
    // The longest added token at i.
    int32_t node = 0, best = -1;
    size_t best_len = 0;
    for (size_t k = i; k < text.size(); ++k) {
      int32_t next = -1;
      for (const auto& [byte, child] : trie_[static_cast<size_t>(node)].children)
        if (byte == static_cast<uint8_t>(text[k])) next = child;
      if (next < 0) break;
      node = next;
      if (trie_[static_cast<size_t>(node)].added >= 0) {
        best = trie_[static_cast<size_t>(node)].added;
        best_len = k + 1 - i;
      }
    }
    if (best >= 0 && spec_.added[static_cast<size_t>(best)].special) {
      // A discarded match still consumes its span (HF's encode_special_tokens), unless it
      // crosses a plain range's edge (tokenizer.h).
      const SpecialMatch m = special_match(options, i, i + best_len);
      if (m == SpecialMatch::kTextConsumed) {
        i += best_len;
        continue;
      }
      if (m == SpecialMatch::kTextNextByte) {
        ++i;
        continue;
      }
    }
    if (best >= 0) {
      const AddedToken& a = spec_.added[static_cast<size_t>(best)];
      if (a.single_word && ((i > 0 && is_word_char(text[i - 1])) ||
                            (i + best_len < text.size() && is_word_char(text[i + best_len])))) {
        best = -1;
      }
    }
    if (best < 0) {
      ++i;
      continue;
    }
    const AddedToken& a = spec_.added[static_cast<size_t>(best)];
    size_t seg_end = i, next = i + best_len;
    if (a.lstrip)
      while (seg_end > seg_start && is_ascii_space(text[seg_end - 1])) --seg_end;
    if (a.rstrip)
      while (next < text.size() && is_ascii_space(text[next])) ++next;
    encode_segment(text.substr(seg_start, seg_end - seg_start), seg_start == 0, out);
    out.push_back(a.id);
    seg_start = i = next;
  }
  encode_segment(text.substr(seg_start), seg_start == 0, out);
  finish();
  return out;
}

}  // namespace kiln
