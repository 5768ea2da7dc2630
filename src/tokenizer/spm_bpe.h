// SentencePiece-style BPE: one model behind the three places such a vocabulary comes from
// (a llama2.c tokenizer .bin, a GGUF "llama" vocabulary, an HF tokenizer.json with a BPE model
// and the Metaspace/"▁" conventions).
//
// The loaders only translate their file into an SpmBpeSpec; SpmBpeTokenizer::create validates
// it and builds every lookup table once, so encode() allocates only its working vectors.
//
// Encoding a text:
//   1. with add_special, what the post-processor puts first (BOS) and, at the end, last;
//   2. the text is cut at the added tokens it contains (only when the spec lists any; matched
//      leftmost-longest on the raw text, as HF does for tokens that are not normalized);
//   3. each remaining segment is normalized by `text_ops` (prepend, replace) and optionally split
//      into words at each occurrence of `split_at` (Metaspace split=true; HF's Split on a string);
//   4. each word is cut into initial symbols (see InitialSymbols), which bpe_merge() merges by
//      `merge_rule`;
//   5. symbols that are still no token become byte-fallback tokens (or unk).
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

enum class PieceKind : uint8_t {
  kNormal,   // text
  kByte,     // "<0xXX>": decodes to that one byte
  kControl,  // BOS, EOS, special added tokens, unused slots: decode to nothing
  kUnknown,  // <unk>: decodes to its piece
};

enum class MergeRule : uint8_t {
  kScore,  // the pair merges into the piece spelled by their concatenation; priority = its score
  kRank,   // the pair merges when `merges` lists it; priority = earlier in the list
};

enum class InitialSymbols : uint8_t {
  // llama2.c run.c: a byte plus up to 3 following continuation bytes is one group; a group that
  // is no piece becomes the byte tokens byte+3 at once, and those merge by their piece text
  // ("<0xE2>") like any other token.
  kLlama2c,
  // HF tokenizers BPE: one symbol per UTF-8 character (an invalid byte is a character of its
  // own); a character that is no piece becomes byte-fallback tokens before merging (or unk).
  kBytesFirst,
  // llama.cpp SPM: one symbol per UTF-8 character; a character that is no piece stays a bare
  // symbol that may still merge by text, and becomes byte tokens only at the end.
  kBytesLast,
};

// One step of per-segment normalization, applied in order.
struct TextOp {
  enum class Kind : uint8_t {
    kPrepend,           // prepend `text` to a non-empty segment
    kPrependIfMissing,  // the same, unless the segment already starts with `text` (Metaspace)
    kReplace,           // replace every `from` with `text`
  };
  Kind kind = Kind::kPrepend;
  std::string text;
  std::string from;
  bool first_segment_only = false;  // Metaspace prepend_scheme "first": only a segment at offset 0
};


struct SpmBpeSpec {
  std::string name;  // the file, for messages
  std::vector<std::string> pieces;
  std::vector<PieceKind> kinds;           // empty: all kNormal
  std::vector<float> scores;              // kScore; empty: all 0
  std::vector<std::pair<int, int>> merges;  // kRank: (left, right) ids, best first
  MergeRule merge_rule = MergeRule::kScore;
  InitialSymbols initial = InitialSymbols::kBytesLast;
  // kScore: a pair merges only when its piece's score is > min_score (llama2.c: -1e10).
  float min_score = -3.4e38f;
  // Which pieces text can turn into (initial symbols, kScore merges); others are reached only
  // as byte fallback, added tokens, or BOS/EOS.
  bool lookup_control = true;  // include kControl and kUnknown pieces
  bool lookup_bytes = true;    // include kByte pieces

  std::vector<TextOp> text_ops;
  // Non-empty: the normalized text is cut into words at each occurrence of this string, which
  // starts a word (Metaspace split=true, HF's MergedWithNext) or, with split_after, ends one (HF's
  // Split MergedWithPrevious; Gemma 3 splits after " ", which its normalizer has already replaced).
  std::string split_at;
  bool split_after = false;
  // Non-empty: the words are this regex's matches and the text between them, as llama.cpp cuts
  // a SentencePiece-style BPE text (gemma4: runs of newlines and of the rest; whitespace: \S+).
  std::string split_regex;
  // A word of newlines only that is a piece is taken whole (llama.cpp's Gemma 4 rule).
  bool whole_newline_words = false;
  std::vector<AddedToken> added;

