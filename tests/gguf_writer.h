// A small GGUF v3 writer for tests that craft files: whole files from keys and tensors, and the
// little-endian pieces for crafting a header field by field.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "formats/gguf.h"

namespace kiln::test {

// Appends GGUF's encodings of integers, strings and values to `bytes`.
struct GgufBytes {
  std::string bytes;
  GgufBytes& u32(uint32_t v);
  GgufBytes& u64(uint64_t v);
  GgufBytes& str(std::string_view s);  // u64 length, then the bytes
  GgufBytes& value(const GgufValue& v);  // as its type says: scalars at their width, arrays with their element type
  GgufBytes& pad_to(uint64_t alignment);
};

// Values of each kind, for the key-value list.
GgufValue gguf_int(GgufType t, int64_t v);
GgufValue gguf_float(double v);
GgufValue gguf_string(std::string s);
GgufValue gguf_strings(std::vector<std::string> v);
GgufValue gguf_ints(GgufType element, std::vector<int64_t> v);
GgufValue gguf_floats(std::vector<double> v);  // F32 elements

struct GgufTensorSpec {
  std::string name;
  std::vector<uint64_t> ne;  // GGUF's order: the fastest dimension first
  uint32_t ggml_type = 0;    // 0 F32
  std::string data;          // placed at the next aligned offset (its length need not match ne)
};

using GgufKeyValues = std::vector<std::pair<std::string, GgufValue>>;

// A GGUF v3 file: the key-values in order, the tensor infos, then each tensor's data aligned.
std::string gguf_file(const GgufKeyValues& kv, const std::vector<GgufTensorSpec>& tensors = {},
                      uint64_t alignment = 32);

// The tiny vocabulary the crafted tokenizer files start from: a SentencePiece-style ("llama")
// vocabulary of <unk>, <s>, </s>, the 256 byte tokens and a few pieces, with scores and types.
GgufKeyValues gguf_tiny_vocab();

// `kv` with `key` set to `v` (replaced where present, else appended).
GgufKeyValues gguf_with(GgufKeyValues kv, const std::string& key, GgufValue v);

}  // namespace kiln::test
