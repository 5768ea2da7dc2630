// Opens a model as published, whatever its format: a llama2.c .bin, a .gguf, or an HF folder.
#pragma once

#include <memory>
#include <string>

#include "formats/gguf.h"
#include "formats/tensor_source.h"

namespace kiln {

enum class ModelFormat { kLlama2c, kGguf, kHfFolder };

// Decides by the path: a directory is an HF folder, a file named *.gguf or starting with "GGUF"
// is GGUF, anything else is tried as a llama2.c checkpoint.
Result<ModelFormat> detect_format(const std::string& path);
// The same for a model: a file that is no GGUF and neither named .bin nor starting with a plausible
// llama2.c header is refused as "not a model file" (an empty file, a text file, a damaged .kiln).
Result<ModelFormat> detect_model_format(const std::string& path);

struct Import {
  ImportedModel model;
  std::shared_ptr<const GgufFile> gguf;  // set for GGUF input: its vocabulary is the tokenizer
};

Result<Import> import_model(const std::string& path);

}  // namespace kiln
