// Streaming UTF-8 repair for generated text: token pieces are bytes, and one character may be
// split across several byte-fallback tokens. push() returns what is complete and valid so far,
// holding back an incomplete trailing sequence (at most 3 bytes) until the next push completes
// it; every invalid byte, or maximal invalid subpart of a sequence (as the Unicode standard and
// WHATWG count them), becomes U+FFFD. The output is always well-formed UTF-8: no overlongs, no
// surrogates, nothing above U+10FFFF.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

class Utf8Stream {
 public:
  // Appends the decodable part of (held-back bytes + `bytes`) to `out`; allocates nothing but
  // what `out` grows by.
  void push(std::string_view bytes, std::string& out);
  std::string push(std::string_view bytes) {
    std::string out;
    push(bytes, out);
    return out;
  }

  // Ends the stream: a held-back incomplete sequence becomes one U+FFFD. The stream is then
  // empty and may be reused.
  void finish(std::string& out);
  std::string finish() {
    std::string out;
    finish(out);
    return out;
  }

  // Bytes held back, waiting for the rest of their character (0..3).
  size_t pending() const { return held_len_; }
  void reset() { held_len_ = need_ = 0; }

 private:
  char held_[4] = {};
  uint8_t held_len_ = 0;
  uint8_t need_ = 0;  // continuation bytes still expected
  uint8_t lo_ = 0x80, hi_ = 0xbf;  // the range the next continuation byte must be in
};

}  // namespace kiln
