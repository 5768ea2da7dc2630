// llama2.c checkpoints ("legacy" version-0 export): a 7 x int32 header, then float32 arrays.
#pragma once

#include <memory>

#include "core/mapped_file.h"
#include "formats/tensor_source.h"

namespace kiln {

Result<ImportedModel> read_llama2c(std::shared_ptr<const MappedFile> file);

}  // namespace kiln
