// What a .kiln holds, as JSON: header, sections, model, ops, back ends, memory plan, I/O,
// tensors and sizes (`kiln inspect --json`, the C API's model info).
#pragma once

#include <nlohmann/json.hpp>

#include "runtime/model.h"
#include "artifact/kiln_image_reader.h"

namespace kiln {

nlohmann::json describe(const KilnImage& k);
// The scheme that holds most of a compiled model's weight bytes ("w4a16", "f32", ...).
std::string main_scheme(const Model& m);

}  // namespace kiln
