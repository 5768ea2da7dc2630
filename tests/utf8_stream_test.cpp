// Utf8Stream: complete characters out, incomplete ones held back, invalid bytes as U+FFFD.
#include <gtest/gtest.h>

#include <random>

#include "core/byte_reader.h"
#include "core/utf8.h"
#include "test_util.h"
#include "tokenizer/utf8_stream.h"

namespace kiln {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

std::string repeat_fffd(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += kFffd;
  return s;
}

// The whole of `bytes` through one stream in one push, then finish.
std::string decode_all(const std::string& bytes) {
  Utf8Stream s;
  std::string out = s.push(bytes);
  out += s.finish();
  return out;
}

TEST(Utf8Stream, AsciiPassesThrough) {
  Utf8Stream s;
  EXPECT_EQ(s.push("hello"), "hello");
  EXPECT_EQ(s.push(""), "");
  EXPECT_EQ(s.push(std::string("a\0b", 3)), std::string("a\0b", 3));
  EXPECT_EQ(s.pending(), 0u);
  EXPECT_EQ(s.finish(), "");
}

// Every 2-, 3- and 4-byte character, split at every point, comes out whole exactly once.
TEST(Utf8Stream, SplitCharacters) {
  const std::vector<std::string> chars = {
      "\xC3\xA9",          // é
      "\xDF\xBF",          // U+07FF
      "\xE0\xA0\x80",      // U+0800
      "\xE4\xBD\xA0",      // 你
      "\xEF\xBF\xBF",      // U+FFFF
      "\xED\x9F\xBF",      // U+D7FF, just below the surrogates
      "\xEE\x80\x80",      // U+E000, just above them
      "\xF0\x90\x80\x80",  // U+10000
      "\xF0\x9F\x98\x80",  // 😀
      "\xF4\x8F\xBF\xBF",  // U+10FFFF
  };
  for (const std::string& c : chars) {
    for (size_t cut = 0; cut <= c.size(); ++cut) {
      Utf8Stream s;
      const std::string a = s.push("x" + c.substr(0, cut));
      EXPECT_EQ(s.pending(), cut == c.size() ? 0u : cut);
      const std::string b = s.push(c.substr(cut) + "y");
      EXPECT_EQ(a + b, "x" + c + "y");
      EXPECT_EQ(a, cut == c.size() ? "x" + c : "x");
      EXPECT_TRUE(is_valid_utf8(a) && is_valid_utf8(b));
      EXPECT_EQ(s.finish(), "");
    }
    // One byte at a time: nothing until the last byte.
    Utf8Stream s;
    for (size_t i = 0; i + 1 < c.size(); ++i) EXPECT_EQ(s.push(c.substr(i, 1)), "");
    EXPECT_EQ(s.push(c.substr(c.size() - 1)), c);
  }
  // An emoji sequence with a ZWJ, and CJK text, byte by byte.
  const std::string text = "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB \xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C";
  Utf8Stream s;
  std::string out;
  for (char c : text) {
    const std::string part = s.push(std::string(1, c));
    EXPECT_TRUE(is_valid_utf8(part));
    out += part;
  }
  out += s.finish();
  EXPECT_EQ(out, text);
}

TEST(Utf8Stream, InvalidBytes) {
  struct Case {
    std::string in, out;
  };
  const std::vector<Case> cases = {
      {"\x80", kFffd},                                  // stray continuation byte
      {"a\xBF" "b", "a" + kFffd + "b"},
      {"\xC0\x80", repeat_fffd(2)},                     // overlong NUL: C0 never starts a character
      {"\xC1\xBF", repeat_fffd(2)},
      {"\xE0\x80\x80", repeat_fffd(3)},                 // overlong 3-byte
      {"\xE0\x9F\xBF", repeat_fffd(3)},
      {"\xF0\x80\x80\x80", repeat_fffd(4)},             // overlong 4-byte
      {"\xF0\x8F\xBF\xBF", repeat_fffd(4)},
      {"\xED\xA0\x80", repeat_fffd(3)},                 // surrogate U+D800
      {"\xED\xBF\xBF", repeat_fffd(3)},                 // surrogate U+DFFF
      {"\xF4\x90\x80\x80", repeat_fffd(4)},             // above U+10FFFF
      {"\xF5\x80\x80\x80", repeat_fffd(4)},
      {"\xFE\xFF", repeat_fffd(2)},
      {"\xE2\x82" "A", kFffd + "A"},                    // a truncated sequence is one U+FFFD
      {"\xF0\x9F\x98" "\xF0\x9F\x98\x80", kFffd + "\xF0\x9F\x98\x80"},
      {"\xC3\xC3\xA9", kFffd + "\xC3\xA9"},
      {"\xE4\xBD", kFffd},                              // held back, then flushed by finish()
  };
  for (const Case& c : cases) {
    const std::string out = decode_all(c.in);
    EXPECT_EQ(out, c.out) << "input bytes: " << c.in.size();
    EXPECT_TRUE(is_valid_utf8(out));
  }
  // An invalid byte in the second push ends a sequence held from the first.
  Utf8Stream s;
  EXPECT_EQ(s.push("\xF0\x9F"), "");
  EXPECT_EQ(s.pending(), 2u);
  EXPECT_EQ(s.push("x"), kFffd + "x");
  EXPECT_EQ(s.pending(), 0u);
  // finish() resets the stream.
  EXPECT_EQ(s.push("\xE4"), "");
  EXPECT_EQ(s.finish(), kFffd);
  EXPECT_EQ(s.push("\xBD"), kFffd);
}

// Random bytes in random chunks: the output is valid UTF-8, never holds back more than 3 bytes,
// and does not depend on how the input was chunked.
TEST(Utf8Stream, RandomChunksAreValidAndChunkingInvariant) {
  std::mt19937 rng(12345);
  const std::string pool[] = {"a", "\xC3\xA9", "\xE4\xBD\xA0", "\xF0\x9F\x98\x80", "\x80", "\xBF", "\xC0",
                              "\xE0", "\xED", "\xF0", "\xF4", "\xFF", "\xE2\x82", " "};
  for (int iter = 0; iter < 500; ++iter) {
    std::string in;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      if (rng() % 4 == 0) {
        in += static_cast<char>(rng() & 0xff);
      } else {
        in += pool[rng() % std::size(pool)];
      }
    }
    const std::string whole = decode_all(in);
    EXPECT_TRUE(is_valid_utf8(whole));
    if (is_valid_utf8(in)) {
      EXPECT_EQ(whole, in);
    }
    Utf8Stream s;
    std::string out;
    for (size_t i = 0; i < in.size();) {
      const size_t len = std::min(in.size() - i, static_cast<size_t>(rng() % 5));
      const std::string part = s.push(std::string_view(in).substr(i, len));
      EXPECT_TRUE(is_valid_utf8(part));
      EXPECT_LE(s.pending(), 3u);
      out += part;
      i += len;
    }
    out += s.finish();
    EXPECT_EQ(out, whole);
  }
}

