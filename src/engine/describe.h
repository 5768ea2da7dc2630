// What a .kiln holds, as JSON: header, sections, model, ops, back ends, memory plan, I/O,
// tensors and sizes (`kiln inspect --json`, the C API's model info).
#pragma once

#include <nlohmann/json.hpp>

#include "runtime/model.h"
#include "artifact/kiln_image_reader.h"

namespace kiln {

nlohmann::json describe(const KilnImage& k);
// A weight's scheme as `kiln inspect` prints it: "w4a16 g32 sym", "w8a16 g32", "w6a16 g256", "f32".
std::string scheme_text(const WeightDesc& w);
// The scheme that holds most of a compiled model's weight bytes ("w4a16", "f32", ...).
std::string main_scheme(const Model& m);

}  // namespace kiln
