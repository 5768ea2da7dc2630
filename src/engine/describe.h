// What a .kiln holds, as JSON: header, sections, model, ops, back ends, memory plan, I/O,
// tensors and sizes (`kiln inspect --json`, the C API's model info).
#pragma once

#include <nlohmann/json.hpp>

#include "runtime/kiln_image.h"

namespace kiln {

nlohmann::json describe(const KilnImage& k);

}  // namespace kiln
