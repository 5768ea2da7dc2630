// libFuzzer target: the llama2.c tokenizer .bin reader, then encode/decode on what it accepts.
// Input: 2 bytes little-endian vocab_size, then the file. Seed with "\x00\x02" + tok512.bin
// (vocab 512).
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "core/byte_reader.h"
#include "core/utf8.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8_stream.h"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

// Encodes `text` both ways, checks every id, decodes through a Utf8Stream.
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
  if (size < 2) return 0;
  const int vocab_size = data[0] | data[1] << 8;
  auto tok = kiln::load_llama2c_tokenizer_bytes(std::span<const uint8_t>(data + 2, size - 2), "fuzz.bin", vocab_size);
  if (!tok.is_ok()) {
    check(!tok.status().message().empty());
    return 0;
  }
  const kiln::Tokenizer& t = *tok.value();
  check(t.vocab_size() == vocab_size);
  // A small text from the input's tail, and one from the vocabulary itself (so merges happen).
  const size_t n = size < 66 ? size - 2 : 64;
  exercise(t, std::string_view(reinterpret_cast<const char*>(data) + size - n, n));
  std::string words;
  for (int id = 0; id < t.vocab_size() && words.size() < 256; id += 1 + id / 4) words += t.piece(id);
  exercise(t, words);
  return 0;
}
