#include "formats/safetensors.h"

#include "core/byte_reader.h"
#include "formats/json_util.h"

namespace kiln {

namespace {

std::optional<DType> parse_dtype(const std::string& s) {
  if (s == "F32") return DType::kF32;
  if (s == "F16") return DType::kF16;
  if (s == "BF16") return DType::kBF16;
  return std::nullopt;
}

}  // namespace

Result<SafetensorsFile> read_safetensors(std::shared_ptr<const MappedFile> file) {
  const std::string& path = file->path();
  ByteReader r(file->bytes(), path);
  KILN_ASSIGN_OR_RETURN(uint64_t header_len, r.read<uint64_t>("header length"));
  constexpr uint64_t kMaxHeader = 100u << 20;  // the safetensors reference implementation's limit
  if (header_len > kMaxHeader) return r.error_at(0, "header length " + std::to_string(header_len) + " exceeds 100 MiB");
  KILN_ASSIGN_OR_RETURN(auto header_bytes, r.read_bytes(header_len, "JSON header"));
  std::string_view header(reinterpret_cast<const char*>(header_bytes.data()), header_bytes.size());
  KILN_ASSIGN_OR_RETURN(Json j, parse_json(header, path + ": header"));
  if (!j.is_object()) return corrupt(path + ": header: not a JSON object");

  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = file->size() - data_start;
  SafetensorsFile out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;
    const std::string where = path + ": tensor '" + name + "'";
    const Json& t = it.value();
    if (!t.is_object()) return corrupt(where + ": entry is not an object");
    KILN_ASSIGN_OR_RETURN(std::string dt, json_string(t, "dtype", "", where));
    auto dtype = parse_dtype(dt);
    if (!dtype) return unsupported(where + ": dtype '" + dt + "' is not supported (F32, F16, BF16 are)");
    auto shape_it = t.find("shape");
    if (shape_it == t.end() || !shape_it->is_array()) return corrupt(where + ": 'shape' must be an array");
    std::vector<int64_t> shape;
    for (const Json& d : *shape_it) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        return corrupt(where + ": shape entries must be non-negative integers");
      shape.push_back(d.get<int64_t>());
    }
    auto offs = t.find("data_offsets");
    if (offs == t.end() || !offs->is_array() || offs->size() != 2 || !(*offs)[0].is_number_unsigned() ||
        !(*offs)[1].is_number_unsigned())
      return corrupt(where + ": 'data_offsets' must be two non-negative integers");
    const auto begin = (*offs)[0].get<uint64_t>(), end = (*offs)[1].get<uint64_t>();
    if (begin > end || end > data_size)
      return corrupt(where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                     "] lie outside the data (" + std::to_string(data_size) + " bytes)");
    auto n = shape_elements(shape);
    auto need = n ? dtype_bytes(*dtype, *n) : std::nullopt;
    if (!need || *need != end - begin)
      return corrupt(where + ": " + std::to_string(end - begin) + " bytes do not match " + dt + " " +
                     shape_string(shape));
    TensorSource ts;
    ts.name = name;
    ts.dtype = *dtype;
    ts.shape = std::move(shape);
    ts.bytes = file->bytes().subspan(data_start + begin, end - begin);
    ts.file = path;
    out.tensors.push_back(std::move(ts));
  }
  std::vector<const TensorSource*> ptrs;
  for (const auto& t : out.tensors) ptrs.push_back(&t);
  KILN_RETURN_IF_ERROR(check_no_overlap(ptrs, path));
  out.file = std::move(file);
  return out;
}

}  // namespace kiln
