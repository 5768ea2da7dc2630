// Hugging Face tokenizer.json, two kinds of BPE model:
//  - SentencePiece-style (what HF's LlamaConverter and GemmaConverter write): byte_fallback, "▁"
//    for spaces via a Prepend/Replace normalizer or a Metaspace pre-tokenizer, optionally a Split
//    on a string (Gemma 3), a Replace/ByteFallback/Fuse/Strip (or Metaspace) decoder; SpmBpeTokenizer.
//  - byte-level (GPT-2, Llama 3, Qwen): a ByteLevel pre-tokenizer (after Split regexes) and
//    decoder, NFC or other normalizers; ByteLevelBpeTokenizer.
//
// Added tokens, SentencePiece-style: those with special=true, and those with normalized=false, are
// matched in the raw text (leftmost-longest, honouring lstrip/rstrip/single_word) before
// normalization; the text between them is normalized and encoded segment by segment. Non-special
// tokens with normalized=true are not matched. Byte-level: as HF's AddedVocabulary, raw-text
// matching for normalized=false and normalized-text matching for normalized=true.
// Special tokens decode to nothing (HF's skip_special_tokens=True).
#include <algorithm>
#include <functional>
#include <unordered_map>

#include "formats/json_util.h"
#include "tokenizer/bytelevel_bpe.h"
#include "tokenizer/spm_bpe.h"

