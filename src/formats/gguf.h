// GGUF v2/v3: metadata key-values, tensor infos, aligned tensor data.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "core/mapped_file.h"
#include "formats/tensor_source.h"

namespace kiln {

enum class GgufType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

// Arrays keep their element type; elements are widened into one of the three vectors.
struct GgufArray {
  GgufType type = GgufType::kU8;
  std::vector<int64_t> ints;  // all integer types and bool (u64 values above INT64_MAX are rejected)
  std::vector<double> floats;
  std::vector<std::string> strings;
  size_t size() const { return ints.size() + floats.size() + strings.size(); }
};

struct GgufValue {
  GgufType type = GgufType::kU8;
  std::variant<int64_t, double, std::string, GgufArray> v;

  const int64_t* as_int() const { return std::get_if<int64_t>(&v); }
  const double* as_float() const { return std::get_if<double>(&v); }
  const std::string* as_string() const { return std::get_if<std::string>(&v); }
  const GgufArray* as_array() const { return std::get_if<GgufArray>(&v); }
};

struct GgufFile {
  std::shared_ptr<const MappedFile> file;
  uint32_t version = 0;
  uint64_t alignment = 32;
  std::map<std::string, GgufValue> metadata;
  std::vector<TensorSource> tensors;  // shape outermost first (GGUF's ne[] reversed)

  const GgufValue* find(const std::string& key) const {
    auto it = metadata.find(key);
    return it == metadata.end() ? nullptr : &it->second;
  }
};

Result<GgufFile> read_gguf(std::shared_ptr<const MappedFile> file);

// The model inside a GGUF file: config from `<arch>.*` keys, tensors under their GGUF names.
Result<ImportedModel> gguf_to_model(const GgufFile& g);

}  // namespace kiln
