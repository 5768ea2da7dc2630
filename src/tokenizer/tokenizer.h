// Text <-> token ids. One interface; the model kinds (SentencePiece-style BPE in spm_bpe.h,
// byte-level BPE in bytelevel_bpe.h) live behind it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace kiln {

struct GgufFile;

// How to encode. The defaults are Hugging Face's encode(text, add_special_tokens=False).
struct EncodeOptions {
  // Adds what the tokenizer adds around a text (HF add_special_tokens=True): the BOS and/or EOS
  // that tokenizer.json's TemplateProcessing post-processor puts there, as tokenizer_config.json's
  // add_bos_token/add_eos_token override it (GGUF: tokenizer.ggml.add_bos_token/add_eos_token).
  bool add_special = false;
  // Special-token strings typed in the text are encoded as ordinary text (HF's
  // encode_special_tokens=True), as a chat server must treat user content. As in HF, added tokens
  // that are not special (Qwen's <think>, <tool_call>) still match.
  bool plain = false;
  // Byte ranges [begin, end) of the text (sorted, disjoint) where special-token strings are
  // ordinary text, as `plain` makes them everywhere: a chat prompt's user and system content
  // (runtime/chat_format.h). The text is still encoded as one, so that BPE merges across a range's
  // edges as it would without the ranges.
  std::vector<std::pair<size_t, size_t>> plain_ranges;
};

// What a special token's match at [begin, end) of the text is under `options`: a token; text
// whose span the match consumes (HF's encode_special_tokens, and a match inside a plain range);
// or, for a match across a plain range's edge, text where matching resumes at the next byte, so
// that a template's own token right after user content that ends in "<|im_" still matches.
enum class SpecialMatch { kToken, kTextConsumed, kTextNextByte };
SpecialMatch special_match(const EncodeOptions& options, size_t begin, size_t end);

struct DecodeOptions {
  // Special tokens (BOS, EOS, <|im_start|>, ...) decode to nothing; off: to their text (HF's
  // decode(ids, skip_special_tokens=False)).
  bool skip_special = true;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Encodes `text`; with add_bos, BOS comes first (as llama2.c's encode(text, bos=1, eos=0)).
  // The same as encode(text, EncodeOptions{}) with BOS (if the tokenizer has one) put first.
  Result<std::vector<int>> encode(std::string_view text, bool add_bos) const;

  // Encodes `text` as `options` say. Byte-level BPE tokenizers (GPT-2, Llama 3, Qwen) need valid
  // UTF-8, as HF does (it takes a str): invalid UTF-8 is an invalid-argument error naming the
  // offset. SentencePiece-style ones take any bytes (invalid ones fall back to byte tokens).
  virtual Result<std::vector<int>> encode(std::string_view text, const EncodeOptions& options) const = 0;

  // The bytes token `id` stands for when it follows `prev` (-1 at the start): byte-fallback
  // pieces give their byte, and the piece right after BOS loses its leading space.
  // Details (all model kinds): the piece at the start (prev == -1) loses its leading space too,
  // where the tokenizer adds a dummy prefix (SentencePiece's "add_dummy_prefix", HF's Strip
  // decoder); control tokens (BOS, EOS, special added tokens) decode to nothing, so that
  // decode(encode(text, true)) == text; an id out of range decodes to nothing. The bytes need
  // not be UTF-8 on their own (a character may span byte tokens): feed them to a Utf8Stream.
  virtual std::string decode_piece(int prev, int id) const = 0;

  // The whole text of a sequence of ids: decode_piece of each, concatenated (raw bytes).
  std::string decode(const std::vector<int>& ids) const;
  // With options; skip_special (the default) is decode(ids). Raw bytes too.
  virtual std::string decode(const std::vector<int>& ids, const DecodeOptions& options) const;
  // decode() made valid UTF-8: each invalid sequence becomes U+FFFD (as HF's from_utf8_lossy).
  std::string decode_text(const std::vector<int>& ids, const DecodeOptions& options = {}) const;

  // Whether `id` is a special token (control: BOS, EOS, special added tokens).
  virtual bool is_special(int id) const = 0;

  virtual int vocab_size() const = 0;
  virtual int bos_id() const = 0;  // -1 when none
  virtual int eos_id() const = 0;  // -1 when none
  virtual std::string piece(int id) const = 0;  // the vocabulary entry, for display
};

// llama2.c tokenizer .bin: vocab_size comes from the checkpoint (the file does not store it).
Result<std::unique_ptr<Tokenizer>> load_llama2c_tokenizer(const std::string& path, int vocab_size);
// The same on bytes already in memory (tests, fuzzing); `name` stands for the path in messages.
Result<std::unique_ptr<Tokenizer>> load_llama2c_tokenizer_bytes(std::span<const uint8_t> bytes,
                                                                const std::string& name, int vocab_size);
// Hugging Face tokenizer.json (its text), `path` for messages: SentencePiece-style BPE
// (spm_bpe.h) or byte-level BPE (bytelevel_bpe.h), whichever the file describes. What
// add_special adds comes from its post_processor alone: transformers 5 ignores
// tokenizer_config.json's add_bos_token/add_eos_token when a tokenizer.json is there.
Result<std::unique_ptr<Tokenizer>> tokenizer_from_json(std::string_view json_text, const std::string& path);
// The vocabulary embedded in a GGUF file (tokenizer.ggml.*).
Result<std::unique_ptr<Tokenizer>> tokenizer_from_gguf(const GgufFile& g);

}  // namespace kiln
