// UTF-8 bytes in, UTF-16 code units out (what JNI's NewString takes), across any chunking: an
// incomplete character at the end of a chunk is held back until the next one completes it, so a
// 4-byte emoji split over tokens becomes one surrogate pair, never two halves. Invalid bytes become
// U+FFFD. JNI's NewStringUTF is never used: it reads "modified UTF-8" and aborts on 4-byte sequences.
#ifndef KILN_JNI_UTF16_STREAM_H
#define KILN_JNI_UTF16_STREAM_H

#include <cstddef>
#include <string>
#include <string_view>

namespace kiln_jni {

class Utf16Stream {
 public:
  // Appends the UTF-16 of every whole character of (held bytes + `bytes`) to `out`.
  void push(std::string_view bytes, std::u16string& out);
  // Ends the stream: a held incomplete character becomes U+FFFD.
  void finish(std::u16string& out);
  size_t pending() const { return held_len_; }

 private:
  char held_[4] = {};
  size_t held_len_ = 0;
};

// The whole of `utf8` as UTF-16 (an incomplete tail is U+FFFD).
std::u16string to_utf16(std::string_view utf8);

}  // namespace kiln_jni

#endif
