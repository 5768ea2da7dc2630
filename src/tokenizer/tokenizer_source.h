// Where a model's tokenizer comes from, and the tokenizer as bytes that travel inside a .kiln.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "formats/import.h"
#include "formats/tokenizer_blob.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace kiln {

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
