// The FP32 reference model and its tokenizer, opened from a path as a user names it.
#pragma once

#include <memory>
#include <string>

#include "reference/reference_model.h"
#include "tokenizer/tokenizer.h"

namespace kiln {

struct LoadedReference {
  std::shared_ptr<const ReferenceModel> model;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::string path;
};

// `tokenizer_path` overrides where the tokenizer comes from (see tokenizer_blob_for).
Result<LoadedReference> load_reference(const std::string& path, const std::string& tokenizer_path = "");

}  // namespace kiln
