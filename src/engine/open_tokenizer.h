// Opens a tokenizer on its own, as `kiln tokenize` and the C API's tokenizer calls name one.
#pragma once

#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"

namespace kiln {

// A tokenizer.json, an HF folder, a .gguf, a llama2.c tokenizer .bin (vocab_size > 0 gives its
// size, else its records are counted) or a .kiln (its tokenizer section).
Result<std::unique_ptr<Tokenizer>> open_tokenizer(const std::string& path, int vocab_size);

}  // namespace kiln
