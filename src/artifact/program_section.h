// The .kiln program and memory-plan sections: JSON encodings; decoding validates every id,
// width and offset.
#pragma once

#include <string>
#include <string_view>

#include "graph/program.h"

namespace kiln {

std::string program_to_json(const Program& p);  // the graph and its constants
std::string plan_to_json(const MemoryPlan& plan);
Result<Program> program_from_json(std::string_view program, std::string_view plan, const std::string& where);

}  // namespace kiln
