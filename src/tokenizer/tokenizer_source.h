// Where a model's tokenizer comes from, and the tokenizer as bytes that travel inside a .kiln.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "formats/import.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace kiln {

// The tokenizer as its source file had it: "llama2c" (.bin bytes), "hf-json" (tokenizer.json
// text) or "gguf" (a GGUF file holding only the tokenizer.* metadata).
struct TokenizerBlob {
  std::string kind;
  int vocab_size = 0;  // what a llama2.c .bin needs, since it does not store it
  std::vector<uint8_t> bytes;
  // The file the tokenizer was read from (a folder's tokenizer.json, not the folder), which its
  // errors name; empty when the tokenizer is part of the model file (a GGUF model's own
  // vocabulary, a .kiln's tokenizer section). Not stored in a .kiln.
  std::string source;
  // The chat template that came with a tokenizer.json (from its folder's tokenizer_config.json
  // or chat_template.jinja). A GGUF blob carries its own tokenizer.chat_template inside `bytes`.
  std::optional<ModelChatTemplate> chat;
};

// The tokenizer of an imported model: `explicit_path` when given (a tokenizer.json, HF folder,
// .gguf or llama2.c .bin); else tokenizer.bin or the one tok*.bin beside a llama2.c checkpoint,
// an HF folder's tokenizer.json, or a GGUF file's own vocabulary.
Result<TokenizerBlob> tokenizer_blob_for(const Import& imp, const std::string& explicit_path);
Result<TokenizerBlob> tokenizer_blob_from_file(const std::string& path, int llama2c_vocab_size);

// The name a tokenizer error starts with: the blob's own file, else "`model_path`: tokenizer".
std::string tokenizer_where(const TokenizerBlob& blob, const std::string& model_path);
Result<std::unique_ptr<Tokenizer>> tokenizer_from_blob(const TokenizerBlob& blob, const std::string& where);
// The blob's chat template: `chat`, or a GGUF blob's tokenizer.chat_template; nullopt when none.
Result<std::optional<ModelChatTemplate>> chat_template_of_blob(const TokenizerBlob& blob, const std::string& where);

// A tokenizer file as a user names it: a tokenizer.json, an HF folder (its tokenizer.json), a
// .gguf (its vocabulary) or a llama2.c tokenizer .bin. A .bin does not store its vocabulary
// size: `llama2c_vocab_size` > 0 gives it, else the records are counted to the end of the file.
Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& path, int llama2c_vocab_size = 0);
// How many tokens a llama2.c tokenizer .bin holds: its records read to the end of the bytes.
Result<int> llama2c_token_count(std::span<const uint8_t> bytes, const std::string& name);

}  // namespace kiln
