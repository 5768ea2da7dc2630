#include "formats/imatrix.h"

#include <cmath>
#include <cstring>

#include "core/byte_reader.h"
#include "formats/gguf.h"

namespace kiln {

namespace {

Status check_values(const std::string& where, const std::string& name, const std::vector<float>& v) {
  if (v.empty()) return corrupt(where + ": entry '" + name + "' has no values");
  for (size_t j = 0; j < v.size(); ++j)
    if (!std::isfinite(v[j]) || v[j] < 0)
      return corrupt(where + ": entry '" + name + "', value " + std::to_string(j) + " is " + std::to_string(v[j]) +
                     " (an importance is a finite mean square, >= 0)");
  return Status::ok();
}

Result<ImatrixFile> read_legacy(const MappedFile& f) {
  ByteReader r(f.bytes(), f.path());
  ImatrixFile out;
  out.format = "dat";
  KILN_ASSIGN_OR_RETURN(int32_t n, r.read<int32_t>("entry count"));
  // Each entry takes at least 13 bytes: a count past that is damage, not an allocation to try.
  if (n <= 0 || static_cast<uint64_t>(n) > r.remaining() / 13)
    return r.error("entry count " + std::to_string(n) + " is not possible in a file of " + std::to_string(r.size()) + " bytes");
  for (int32_t e = 0; e < n; ++e) {
    KILN_ASSIGN_OR_RETURN(int32_t len, r.read<int32_t>("name length"));
    if (len <= 0 || len > 4096) return r.error("name length " + std::to_string(len) + " (1..4096)");
    KILN_ASSIGN_OR_RETURN(auto name_bytes, r.read_bytes(static_cast<uint64_t>(len), "name"));
    const std::string name(reinterpret_cast<const char*>(name_bytes.data()), name_bytes.size());
    KILN_ASSIGN_OR_RETURN(int32_t ncall, r.read<int32_t>("call count"));
    KILN_ASSIGN_OR_RETURN(int32_t nval, r.read<int32_t>("value count"));
    if (ncall <= 0) return r.error("entry '" + name + "': call count " + std::to_string(ncall) + " (must be > 0)");
    if (nval <= 0 || static_cast<uint64_t>(nval) > r.remaining() / 4)
      return r.error("entry '" + name + "': value count " + std::to_string(nval) + " does not fit in the file");
    KILN_ASSIGN_OR_RETURN(auto raw, r.read_bytes(uint64_t{4} * static_cast<uint64_t>(nval), "values"));
    std::vector<float> v(static_cast<size_t>(nval));
    std::memcpy(v.data(), raw.data(), raw.size());
    for (float& x : v) x /= static_cast<float>(ncall);  // stored as the mean times ncall
    KILN_RETURN_IF_ERROR(check_values(f.path(), name, v));
    if (!out.importance.emplace(name, std::move(v)).second) return r.error("entry '" + name + "' appears twice");
  }
  // The trailer is optional (older files end here).
  if (r.remaining() >= 4) {
    KILN_ASSIGN_OR_RETURN(int32_t chunks, r.read<int32_t>("chunk count"));
    out.chunks = chunks;
    if (r.remaining() >= 4) {
      KILN_ASSIGN_OR_RETURN(int32_t len, r.read<int32_t>("dataset name length"));
      if (len < 0 || static_cast<uint64_t>(len) > r.remaining()) return r.error("dataset name length " + std::to_string(len));
      KILN_ASSIGN_OR_RETURN(auto d, r.read_bytes(static_cast<uint64_t>(len), "dataset name"));
      out.dataset.assign(reinterpret_cast<const char*>(d.data()), d.size());
    }
  }
  if (r.remaining() != 0) return r.error(std::to_string(r.remaining()) + " bytes after the last field");
  return out;
}

Result<ImatrixFile> read_gguf_imatrix(const MappedFile& f) {
  // read_gguf keeps the map alive through a shared pointer; this one only lends the bytes.
  auto view = std::shared_ptr<const MappedFile>(std::shared_ptr<const MappedFile>{}, &f);
  KILN_ASSIGN_OR_RETURN(GgufFile g, read_gguf(view));
  ImatrixFile out;
  out.format = "gguf";
  if (const GgufValue* d = g.find("imatrix.datasets"); d && d->as_array() && !d->as_array()->strings.empty())
    out.dataset = d->as_array()->strings.front();
  if (const GgufValue* c = g.find("imatrix.chunk_count"); c && c->as_int()) out.chunks = *c->as_int();
  if (const GgufValue* c = g.find("imatrix.chunk_size"); c && c->as_int() && *c->as_int() > 0) out.chunk_size = *c->as_int();
  std::map<std::string, const TensorSource*> sums, counts;
  for (const TensorSource& t : g.tensors) {
    auto ends = [&](const std::string& suffix) {
      return t.name.size() > suffix.size() && t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (ends(".in_sum2")) sums[t.name.substr(0, t.name.size() - 8)] = &t;
    else if (ends(".counts")) counts[t.name.substr(0, t.name.size() - 7)] = &t;
    else return corrupt(f.path() + ": tensor '" + t.name + "' is neither NAME.in_sum2 nor NAME.counts: not an importance matrix");
  }
  if (sums.empty()) return corrupt(f.path() + ": no NAME.in_sum2 tensors: not an importance matrix");
  for (const auto& [name, s] : sums) {
    auto c = counts.find(name);
    if (c == counts.end()) return corrupt(f.path() + ": '" + name + ".in_sum2' has no '" + name + ".counts'");
    if (s->dtype != DType::kF32 || c->second->dtype != DType::kF32)
      return corrupt(f.path() + ": '" + name + "': the sums and counts must be f32");
    const int64_t n_mat = s->shape.size() == 2 ? s->shape[0] : 1;
    if (n_mat != 1 || c->second->elements() != 1)
      return unsupported(f.path() + ": '" + name + "' has " + std::to_string(n_mat) +
                         " expert matrices; kiln's models have one matrix per weight");
    float count = 0;
    std::memcpy(&count, c->second->bytes.data(), 4);
    if (!(count > 0)) return corrupt(f.path() + ": '" + name + ".counts' is " + std::to_string(count) + " (must be > 0)");
    std::vector<float> v(s->elements());
    if (s->bytes.size() != v.size() * 4) return corrupt(f.path() + ": '" + name + ".in_sum2' has the wrong byte size");
    std::memcpy(v.data(), s->bytes.data(), s->bytes.size());
    for (float& x : v) x /= count;
    KILN_RETURN_IF_ERROR(check_values(f.path(), name, v));
    out.importance.emplace(name, std::move(v));
  }
  for (const auto& [name, c] : counts)
    if (!sums.count(name)) return corrupt(f.path() + ": '" + name + ".counts' has no '" + name + ".in_sum2'");
  return out;
}

}  // namespace

Result<ImatrixFile> read_imatrix(const MappedFile& f) {
  const auto b = f.bytes();
  if (b.size() >= 4 && std::memcmp(b.data(), "GGUF", 4) == 0) return read_gguf_imatrix(f);
  return read_legacy(f);
}

Result<ImatrixFile> read_imatrix_file(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto f, MappedFile::open(path));
  return read_imatrix(*f);
}

}  // namespace kiln
