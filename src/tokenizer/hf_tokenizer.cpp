// Hugging Face tokenizer.json with a SentencePiece-style BPE model (what HF's LlamaConverter
// writes): byte_fallback, "▁" for spaces via a Prepend/Replace normalizer or a Metaspace
// pre-tokenizer, a Replace/ByteFallback/Fuse/Strip (or Metaspace) decoder.
//
// Added tokens: those with special=true, and those with normalized=false, are matched in the raw
// text (leftmost-longest, honouring lstrip/rstrip/single_word) before normalization, as HF does;
// the text between them is normalized and encoded segment by segment. Non-special tokens with
// normalized=true would have to be matched on the normalized text; they are not matched here.
// Special tokens decode to nothing (HF's skip_special_tokens=True).
#include <algorithm>

#include "formats/json_util.h"
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
  if (type == "Metaspace") {
    if (!spec.split_before.empty()) return unsupported(where + ": two Metaspace pre-tokenizers");
    KILN_ASSIGN_OR_RETURN(MetaspaceSettings m, parse_metaspace(p, where));
    spec.text_ops.push_back({TextOp::Kind::kReplace, m.replacement, " ", false});
    if (m.scheme != "never")
      spec.text_ops.push_back({TextOp::Kind::kPrependIfMissing, m.replacement, "", m.scheme == "first"});
    if (m.split) spec.split_before = m.replacement;
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

// The BOS a TemplateProcessing post-processor puts first, by name; "" when none.
std::string template_bos(const Json* pp) {
  if (pp == nullptr || !pp->is_object()) return {};
  const std::string type = type_of(*pp);
  if (type == "Sequence") {
    if (const Json* list = member(*pp, "processors"); list != nullptr && list->is_array())
      for (const Json& e : *list)
        if (std::string b = template_bos(&e); !b.empty()) return b;
    return {};
  }
  if (type != "TemplateProcessing") return {};
  const Json* single = member(*pp, "single");
  if (single == nullptr || !single->is_array() || single->empty()) return {};
  const Json* special = member((*single)[0], "SpecialToken");
  if (special == nullptr) return {};
  const Json* id = member(*special, "id");
  return id != nullptr && id->is_string() ? id->get<std::string>() : std::string();
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> tokenizer_from_json(std::string_view json_text, const std::string& path) {
  KILN_ASSIGN_OR_RETURN(Json j, parse_json(json_text, path));
  if (!j.is_object()) return corrupt(path + ": the top level must be a JSON object");
  const Json* model = member(j, "model");
  if (model == nullptr || !model->is_object()) return corrupt(path + ": 'model' is missing or not an object");
  const Json* normalizer = member(j, "normalizer");
  const Json* pre = member(j, "pre_tokenizer");
  const Json* post = member(j, "post_processor");
  const Json* decoder = member(j, "decoder");

  std::string type = type_of(*model);
  if (type.empty() && member(*model, "merges") != nullptr) type = "BPE";  // old files omit it
  if (type == "BPE" && (has_byte_level(pre) || has_byte_level(decoder) || has_byte_level(post)))
    return unsupported(path + ": byte-level BPE tokenizers (ByteLevel pre-tokenizer/decoder, as GPT-2, Llama 3 and "
                              "Qwen use) are not supported yet");
  if (type != "BPE")
    return unsupported(path + ": tokenizer model type '" + type +
                       "' is not supported (only SentencePiece-style BPE is, so far)");
  const std::string mw = path + ": model";
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    KILN_ASSIGN_OR_RETURN(std::string v, json_string(*model, k, "", mw));
    if (!v.empty()) return unsupported(mw + ": '" + k + "' is not supported (SentencePiece-style BPE has none)");
  }

  SpmBpeSpec spec;
  spec.name = path;
  spec.merge_rule = MergeRule::kRank;
  spec.initial = InitialSymbols::kBytesFirst;

  // Vocabulary: ids must be 0..n-1, each once.
  const Json* vocab = member(*model, "vocab");
  if (vocab == nullptr || !vocab->is_object()) return corrupt(mw + ": 'vocab' is missing or not an object");
  const size_t n = vocab->size();
  if (n == 0) return corrupt(mw + ": 'vocab' is empty");
  if (n > static_cast<size_t>(INT32_MAX)) return corrupt(mw + ": 'vocab' is too large");
  spec.pieces.resize(n);
  std::vector<bool> seen(n, false);
  std::unordered_map<std::string, int> ids;
  ids.reserve(n);
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    const Json& v = it.value();
    if (!v.is_number_integer() && !v.is_number_unsigned())
      return corrupt(mw + ".vocab: the id of '" + it.key() + "' is not an integer");
    const int64_t id = v.get<int64_t>();
    if (id < 0 || static_cast<uint64_t>(id) >= n)
      return corrupt(mw + ".vocab: '" + it.key() + "' has id " + std::to_string(id) + ", outside 0.." +
                     std::to_string(n - 1) + " (the vocab has " + std::to_string(n) + " entries)");
    if (seen[static_cast<size_t>(id)])
      return corrupt(mw + ".vocab: id " + std::to_string(id) + " is given to both '" + spec.pieces[static_cast<size_t>(id)] +
                     "' and '" + it.key() + "'");
    seen[static_cast<size_t>(id)] = true;
    spec.pieces[static_cast<size_t>(id)] = it.key();
    ids.emplace(it.key(), static_cast<int>(id));
  }
  spec.kinds.assign(n, PieceKind::kNormal);

  // Added tokens: ids inside the vocab must spell the same piece; new ids extend it.
  if (const Json* added = member(j, "added_tokens")) {
    if (!added->is_array()) return corrupt(path + ": 'added_tokens' must be an array");
    const size_t limit = n + added->size();  // bounds the ids a file can make us allocate
    std::vector<bool> new_seen;
    for (size_t i = 0; i < added->size(); ++i) {
      const Json& a = (*added)[i];
      const std::string aw = path + ": added_tokens[" + std::to_string(i) + "]";
      if (!a.is_object()) return corrupt(aw + ": must be an object");
      KILN_ASSIGN_OR_RETURN(int64_t id, json_int(a, "id", -1, aw));
      KILN_ASSIGN_OR_RETURN(std::string content, json_string(a, "content", "", aw));
      KILN_ASSIGN_OR_RETURN(bool special, json_bool(a, "special", false, aw));
      KILN_ASSIGN_OR_RETURN(bool normalized, json_bool(a, "normalized", !special, aw));
      AddedToken t;
      KILN_ASSIGN_OR_RETURN(t.lstrip, json_bool(a, "lstrip", false, aw));
      KILN_ASSIGN_OR_RETURN(t.rstrip, json_bool(a, "rstrip", false, aw));
      KILN_ASSIGN_OR_RETURN(t.single_word, json_bool(a, "single_word", false, aw));
      if (content.empty()) return corrupt(aw + ": 'content' is missing or empty");
      if (id < 0 || static_cast<uint64_t>(id) >= limit)
        return corrupt(aw + ": '" + content + "' has id " + std::to_string(id) + ", outside 0.." + std::to_string(limit - 1));
      const auto uid = static_cast<size_t>(id);
      if (uid < n) {
        if (spec.pieces[uid] != content)
          return corrupt(aw + ": '" + content + "' has id " + std::to_string(id) + ", which the vocab gives to '" +
                         spec.pieces[uid] + "'");
      } else {
        if (uid >= spec.pieces.size()) {
          spec.pieces.resize(uid + 1);
          spec.kinds.resize(uid + 1, PieceKind::kControl);  // gaps: nothing to decode
          new_seen.resize(uid + 1 - n, false);
        }
        if (new_seen[uid - n])
          return corrupt(aw + ": id " + std::to_string(id) + " is given to both '" + spec.pieces[uid] + "' and '" +
                         content + "'");
        new_seen[uid - n] = true;
        spec.pieces[uid] = content;
        spec.kinds[uid] = PieceKind::kNormal;
      }
      if (special) spec.kinds[uid] = PieceKind::kControl;
      if (special || !normalized) {
        t.content = content;
        t.id = static_cast<int>(id);
        spec.added.push_back(std::move(t));
      }
    }
  }

  // The model's options.
  KILN_ASSIGN_OR_RETURN(spec.byte_fallback, json_bool(*model, "byte_fallback", false, mw));
  KILN_ASSIGN_OR_RETURN(spec.fuse_unk, json_bool(*model, "fuse_unk", false, mw));
  KILN_ASSIGN_OR_RETURN(spec.ignore_merges, json_bool(*model, "ignore_merges", false, mw));
  KILN_ASSIGN_OR_RETURN(std::string unk, json_string(*model, "unk_token", "", mw));
  if (!unk.empty()) {
    auto it = ids.find(unk);
    if (it == ids.end()) return corrupt(mw + ": unk_token '" + unk + "' is not in the vocab");
    spec.unk_id = it->second;
    if (spec.kinds[static_cast<size_t>(spec.unk_id)] == PieceKind::kNormal)
      spec.kinds[static_cast<size_t>(spec.unk_id)] = PieceKind::kUnknown;
  }

  // Merges, as "a b" strings or [a, b] pairs; both sides must be vocab pieces.
  const Json* merges = member(*model, "merges");
  if (merges != nullptr && !merges->is_array()) return corrupt(mw + ": 'merges' must be an array");
  if (merges != nullptr) {
    spec.merges.reserve(merges->size());
    for (size_t r = 0; r < merges->size(); ++r) {
      const Json& m = (*merges)[r];
      const std::string where = mw + ".merges[" + std::to_string(r) + "]";
      std::string left, right;
      if (m.is_string()) {
        const std::string& s = m.get_ref<const std::string&>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
          return corrupt(where + ": '" + s + "' is not two tokens separated by one space");
        left = s.substr(0, sp);
        right = s.substr(sp + 1);
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        left = m[0].get<std::string>();
        right = m[1].get<std::string>();
      } else {
        return corrupt(where + ": must be a string \"a b\" or an array of two strings");
      }
      auto a = ids.find(left), b = ids.find(right);
      if (a == ids.end()) return corrupt(where + ": '" + left + "' is not in the vocab");
      if (b == ids.end()) return corrupt(where + ": '" + right + "' is not in the vocab");
      spec.merges.emplace_back(a->second, b->second);
    }
  }

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

  // BOS: what the post-processor puts first; else a conventional name. EOS: a conventional name.
  auto id_of = [&](const std::string& name) {
    for (const AddedToken& a : spec.added)
      if (a.content == name) return a.id;
    auto it = ids.find(name);
    return it == ids.end() ? -1 : it->second;
  };
  if (std::string b = template_bos(post); !b.empty()) {
    int id = -1;
    if (const Json* st = member(*post, "special_tokens"); st != nullptr)
      if (const Json* e = member(*st, b.c_str()); e != nullptr)
        if (const Json* list = member(*e, "ids"); list != nullptr && list->is_array() && !list->empty() &&
                                                  (*list)[0].is_number_integer())
          id = (*list)[0].get<int>();
    if (id < 0) id = id_of(b);
    if (id < 0 || static_cast<size_t>(id) >= spec.pieces.size())
      return corrupt(path + ": post_processor: the BOS token '" + b + "' is not in the vocabulary");
    spec.bos_id = id;
  } else {
    for (const char* name : {"<s>", "<bos>", "<|begin_of_text|>"})
      if (spec.bos_id < 0) spec.bos_id = id_of(name);
  }
  for (const char* name : {"</s>", "<eos>", "<|endoftext|>", "<|end_of_text|>"})
    if (spec.eos_id < 0) spec.eos_id = id_of(name);

  KILN_ASSIGN_OR_RETURN(auto t, SpmBpeTokenizer::create(std::move(spec)));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

}  // namespace kiln
