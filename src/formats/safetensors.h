// safetensors: an 8-byte header length, a JSON header, then raw little-endian tensor data.
#pragma once

#include <memory>
#include <vector>

#include "core/mapped_file.h"
#include "formats/tensor_source.h"

namespace kiln {

struct SafetensorsFile {
  std::shared_ptr<const MappedFile> file;
  std::vector<TensorSource> tensors;  // in header order, names as stored
};

Result<SafetensorsFile> read_safetensors(std::shared_ptr<const MappedFile> file);

}  // namespace kiln
