// What a source model (GGUF, HF folder, llama2.c .bin) holds, as JSON, without compiling it:
// format, architecture and shapes, tensors with their stored types, sizes by type, and what
// `kiln compile` with its default flags makes of each (`kiln inspect` on a model that is not a
// .kiln yet).
#pragma once

#include <nlohmann/json.hpp>

#include "formats/import.h"

namespace kiln {

nlohmann::json describe_source(const Import& imp);

}  // namespace kiln
