// libFuzzer target: the HF tokenizer.json reader, then encode/decode on what it accepts.
// Input: the JSON text. Seed with tests/data/stories260K-hf/tokenizer.json.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/byte_reader.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8_stream.h"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void exercise(const kiln::Tokenizer& t, std::string_view text) {
  for (bool bos : {false, true}) {
    auto ids = t.encode(text, bos);
    check(ids.is_ok());
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
  }
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
  // byte fallback and special-token matching.
  exercise(t, text.substr(size > 200 ? size / 2 : 0, 160));
  exercise(t, "Hello <s> w\xC3\xB6rld </s>\xF0\x9F\x98\x80 \xFF\x80 <unk>");
  return 0;
}
