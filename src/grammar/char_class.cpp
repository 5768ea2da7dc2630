#include <algorithm>

#include "grammar/grammar.h"

namespace kiln {

namespace {
constexpr uint32_t kMaxCodePoint = 0x10FFFF;
}

CharClass::CharClass(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negated) {
  std::sort(ranges.begin(), ranges.end());
  for (const auto& r : ranges) {
    if (!ranges_.empty() && r.first <= ranges_.back().second + 1)
      ranges_.back().second = std::max(ranges_.back().second, r.second);
    else
      ranges_.push_back(r);
  }
  if (negated) {
    std::vector<std::pair<uint32_t, uint32_t>> out;
    uint32_t next = 0;
    for (const auto& r : ranges_) {
      if (r.first > next) out.emplace_back(next, r.first - 1);
      next = r.second + 1;
    }
    if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
    ranges_ = std::move(out);
  }
  for (const auto& r : ranges_)
    for (uint32_t c = r.first; c <= std::min<uint32_t>(r.second, 127); ++c) ascii_[c >> 6] |= 1ull << (c & 63);
}

bool CharClass::contains_slow(uint32_t cp) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), cp,
                             [](uint32_t c, const std::pair<uint32_t, uint32_t>& r) { return c < r.first; });
  return it != ranges_.begin() && std::prev(it)->second >= cp;
}

bool CharClass::intersects(uint32_t lo, uint32_t hi) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), hi,
                             [](uint32_t c, const std::pair<uint32_t, uint32_t>& r) { return c < r.first; });
  return it != ranges_.begin() && std::prev(it)->second >= lo;
}

}  // namespace kiln
