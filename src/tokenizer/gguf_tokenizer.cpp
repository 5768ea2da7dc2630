// The vocabulary a GGUF file carries (tokenizer.ggml.*), as llama.cpp reads it: "llama"
// (SentencePiece-style, spm_bpe.h) or "gpt2" (byte-level BPE, bytelevel_bpe.h, with the
// pre-tokenizer that tokenizer.ggml.pre names; under four names SentencePiece-style BPE with
// ranked merges, spm_bpe.h).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>
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

// GPT-2's pattern, a step of several of llama.cpp's sets below.
constexpr const char* kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr const char* kCjk = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+";
// llama.cpp's lookahead rewrite of GPT-4o's letters (std::regex has no \p{Lu}), with \p{M}.
constexpr const char* kGpt4oLookaheadRegex =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)"
    R"(|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// A run of digits cut into threes from the right ("1234567": 1, 234, 567): llama.cpp's hand-written
// split for afmoe and tiny_aya (whose tokenizer.json has \d{1,3}(?=(?:\d{3})*\b)), over \p{N}.
constexpr const char* kDigitsFromRight = R"(\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N})))";
// Han as llama.cpp's unicode_cpt_is_han has it (kimi-k2).
#define KILN_HAN "[\\x{3400}-\\x{4DBF}\\x{4E00}-\\x{9FFF}\\x{F900}-\\x{FAFF}\\x{20000}-\\x{2A6DF}\\x{2A700}-\\x{2EBEF}\\x{2F800}-\\x{2FA1F}]"

