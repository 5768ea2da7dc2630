// A model's tokenizer and chat template as plain bytes and text: what an import finds and a
// .kiln carries. Parsing them is the tokenizer's and the template engine's job; the layers below
// (the graph, the artifact) only hold and copy them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

// A model's chat template and its special tokens (bos_token, eos_token, ... by name).
struct ModelChatTemplate {
  std::string source;
  std::vector<std::pair<std::string, std::string>> special_tokens;
};

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

}  // namespace kiln
