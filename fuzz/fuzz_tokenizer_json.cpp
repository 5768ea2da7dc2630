// libFuzzer target: the HF tokenizer.json reader (SentencePiece-style and byte-level BPE), then
// encode/decode on what it accepts. Input: the JSON text. Seeds: fuzz/corpus/tokenizer_json/
// (stories260K's SentencePiece-style file, a small byte-level file with NFC, a Split regex,
// added tokens).
#include <cstdint>
#include <string>
#include <string_view>

#include "core/byte_reader.h"
#include "core/utf8.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8_stream.h"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void exercise(const kiln::Tokenizer& t, std::string_view text) {
  for (int mode = 0; mode < 4; ++mode) {
    kiln::EncodeOptions o;
    o.add_special = (mode & 1) != 0;
    o.plain = (mode & 2) != 0;
    auto ids = t.encode(text, o);
    // Byte-level BPE refuses invalid UTF-8 (with a message); everything else must encode.
    if (!ids.is_ok()) {
      check(!kiln::is_valid_utf8(text) && !ids.status().message().empty());
      continue;
    }
    for (int id : ids.value()) check(id >= 0 && id < t.vocab_size());
    kiln::Utf8Stream stream;
    std::string out;
    int prev = -1;
    for (int id : ids.value()) {
      stream.push(t.decode_piece(prev, id), out);
      prev = id;
    }
    stream.finish(out);
    check(kiln::is_valid_utf8(out));
    (void)t.decode(ids.value());
    kiln::DecodeOptions d;
    d.skip_special = false;
    check(kiln::is_valid_utf8(t.decode_text(ids.value(), d)));
  }
  auto legacy = t.encode(text, true);
  check(legacy.is_ok() || !kiln::is_valid_utf8(text));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto tok = kiln::tokenizer_from_json(text, "fuzz.json");
  if (!tok.is_ok()) {
    check(!tok.status().message().empty());
    return 0;
  }
  const kiln::Tokenizer& t = *tok.value();
  check(t.bos_id() >= -1 && t.bos_id() < t.vocab_size());
  check(t.eos_id() >= -1 && t.eos_id() < t.vocab_size());
  // Text from the file itself (its vocabulary and merges are in there), and some that needs
  // byte fallback, NFC, special-token matching, and (for byte-level) is invalid UTF-8.
  exercise(t, text.substr(size > 200 ? size / 2 : 0, 160));
  exercise(t, "Hello <s> w\xC3\xB6rld </s>\xF0\x9F\x98\x80 <unk> <|im_start|>user\ne\xCC\x81 \xE4\xBD\xA0\xE5\xA5\xBD<think>  ");
  exercise(t, "bad \xFF\x80 bytes");
  return 0;
}
