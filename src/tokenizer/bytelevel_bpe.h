// Byte-level BPE (GPT-2, Llama 3, Qwen2 / 2.5 / 3, DeepSeek, ...): one model behind the places
// such a vocabulary comes from (an HF tokenizer.json with a ByteLevel pre-tokenizer, a GGUF
// "gpt2" vocabulary). The loaders translate their file into a ByteLevelSpec; create() validates it
// and builds every table once.
//
// Encoding a text, as HF tokenizers does:
//   1. the text is cut at the added tokens matched on the raw text (those with normalized=false);
//   2. each piece between them is normalized (NFC, ...), then cut at the added tokens matched on
//      the normalized text (normalized=true);
//   3. each remaining piece is pre-tokenized: Split regexes, Digits, ..., and last ByteLevel
//      (add_prefix_space, the GPT-2 regex when use_regex);
//   4. each word is BPE-merged by merge rank over its bytes (the byte-to-unicode map of GPT-2 is
//      a bijection, so kiln keys the vocabulary by the bytes a token stands for and never builds
//      the mapped string); with ignore_merges a word that is a token is taken whole.
// Decoding maps each token back through the inverse of that map (a token with a character
// outside it decodes to its own UTF-8, as HF's ByteLevel decoder does).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_merge.h"
#include "tokenizer/regex.h"
#include "tokenizer/tokenizer.h"

namespace kiln {

// GPT-2's byte-to-unicode map: the code point that stands for byte b in a vocabulary.
uint32_t byte_to_unicode(uint8_t b);
// Its inverse: the byte code point `cp` stands for, or -1.
int unicode_to_byte(uint32_t cp);
// A vocabulary string turned into the bytes it stands for; false when a character is outside
// the map (then `out` holds nothing useful).
bool byte_level_decode(std::string_view token, std::string& out);
// Bytes turned into their vocabulary spelling ("Ġworld" for " world").
std::string byte_level_encode(std::string_view bytes);

// How a Split keeps what it finds (HF's SplitDelimiterBehavior).
enum class SplitBehavior : uint8_t { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct TextNormalizer {
  enum class Kind : uint8_t { kNfc, kNfd, kNfkc, kNfkd, kLowercase, kStrip, kReplace, kPrepend };
  Kind kind = Kind::kNfc;
  std::string pattern;      // kReplace: the literal, or the regex when `regex`
  bool regex = false;
  std::string content;      // kReplace: the replacement; kPrepend: the prefix
  bool left = true, right = true;  // kStrip: which ends
};

struct PreTokenizerStep {
  enum class Kind : uint8_t {
    kSplit,            // `pattern` (literal, or a regex when `regex`), `behavior`, `invert`
    kDigits,           // char::is_numeric; individual_digits: each alone (Isolated), else Contiguous
    kPunctuation,      // HF is_punc, `behavior`
    kWhitespaceSplit,  // split on whitespace, removing it
    kByteLevel,        // must come last
  };
  Kind kind = Kind::kSplit;
  std::string pattern;
  bool regex = true;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  bool individual_digits = false;
  bool add_prefix_space = false;  // kByteLevel
  bool use_regex = true;          // kByteLevel: split with the GPT-2 regex
};

struct ByteLevelSpec {
  std::string name;  // the file, for messages
  // By id, as the file spells them (byte-level alphabet); an added token beyond the model's
  // vocabulary has its content here; "" marks an id that no token has.
  std::vector<std::string> tokens;
  int model_vocab_size = -1;  // ids from here on are added tokens beyond the model's vocab (-1: none)
  std::vector<std::pair<int, int>> merges;  // (left, right) ids by rank, best first
  std::vector<AddedToken> added;
  std::vector<TextNormalizer> normalizers;
  std::vector<PreTokenizerStep> pre_tokenizer;  // ends with kByteLevel
  bool ignore_merges = false;
  int unk_id = -1;
  bool fuse_unk = false;
  bool byte_fallback = false;
  // What EncodeOptions::add_special puts around the text.
  std::vector<int> special_prefix, special_suffix;
  int bos_id = -1;
  int eos_id = -1;
};

class ByteLevelBpeTokenizer final : public Tokenizer {
 public:
  static Result<std::unique_ptr<ByteLevelBpeTokenizer>> create(ByteLevelSpec spec);
  ~ByteLevelBpeTokenizer() override;
  ByteLevelBpeTokenizer(const ByteLevelBpeTokenizer&) = delete;
  ByteLevelBpeTokenizer& operator=(const ByteLevelBpeTokenizer&) = delete;