// Appending into the caller's string allocates nothing once it has room.
TEST(Utf8Stream, AppendDoesNotAllocate) {
  Utf8Stream s;
  std::string out;
  out.reserve(1 << 16);
  const std::string piece = " w\xC3\xA9rld \xF0\x9F";
  const std::string rest = "\x98\x80";
  const uint64_t before = test::allocation_count();
  for (int i = 0; i < 1000; ++i) {
    s.push(piece, out);
    s.push(rest, out);
  }
  s.finish(out);
  EXPECT_EQ(test::allocation_count(), before);
  EXPECT_TRUE(is_valid_utf8(out));
  EXPECT_EQ(out.size(), 1000 * (piece.size() + rest.size()));
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// An independent definition of well-formed: decode by the bit patterns, then reject overlongs,
// surrogates and code points above U+10FFFF (the rule core/utf8's lead table encodes).
bool well_formed_by_decoding(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len;
    uint32_t cp;
    if (c < 0x80) { len = 1; cp = c; }
    else if ((c & 0xe0) == 0xc0) { len = 2; cp = c & 0x1f; }
    else if ((c & 0xf0) == 0xe0) { len = 3; cp = c & 0x0f; }
    else if ((c & 0xf8) == 0xf0) { len = 4; cp = c & 0x07; }
    else return false;
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = cp << 6 | (cc & 0x3f);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return false;
    if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

// Every 1-, 2- and 3-byte string, and 4-byte ones over every lead and second byte: the one
// validator agrees with decoding, and the stream passes exactly the valid ones through unchanged.
TEST(Utf8, ValidatorAgreesWithDecodingExhaustively) {
  std::string s;
  auto check = [&] {
    const bool valid = well_formed_by_decoding(s);
    ASSERT_EQ(is_valid_utf8(s), valid) << testing::PrintToString(s);
    if (valid) ASSERT_EQ(decode_all(s), s);
  };
  for (int a = 0; a < 256; ++a) {
    s.assign(1, static_cast<char>(a));
    check();
    for (int b = 0; b < 256; ++b) {
      s.assign({static_cast<char>(a), static_cast<char>(b)});
      check();
      if (a < 0xe0 || a > 0xef) continue;  // 3-byte strings: every one with a 3-byte lead
      for (int c = 0; c < 256; ++c) {
        s.assign({static_cast<char>(a), static_cast<char>(b), static_cast<char>(c)});
        check();
      }
    }
  }
  for (int a = 0xf0; a < 0x100; ++a)
    for (int b = 0; b < 256; ++b)
      for (int c : {0x41, 0x80, 0xbf, 0xc0})
        for (int d : {0x80, 0xbf, 0x7f}) {
          s.assign({static_cast<char>(a), static_cast<char>(b), static_cast<char>(c), static_cast<char>(d)});
          check();
        }
}

TEST(Utf8, InvalidOffsetPointsAtTheFirstBadSequence) {
  EXPECT_EQ(invalid_utf8_offset("abcdefgh\xE2\x82\xAC" "ok"), std::string_view::npos);
  EXPECT_EQ(invalid_utf8_offset("abcdefghij\xED\xA0\x80"), 10u);  // a surrogate
  EXPECT_EQ(invalid_utf8_offset("\xC0\xAF"), 0u);                  // an overlong '/'
  EXPECT_EQ(utf8_sequence_length("\xF4\x8F\xBF\xBF", 0), 4u);     // U+10FFFF
  EXPECT_EQ(utf8_sequence_length("\xF4\x90\x80\x80", 0), 0u);     // above it
}

}  // namespace
}  // namespace kiln
