// Tensors as a reader found them: a name, a stored type, a shape and bytes inside a file.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "formats/model_config.h"

namespace kiln {

struct TensorSource {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // outermost first: a [out][in] matrix is {out, in}
  std::span<const uint8_t> bytes;
  std::string file;  // where the bytes live, for messages

  uint64_t elements() const;
};

// A model as imported: config, tensors under kiln's canonical (GGUF-style) names, and the
// files that own the bytes. Nothing is converted yet.
struct ImportedModel {
  std::string format;  // "llama2c", "hf", "gguf"
  std::string path;
  ModelConfig config;
  std::map<std::string, TensorSource> tensors;
  std::vector<std::shared_ptr<const MappedFile>> files;
};

// Product of the dimensions; nullopt when negative or on overflow.
std::optional<uint64_t> shape_elements(const std::vector<int64_t>& shape);
std::string shape_string(const std::vector<int64_t>& shape);

// Rejects tensors whose byte ranges overlap (all of them from the same file).
Status check_no_overlap(std::vector<const TensorSource*> tensors, const std::string& file);

// Phi-3's fused projections (qkv_proj: q, k, v; gate_up_proj: gate, up) as views of consecutive
// rows of `fused`, named `parts[i].first` with `parts[i].second` rows each: no copy, whatever
// the type (a row of a block type is whole blocks). An error names the tensor when its shape is
// not [sum of the parts' rows][cols] or its bytes do not match.
Result<std::vector<TensorSource>> split_rows(const TensorSource& fused, int64_t cols,
                                             const std::vector<std::pair<std::string, int64_t>>& parts);

// The tensors a model of this config needs, with their shapes; checks that `m` has each one,
// with that shape and a byte size that matches its type.
Status check_model_tensors(const ImportedModel& m);

}  // namespace kiln