namespace kiln {

namespace {

const Json* member(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string type_of(const Json& obj) {
  const Json* t = member(obj, "type");
  return t != nullptr && t->is_string() ? t->get<std::string>() : std::string();
}

// True when a component, or one inside a Sequence of them, is ByteLevel.
bool has_byte_level(const Json* j) {
  if (j == nullptr) return false;
  if (j->is_array()) {
    for (const Json& e : *j)
      if (has_byte_level(&e)) return true;
    return false;
  }
  if (!j->is_object()) return false;
  if (type_of(*j) == "ByteLevel") return true;
  for (const char* k : {"normalizers", "pretokenizers", "processors", "decoders"})
    if (has_byte_level(member(*j, k))) return true;
  return false;
}

// The "String" of a Replace pattern ({"String": s}); a Regex pattern is unsupported.
Result<std::string> replace_pattern(const Json& obj, const std::string& where) {
  const Json* p = member(obj, "pattern");
  if (p == nullptr || !p->is_object()) return corrupt(where + ": Replace needs a 'pattern' object");
  if (const Json* s = member(*p, "String")) {
    if (!s->is_string()) return corrupt(where + ": Replace pattern 'String' must be a string");
    if (s->get_ref<const std::string&>().empty()) return corrupt(where + ": Replace pattern is empty");
    return s->get<std::string>();
  }
  if (member(*p, "Regex") != nullptr) return unsupported(where + ": Replace with a Regex pattern is not supported yet");
  return corrupt(where + ": Replace pattern must have 'String' or 'Regex'");
}

Result<SplitBehavior> parse_behavior(const Json& p, const std::string& where, SplitBehavior fallback) {
  KILN_ASSIGN_OR_RETURN(std::string b, json_string(p, "behavior", "", where));
  if (b.empty()) return fallback;
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  return corrupt(where + ": split behavior '" + b + "' is not Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous");
}

// A Split or Replace pattern: {"String": s} or {"Regex": r}.
Status parse_pattern(const Json& obj, const std::string& where, std::string& pattern, bool& regex) {
  const Json* p = member(obj, "pattern");
  if (p == nullptr || !p->is_object()) return corrupt(where + ": needs a 'pattern' object");
  if (const Json* s = member(*p, "String")) {
    if (!s->is_string()) return corrupt(where + ": pattern 'String' must be a string");
    pattern = s->get<std::string>();
    regex = false;
    return Status::ok();
  }
  if (const Json* r = member(*p, "Regex")) {
    if (!r->is_string()) return corrupt(where + ": pattern 'Regex' must be a string");
    pattern = r->get<std::string>();
    regex = true;
    return Status::ok();
  }
  return corrupt(where + ": pattern must have 'String' or 'Regex'");
}

Status parse_normalizer(const Json& n, const std::string& where, std::vector<TextOp>& ops) {
  if (!n.is_object()) return corrupt(where + ": must be an object");
  const std::string type = type_of(n);
  if (type == "Sequence") {
    const Json* list = member(n, "normalizers");
    if (list == nullptr || !list->is_array()) return corrupt(where + ": Sequence needs a 'normalizers' array");
    for (const Json& e : *list) KILN_RETURN_IF_ERROR(parse_normalizer(e, where, ops));
    return Status::ok();
  }
  if (type == "Prepend") {
    KILN_ASSIGN_OR_RETURN(std::string text, json_string(n, "prepend", "", where));
    ops.push_back({TextOp::Kind::kPrepend, text, "", false});
    return Status::ok();
  }
  if (type == "Replace") {
    KILN_ASSIGN_OR_RETURN(std::string from, replace_pattern(n, where));
    KILN_ASSIGN_OR_RETURN(std::string to, json_string(n, "content", "", where));
    ops.push_back({TextOp::Kind::kReplace, to, from, false});
    return Status::ok();
  }
  if (type.empty()) return corrupt(where + ": a normalizer has no 'type'");
  return unsupported(where + ": normalizer '" + type + "' is not supported yet");
}

struct MetaspaceSettings {
  std::string replacement = "\xE2\x96\x81";
  std::string scheme = "always";  // always, first, never
  bool split = true;
};

Result<MetaspaceSettings> parse_metaspace(const Json& m, const std::string& where) {
  MetaspaceSettings s;
  KILN_ASSIGN_OR_RETURN(s.replacement, json_string(m, "replacement", s.replacement, where));
  if (s.replacement.empty()) return corrupt(where + ": Metaspace 'replacement' is empty");
  if (member(m, "prepend_scheme") != nullptr) {
    KILN_ASSIGN_OR_RETURN(s.scheme, json_string(m, "prepend_scheme", "always", where));
    if (s.scheme != "always" && s.scheme != "first" && s.scheme != "never")
      return corrupt(where + ": Metaspace prepend_scheme '" + s.scheme + "' is not always, first or never");
  } else {
    KILN_ASSIGN_OR_RETURN(bool add, json_bool(m, "add_prefix_space", true, where));  // older files
    s.scheme = add ? "always" : "never";
  }
  KILN_ASSIGN_OR_RETURN(s.split, json_bool(m, "split", true, where));
  return s;
}

Status parse_pre_tokenizer(const Json& p, const std::string& where, SpmBpeSpec& spec) {
  if (!p.is_object()) return corrupt(where + ": must be an object");
  const std::string type = type_of(p);
  if (type == "Sequence") {
    const Json* list = member(p, "pretokenizers");
    if (list == nullptr || !list->is_array()) return corrupt(where + ": Sequence needs a 'pretokenizers' array");
    if (list->size() > 1) return unsupported(where + ": a Sequence of several pre-tokenizers is not supported yet");
    for (const Json& e : *list) KILN_RETURN_IF_ERROR(parse_pre_tokenizer(e, where, spec));
    return Status::ok();
  }
  if (type == "Split") {
    // A literal string only, merged into the word before or after it (Metaspace's split is the
    // latter). It runs on the normalized text: Gemma 3's Split(" ") finds no " " after its
    // Replace(" " -> "▁"), so there it cuts nothing, as in HF.
    std::string pattern;
    bool regex = false;
    KILN_RETURN_IF_ERROR(parse_pattern(p, where + ": Split", pattern, regex));
    if (regex) return unsupported(where + ": Split with a Regex pattern is not supported in a SentencePiece-style BPE yet");
    if (pattern.empty()) return corrupt(where + ": Split pattern is empty");
    KILN_ASSIGN_OR_RETURN(SplitBehavior b, parse_behavior(p, where + ": Split", SplitBehavior::kIsolated));
    KILN_ASSIGN_OR_RETURN(bool invert, json_bool(p, "invert", false, where));
    if (invert) return unsupported(where + ": Split with invert=true is not supported in a SentencePiece-style BPE yet");
    if (b != SplitBehavior::kMergedWithPrevious && b != SplitBehavior::kMergedWithNext) {
      KILN_ASSIGN_OR_RETURN(std::string name, json_string(p, "behavior", "Isolated", where));
      return unsupported(where + ": Split behavior '" + name +
                         "' is not supported in a SentencePiece-style BPE yet (MergedWithPrevious and MergedWithNext are)");
    }
    if (!spec.split_at.empty()) return unsupported(where + ": two pre-tokenizers that split words");
    spec.split_at = pattern;
    spec.split_after = b == SplitBehavior::kMergedWithPrevious;
    return Status::ok();
  }
  if (type == "Metaspace") {
    if (!spec.split_at.empty()) return unsupported(where + ": two pre-tokenizers that split words");
    KILN_ASSIGN_OR_RETURN(MetaspaceSettings m, parse_metaspace(p, where));
    spec.text_ops.push_back({TextOp::Kind::kReplace, m.replacement, " ", false});
    if (m.scheme != "never")
      spec.text_ops.push_back({TextOp::Kind::kPrependIfMissing, m.replacement, "", m.scheme == "first"});
    if (m.split) spec.split_at = m.replacement;
    return Status::ok();
  }
  if (type.empty()) return corrupt(where + ": a pre-tokenizer has no 'type'");
  return unsupported(where + ": pre-tokenizer '" + type + "' is not supported yet");
}

struct DecoderSettings {
  std::string space_piece;  // what becomes ' '
  bool strip = false;
  bool byte_fallback = false;
};

Status parse_decoder(const Json& d, const std::string& where, DecoderSettings& s) {
  if (!d.is_object()) return corrupt(where + ": must be an object");
  const std::string type = type_of(d);
  if (type == "Sequence") {
    const Json* list = member(d, "decoders");
    if (list == nullptr || !list->is_array()) return corrupt(where + ": Sequence needs a 'decoders' array");
    for (const Json& e : *list) KILN_RETURN_IF_ERROR(parse_decoder(e, where, s));
    return Status::ok();
  }
  if (type == "Replace") {
    KILN_ASSIGN_OR_RETURN(std::string from, replace_pattern(d, where));
    KILN_ASSIGN_OR_RETURN(std::string to, json_string(d, "content", "", where));
    if (to != " ") return unsupported(where + ": a Replace decoder that does not produce ' ' is not supported yet");
    s.space_piece = from;
    return Status::ok();
  }
  if (type == "ByteFallback") {
    s.byte_fallback = true;
    return Status::ok();
  }
  if (type == "Fuse") return Status::ok();
  if (type == "Strip") {
    KILN_ASSIGN_OR_RETURN(std::string content, json_string(d, "content", " ", where));
    KILN_ASSIGN_OR_RETURN(int64_t start, json_int(d, "start", 0, where));
    KILN_ASSIGN_OR_RETURN(int64_t stop, json_int(d, "stop", 0, where));
    if (content != " " || start > 1 || stop != 0 || start < 0)
      return unsupported(where + ": only Strip of one leading ' ' is supported");
    s.strip = start == 1;
    return Status::ok();
  }
  if (type == "Metaspace") {
    KILN_ASSIGN_OR_RETURN(MetaspaceSettings m, parse_metaspace(d, where));
    s.space_piece = m.replacement;
    s.strip = m.scheme != "never";
    return Status::ok();
  }
  if (type.empty()) return corrupt(where + ": a decoder has no 'type'");
  return unsupported(where + ": decoder '" + type + "' is not supported yet");
}

// ---------------------------------------------------------------------------------------------
// What both model kinds read: the vocabulary, the added tokens, the merges, the post-processor.

struct Vocab {
  std::vector<std::string> pieces;  // by id; added tokens beyond the model's vocab appended
  size_t model_size = 0;            // how many ids the model's own vocab has
  std::unordered_map<std::string, int> ids;  // the model's vocab
};

Result<Vocab> parse_vocab(const Json& model, const std::string& mw) {
  const Json* vocab = member(model, "vocab");
  if (vocab == nullptr || !vocab->is_object()) return corrupt(mw + ": 'vocab' is missing or not an object");
  const size_t n = vocab->size();
  if (n == 0) return corrupt(mw + ": 'vocab' is empty");
  if (n > static_cast<size_t>(INT32_MAX / 2)) return corrupt(mw + ": 'vocab' is too large");
  Vocab v;
  v.model_size = n;
  v.pieces.resize(n);
  std::vector<bool> seen(n, false);
  v.ids.reserve(n);
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    const Json& x = it.value();
    if (!x.is_number_integer() && !x.is_number_unsigned())
      return corrupt(mw + ".vocab: the id of '" + it.key() + "' is not an integer");
    const int64_t id = x.get<int64_t>();
    if (id < 0 || static_cast<uint64_t>(id) >= n)
      return corrupt(mw + ".vocab: '" + it.key() + "' has id " + std::to_string(id) + ", outside 0.." +
                     std::to_string(n - 1) + " (the vocab has " + std::to_string(n) + " entries)");
    if (seen[static_cast<size_t>(id)])
      return corrupt(mw + ".vocab: id " + std::to_string(id) + " is given to both '" + v.pieces[static_cast<size_t>(id)] +
                     "' and '" + it.key() + "'");
    seen[static_cast<size_t>(id)] = true;
    v.pieces[static_cast<size_t>(id)] = it.key();
    v.ids.emplace(it.key(), static_cast<int>(id));
  }
  return v;
}

struct AddedEntry {
  AddedToken token;
  bool new_id = false;  // beyond the model's vocab
};

// Added tokens: ids inside the vocab must spell the same piece; new ids extend `v.pieces`
// (gaps stay "").
Result<std::vector<AddedEntry>> parse_added(const Json& j, const std::string& path, Vocab& v) {
  std::vector<AddedEntry> out;
  const Json* added = member(j, "added_tokens");
  if (added == nullptr) return out;
  if (!added->is_array()) return corrupt(path + ": 'added_tokens' must be an array");
  const size_t n = v.model_size;
  const size_t limit = n + added->size();  // bounds the ids a file can make us allocate
  std::vector<bool> new_seen;
  for (size_t i = 0; i < added->size(); ++i) {
    const Json& a = (*added)[i];
    const std::string aw = path + ": added_tokens[" + std::to_string(i) + "]";
    if (!a.is_object()) return corrupt(aw + ": must be an object");
    KILN_ASSIGN_OR_RETURN(int64_t id, json_int(a, "id", -1, aw));
    AddedEntry e;
    AddedToken& t = e.token;
    KILN_ASSIGN_OR_RETURN(t.content, json_string(a, "content", "", aw));
    KILN_ASSIGN_OR_RETURN(t.special, json_bool(a, "special", false, aw));
    KILN_ASSIGN_OR_RETURN(t.normalized, json_bool(a, "normalized", !t.special, aw));
    KILN_ASSIGN_OR_RETURN(t.lstrip, json_bool(a, "lstrip", false, aw));
    KILN_ASSIGN_OR_RETURN(t.rstrip, json_bool(a, "rstrip", false, aw));
    KILN_ASSIGN_OR_RETURN(t.single_word, json_bool(a, "single_word", false, aw));
    if (t.content.empty()) return corrupt(aw + ": 'content' is missing or empty");
    if (id < 0 || static_cast<uint64_t>(id) >= limit)
      return corrupt(aw + ": '" + t.content + "' has id " + std::to_string(id) + ", outside 0.." + std::to_string(limit - 1));
    const auto uid = static_cast<size_t>(id);
    if (uid < n) {
      if (v.pieces[uid] != t.content)
        return corrupt(aw + ": '" + t.content + "' has id " + std::to_string(id) + ", which the vocab gives to '" +
                       v.pieces[uid] + "'");
    } else {
      if (uid >= v.pieces.size()) {
        v.pieces.resize(uid + 1);
        new_seen.resize(uid + 1 - n, false);
      }
      if (new_seen[uid - n])
        return corrupt(aw + ": id " + std::to_string(id) + " is given to both '" + v.pieces[uid] + "' and '" +
                       t.content + "'");
      new_seen[uid - n] = true;
      v.pieces[uid] = t.content;
      e.new_id = true;
    }
    t.id = static_cast<int>(id);
    out.push_back(std::move(e));
  }
  return out;
}

// Merges, as "a b" strings or [a, b] pairs; both sides must be vocab pieces.
Result<std::vector<std::pair<int, int>>> parse_merges(const Json& model, const Vocab& v, const std::string& mw) {
  std::vector<std::pair<int, int>> out;
  const Json* merges = member(model, "merges");
  if (merges == nullptr) return out;
  if (!merges->is_array()) return corrupt(mw + ": 'merges' must be an array");
  out.reserve(merges->size());
  std::string left, right;
  for (size_t r = 0; r < merges->size(); ++r) {
    const Json& m = (*merges)[r];
    const std::string where = mw + ".merges[" + std::to_string(r) + "]";
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        return corrupt(where + ": '" + s + "' is not two tokens separated by one space");
      left.assign(s, 0, sp);
      right.assign(s, sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      return corrupt(where + ": must be a string \"a b\" or an array of two strings");
    }
    auto a = v.ids.find(left), b = v.ids.find(right);
    if (a == v.ids.end()) return corrupt(where + ": '" + left + "' is not in the vocab");
    if (b == v.ids.end()) return corrupt(where + ": '" + right + "' is not in the vocab");
    out.emplace_back(a->second, b->second);
  }
  return out;
}

// What the post-processor puts around a single text when special tokens are added.
struct PostTokens {
  std::vector<int> prefix, suffix;
  std::string first_name;  // the first special token's name (the BOS), "" when none
  std::string last_name;   // the last one after the text (the EOS), "" when none
};

Status parse_post_processor(const Json* pp, const std::string& where, const std::function<int(const std::string&)>& id_of,
                            int n, PostTokens& out) {
  if (pp == nullptr) return Status::ok();
  if (!pp->is_object()) return corrupt(where + ": must be an object");
  const std::string type = type_of(*pp);
  if (type == "Sequence") {
    const Json* list = member(*pp, "processors");
    if (list == nullptr || !list->is_array()) return corrupt(where + ": Sequence needs a 'processors' array");
    for (const Json& e : *list) KILN_RETURN_IF_ERROR(parse_post_processor(&e, where, id_of, n, out));
    return Status::ok();
  }
  if (type == "ByteLevel") return Status::ok();  // offsets only
  if (type == "TemplateProcessing") {
    const Json* single = member(*pp, "single");
    if (single == nullptr || !single->is_array()) return corrupt(where + ": TemplateProcessing needs a 'single' array");
    const Json* special = member(*pp, "special_tokens");
    bool after = false;
    for (const Json& item : *single) {
      if (member(item, "Sequence") != nullptr) {
        after = true;
        continue;
      }
      const Json* st = member(item, "SpecialToken");
      if (st == nullptr) return corrupt(where + ": a 'single' item is neither SpecialToken nor Sequence");
      const Json* nm = member(*st, "id");
      if (nm == nullptr || !nm->is_string()) return corrupt(where + ": a SpecialToken has no 'id' name");
      const std::string name = nm->get<std::string>();
      std::vector<int> ids;
      if (special != nullptr)
        if (const Json* e = member(*special, name.c_str()))
          if (const Json* list = member(*e, "ids"); list != nullptr && list->is_array())
            for (const Json& x : *list)
              if (x.is_number_integer()) ids.push_back(x.get<int>());
      if (ids.empty())
        if (int id = id_of(name); id >= 0) ids.push_back(id);
      for (int id : ids)
        if (id < 0 || id >= n) ids.clear();
      if (ids.empty())
        return corrupt(where + ": the " + std::string(after ? "EOS" : "BOS") + " token '" + name +
                       "' is not in the vocabulary");
      auto& dst = after ? out.suffix : out.prefix;
      dst.insert(dst.end(), ids.begin(), ids.end());
      if (!after && out.first_name.empty()) out.first_name = name;
      if (after) out.last_name = name;
    }
    return Status::ok();
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    for (const char* k : {"cls", "sep"}) {
      const Json* e = member(*pp, k);
      if (e == nullptr || !e->is_array() || e->size() != 2 || !(*e)[0].is_string() || !(*e)[1].is_number_integer())
        return corrupt(where + ": " + type + " needs '" + k + "' as [token, id]");
      const int id = (*e)[1].get<int>();
      if (id < 0 || id >= n) return corrupt(where + ": " + type + " '" + k + "' id " + std::to_string(id) + " is outside the vocabulary");
      (std::string(k) == "cls" ? out.prefix : out.suffix).push_back(id);
      (std::string(k) == "cls" ? out.first_name : out.last_name) = (*e)[0].get<std::string>();
    }
    return Status::ok();
  }
  if (type.empty()) return corrupt(where + ": a post-processor has no 'type'");
  return unsupported(where + ": post-processor '" + type + "' is not supported yet");
}

// ---------------------------------------------------------------------------------------------
// Byte-level BPE

Status parse_bl_normalizer(const Json& n, const std::string& where, std::vector<TextNormalizer>& out) {
  if (!n.is_object()) return corrupt(where + ": must be an object");
  const std::string type = type_of(n);
  using K = TextNormalizer::Kind;
  TextNormalizer z;
  if (type == "Sequence") {
    const Json* list = member(n, "normalizers");
    if (list == nullptr || !list->is_array()) return corrupt(where + ": Sequence needs a 'normalizers' array");
    for (const Json& e : *list) KILN_RETURN_IF_ERROR(parse_bl_normalizer(e, where, out));
    return Status::ok();
  }
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    z.kind = type == "NFC" ? K::kNfc : type == "NFD" ? K::kNfd : type == "NFKC" ? K::kNfkc : K::kNfkd;
  } else if (type == "Lowercase") {
    z.kind = K::kLowercase;
  } else if (type == "Strip") {
    z.kind = K::kStrip;
    KILN_ASSIGN_OR_RETURN(z.left, json_bool(n, "strip_left", true, where));
    KILN_ASSIGN_OR_RETURN(z.right, json_bool(n, "strip_right", true, where));
  } else if (type == "Replace") {
    z.kind = K::kReplace;
    KILN_RETURN_IF_ERROR(parse_pattern(n, where + ": Replace", z.pattern, z.regex));
    if (z.pattern.empty()) return corrupt(where + ": Replace pattern is empty");
    KILN_ASSIGN_OR_RETURN(z.content, json_string(n, "content", "", where));
  } else if (type == "Prepend") {
    z.kind = K::kPrepend;
    KILN_ASSIGN_OR_RETURN(z.content, json_string(n, "prepend", "", where));
  } else if (type.empty()) {
    return corrupt(where + ": a normalizer has no 'type'");
  } else {
    return unsupported(where + ": normalizer '" + type + "' is not supported yet");
  }
  out.push_back(std::move(z));
  return Status::ok();
}

Status parse_bl_pre_tokenizer(const Json& p, const std::string& where, std::vector<PreTokenizerStep>& out) {
  if (!p.is_object()) return corrupt(where + ": must be an object");
  const std::string type = type_of(p);
  using K = PreTokenizerStep::Kind;
  PreTokenizerStep st;
  if (type == "Sequence") {
    const Json* list = member(p, "pretokenizers");
    if (list == nullptr || !list->is_array()) return corrupt(where + ": Sequence needs a 'pretokenizers' array");
    for (const Json& e : *list) KILN_RETURN_IF_ERROR(parse_bl_pre_tokenizer(e, where, out));
    return Status::ok();
  }
  if (type == "Split") {
    st.kind = K::kSplit;
    KILN_RETURN_IF_ERROR(parse_pattern(p, where + ": Split", st.pattern, st.regex));
    KILN_ASSIGN_OR_RETURN(st.behavior, parse_behavior(p, where + ": Split", SplitBehavior::kIsolated));
    KILN_ASSIGN_OR_RETURN(st.invert, json_bool(p, "invert", false, where));
  } else if (type == "ByteLevel") {
    st.kind = K::kByteLevel;
    KILN_ASSIGN_OR_RETURN(st.add_prefix_space, json_bool(p, "add_prefix_space", true, where));
    KILN_ASSIGN_OR_RETURN(st.use_regex, json_bool(p, "use_regex", true, where));
  } else if (type == "Digits") {
    st.kind = K::kDigits;
    KILN_ASSIGN_OR_RETURN(st.individual_digits, json_bool(p, "individual_digits", false, where));
  } else if (type == "Punctuation") {
    st.kind = K::kPunctuation;
    KILN_ASSIGN_OR_RETURN(st.behavior, parse_behavior(p, where + ": Punctuation", SplitBehavior::kIsolated));
  } else if (type == "WhitespaceSplit") {
    st.kind = K::kWhitespaceSplit;
  } else if (type == "Whitespace") {  // HF: \w+|[^\w\s]+, the rest removed
    st.kind = K::kSplit;
    st.pattern = "\\w+|[^\\w\\s]+";
    st.regex = true;
    st.invert = true;
    st.behavior = SplitBehavior::kRemoved;
  } else if (type.empty()) {
    return corrupt(where + ": a pre-tokenizer has no 'type'");
  } else {
    return unsupported(where + ": pre-tokenizer '" + type + "' is not supported in a byte-level tokenizer yet");
  }
  out.push_back(std::move(st));
  return Status::ok();
}

Status check_bl_decoder(const Json& d, const std::string& where) {
  if (!d.is_object()) return corrupt(where + ": must be an object");
  const std::string type = type_of(d);
  if (type == "Sequence") {
    const Json* list = member(d, "decoders");
    if (list == nullptr || !list->is_array()) return corrupt(where + ": Sequence needs a 'decoders' array");
    for (const Json& e : *list) KILN_RETURN_IF_ERROR(check_bl_decoder(e, where));
    return Status::ok();
  }
  if (type == "ByteLevel") return Status::ok();
  if (type.empty()) return corrupt(where + ": a decoder has no 'type'");
  return unsupported(where + ": decoder '" + type + "' is not supported in a byte-level tokenizer yet");
}

Result<std::unique_ptr<Tokenizer>> byte_level_from_json(const Json& j, const Json& model, const std::string& path) {
  const std::string mw = path + ": model";
  ByteLevelSpec spec;
  spec.name = path;
  KILN_ASSIGN_OR_RETURN(Vocab v, parse_vocab(model, mw));
  KILN_ASSIGN_OR_RETURN(std::vector<AddedEntry> added, parse_added(j, path, v));
  KILN_ASSIGN_OR_RETURN(spec.merges, parse_merges(model, v, mw));
  KILN_ASSIGN_OR_RETURN(spec.ignore_merges, json_bool(model, "ignore_merges", false, mw));
  KILN_ASSIGN_OR_RETURN(spec.byte_fallback, json_bool(model, "byte_fallback", false, mw));
  KILN_ASSIGN_OR_RETURN(spec.fuse_unk, json_bool(model, "fuse_unk", false, mw));
  if (const Json* d = member(model, "dropout"); d != nullptr && (!d->is_number() || d->get<double>() != 0.0))
    return unsupported(mw + ": BPE dropout (random merges) is not supported");
  KILN_ASSIGN_OR_RETURN(std::string unk, json_string(model, "unk_token", "", mw));
  if (!unk.empty()) {
    auto it = v.ids.find(unk);
    if (it == v.ids.end()) return corrupt(mw + ": unk_token '" + unk + "' is not in the vocab");
    spec.unk_id = it->second;
  }
  spec.model_vocab_size = static_cast<int>(v.model_size);
  for (AddedEntry& e : added) spec.added.push_back(std::move(e.token));

  if (const Json* n = member(j, "normalizer")) KILN_RETURN_IF_ERROR(parse_bl_normalizer(*n, path + ": normalizer", spec.normalizers));
  const Json* pre = member(j, "pre_tokenizer");
  if (pre == nullptr) return unsupported(path + ": a byte-level BPE without a ByteLevel pre-tokenizer is not supported");
  KILN_RETURN_IF_ERROR(parse_bl_pre_tokenizer(*pre, path + ": pre_tokenizer", spec.pre_tokenizer));
  if (spec.pre_tokenizer.empty() || spec.pre_tokenizer.back().kind != PreTokenizerStep::Kind::kByteLevel)
    return unsupported(path + ": pre_tokenizer: a byte-level BPE needs ByteLevel as its last pre-tokenizer");
  if (const Json* d = member(j, "decoder")) KILN_RETURN_IF_ERROR(check_bl_decoder(*d, path + ": decoder"));
  if (const Json* n = member(j, "normalizer"); n != nullptr && has_byte_level(n))
    return unsupported(path + ": normalizer: a ByteLevel normalizer is not supported yet");

  spec.tokens = std::move(v.pieces);
  auto id_of = [&](const std::string& name) {
    for (const AddedToken& a : spec.added)
      if (a.content == name) return a.id;
    auto it = v.ids.find(name);
    return it == v.ids.end() ? -1 : it->second;
  };
  PostTokens post;
  KILN_RETURN_IF_ERROR(parse_post_processor(member(j, "post_processor"), path + ": post_processor", id_of,
                                            static_cast<int>(spec.tokens.size()), post));
  spec.special_prefix = post.prefix;
  spec.special_suffix = post.suffix;
  if (!post.prefix.empty()) spec.bos_id = post.prefix.front();
  if (!post.suffix.empty()) spec.eos_id = post.suffix.back();
  for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|im_end|>"})
    if (spec.eos_id < 0) spec.eos_id = id_of(name);
  KILN_ASSIGN_OR_RETURN(auto t, ByteLevelBpeTokenizer::create(std::move(spec)));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

// ---------------------------------------------------------------------------------------------
// SentencePiece-style BPE

Result<std::unique_ptr<Tokenizer>> spm_from_json(const Json& j, const Json& model, const std::string& path) {
  const Json* normalizer = member(j, "normalizer");
  const Json* pre = member(j, "pre_tokenizer");
  const Json* post = member(j, "post_processor");
  const Json* decoder = member(j, "decoder");
  const std::string mw = path + ": model";

  SpmBpeSpec spec;
  spec.name = path;
  spec.merge_rule = MergeRule::kRank;
  spec.initial = InitialSymbols::kBytesFirst;

  KILN_ASSIGN_OR_RETURN(Vocab v, parse_vocab(model, mw));
  const size_t n = v.model_size;
  KILN_ASSIGN_OR_RETURN(std::vector<AddedEntry> added, parse_added(j, path, v));
  spec.pieces = std::move(v.pieces);
  spec.kinds.assign(spec.pieces.size(), PieceKind::kNormal);
  for (size_t id = n; id < spec.pieces.size(); ++id) spec.kinds[id] = PieceKind::kControl;  // gaps: nothing to decode
  for (AddedEntry& e : added) {
    const auto uid = static_cast<size_t>(e.token.id);
    if (e.new_id) spec.kinds[uid] = PieceKind::kNormal;
    if (e.token.special) spec.kinds[uid] = PieceKind::kControl;
  }
  for (AddedEntry& e : added)
    if (e.token.special || !e.token.normalized) spec.added.push_back(std::move(e.token));

  // The model's options.
  KILN_ASSIGN_OR_RETURN(spec.byte_fallback, json_bool(model, "byte_fallback", false, mw));
  KILN_ASSIGN_OR_RETURN(spec.fuse_unk, json_bool(model, "fuse_unk", false, mw));
  KILN_ASSIGN_OR_RETURN(spec.ignore_merges, json_bool(model, "ignore_merges", false, mw));
  KILN_ASSIGN_OR_RETURN(std::string unk, json_string(model, "unk_token", "", mw));
  if (!unk.empty()) {
    auto it = v.ids.find(unk);
    if (it == v.ids.end()) return corrupt(mw + ": unk_token '" + unk + "' is not in the vocab");
    spec.unk_id = it->second;
    if (spec.kinds[static_cast<size_t>(spec.unk_id)] == PieceKind::kNormal)
      spec.kinds[static_cast<size_t>(spec.unk_id)] = PieceKind::kUnknown;
  }
  KILN_ASSIGN_OR_RETURN(spec.merges, parse_merges(model, v, mw));

  // Byte pieces decode to their byte when the decoder has ByteFallback (or, without a decoder,
  // when the model falls back to bytes).
  DecoderSettings dec;
  if (decoder != nullptr) {
    KILN_RETURN_IF_ERROR(parse_decoder(*decoder, path + ": decoder", dec));
  } else {
    dec.byte_fallback = spec.byte_fallback;
  }
  if (dec.byte_fallback)
    for (size_t id = 0; id < n; ++id)
      if (spec.kinds[id] == PieceKind::kNormal && parse_byte_piece(spec.pieces[id]) >= 0) spec.kinds[id] = PieceKind::kByte;
  spec.space_piece = dec.space_piece;
  spec.strip_leading_space = dec.strip;

  if (normalizer != nullptr) KILN_RETURN_IF_ERROR(parse_normalizer(*normalizer, path + ": normalizer", spec.text_ops));
  if (pre != nullptr) KILN_RETURN_IF_ERROR(parse_pre_tokenizer(*pre, path + ": pre_tokenizer", spec));

  // BOS: what the post-processor puts first; else a conventional name. EOS: what it puts last;
  // else a conventional name.
  auto id_of = [&](const std::string& name) {
    for (const AddedToken& a : spec.added)
      if (a.content == name) return a.id;
    auto it = v.ids.find(name);
    return it == v.ids.end() ? -1 : it->second;
  };
  PostTokens pt;
  KILN_RETURN_IF_ERROR(parse_post_processor(post, path + ": post_processor", id_of, static_cast<int>(spec.pieces.size()), pt));
  spec.special_prefix = pt.prefix;
  spec.special_suffix = pt.suffix;
  if (!pt.prefix.empty()) {
    spec.bos_id = pt.prefix.front();
  } else {
    for (const char* name : {"<s>", "<bos>", "<|begin_of_text|>"})
      if (spec.bos_id < 0) spec.bos_id = id_of(name);
  }
  if (!pt.suffix.empty()) spec.eos_id = pt.suffix.back();
  for (const char* name : {"</s>", "<eos>", "<|endoftext|>", "<|end_of_text|>"})
    if (spec.eos_id < 0) spec.eos_id = id_of(name);

  KILN_ASSIGN_OR_RETURN(auto t, SpmBpeTokenizer::create(std::move(spec)));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> tokenizer_from_json(std::string_view json_text, const std::string& path) {
  KILN_ASSIGN_OR_RETURN(Json j, parse_json(json_text, path));
  if (!j.is_object()) return corrupt(path + ": the top level must be a JSON object");
  const Json* model = member(j, "model");
  if (model == nullptr || !model->is_object()) return corrupt(path + ": 'model' is missing or not an object");

  std::string type = type_of(*model);
  if (type.empty() && member(*model, "merges") != nullptr) type = "BPE";  // old files omit it
  if (type != "BPE")
    return unsupported(path + ": tokenizer model type '" + type +
                       "' is not supported (kiln reads BPE models: SentencePiece-style and byte-level)");
  const std::string mw = path + ": model";
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    KILN_ASSIGN_OR_RETURN(std::string v, json_string(*model, k, "", mw));
    if (!v.empty()) return unsupported(mw + ": '" + k + "' is not supported (SentencePiece-style and byte-level BPE have none)");
  }
  if (has_byte_level(member(j, "pre_tokenizer")) || has_byte_level(member(j, "decoder")) ||
      has_byte_level(member(j, "normalizer")))
    return byte_level_from_json(j, *model, path);
  return spm_from_json(j, *model, path);
}

}  // namespace kiln