  bool byte_fallback = true;
  // Byte fallback: the token of byte b; -1 where missing (then unk). Empty: "<0xXX>" pieces.
  std::vector<int> byte_ids;
  int unk_id = -1;
  bool fuse_unk = false;      // kBytesFirst: consecutive unknown characters give one unk
  bool ignore_merges = false;  // kRank (HF): a word that is a piece is taken whole

  int bos_id = -1;
  int eos_id = -1;
  // What EncodeOptions::add_special puts around the text (HF's post-processor).
  std::vector<int> special_prefix, special_suffix;
  // Decoding: `space_piece` in a piece stands for ' ' (empty or " ": pieces hold real spaces);
  // strip_leading_space: the first piece (prev == -1) and the piece after BOS lose one leading ' '.
  std::string space_piece;
  bool strip_leading_space = true;
};

class SpmBpeTokenizer final : public Tokenizer {
 public:
  // Validates the spec (ids in range, merges well formed, ...) and builds the lookup tables.
  static Result<std::unique_ptr<SpmBpeTokenizer>> create(SpmBpeSpec spec);

  SpmBpeTokenizer(const SpmBpeTokenizer&) = delete;  // the tables point into pieces_
  SpmBpeTokenizer& operator=(const SpmBpeTokenizer&) = delete;

  using Tokenizer::decode;
  using Tokenizer::encode;
  Result<std::vector<int>> encode(std::string_view text, const EncodeOptions& options) const override;
  std::string decode_piece(int prev, int id) const override;
  // As HF decodes: the pieces (control ones as spelled, or left out with skip_special), then one
  // leading space dropped where the tokenizer adds a dummy prefix (its Strip decoder runs over
  // the whole text). decode(ids) instead drops the space of the piece after every BOS (run.c).
  std::string decode(const std::vector<int>& ids, const DecodeOptions& options) const override;
  bool is_special(int id) const override {
    return id >= 0 && id < vocab_size() && spec_.kinds[static_cast<size_t>(id)] == PieceKind::kControl;
  }
  int vocab_size() const override { return static_cast<int>(spec_.pieces.size()); }
  int bos_id() const override { return spec_.bos_id; }
  int eos_id() const override { return spec_.eos_id; }
  std::string piece(int id) const override;

  PieceKind kind(int id) const { return spec_.kinds[static_cast<size_t>(id)]; }
  float score(int id) const { return spec_.scores[static_cast<size_t>(id)]; }
  const SpmBpeSpec& spec() const { return spec_; }
  // The id of a piece text can reach (see lookup_control/lookup_bytes), or -1.
  int find(std::string_view piece) const;

 private:
  SpmBpeTokenizer() = default;
  Status build();
  // Appends the ids of one normalized word; its first `prefix_len` bytes were prepended by the
  // normalizer (kLlama2c groups them apart from the text).
  void encode_word(std::string_view word, size_t prefix_len, std::vector<int>& out) const;
  void encode_segment(std::string_view segment, bool at_start, std::vector<int>& out) const;
  void emit_bytes(std::string_view bytes, std::vector<int>& out) const;

  struct PairMerge {
    int rank;
    int id;
  };
  static uint64_t pair_key(int a, int b) {
    return static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32 | static_cast<uint32_t>(b);
  }

  SpmBpeSpec spec_;
  std::unordered_map<std::string_view, int> lookup_;  // views into spec_.pieces
  size_t max_lookup_len_ = 0;
  std::unordered_map<uint64_t, PairMerge> pair_merges_;  // kRank
  std::array<int, 256> byte_ids_{};
  std::vector<std::string> decoded_;  // decode_piece's text of each id (before stripping)
  std::unique_ptr<Regex> split_regex_;  // spec_.split_regex, compiled

  // Added tokens: a byte trie, for leftmost-longest matching.
  struct TrieNode {
    std::vector<std::pair<uint8_t, int32_t>> children;
    int32_t added = -1;  // index into spec_.added
  };
  std::vector<TrieNode> trie_;
};

// "<0xXX>" (two upper- or lower-case hex digits) → the byte; -1 otherwise.
int parse_byte_piece(std::string_view piece);

}  // namespace kiln
