// The builtin tables (filters, tests, methods, globals) are arrays of entries with a `name`,
// sorted by it: one lookup and one list of names serve them all.
#pragma once

#include <algorithm>
#include <span>
#include <string_view>
#include <vector>

namespace kiln::jinja {

template <typename Entry>
constexpr bool sorted_by_name(std::span<const Entry> table) {
  return std::is_sorted(table.begin(), table.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
}

template <typename Entry>
const Entry* find_by_name(std::span<const Entry> table, std::string_view name) {
  auto it = std::lower_bound(table.begin(), table.end(), name,
                             [](const Entry& e, std::string_view n) { return e.name < n; });
  return it != table.end() && it->name == name ? &*it : nullptr;
}

template <typename Entry>
std::vector<std::string_view> names_of(std::span<const Entry> table) {
  std::vector<std::string_view> out;
  out.reserve(table.size());
  for (const Entry& e : table) out.push_back(e.name);
  return out;
}

}  // namespace kiln::jinja
