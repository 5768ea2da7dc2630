// Text <-> token ids. One interface; the model kinds (SentencePiece-style BPE today, byte-level
// BPE next) live behind it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kiln {

struct GgufFile;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Encodes `text`; with add_bos, BOS comes first (as llama2.c's encode(text, bos=1, eos=0)).
  virtual Result<std::vector<int>> encode(std::string_view text, bool add_bos) const = 0;

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
// Hugging Face tokenizer.json (its text), `path` for messages.
Result<std::unique_ptr<Tokenizer>> tokenizer_from_json(std::string_view json_text, const std::string& path);
// The vocabulary embedded in a GGUF file (tokenizer.ggml.*).
Result<std::unique_ptr<Tokenizer>> tokenizer_from_gguf(const GgufFile& g);

}  // namespace kiln
