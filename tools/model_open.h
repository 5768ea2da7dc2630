// Opens whatever the user names as a model: a .kiln (mapped), or a source model compiled in memory.
#pragma once

#include <memory>
#include <string>

#include "quant/overrides.h"
#include "runtime/compiled_model.h"
#include "tokenizer/tokenizer.h"

namespace kiln::cli {

struct OpenOptions {
  std::string tokenizer_path;  // source models only
  OverridesFile quant;         // source models only; default f32
  bool verify = false;         // .kiln: check every section's checksum
  int max_tokens = 64;
};

struct OpenedModel {
  std::shared_ptr<const CompiledModel> model;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::string kind;  // "kiln", "llama2c", "gguf", "hf"
};

bool is_kiln_file(const std::string& path);
Result<OpenedModel> open_model(const std::string& path, const OpenOptions& options);
// The f32 default for running a source model as published.
OverridesFile f32_overrides();

}  // namespace kiln::cli