// llama.cpp's other regex sets for byte-level vocabularies (its src/llama-vocab.cpp reads
// tokenizer.ggml.pre so), each a list of splits applied in turn to every piece the one before
// left, by the names that select them. \z where llama.cpp's std::regex has $ (end of text only).
struct RegexSet {
  std::vector<const char*> names;
  std::vector<std::string> regexes;
};
const std::vector<RegexSet>& regex_sets() {
  static const std::vector<RegexSet> sets = {
      {{"default"}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2Regex, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
      {{"deepseek-llm"},
       {"[\r\n]",
        "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373"
        "\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f"
        "\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77"
        "\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d"
        "\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4"
        "\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139"
        "\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d"
        "\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a"
        "\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2"
        "\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+",
        "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+", "\\s+\\z", kCjk, "\\p{N}+"}},
      {{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"},
       {"\\p{N}{1,3}", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
        R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
      {{"deepseek-coder"}, {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kCjk, "\\p{N}"}},
      {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2Regex, "[0-9][0-9][0-9]"}},
      {{"poro-chat", "bloom", "gpt3-finnish"}, {" ?[^(\\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+"}},
      {{"viking"}, {" ?[^(\\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+", "\\p{N}"}},
      {{"jais-2"},
       {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+)"
        R"(|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})"}},
      {{"laguna"}, {R"([^\n]+|[\n]+)", kQwen2Regex}},
      {{"kormo", "f2llmv2", "stablelm2", "hunyuan", "solar-open", "grok-2"}, {kQwen2Regex}},
      {{"qwen35"},
       {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
      {{"seed-coder"},
       {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
      {{"ufakzeka"}, {R"([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
      {{"bailingmoe", "bailingmoe2", "llada-moe"},
       {R"('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)"}},
      {{"exaone-moe"},
       {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)"}},
      {{"minicpm5"},
       {"\\p{N}{1,3}", R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
      {{"spark2_5"},
       {"\\p{N}{1,3}", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
        R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)",
        "\\p{N}"}},
      {{"youtu"},
       {"[\uac00-\ud7a3\u3131-\u318e]+|[\uff01\u2026\u201c\u201d\u2018\u2019\u2014\uff1a\uff1b\uff0c\u3001-\u303f\ufe30-\ufe4f]+"
        "|[\u3105-\u312f]+|[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
        R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
        R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
        R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
      {{"granite-embed-multi-97m"}, {kGpt4oLookaheadRegex}},
      {{"tiny_aya", "cohere2moe"},
       {kDigitsFromRight,
        R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)"
        R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)"
        R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
      // Numbers apart, each cut where a multiple of three ASCII digits is left: llama.cpp splits with
      // the empty match (?=(\d{3})+(?!\d)); here each piece runs from one such place to the next.
      // Everything else stays whole, spaces included (SuperBPE's tokens span words).
      {{"superbpe"}, {R"(\p{N}+)", R"((?s:.(?:[^0-9]|(?!(?:[0-9]{3})+(?![0-9]))[0-9])*))"}},
      // The second class as llama.cpp's source spells it: its "豈-﫿" starts at U+8C48 (the NFC
      // form of U+F900) and its Thai range at U+0E40.
      {{"afmoe"},
       {kDigitsFromRight,
        "[\u4e00-\u9fff\u3400-\u4dbf\u8c48-\ufaff\u3040-\u309f\u30a0-\u30ff\uff65-\uff9f\u2f00-\u2fdf"
        "\u0e40-\u0e7f\u0e80-\u0eff\u1780-\u17ff\u1000-\u109f\uaa60-\uaa7f\ua9e0-\ua9ff\uac00-\ud7af\u1100-\u11ff]+",
        R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
      // llama.cpp's hand-written kimi-k2 split (unicode.cpp), which differs from Kimi's regex: Han
      // runs, then letters of any case (no \p{M}) with an optional leading character and contraction.
      {{"kimi-k2"},
       {KILN_HAN "+|[^\\r\\n\\p{L}\\p{N}]?(?:(?!" KILN_HAN ")\\p{L})+(?:'[sStTmMdD]|'[rR][eE]|'[vV][eE]|'[lL][lL])?"
                 "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
      {{"chameleon"},
       {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\t\n]|    |  )", "\\p{N}", R"([\p{P}!-/:-@\[-`{-~])",
        kGpt2Regex}},
  };
  return sets;
}

// What a SentencePiece-style piece of llama.cpp's token type `t` is.
Result<PieceKind> piece_kind(int64_t t, const std::string& piece, size_t i, const std::string& path) {
  switch (t) {
    case kUndefined: case kNormal: case kUserDefined: return PieceKind::kNormal;
    case kUnknown: return PieceKind::kUnknown;
    case kControl: case kUnused: return PieceKind::kControl;
    case kByte:
      if (parse_byte_piece(piece) < 0)
        return corrupt(path + ": token " + std::to_string(i) + " has the byte type but is not spelled <0xXX>");
      return PieceKind::kByte;
    default:
      return corrupt(path + ": token " + std::to_string(i) + " has unknown type " + std::to_string(t));
  }
}

// tokenizer.ggml.merges ("a b", best first) as pairs of ids.
Result<std::vector<std::pair<int, int>>> read_merges(const GgufFile& g, const std::string& path,
                                                     const std::unordered_map<std::string_view, int>& ids) {
  KILN_ASSIGN_OR_RETURN(const GgufArray* merges, find_array(g, path, "tokenizer.ggml.merges", true));
  if (merges->type != GgufType::kString) return corrupt(path + ": 'tokenizer.ggml.merges' must be an array of strings");
  std::vector<std::pair<int, int>> out;
  out.reserve(merges->strings.size());
  for (size_t r = 0; r < merges->strings.size(); ++r) {
    const std::string& m = merges->strings[r];
    const std::string where = path + ": tokenizer.ggml.merges[" + std::to_string(r) + "]";
    const size_t sp = m.find(' ');
    if (sp == std::string::npos || m.find(' ', sp + 1) != std::string::npos)
      return corrupt(where + ": '" + m + "' is not two tokens separated by one space");
    auto a = ids.find(std::string_view(m).substr(0, sp)), b = ids.find(std::string_view(m).substr(sp + 1));
    if (a == ids.end()) return corrupt(where + ": '" + m.substr(0, sp) + "' is not in the vocabulary");
    if (b == ids.end()) return corrupt(where + ": '" + m.substr(sp + 1) + "' is not in the vocabulary");
    out.emplace_back(a->second, b->second);
  }
  return out;
}

bool one_of(const std::string& s, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (s == n) return true;
  return false;
}

// The pre-tokenizer names under which llama.cpp reads a "gpt2" vocabulary as SentencePiece-style
// BPE: pieces of raw UTF-8 (a space spelled "▁" where escaped), ranked merges, "<0xXX>" byte tokens.
bool spm_style_pre(const std::string& pre) {
  return one_of(pre, {"gemma4", "granite-embed-multi-311m", "sarvam-moe", "whitespace"});
}

// llama.cpp's BPE without byte encoding (src/llama-vocab.cpp, byte_encode = false): spaces become
// "▁" (not under "whitespace"), the text is cut by one regex into words that merge apart, and a
// piece left without a token becomes its "<0xXX>" byte tokens (a byte without one is dropped).
Result<std::unique_ptr<Tokenizer>> gguf_spm_style(const GgufFile& g, const std::string& path, const std::string& pre) {
  KILN_ASSIGN_OR_RETURN(const GgufArray* tokens, find_array(g, path, "tokenizer.ggml.tokens", true));
  if (tokens->type != GgufType::kString) return corrupt(path + ": 'tokenizer.ggml.tokens' must be an array of strings");
  const size_t n = tokens->strings.size();
  if (n == 0) return corrupt(path + ": 'tokenizer.ggml.tokens' is empty");
  if (n > static_cast<size_t>(INT32_MAX / 2)) return corrupt(path + ": 'tokenizer.ggml.tokens' is too large");
  SpmBpeSpec spec;
  spec.name = path;
  spec.pieces = tokens->strings;
  std::unordered_map<std::string_view, int> ids;
  ids.reserve(n);
  for (size_t i = 0; i < n; ++i) ids.emplace(spec.pieces[i], static_cast<int>(i));  // the first id wins, as llama.cpp
  KILN_ASSIGN_OR_RETURN(spec.merges, read_merges(g, path, ids));

  KILN_ASSIGN_OR_RETURN(const GgufArray* types, find_array(g, path, "tokenizer.ggml.token_type", false));
  spec.kinds.assign(n, PieceKind::kNormal);
  if (types != nullptr && (types->ints.size() != n || !types->floats.empty() || !types->strings.empty()))
    return corrupt(path + ": 'tokenizer.ggml.token_type' must hold " + std::to_string(n) + " integers, one per token");
  for (size_t i = 0; i < n; ++i) {
    const int64_t t = types != nullptr ? types->ints[i] : (parse_byte_piece(spec.pieces[i]) >= 0 ? kByte : kNormal);
    KILN_ASSIGN_OR_RETURN(spec.kinds[i], piece_kind(t, spec.pieces[i], i, path));
    if ((t == kControl || t == kUserDefined) && !spec.pieces[i].empty()) {
      AddedToken a;  // matched in the text, as llama.cpp's parse_special does
      a.content = spec.pieces[i];
      a.id = static_cast<int>(i);
      a.special = t == kControl;
      spec.added.push_back(std::move(a));
    }
  }
  spec.byte_ids.assign(256, -1);
  for (size_t i = n; i-- > 0;)
    if (spec.kinds[i] == PieceKind::kByte) spec.byte_ids[static_cast<size_t>(parse_byte_piece(spec.pieces[i]))] = static_cast<int>(i);

  const int ni = static_cast<int>(n);
  KILN_ASSIGN_OR_RETURN(spec.bos_id, token_id(g, path, "tokenizer.ggml.bos_token_id", INT32_MAX, ni));
  KILN_ASSIGN_OR_RETURN(spec.eos_id, token_id(g, path, "tokenizer.ggml.eos_token_id", INT32_MAX, ni));
  // llama.cpp turns Gemma 4's BOS on whatever the file says.
  KILN_ASSIGN_OR_RETURN(bool add_bos, optional_bool(g, path, "tokenizer.ggml.add_bos_token", false));
  KILN_ASSIGN_OR_RETURN(bool add_eos, optional_bool(g, path, "tokenizer.ggml.add_eos_token", false));
  if (pre == "gemma4" || pre == "granite-embed-multi-311m") add_bos = true;
  if (add_bos && spec.bos_id >= 0) spec.special_prefix.push_back(spec.bos_id);
  if (add_eos && spec.eos_id >= 0) spec.special_suffix.push_back(spec.eos_id);

  spec.merge_rule = MergeRule::kRank;
  spec.initial = InitialSymbols::kBytesLast;
  spec.byte_fallback = true;
  spec.unk_id = -1;  // llama.cpp drops a byte without a token
  spec.strip_leading_space = false;
  if (pre == "whitespace") {
    spec.split_regex = R"(\S+)";
    spec.space_piece = " ";
  } else {
    spec.text_ops.push_back({TextOp::Kind::kReplace, "\xE2\x96\x81", " ", false});
    spec.split_regex = R"([^\n]+|\n+)";
    spec.space_piece = "\xE2\x96\x81";
    spec.whole_newline_words = pre != "sarvam-moe";
  }
  KILN_ASSIGN_OR_RETURN(auto t, SpmBpeTokenizer::create(std::move(spec)));
  return std::unique_ptr<Tokenizer>(std::move(t));
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

  KILN_ASSIGN_OR_RETURN(spec.merges, read_merges(g, path, ids));

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
  // The names llama.cpp reads, by the set of regexes it splits with (src/llama-vocab.cpp);
  // tests/data/tokenizer-vectors/gguf-pre-llamacpp.json holds its ids for each.
  const auto set = std::find_if(regex_sets().begin(), regex_sets().end(), [&](const RegexSet& r) {
    return std::find_if(r.names.begin(), r.names.end(), [&](const char* n) { return pre == n; }) != r.names.end();
  });
  if (one_of(pre, {"gpt-2", "gpt2", "phi-2", "roberta-bpe", "mpt", "olmo", "jais", "trillion", "granite-docling", "jina-es",
                   "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "jina-v1-en",
                   "jina-v2-code", "exaone4"})) {
    byte_level.use_regex = true;
  } else if (one_of(pre, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
                          "jina-v5-nano", "dbrx", "smaug-bpe", "chatglm-bpe", "glm4", "glm5"})) {
    split.pattern = kLlama3Regex;
    spec.pre_tokenizer.push_back(split);
    spec.ignore_merges = !one_of(pre, {"dbrx", "smaug-bpe", "chatglm-bpe"});
  } else if (set != regex_sets().end()) {
    for (const std::string& r : set->regexes) {
      split.pattern = r;
      spec.pre_tokenizer.push_back(split);
    }
    spec.ignore_merges = one_of(pre, {"youtu", "minicpm5", "granite-embed-multi-97m"});
  } else if (one_of(pre, {"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"})) {
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
  } else if (one_of(pre, {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b", "mellum2"})) {
    // Each digit alone, then GPT-2's regex: SmolLM's tokenizer.json (Digits individual_digits,
    // ByteLevel use_regex) and llama.cpp's \p{N} split before the GPT-2 pattern.
    PreTokenizerStep digits;
    digits.kind = PreTokenizerStep::Kind::kDigits;
    digits.individual_digits = true;
    spec.pre_tokenizer.push_back(digits);
    byte_level.use_regex = true;
  } else {
    return unsupported(path + ": pre-tokenizer '" + pre +
                       "' (tokenizer.ggml.pre) is not supported; kiln knows the names that "
                       "llama-cpp-python 0.3.36's llama.cpp reads; use the model's tokenizer.json instead");
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
  if (*kind == "gpt2") {
    const GgufValue* pre = g.find("tokenizer.ggml.pre");
    if (pre != nullptr && pre->as_string() != nullptr && spm_style_pre(*pre->as_string()))
      return gguf_spm_style(g, path, *pre->as_string());
    return gguf_byte_level(g, path);
  }
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
      KILN_ASSIGN_OR_RETURN(spec.kinds[i], piece_kind(types->ints[i], spec.pieces[i], i, path));
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
