#include "gguf_writer.h"

#include <cstdio>
#include <cstring>

namespace kiln::test {

namespace {

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void put_number(std::string& out, GgufType t, int64_t i, double f) {
  switch (t) {
    case GgufType::kU8: case GgufType::kBool: put(out, static_cast<uint8_t>(i)); break;
    case GgufType::kI8: put(out, static_cast<int8_t>(i)); break;
    case GgufType::kU16: put(out, static_cast<uint16_t>(i)); break;
    case GgufType::kI16: put(out, static_cast<int16_t>(i)); break;
    case GgufType::kU32: put(out, static_cast<uint32_t>(i)); break;
    case GgufType::kI32: put(out, static_cast<int32_t>(i)); break;
    case GgufType::kU64: put(out, static_cast<uint64_t>(i)); break;
    case GgufType::kI64: put(out, i); break;
    case GgufType::kF32: put(out, static_cast<float>(f)); break;
    case GgufType::kF64: put(out, f); break;
    default: break;
  }
}

}  // namespace

GgufBytes& GgufBytes::u32(uint32_t v) { put(bytes, v); return *this; }
GgufBytes& GgufBytes::u64(uint64_t v) { put(bytes, v); return *this; }
GgufBytes& GgufBytes::str(std::string_view s) {
  u64(s.size());
  bytes.append(s);
  return *this;
}

GgufBytes& GgufBytes::value(const GgufValue& v) {
  u32(static_cast<uint32_t>(v.type));
  if (const std::string* s = v.as_string()) return str(*s);
  if (const int64_t* i = v.as_int()) { put_number(bytes, v.type, *i, 0); return *this; }
  if (const double* f = v.as_float()) { put_number(bytes, v.type, 0, *f); return *this; }
  const GgufArray& a = *v.as_array();
  u32(static_cast<uint32_t>(a.type));
  u64(a.size());
  for (const std::string& s : a.strings) str(s);
  for (int64_t i : a.ints) put_number(bytes, a.type, i, 0);
  for (double f : a.floats) put_number(bytes, a.type, 0, f);
  return *this;
}

GgufBytes& GgufBytes::pad_to(uint64_t alignment) {
  while (bytes.size() % alignment != 0) bytes.push_back('\0');
  return *this;
}

GgufValue gguf_int(GgufType t, int64_t v) { return GgufValue{t, v}; }
GgufValue gguf_float(double v) { return GgufValue{GgufType::kF32, v}; }
GgufValue gguf_string(std::string s) { return GgufValue{GgufType::kString, std::move(s)}; }
GgufValue gguf_strings(std::vector<std::string> v) {
  GgufArray a;
  a.type = GgufType::kString;
  a.strings = std::move(v);
  return GgufValue{GgufType::kArray, std::move(a)};
}
GgufValue gguf_ints(GgufType element, std::vector<int64_t> v) {
  GgufArray a;
  a.type = element;
  a.ints = std::move(v);
  return GgufValue{GgufType::kArray, std::move(a)};
}
GgufValue gguf_floats(std::vector<double> v) {
  GgufArray a;
  a.type = GgufType::kF32;
  a.floats = std::move(v);
  return GgufValue{GgufType::kArray, std::move(a)};
}

std::string gguf_file(const GgufKeyValues& kv, const std::vector<GgufTensorSpec>& tensors, uint64_t alignment) {
  GgufBytes b;
  b.bytes = "GGUF";
  b.u32(3).u64(tensors.size()).u64(kv.size());
  for (const auto& [key, v] : kv) b.str(key).value(v);
  uint64_t offset = 0;
  for (const GgufTensorSpec& t : tensors) {
    b.str(t.name).u32(static_cast<uint32_t>(t.ne.size()));
    for (uint64_t d : t.ne) b.u64(d);
    b.u32(t.ggml_type).u64(offset);
    offset += (t.data.size() + alignment - 1) / alignment * alignment;
  }
  for (const GgufTensorSpec& t : tensors) {
    b.pad_to(alignment);
    b.bytes += t.data;
  }
  return b.bytes;
}

GgufKeyValues gguf_tiny_vocab() {
  std::vector<std::string> pieces = {"<unk>", "<s>", "</s>"};
  std::vector<int64_t> types = {2, 3, 3};
  for (int i = 0; i < 256; ++i) {
    char p[8];
    std::snprintf(p, sizeof p, "<0x%02X>", i);
    pieces.push_back(p);
    types.push_back(6);
  }
  for (const char* p : {"\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", "ab"}) {
    pieces.push_back(p);
    types.push_back(1);
  }
  std::vector<double> scores(pieces.size(), 0.0);
  for (size_t i = 259; i < pieces.size(); ++i) scores[i] = -static_cast<double>(i);
  return {{"tokenizer.ggml.model", gguf_string("llama")},
          {"tokenizer.ggml.tokens", gguf_strings(pieces)},
          {"tokenizer.ggml.scores", gguf_floats(scores)},
          {"tokenizer.ggml.token_type", gguf_ints(GgufType::kI32, types)},
          {"tokenizer.ggml.bos_token_id", gguf_int(GgufType::kU32, 1)},
          {"tokenizer.ggml.eos_token_id", gguf_int(GgufType::kU32, 2)}};
}

GgufKeyValues gguf_with(GgufKeyValues kv, const std::string& key, GgufValue v) {
  for (auto& [k, old] : kv)
    if (k == key) {
      old = std::move(v);
      return kv;
    }
  kv.emplace_back(key, std::move(v));
  return kv;
}

}  // namespace kiln::test
