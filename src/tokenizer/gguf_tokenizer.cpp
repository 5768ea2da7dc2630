// The vocabulary a GGUF file carries (tokenizer.ggml.*), as llama.cpp reads it.
#include "formats/gguf.h"
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

}  // namespace

Result<std::unique_ptr<Tokenizer>> tokenizer_from_gguf(const GgufFile& g) {
  const std::string path = g.file ? g.file->path() : std::string("<gguf>");
  const GgufValue* model = g.find("tokenizer.ggml.model");
  if (model == nullptr) return not_found(path + ": the GGUF file has no tokenizer ('tokenizer.ggml.model' is missing)");
  const std::string* kind = model->as_string();
  if (kind == nullptr) return corrupt(path + ": 'tokenizer.ggml.model' must be a string");
  if (*kind == "gpt2")
    return unsupported(path + ": tokenizer model 'gpt2': byte-level BPE tokenizers are not supported yet");
  if (*kind != "llama")
    return unsupported(path + ": tokenizer model '" + *kind + "' is not supported (only 'llama', SentencePiece BPE)");

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
  bool add_space_prefix = true;
  if (const GgufValue* v = g.find("tokenizer.ggml.add_space_prefix")) {
    const int64_t* b = v->as_int();
    if (b == nullptr) return corrupt(path + ": 'tokenizer.ggml.add_space_prefix' must be a bool");
    add_space_prefix = *b != 0;
  }

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
