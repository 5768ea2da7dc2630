// The vocabulary a GGUF file carries (tokenizer.ggml.*), as llama.cpp reads it: "llama"
// (SentencePiece-style, spm_bpe.h) or "gpt2" (byte-level BPE, bytelevel_bpe.h, with the
// pre-tokenizer that tokenizer.ggml.pre names).
#include <cstring>
#include <initializer_list>
#include <unordered_map>

#include "formats/gguf.h"
#include "tokenizer/bytelevel_bpe.h"
#include "tokenizer/spm_bpe.h"

namespace kiln {

namespace {

// llama.cpp's token types.
enum GgufTokenType : int64_t { kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

Result<const GgufArray*> find_array(const GgufFile& g, const std::string& path, const std::string& key, bool required) {
  const GgufValue* v = g.find(key);
  if (v == nullptr) {
    if (required) return not_found(path + ": no '" + key + "' in the GGUF metadata");
    return static_cast<const GgufArray*>(nullptr);
  }
  const GgufArray* a = v->as_array();
  if (a == nullptr) return corrupt(path + ": '" + key + "' must be an array");
  return a;
}

// An optional token id: absent gives `fallback`; -1 and 0xFFFFFFFF (how converters write "none")
// give -1; anything else must be a token.
Result<int> token_id(const GgufFile& g, const std::string& path, const std::string& key, int fallback, int n) {
  const GgufValue* v = g.find(key);
  if (v == nullptr) return fallback < n ? fallback : -1;
  const int64_t* i = v->as_int();
  if (i == nullptr) return corrupt(path + ": '" + key + "' must be an integer");
  if (*i == -1 || *i == 0xFFFFFFFFll) return -1;
  if (*i < 0 || *i >= n)
    return corrupt(path + ": '" + key + "' is " + std::to_string(*i) + ", outside the vocabulary of " + std::to_string(n));
  return static_cast<int>(*i);
}

Result<bool> optional_bool(const GgufFile& g, const std::string& path, const std::string& key, bool fallback) {
  const GgufValue* v = g.find(key);
  if (v == nullptr) return fallback;
  const int64_t* b = v->as_int();
  if (b == nullptr) return corrupt(path + ": '" + key + "' must be a bool");
  return *b != 0;
}

// The regexes of the HF tokenizer.json files these pre-tokenizer names stand for.
constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// o200k (tiktoken's GPT-4o pattern: Phi-4-mini, Llama 4) and Mistral's Tekken (Nemo, Ministral).
constexpr const char* kGpt4oRegex =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kTekkenRegex =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)"
    R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

bool one_of(const std::string& s, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (s == n) return true;
  return false;
}

Result<std::unique_ptr<Tokenizer>> gguf_byte_level(const GgufFile& g, const std::string& path) {
  ByteLevelSpec spec;
  spec.name = path;
  KILN_ASSIGN_OR_RETURN(const GgufArray* tokens, find_array(g, path, "tokenizer.ggml.tokens", true));
  if (tokens->type != GgufType::kString) return corrupt(path + ": 'tokenizer.ggml.tokens' must be an array of strings");
  const size_t n = tokens->strings.size();
  if (n == 0) return corrupt(path + ": 'tokenizer.ggml.tokens' is empty");
  if (n > static_cast<size_t>(INT32_MAX / 2)) return corrupt(path + ": 'tokenizer.ggml.tokens' is too large");
  spec.tokens = tokens->strings;
  std::unordered_map<std::string_view, int> ids;
  ids.reserve(n);
  for (size_t i = 0; i < n; ++i)
    if (!ids.emplace(spec.tokens[i], static_cast<int>(i)).second)
      return corrupt(path + ": token '" + spec.tokens[i] + "' appears twice in 'tokenizer.ggml.tokens'");

  KILN_ASSIGN_OR_RETURN(const GgufArray* merges, find_array(g, path, "tokenizer.ggml.merges", true));
  if (merges->type != GgufType::kString) return corrupt(path + ": 'tokenizer.ggml.merges' must be an array of strings");
  spec.merges.reserve(merges->strings.size());
  for (size_t r = 0; r < merges->strings.size(); ++r) {
    const std::string& m = merges->strings[r];
    const std::string where = path + ": tokenizer.ggml.merges[" + std::to_string(r) + "]";
    const size_t sp = m.find(' ');
    if (sp == std::string::npos || m.find(' ', sp + 1) != std::string::npos)
      return corrupt(where + ": '" + m + "' is not two tokens separated by one space");
    auto a = ids.find(std::string_view(m).substr(0, sp)), b = ids.find(std::string_view(m).substr(sp + 1));
    if (a == ids.end()) return corrupt(where + ": '" + m.substr(0, sp) + "' is not in the vocabulary");
    if (b == ids.end()) return corrupt(where + ": '" + m.substr(sp + 1) + "' is not in the vocabulary");
    spec.merges.emplace_back(a->second, b->second);
  }

  // Control tokens are special added tokens; user-defined ones are added tokens that are not
  // special: both match in the text (as HF matches its added tokens).
  KILN_ASSIGN_OR_RETURN(const GgufArray* types, find_array(g, path, "tokenizer.ggml.token_type", false));
  if (types != nullptr) {
    if (types->ints.size() != n || !types->floats.empty() || !types->strings.empty())
      return corrupt(path + ": 'tokenizer.ggml.token_type' must hold " + std::to_string(n) + " integers, one per token");
    for (size_t i = 0; i < n; ++i) {
      const int64_t t = types->ints[i];
      if (t < kUndefined || t > kByte)
        return corrupt(path + ": token " + std::to_string(i) + " has unknown type " + std::to_string(t));
      if ((t == kControl || t == kUserDefined) && !spec.tokens[i].empty()) {
        AddedToken a;
        a.content = spec.tokens[i];
        a.id = static_cast<int>(i);
        a.special = t == kControl;
        spec.added.push_back(std::move(a));
      }
    }
  }

  const int ni = static_cast<int>(n);
  KILN_ASSIGN_OR_RETURN(spec.bos_id, token_id(g, path, "tokenizer.ggml.bos_token_id", INT32_MAX, ni));
  KILN_ASSIGN_OR_RETURN(spec.eos_id, token_id(g, path, "tokenizer.ggml.eos_token_id", INT32_MAX, ni));
  // Checked, not used: llama.cpp's byte-level BPE drops a byte the vocabulary has no token for
  // (SmolLM2 has none for 0x1D), as HF does without an unk token.
  KILN_ASSIGN_OR_RETURN(const int unk_id, token_id(g, path, "tokenizer.ggml.unknown_token_id", INT32_MAX, ni));
  static_cast<void>(unk_id);
  // The pre-tokenizer's name (below); Tekken files start with BOS even without the key, as in llama.cpp.
  std::string pre = "default";
  if (const GgufValue* v = g.find("tokenizer.ggml.pre")) {
    const std::string* s = v->as_string();
    if (s == nullptr) return corrupt(path + ": 'tokenizer.ggml.pre' must be a string");
    pre = *s;
  }
  KILN_ASSIGN_OR_RETURN(bool add_bos, optional_bool(g, path, "tokenizer.ggml.add_bos_token", pre == "tekken"));
  KILN_ASSIGN_OR_RETURN(bool add_eos, optional_bool(g, path, "tokenizer.ggml.add_eos_token", false));
  if (add_bos && spec.bos_id >= 0) spec.special_prefix.push_back(spec.bos_id);
  if (add_eos && spec.eos_id >= 0) spec.special_suffix.push_back(spec.eos_id);
  if (!add_bos) spec.bos_id = -1;  // what kiln run puts first: nothing, as llama.cpp

  // The pre-tokenizer.
  PreTokenizerStep byte_level;
  byte_level.kind = PreTokenizerStep::Kind::kByteLevel;
  byte_level.add_prefix_space = false;
  byte_level.use_regex = false;
  PreTokenizerStep split;
  split.kind = PreTokenizerStep::Kind::kSplit;
  split.regex = true;
  split.behavior = SplitBehavior::kIsolated;
  if (one_of(pre, {"default", "gpt-2", "gpt2", "phi-2", "roberta-bpe"})) {
    byte_level.use_regex = true;
  } else if (one_of(pre, {"llama3", "llama-v3", "llama-bpe", "falcon3", "dbrx", "smaug-bpe"})) {
    split.pattern = kLlama3Regex;
    spec.pre_tokenizer.push_back(split);
    spec.ignore_merges = one_of(pre, {"llama3", "llama-v3", "llama-bpe", "falcon3"});
  } else if (one_of(pre, {"gpt-4o", "llama4"})) {
    split.pattern = kGpt4oRegex;
    spec.pre_tokenizer.push_back(split);
  } else if (pre == "tekken") {
    split.pattern = kTekkenRegex;
    spec.pre_tokenizer.push_back(split);
    spec.ignore_merges = true;
  } else if (one_of(pre, {"qwen2", "deepseek-r1-qwen", "megrez"})) {
    split.pattern = kQwen2Regex;
    spec.pre_tokenizer.push_back(split);
    TextNormalizer nfc;  // Qwen's tokenizer.json normalizes to NFC
    nfc.kind = TextNormalizer::Kind::kNfc;
    spec.normalizers.push_back(nfc);
  } else if (one_of(pre, {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"})) {
    // Each digit alone, then GPT-2's regex: SmolLM's tokenizer.json (Digits individual_digits,
    // ByteLevel use_regex) and llama.cpp's \p{N} split before the GPT-2 pattern.
    PreTokenizerStep digits;
    digits.kind = PreTokenizerStep::Kind::kDigits;
    digits.individual_digits = true;
    spec.pre_tokenizer.push_back(digits);
    byte_level.use_regex = true;
  } else {
    return unsupported(path + ": pre-tokenizer '" + pre +
                       "' (tokenizer.ggml.pre) is not supported; kiln knows gpt-2, llama-bpe (llama3, falcon3, dbrx, "
                       "smaug-bpe), gpt-4o (llama4), tekken, qwen2 (deepseek-r1-qwen, megrez) and smollm (starcoder, refact, command-r, "
                       "codeshell, exaone, minerva-7b); use the model's tokenizer.json instead");
  }
  spec.pre_tokenizer.push_back(byte_level);
  KILN_ASSIGN_OR_RETURN(auto t, ByteLevelBpeTokenizer::create(std::move(spec)));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> tokenizer_from_gguf(const GgufFile& g) {
  const std::string path = g.file ? g.file->path() : std::string("<gguf>");
  const GgufValue* model = g.find("tokenizer.ggml.model");
  if (model == nullptr) return not_found(path + ": the GGUF file has no tokenizer ('tokenizer.ggml.model' is missing)");
  const std::string* kind = model->as_string();
  if (kind == nullptr) return corrupt(path + ": 'tokenizer.ggml.model' must be a string");
  if (*kind == "gpt2") return gguf_byte_level(g, path);
  if (*kind != "llama")
    return unsupported(path + ": tokenizer model '" + *kind +
                       "' is not supported (kiln reads 'llama', SentencePiece BPE, and 'gpt2', byte-level BPE)");

  KILN_ASSIGN_OR_RETURN(const GgufArray* tokens, find_array(g, path, "tokenizer.ggml.tokens", true));
  if (tokens->type != GgufType::kString) return corrupt(path + ": 'tokenizer.ggml.tokens' must be an array of strings");
  const size_t n = tokens->strings.size();
  if (n == 0) return corrupt(path + ": 'tokenizer.ggml.tokens' is empty");
  if (n > static_cast<size_t>(INT32_MAX)) return corrupt(path + ": 'tokenizer.ggml.tokens' is too large");
  KILN_ASSIGN_OR_RETURN(const GgufArray* scores, find_array(g, path, "tokenizer.ggml.scores", false));
  KILN_ASSIGN_OR_RETURN(const GgufArray* types, find_array(g, path, "tokenizer.ggml.token_type", false));

  SpmBpeSpec spec;
  spec.name = path;
  spec.pieces = tokens->strings;
  if (scores != nullptr) {
    if (scores->floats.size() != n || !scores->ints.empty() || !scores->strings.empty())
      return corrupt(path + ": 'tokenizer.ggml.scores' must hold " + std::to_string(n) + " numbers, one per token");
    spec.scores.reserve(n);
    for (double s : scores->floats) spec.scores.push_back(static_cast<float>(s));
  }
  spec.kinds.assign(n, PieceKind::kNormal);
  if (types != nullptr) {
    if (types->ints.size() != n || !types->floats.empty() || !types->strings.empty())
      return corrupt(path + ": 'tokenizer.ggml.token_type' must hold " + std::to_string(n) + " integers, one per token");
    for (size_t i = 0; i < n; ++i) {
      switch (types->ints[i]) {
        case kUndefined: case kNormal: case kUserDefined: spec.kinds[i] = PieceKind::kNormal; break;
        case kUnknown: spec.kinds[i] = PieceKind::kUnknown; break;
        case kControl: case kUnused: spec.kinds[i] = PieceKind::kControl; break;
        case kByte:
          if (parse_byte_piece(spec.pieces[i]) < 0)
            return corrupt(path + ": token " + std::to_string(i) + " has the byte type but is not spelled <0xXX>");
          spec.kinds[i] = PieceKind::kByte;
          break;
        default:
          return corrupt(path + ": token " + std::to_string(i) + " has unknown type " + std::to_string(types->ints[i]));
      }
    }
  } else {
    for (size_t i = 0; i < n; ++i)
      if (parse_byte_piece(spec.pieces[i]) >= 0) spec.kinds[i] = PieceKind::kByte;
  }

  const int ni = static_cast<int>(n);
  // llama.cpp's defaults for a SentencePiece vocabulary: <unk> 0, BOS 1, EOS 2.
  KILN_ASSIGN_OR_RETURN(spec.unk_id, token_id(g, path, "tokenizer.ggml.unknown_token_id", 0, ni));
  KILN_ASSIGN_OR_RETURN(spec.bos_id, token_id(g, path, "tokenizer.ggml.bos_token_id", 1, ni));
  KILN_ASSIGN_OR_RETURN(spec.eos_id, token_id(g, path, "tokenizer.ggml.eos_token_id", 2, ni));
  KILN_ASSIGN_OR_RETURN(bool add_space_prefix, optional_bool(g, path, "tokenizer.ggml.add_space_prefix", true));
  KILN_ASSIGN_OR_RETURN(bool add_bos, optional_bool(g, path, "tokenizer.ggml.add_bos_token", true));
  KILN_ASSIGN_OR_RETURN(bool add_eos, optional_bool(g, path, "tokenizer.ggml.add_eos_token", false));
  if (add_bos && spec.bos_id >= 0) spec.special_prefix.push_back(spec.bos_id);
  if (add_eos && spec.eos_id >= 0) spec.special_suffix.push_back(spec.eos_id);

  // Byte tokens: by type where types are given, else by spelling.
  spec.byte_ids.assign(256, -1);
  for (size_t i = n; i-- > 0;) {
    if (spec.kinds[i] != PieceKind::kByte) continue;
    spec.byte_ids[static_cast<size_t>(parse_byte_piece(spec.pieces[i]))] = static_cast<int>(i);
  }

  // SentencePiece vocabularies spell a space "▁" (U+2581); some converters store real spaces.
  bool uses_meta_space = false;
  for (size_t i = 0; i < n && !uses_meta_space; ++i)
    uses_meta_space = spec.kinds[i] == PieceKind::kNormal && spec.pieces[i].find("\xE2\x96\x81") != std::string::npos;
  spec.space_piece = uses_meta_space ? "\xE2\x96\x81" : " ";

  spec.merge_rule = MergeRule::kScore;
  spec.initial = InitialSymbols::kBytesLast;
  // Text never turns into control, unknown or byte tokens by spelling them out.
  spec.lookup_control = false;
  spec.lookup_bytes = false;
  if (add_space_prefix) spec.text_ops.push_back({TextOp::Kind::kPrepend, " ", "", false});
  if (uses_meta_space) spec.text_ops.push_back({TextOp::Kind::kReplace, "\xE2\x96\x81", " ", false});
  spec.byte_fallback = true;
  spec.strip_leading_space = add_space_prefix;
  KILN_ASSIGN_OR_RETURN(auto t, SpmBpeTokenizer::create(std::move(spec)));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

}  // namespace kiln
