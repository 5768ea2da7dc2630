// A model and its tokenizer, opened from a path as a user names it.
#pragma once

#include <memory>
#include <string>

#include "runtime/model.h"
#include "tokenizer/tokenizer.h"

namespace kiln {

struct LoadedModel {
  std::shared_ptr<const Model> model;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::string path;
};

// `tokenizer_path` overrides where the tokenizer comes from; by default a llama2.c model uses
// tokenizer.bin or tok*.bin beside it, an HF folder its tokenizer.json, a GGUF its own vocabulary.
Result<LoadedModel> load_model(const std::string& path, const std::string& tokenizer_path = "");

// Loads a tokenizer from a file or folder: tokenizer.json, an HF folder, a .gguf, or a llama2.c
// tokenizer .bin (which needs the vocabulary size of its model).
Result<std::unique_ptr<Tokenizer>> load_tokenizer_file(const std::string& path, int llama2c_vocab_size);

}  // namespace kiln
