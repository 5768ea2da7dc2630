#include "tools/template_vars.h"

namespace kiln::cli {

Result<std::pair<std::string, nlohmann::ordered_json>> parse_template_var(const std::string& s) {
  const size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0) return invalid_argument("--set wants NAME=JSON, got '" + s + "'");
  std::string name = s.substr(0, eq);
  const std::string value = s.substr(eq + 1);
  auto v = nlohmann::ordered_json::parse(value.begin(), value.end(), nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded())
    return invalid_argument("--set " + name + ": '" + value + "' is not JSON (a string needs quotes: " + name +
                            "='\"text\"')");
  return std::make_pair(std::move(name), std::move(v));
}

}  // namespace kiln::cli
