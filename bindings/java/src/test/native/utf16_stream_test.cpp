// Utf16Stream: what libkiln_jni hands to NewString. Whole characters only, surrogate pairs for
// 4-byte ones, a split tail held back, invalid bytes as U+FFFD.
#include <gtest/gtest.h>

#include <string>

#include "utf16_stream.h"

namespace kiln_jni {
namespace {

TEST(Utf16Stream, EveryLengthSplitAtEveryPoint) {
  struct Case {
    std::string utf8;
    std::u16string utf16;
  };
  const Case cases[] = {
      {"a", u"a"},
      {"\xC3\xA9", u"\u00E9"},                    // é
      {"\xE4\xBD\xA0", u"\u4F60"},                // 你
      {"\xEF\xBF\xBF", u"\uFFFF"},
      {"\xF0\x9F\x98\x80", u"\U0001F600"},        // 😀: a surrogate pair
      {"\xF4\x8F\xBF\xBF", u"\U0010FFFF"},
  };
  for (const Case& c : cases) {
    for (size_t cut = 0; cut <= c.utf8.size(); ++cut) {
      Utf16Stream s;
      std::u16string a, b;
      s.push(std::string("x").append(c.utf8, 0, cut), a);
      s.push(c.utf8.substr(cut) + "y", b);
      EXPECT_EQ(a + b, u"x" + c.utf16 + u"y");
      EXPECT_EQ(a, cut == c.utf8.size() ? u"x" + c.utf16 : u"x");  // nothing half-made comes out
      std::u16string end;
      s.finish(end);
      EXPECT_EQ(end, u"");
    }
  }
}

TEST(Utf16Stream, ByteAtATimeCjkAndEmoji) {
  const std::string text = "\xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB!";
  Utf16Stream s;
  std::u16string out;
  for (char c : text) {
    std::u16string piece;
    s.push(std::string(1, c), piece);
    // A piece never ends in a high surrogate: the pair is whole or not there.
    if (!piece.empty()) {
      EXPECT_FALSE(piece.back() >= 0xD800 && piece.back() <= 0xDBFF);
    }
    out += piece;
  }
  s.finish(out);
  EXPECT_EQ(out, u"\u4F60\u597D \U0001F469\u200D\U0001F4BB!");
}

TEST(Utf16Stream, InvalidBytesBecomeReplacementCharacters) {
  EXPECT_EQ(to_utf16("\x80"), u"\uFFFD");
  EXPECT_EQ(to_utf16("a\xFF" "b"), u"a\uFFFD" u"b");
  EXPECT_EQ(to_utf16("\xC0\x80"), u"\uFFFD\uFFFD");          // overlong NUL
  EXPECT_EQ(to_utf16("\xED\xA0\x80"), u"\uFFFD\uFFFD\uFFFD");  // a UTF-8 surrogate
  EXPECT_EQ(to_utf16("\xF4\x90\x80\x80"), u"\uFFFD\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(to_utf16("\xE2\x82" "A"), u"\uFFFD" u"A");       // a truncated sequence is one U+FFFD
  EXPECT_EQ(to_utf16("\xF0\x9F\x98"), u"\uFFFD");            // cut at the end
  // A held tail broken by the next chunk: one U+FFFD, then the new character.
  Utf16Stream s;
  std::u16string out;
  s.push("\xF0\x9F", out);
  EXPECT_EQ(s.pending(), 2u);
  s.push("\xE4\xBD\xA0", out);
  EXPECT_EQ(out, u"\uFFFD\u4F60");
  EXPECT_EQ(s.pending(), 0u);
  // Two incomplete starts in a row, across chunks.
  out.clear();
  s.push("\xE4", out);
  s.push("\xF0\x9F", out);
  s.push("\x98\x80", out);
  EXPECT_EQ(out, u"\uFFFD\U0001F600");
}

}  // namespace
}  // namespace kiln_jni
