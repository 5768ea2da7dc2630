#include "tokenizer/utf8_stream.h"

#include "core/utf8.h"

namespace kiln {

namespace {
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
}  // namespace

void Utf8Stream::push(std::string_view bytes, std::string& out) {
  out.reserve(out.size() + held_len_ + bytes.size() + kReplacement.size());
  size_t i = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (need_ == 0) {
      // Copy a run of ASCII in one go.
      if (c < 0x80) {
        size_t j = i + 1;
        while (j < bytes.size() && static_cast<unsigned char>(bytes[j]) < 0x80) ++j;
        out.append(bytes.data() + i, j - i);
        i = j;
        continue;
      }
      const Utf8Lead lead = utf8_lead(c);
      if (lead.length == 0) {
        out += kReplacement;  // a stray continuation byte, C0, C1 or F5..FF
        ++i;
        continue;
      }
      need_ = static_cast<uint8_t>(lead.length - 1);
      lo_ = lead.lo;
      hi_ = lead.hi;
      held_[0] = static_cast<char>(c);
      held_len_ = 1;
      ++i;
      continue;
    }
    if (c < lo_ || c > hi_) {
      // The sequence so far is a maximal invalid subpart; this byte starts afresh.
      out += kReplacement;
      held_len_ = need_ = 0;
      continue;
    }
    held_[held_len_++] = static_cast<char>(c);
    lo_ = 0x80;
    hi_ = 0xbf;
    ++i;
    if (--need_ == 0) {
      out.append(held_, held_len_);
      held_len_ = 0;
    }
  }
}

void Utf8Stream::finish(std::string& out) {
  if (held_len_ > 0) out += kReplacement;
  reset();
}

}  // namespace kiln
