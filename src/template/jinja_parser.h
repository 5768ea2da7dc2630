// Parses Jinja template text into statements, with Jinja2's grammar and operator precedence.
// Filters and tests are checked here, as Jinja2 does when it compiles: an unknown one is an
// error naming its line and column, and so is any construct kiln's engine does not run.
#pragma once

#include <memory>
#include <string_view>

#include "core/status.h"
#include "template/jinja_ast.h"

namespace kiln::jinja {

Result<std::unique_ptr<Template>> parse_template(std::string_view source);

}  // namespace kiln::jinja