  using Tokenizer::decode;
  using Tokenizer::encode;
  Result<std::vector<int>> encode(std::string_view text, const EncodeOptions& options) const override;
  // Special tokens decode to nothing; every other token to its bytes (no space is stripped:
  // byte-level vocabularies spell spaces out).
  std::string decode_piece(int prev, int id) const override;
  std::string decode(const std::vector<int>& ids, const DecodeOptions& options) const override;
  bool is_special(int id) const override;
  int vocab_size() const override { return static_cast<int>(spec_.tokens.size()); }
  int bos_id() const override { return spec_.bos_id; }
  int eos_id() const override { return spec_.eos_id; }
  std::string piece(int id) const override;

  const ByteLevelSpec& spec() const { return spec_; }
  // encode() keeps a per-call cache of words and merge pairs for texts of at least this many
  // bytes (default 4096; results are the same either way). For tests and benchmarks; set it
  // before sharing the tokenizer between threads.
  void set_cache_min_bytes(size_t n) { cache_min_bytes_ = n; }
  // The bytes token `id` stands for (special tokens too).
  const std::string& token_bytes(int id) const { return bytes_[static_cast<size_t>(id)]; }

 private:
  ByteLevelBpeTokenizer() = default;
  Status build();
  // build()'s steps, in order.
  Status check_spec() const;
  Status build_vocabulary(std::unordered_map<std::string_view, int>& by_spelling);
  Status build_merges(const std::unordered_map<std::string_view, int>& by_spelling);
  Status compile_regexes();
  void build_added_matchers();
  struct Scratch;
  Status encode_normalized(std::string_view text, size_t offset, const EncodeOptions& options, Scratch& s,
                           std::vector<int>& out) const;
  Status pre_tokenize(std::string_view text, Scratch& s, std::vector<int>& out) const;
  void encode_word(std::string_view word, Scratch& s, std::vector<int>& out) const;
  std::string_view normalize(std::string_view text, std::string& buf, std::string& tmp) const;

  ByteLevelSpec spec_;
  size_t cache_min_bytes_ = 4096;
  std::vector<std::string> bytes_;   // by id: what it decodes to
  std::vector<uint8_t> special_;     // by id
  std::unordered_map<std::string_view, int> by_bytes_;  // tokens BPE can reach, by their bytes
  std::array<int, 256> byte_ids_{};  // the token of each single byte, or -1
  std::array<std::vector<int>, 256> byte_fallback_ids_;  // HF byte_fallback (rarely used here)

  // Merge table: open addressing over (left << 32 | right) keys.
  struct PairSlot {
    uint64_t key = ~0ull;
    int32_t rank = 0;
    int32_t id = -1;
  };
  std::vector<PairSlot> pairs_;
  uint64_t pair_mask_ = 0;
  int pair_shift_ = 60;  // 64 - log2(pairs_.size())
  const PairSlot* find_pair(int a, int b) const;

  std::vector<std::unique_ptr<Regex>> regexes_;  // by pre-tokenizer step (null where none)
  std::vector<std::unique_ptr<Regex>> normalizer_regexes_;
  std::unique_ptr<Regex> gpt2_regex_;
  AddedTokenMatcher raw_added_, normalized_added_;
  std::vector<int> raw_added_ids_, normalized_added_ids_;
};

// The regex of GPT-2's ByteLevel pre-tokenizer (use_regex).
extern const char* const kGpt2Regex;

}  // namespace kiln
