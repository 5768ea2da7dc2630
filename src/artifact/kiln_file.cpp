#include "artifact/kiln_file.h"

#include "core/temp_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <memory>
#include <new>
#include <numeric>

#include "core/byte_reader.h"
#include "core/utf8.h"

// The Debian library by default; a cross build without libxxhash may define KILN_XXHASH_INLINE
// to compile xxHash from its header alone.
#if defined(KILN_XXHASH_INLINE)
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

namespace kiln {

namespace {

constexpr uint64_t kMinTensorEntry = 4 + 4 + 4 + 8 + 8;  // name length, code, n_dims, offset, size
constexpr uint64_t kTensorTableHeader = 8;                // count, reserved

// Header field offsets (see kiln_file.h).
constexpr size_t kOffVersion = 8;
constexpr size_t kOffHeaderSize = 12;
constexpr size_t kOffWriter = 16;
constexpr size_t kOffBackend = 48;
constexpr size_t kOffFeatures = 80;
constexpr size_t kOffFeatureNames = 88;
constexpr size_t kOffSectionCount = 216;
constexpr size_t kOffReserved = 220;
constexpr size_t kOffFileSize = 224;
static_assert(kOffFileSize + 8 == kKilnHeaderSize);
static_assert(kOffFeatureNames + kKilnFeatureNamesField == kOffSectionCount);

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

uint64_t section_alignment(uint32_t kind) {
  return kind == static_cast<uint32_t>(KilnSection::kWeights) ? kKilnWeightsAlignment : kKilnSectionAlignment;
}

std::string hex(uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s = "0x";
  for (int i = 60; i >= 0; i -= 4) s += digits[(v >> i) & 0xf];
  return s;
}

// "avx2,fma" -> {"avx2", "fma"}; the count must match the set bits of `bits`.
Result<std::vector<std::string>> split_feature_names(std::string_view names, uint64_t bits) {
  std::vector<std::string> out;
  if (!names.empty()) {
    size_t start = 0;
    while (true) {
      size_t comma = names.find(',', start);
      std::string_view part = names.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
      if (part.empty()) return invalid_argument("CPU feature names '" + std::string(names) + "' contain an empty name");
      out.emplace_back(part);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
  }
  const int n_bits = std::popcount(bits);
  if (out.size() != static_cast<size_t>(n_bits))
    return invalid_argument("CPU feature names '" + std::string(names) + "' give " + std::to_string(out.size()) +
                            " names for " + std::to_string(n_bits) + " feature bits (" + hex(bits) +
                            "): one name per set bit is needed");
  return out;
}

// ---------------------------------------------------------------------------------------------
// Writing

// Zeros up to `offset`, hashed into `hash` when given.
Status pad_to(TempFile& f, uint64_t offset, XXH3_state_t* hash) {
  static const uint8_t zeros[4096] = {};
  while (f.pos() < offset) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(offset - f.pos(), sizeof zeros));
    if (hash != nullptr) XXH3_64bits_update(hash, zeros, n);
    KILN_RETURN_IF_ERROR(f.write(zeros, n));
  }
  return Status::ok();
}

struct Xxh3Deleter {
  void operator()(XXH3_state_t* s) const { XXH3_freeState(s); }
};

void put_u32(std::vector<uint8_t>& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
void put_u64(std::vector<uint8_t>& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }
void append_u32(std::vector<uint8_t>& b, uint32_t v) {
  b.resize(b.size() + 4);
  put_u32(b, b.size() - 4, v);
}
void append_u64(std::vector<uint8_t>& b, uint64_t v) {
  b.resize(b.size() + 8);
  put_u64(b, b.size() - 8, v);
}

Status check_fixed_string(const std::string& s, size_t field, const char* what, bool non_empty) {
  if (non_empty && s.empty()) return invalid_argument(std::string(what) + " is empty");
  if (s.size() >= field)
    return invalid_argument(std::string(what) + " '" + s + "' is " + std::to_string(s.size()) + " bytes, at most " +
                            std::to_string(field - 1) + " fit");
  if (s.find('\0') != std::string::npos) return invalid_argument(std::string(what) + " contains a NUL byte");
  if (!is_valid_utf8(s)) return invalid_argument(std::string(what) + " is not valid UTF-8");
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// Reading

// A NUL-padded fixed field: the text before the first NUL, zeros after it.
Result<std::string> read_fixed_string(std::span<const uint8_t> header, size_t at, size_t field, const char* what,
                                      const std::string& path) {
  auto f = header.subspan(at, field);
  auto nul = std::find(f.begin(), f.end(), uint8_t{0});
  auto where = [&](const std::string& m) {
    return corrupt(path + ": offset " + std::to_string(at) + ": " + what + " " + m);
  };
  if (nul == f.end()) return where("is not NUL-terminated");
  if (std::any_of(nul, f.end(), [](uint8_t c) { return c != 0; })) return where("has bytes after its NUL padding");
  std::string s(reinterpret_cast<const char*>(f.data()), static_cast<size_t>(nul - f.begin()));
  if (!is_valid_utf8(s)) return where("is not valid UTF-8");
  return s;
}

template <typename T>
T load(std::span<const uint8_t> b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof(T));
  return v;
}

}  // namespace

std::string kiln_section_name(uint32_t kind) {
  switch (static_cast<KilnSection>(kind)) {
    case KilnSection::kConfig: return "config";
    case KilnSection::kTokenizer: return "tokenizer";
    case KilnSection::kProgram: return "program";
    case KilnSection::kMemoryPlan: return "memory plan";
    case KilnSection::kQuantRecord: return "quantization record";
    case KilnSection::kTensorTable: return "tensor table";
    case KilnSection::kWeights: return "weights";
    case KilnSection::kConformance: return "conformance";
    case KilnSection::kSource: return "source";
  }
  return "kind " + std::to_string(kind);
}

uint64_t kiln_checksum(std::span<const uint8_t> bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

// ---------------------------------------------------------------------------------------------
// KilnWriter

KilnWriter::KilnWriter(KilnTarget target, std::string writer_version)
    : target_(std::move(target)), writer_version_(std::move(writer_version)) {}

Status KilnWriter::remember(Status st) {
  if (!st.is_ok() && first_error_.is_ok()) first_error_ = st;
  return st;
}

Status KilnWriter::add_section(KilnSection kind, std::vector<uint8_t> bytes) {
  const auto k = static_cast<uint32_t>(kind);
  if (k == 0) return remember(invalid_argument("section kind 0 is reserved"));
  if (kind == KilnSection::kTensorTable || kind == KilnSection::kWeights)
    return remember(invalid_argument("the " + kiln_section_name(k) +
                                     " section is written from add_tensor calls, not added directly"));
  for (const auto& s : sections_)
    if (s.first == k) return remember(invalid_argument("the " + kiln_section_name(k) + " section was added twice"));
  if (sections_.size() + 1 + 2 > kKilnMaxSections)  // 2: the tensor table and the weights
    return remember(invalid_argument("more than " + std::to_string(kKilnMaxSections) + " sections"));
  sections_.emplace_back(k, std::move(bytes));
  return Status::ok();
}

Status KilnWriter::check_tensor(const std::string& name, const std::vector<int64_t>& dims) {
  const std::string where = "tensor '" + name + "'";
  if (name.empty()) return invalid_argument("a tensor has an empty name");
  if (name.size() > kKilnMaxTensorName)
    return invalid_argument(where + ": name is longer than " + std::to_string(kKilnMaxTensorName) + " bytes");
  if (!is_valid_utf8(name)) return invalid_argument("a tensor name is not valid UTF-8");
  if (tensor_index_.count(name)) return invalid_argument(where + " was added twice");
  if (dims.size() > kKilnMaxDims)
    return invalid_argument(where + ": " + std::to_string(dims.size()) + " dimensions, at most " +
                            std::to_string(kKilnMaxDims));
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return invalid_argument(where + ": negative dimension " + std::to_string(d));
    if (__builtin_mul_overflow(n, d, &n)) return invalid_argument(where + ": element count overflows");
  }
  return Status::ok();
}

Status KilnWriter::add_tensor(std::string name, uint32_t code, std::vector<int64_t> dims, std::vector<uint8_t> bytes) {
  KILN_RETURN_IF_ERROR(remember(check_tensor(name, dims)));
  PendingTensor t;
  t.name = std::move(name);
  t.code = code;
  t.dims = std::move(dims);
  t.size = bytes.size();
  t.bytes = std::move(bytes);
  tensor_index_.emplace(t.name, tensors_.size());
  tensors_.push_back(std::move(t));
  return Status::ok();
}

Status KilnWriter::add_tensor(std::string name, uint32_t code, std::vector<int64_t> dims, uint64_t size,
                              KilnFillFn fill) {
  KILN_RETURN_IF_ERROR(remember(check_tensor(name, dims)));
  if (!fill) return remember(invalid_argument("tensor '" + name + "': no fill function"));
  PendingTensor t;
  t.name = std::move(name);
  t.code = code;
  t.dims = std::move(dims);
  t.size = size;
  t.fill = std::move(fill);
  tensor_index_.emplace(t.name, tensors_.size());
  tensors_.push_back(std::move(t));
  return Status::ok();
}

Status KilnWriter::write(const std::string& path, const std::function<void(double)>& progress) const {
  auto fail = [&](const Status& st) { return st.with_context(path + ": cannot write"); };
  if (!first_error_.is_ok()) return fail(first_error_);
  KILN_RETURN_IF_ERROR(fail(check_fixed_string(writer_version_, kKilnWriterVersionField, "writer version", false)));
  KILN_RETURN_IF_ERROR(fail(check_fixed_string(target_.backend, kKilnBackendField, "target back end", true)));
  KILN_RETURN_IF_ERROR(
      fail(check_fixed_string(target_.cpu_feature_names, kKilnFeatureNamesField, "CPU feature names", false)));
  if (auto names = split_feature_names(target_.cpu_feature_names, target_.cpu_features); !names)
    return fail(names.status());

  // Layout: the added sections in kind order, then the tensor table and the weights.
  struct Planned {
    uint32_t kind;
    const std::vector<uint8_t>* bytes;  // null for the weights (streamed)
    uint64_t offset = 0;
    uint64_t size = 0;
    uint64_t checksum = 0;
  };
  std::vector<Planned> plan;
  for (const auto& s : sections_) plan.push_back({s.first, &s.second});
  std::sort(plan.begin(), plan.end(), [](const Planned& a, const Planned& b) { return a.kind < b.kind; });

  std::vector<uint64_t> tensor_offsets(tensors_.size());
  uint64_t weights_size = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const uint64_t at = align_up(weights_size, kKilnTensorAlignment);
    if (at < weights_size || tensors_[i].size > UINT64_MAX / 2 - at)
      return fail(invalid_argument("tensor '" + tensors_[i].name + "': the weights exceed 2^63 bytes"));
    tensor_offsets[i] = at;
    weights_size = at + tensors_[i].size;
  }
  if (tensors_.size() > UINT32_MAX) return fail(invalid_argument("more than 2^32 tensors"));
  std::vector<uint8_t> table;
  if (!tensors_.empty()) {
    append_u32(table, static_cast<uint32_t>(tensors_.size()));
    append_u32(table, 0);
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const PendingTensor& t = tensors_[i];
      append_u32(table, static_cast<uint32_t>(t.name.size()));
      table.insert(table.end(), t.name.begin(), t.name.end());
      append_u32(table, t.code);
      append_u32(table, static_cast<uint32_t>(t.dims.size()));
      for (int64_t d : t.dims) append_u64(table, static_cast<uint64_t>(d));
      append_u64(table, tensor_offsets[i]);
      append_u64(table, t.size);
    }
    plan.push_back({static_cast<uint32_t>(KilnSection::kTensorTable), &table});
    plan.push_back({static_cast<uint32_t>(KilnSection::kWeights), nullptr});
  }
  const uint64_t table_end = kKilnHeaderSize + uint64_t{kKilnSectionEntrySize} * plan.size();
  uint64_t cursor = table_end + 8;
  for (Planned& p : plan) {
    p.size = p.bytes != nullptr ? p.bytes->size() : weights_size;
    p.offset = align_up(cursor, section_alignment(p.kind));
    cursor = p.offset + p.size;
  }
  const uint64_t file_size = cursor;

  auto report = [&](uint64_t pos) {
    if (progress) progress(file_size == 0 ? 1.0 : std::min(1.0, static_cast<double>(pos) / static_cast<double>(file_size)));
  };
  if (progress) progress(0.0);

  TempFile tmp;
  KILN_RETURN_IF_ERROR(fail(tmp.create(path)));
  std::unique_ptr<XXH3_state_t, Xxh3Deleter> hash(XXH3_createState());
  if (!hash) return fail(io_error("out of memory for the checksum state"));
  for (Planned& p : plan) {
    KILN_RETURN_IF_ERROR(fail(pad_to(tmp, p.offset, nullptr)));
    if (p.bytes != nullptr) {
      p.checksum = kiln_checksum(*p.bytes);
      KILN_RETURN_IF_ERROR(fail(tmp.write(p.bytes->data(), p.bytes->size())));
      report(tmp.pos());
      continue;
    }
    // The weights: one tensor at a time, hashed as they go.
    XXH3_64bits_reset(hash.get());
    std::vector<uint8_t> filled;  // reused from tensor to tensor
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const PendingTensor& t = tensors_[i];
      KILN_RETURN_IF_ERROR(fail(pad_to(tmp, p.offset + tensor_offsets[i], hash.get())));
      std::span<const uint8_t> bytes = t.bytes;
      if (t.fill) {
        const std::string no_memory = "tensor '" + t.name + "': no memory for its " + std::to_string(t.size) + " bytes";
        if (t.size > SIZE_MAX) return fail(invalid_argument(no_memory));
        try {  // the size is the caller's, and may be more than this machine has
          filled.assign(static_cast<size_t>(t.size), 0);
        } catch (const std::bad_alloc&) {
          return fail(invalid_argument(no_memory));
        }
        Status st = t.fill(std::span<uint8_t>(filled));
        if (!st.is_ok()) return fail(st.with_context("tensor '" + t.name + "'"));
        bytes = filled;
      }
      XXH3_64bits_update(hash.get(), bytes.data(), bytes.size());
      KILN_RETURN_IF_ERROR(fail(tmp.write(bytes.data(), bytes.size())));
      report(tmp.pos());
    }
    p.checksum = XXH3_64bits_digest(hash.get());
  }
  if (tmp.pos() != file_size) return fail(Status(StatusCode::kInternal, "wrote " + std::to_string(tmp.pos()) +
                                                                             " bytes, planned " + std::to_string(file_size)));

  std::vector<uint8_t> header(table_end + 8, 0);
  std::memcpy(header.data(), kKilnMagic, sizeof kKilnMagic);
  put_u32(header, kOffVersion, kKilnFormatVersion);
  put_u32(header, kOffHeaderSize, kKilnHeaderSize);
  std::memcpy(header.data() + kOffWriter, writer_version_.data(), writer_version_.size());
  std::memcpy(header.data() + kOffBackend, target_.backend.data(), target_.backend.size());
  put_u64(header, kOffFeatures, target_.cpu_features);
  std::memcpy(header.data() + kOffFeatureNames, target_.cpu_feature_names.data(), target_.cpu_feature_names.size());
  put_u32(header, kOffSectionCount, static_cast<uint32_t>(plan.size()));
  put_u32(header, kOffReserved, 0);
  put_u64(header, kOffFileSize, file_size);
  for (size_t i = 0; i < plan.size(); ++i) {
    const size_t at = kKilnHeaderSize + i * kKilnSectionEntrySize;
    put_u32(header, at, plan[i].kind);
    put_u32(header, at + 4, 0);
    put_u64(header, at + 8, plan[i].offset);
    put_u64(header, at + 16, plan[i].size);
    put_u64(header, at + 24, plan[i].checksum);
  }
  put_u64(header, table_end, kiln_checksum(std::span<const uint8_t>(header).first(table_end)));
  KILN_RETURN_IF_ERROR(fail(tmp.pwrite_at(0, header)));
  KILN_RETURN_IF_ERROR(fail(tmp.commit(path)));
  if (progress) progress(1.0);
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// KilnFile

const KilnSectionInfo* KilnFile::find_section(uint32_t kind) const {
  for (const auto& s : sections_)
    if (s.kind == kind) return &s;
  return nullptr;
}

std::span<const uint8_t> KilnFile::section(KilnSection kind) const {
  const KilnSectionInfo* s = find_section(static_cast<uint32_t>(kind));
  if (s == nullptr) return {};
  return file_->bytes().subspan(static_cast<size_t>(s->offset), static_cast<size_t>(s->size));
}

const KilnTensor* KilnFile::tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Status KilnFile::verify_section(const KilnSectionInfo& s) const {
  auto bytes = file_->bytes().subspan(static_cast<size_t>(s.offset), static_cast<size_t>(s.size));
  const uint64_t got = kiln_checksum(bytes);
  if (got != s.checksum)
    return corrupt(path() + ": section '" + kiln_section_name(s.kind) + "' (offset " + std::to_string(s.offset) + ", " +
                   std::to_string(s.size) + " bytes): checksum mismatch (stored " + hex(s.checksum) + ", computed " +
                   hex(got) + "): the file is damaged; copy it again or recompile it with `kiln compile`");
  return Status::ok();
}

Status KilnFile::verify() const {
  for (const auto& s : sections_) KILN_RETURN_IF_ERROR(verify_section(s));
  return Status::ok();
}

Status KilnFile::parse_tensor_table() {
  const KilnSectionInfo* ts = find_section(static_cast<uint32_t>(KilnSection::kTensorTable));
  if (ts == nullptr) return Status::ok();
  const KilnSectionInfo* ws = find_section(static_cast<uint32_t>(KilnSection::kWeights));
  const std::string place = path() + ": section 'tensor table'";
  ByteReader r(section(KilnSection::kTensorTable), place);
  KILN_ASSIGN_OR_RETURN(uint32_t count, r.read<uint32_t>("tensor count"));
  KILN_ASSIGN_OR_RETURN(uint32_t reserved, r.read<uint32_t>("reserved field"));
  if (reserved != 0) return r.error_at(4, "reserved field is " + std::to_string(reserved) + ", not 0");
  if (count > r.remaining() / kMinTensorEntry)
    return r.error_at(0, "tensor count " + std::to_string(count) + " exceeds the section (" +
                             std::to_string(r.size()) + " bytes)");
  if (count > 0 && ws == nullptr) return corrupt(place + ": " + std::to_string(count) + " tensors but no weights section");
  const uint64_t weights_size = ws != nullptr ? ws->size : 0;
  auto weights = section(KilnSection::kWeights);

  tensors_.reserve(count);
  tensor_index_.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    const size_t entry_at = r.offset();
    KILN_ASSIGN_OR_RETURN(uint32_t name_len, r.read<uint32_t>("tensor name length"));
    if (name_len == 0) return r.error_at(entry_at, "tensor " + std::to_string(i) + " has an empty name");
    if (name_len > kKilnMaxTensorName)
      return r.error_at(entry_at, "tensor " + std::to_string(i) + " name length " + std::to_string(name_len) +
                                      " exceeds " + std::to_string(kKilnMaxTensorName));
    KILN_ASSIGN_OR_RETURN(auto name_bytes, r.read_bytes(name_len, "tensor name"));
    std::string_view name(reinterpret_cast<const char*>(name_bytes.data()), name_bytes.size());
    if (!is_valid_utf8(name)) return r.error_at(entry_at + 4, "tensor " + std::to_string(i) + " name is not valid UTF-8");
    const std::string where = place + ": tensor '" + std::string(name) + "'";
    KilnTensor t;
    t.name = std::string(name);
    KILN_ASSIGN_OR_RETURN(t.code, r.read<uint32_t>("tensor code"));
    KILN_ASSIGN_OR_RETURN(uint32_t n_dims, r.read<uint32_t>("tensor dimension count"));
    if (n_dims > kKilnMaxDims)
      return corrupt(where + ": " + std::to_string(n_dims) + " dimensions, at most " + std::to_string(kKilnMaxDims));
    t.dims.resize(n_dims);
    int64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      KILN_ASSIGN_OR_RETURN(t.dims[d], r.read<int64_t>("tensor dimension"));
      if (t.dims[d] < 0) return corrupt(where + ": dimension " + std::to_string(d) + " is negative (" +
                                        std::to_string(t.dims[d]) + ")");
      if (__builtin_mul_overflow(elements, t.dims[d], &elements))
        return corrupt(where + ": element count overflows");
    }
    KILN_ASSIGN_OR_RETURN(t.offset, r.read<uint64_t>("tensor offset"));
    KILN_ASSIGN_OR_RETURN(uint64_t size, r.read<uint64_t>("tensor size"));
    if (t.offset % kKilnTensorAlignment != 0)
      return corrupt(where + ": offset " + std::to_string(t.offset) + " is not a multiple of " +
                     std::to_string(kKilnTensorAlignment));
    if (t.offset > weights_size || size > weights_size - t.offset)
      return corrupt(where + ": bytes [" + std::to_string(t.offset) + ", +" + std::to_string(size) +
                     ") lie outside the weights section (" + std::to_string(weights_size) + " bytes)");
    t.bytes = weights.subspan(static_cast<size_t>(t.offset), static_cast<size_t>(size));
    if (!tensor_index_.emplace(name, tensors_.size()).second) return corrupt(where + " appears twice");
    tensors_.push_back(std::move(t));
  }
  if (r.remaining() != 0)
    return r.error(std::to_string(r.remaining()) + " bytes after the last tensor entry");

  std::vector<size_t> order(tensors_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto& x = tensors_[a];
    const auto& y = tensors_[b];
    return x.offset != y.offset ? x.offset < y.offset : x.bytes.size() < y.bytes.size();
  });
  for (size_t k = 1; k < order.size(); ++k) {
    const KilnTensor& prev = tensors_[order[k - 1]];
    const KilnTensor& cur = tensors_[order[k]];
    if (prev.offset + prev.bytes.size() > cur.offset)
      return corrupt(place + ": tensors '" + prev.name + "' [" + std::to_string(prev.offset) + ", +" +
                     std::to_string(prev.bytes.size()) + ") and '" + cur.name + "' [" + std::to_string(cur.offset) +
                     ", +" + std::to_string(cur.bytes.size()) + ") overlap");
  }
  return Status::ok();
}

Result<std::shared_ptr<const KilnFile>> open_kiln(const std::string& path, const KilnOpenOptions& options) {
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  return open_kiln_bytes(std::move(file), options);
}

Result<std::shared_ptr<const KilnFile>> open_kiln_bytes(std::shared_ptr<const MappedFile> file,
                                                        const KilnOpenOptions& options) {
  if (!file) return invalid_argument("open_kiln_bytes: no file");
  const std::string& path = file->path();
  const auto bytes = file->bytes();
  ByteReader r(bytes, path);

  if (bytes.size() < sizeof kKilnMagic || std::memcmp(bytes.data(), kKilnMagic, sizeof kKilnMagic) != 0)
    return r.error_at(0, "not a .kiln file (bad magic)");
  KILN_RETURN_IF_ERROR(r.seek(kOffVersion));
  KILN_ASSIGN_OR_RETURN(uint32_t version, r.read<uint32_t>("format version"));
  if (version != kKilnFormatVersion && !(options.accept_older_versions && version < kKilnFormatVersion))
    return unsupported(path + ": format version " + std::to_string(version) + ", this kiln reads " +
                       std::to_string(kKilnFormatVersion) + ": recompile it with `kiln compile`");
  if (bytes.size() < kKilnHeaderSize)
    return r.error_at(0, "truncated: " + std::to_string(bytes.size()) + " bytes, the header alone needs " +
                             std::to_string(kKilnHeaderSize));
  const uint32_t header_size = load<uint32_t>(bytes, kOffHeaderSize);
  if (header_size != kKilnHeaderSize)
    return r.error_at(kOffHeaderSize, "header size " + std::to_string(header_size) + ", version " +
                                          std::to_string(kKilnFormatVersion) + " has " + std::to_string(kKilnHeaderSize));
  const uint32_t n_sections = load<uint32_t>(bytes, kOffSectionCount);
  if (n_sections > kKilnMaxSections)
    return r.error_at(kOffSectionCount, "section count " + std::to_string(n_sections) + " exceeds " +
                                            std::to_string(kKilnMaxSections));
  const uint64_t file_size = load<uint64_t>(bytes, kOffFileSize);
  if (file_size != bytes.size())
    return r.error_at(kOffFileSize, file_size > bytes.size()
                                        ? "truncated: the header says " + std::to_string(file_size) +
                                              " bytes, the file has " + std::to_string(bytes.size())
                                        : "the header says " + std::to_string(file_size) + " bytes, the file has " +
                                              std::to_string(bytes.size()) + " (trailing bytes)");
  const uint64_t table_end = kKilnHeaderSize + uint64_t{kKilnSectionEntrySize} * n_sections;
  const uint64_t data_start = table_end + 8;
  if (data_start > bytes.size())
    return r.error_at(kKilnHeaderSize, "truncated: the section table of " + std::to_string(n_sections) +
                                           " entries runs past the end of the file");
  const uint64_t stored = load<uint64_t>(bytes, table_end);
  const uint64_t computed = kiln_checksum(bytes.first(table_end));
  if (stored != computed)
    return r.error_at(table_end, "header checksum mismatch (stored " + hex(stored) + ", computed " + hex(computed) +
                                     "): the file is damaged; copy it again or recompile it with `kiln compile`");

  std::shared_ptr<KilnFile> k(new KilnFile());
  k->file_ = file;
  k->format_version_ = version;
  KILN_ASSIGN_OR_RETURN(k->writer_version_,
                        read_fixed_string(bytes, kOffWriter, kKilnWriterVersionField, "writer version", path));
  KILN_ASSIGN_OR_RETURN(k->target_.backend,
                        read_fixed_string(bytes, kOffBackend, kKilnBackendField, "target back end", path));
  if (k->target_.backend.empty()) return r.error_at(kOffBackend, "target back end is empty");
  k->target_.cpu_features = load<uint64_t>(bytes, kOffFeatures);
  KILN_ASSIGN_OR_RETURN(k->target_.cpu_feature_names, read_fixed_string(bytes, kOffFeatureNames, kKilnFeatureNamesField,
                                                                        "CPU feature names", path));
  auto names = split_feature_names(k->target_.cpu_feature_names, k->target_.cpu_features);
  if (!names) return r.error_at(kOffFeatureNames, names.status().message());
  if (uint32_t reserved = load<uint32_t>(bytes, kOffReserved); reserved != 0)
    return r.error_at(kOffReserved, "reserved field is " + std::to_string(reserved) + ", not 0");

  if (options.check_target) {
    const KilnTarget& t = k->target_;
    if (!options.host_backends.empty() &&
        std::find(options.host_backends.begin(), options.host_backends.end(), t.backend) == options.host_backends.end()) {
      std::string have;
      for (const auto& b : options.host_backends) have += (have.empty() ? "" : ", ") + b;
      return unsupported(path + ": compiled for the back end '" + t.backend + "', this kiln has " + have +
                         ": recompile it with `kiln compile --target native`");
    }
    const uint64_t missing = t.cpu_features & ~options.host_cpu_features;
    if (missing != 0) {
      std::string list;
      size_t name_index = 0;
      for (int bit = 0; bit < 64; ++bit) {
        if (((t.cpu_features >> bit) & 1) == 0) continue;
        if ((missing >> bit) & 1) list += (list.empty() ? "" : ", ") + (*names)[name_index];
        ++name_index;
      }
      return unsupported(path + ": compiled for CPU features this machine lacks (" + list +
                         "): recompile it with `kiln compile --target native`, or with the default target "
                         "(auto), which runs on every CPU");
    }
  }

  k->sections_.reserve(n_sections);
  for (uint32_t i = 0; i < n_sections; ++i) {
    const size_t at = kKilnHeaderSize + size_t{i} * kKilnSectionEntrySize;
    KilnSectionInfo s;
    s.kind = load<uint32_t>(bytes, at);
    s.flags = load<uint32_t>(bytes, at + 4);
    s.offset = load<uint64_t>(bytes, at + 8);
    s.size = load<uint64_t>(bytes, at + 16);
    s.checksum = load<uint64_t>(bytes, at + 24);
    const std::string where = path + ": section table entry " + std::to_string(i) + " (offset " + std::to_string(at) +
                              ", section '" + kiln_section_name(s.kind) + "')";
    if (s.kind == 0) return corrupt(where + ": kind 0 is reserved");
    if (s.flags != 0) return corrupt(where + ": flags " + hex(s.flags) + ", version 1 defines none");
    if (k->find_section(s.kind) != nullptr) return corrupt(where + ": a second section of this kind");
    const uint64_t align = section_alignment(s.kind);
    if (s.offset % align != 0)
      return corrupt(where + ": offset " + std::to_string(s.offset) + " is not a multiple of " + std::to_string(align));
    if (s.offset < data_start)
      return corrupt(where + ": offset " + std::to_string(s.offset) + " lies inside the header (which ends at " +
                     std::to_string(data_start) + ")");
    if (s.offset > bytes.size() || s.size > bytes.size() - s.offset)
      return corrupt(where + ": bytes [" + std::to_string(s.offset) + ", +" + std::to_string(s.size) +
                     ") run past the end of the file (" + std::to_string(bytes.size()) + " bytes)");
    k->sections_.push_back(s);
  }
  std::vector<KilnSectionInfo> by_offset = k->sections_;
  std::sort(by_offset.begin(), by_offset.end(), [](const KilnSectionInfo& a, const KilnSectionInfo& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.size < b.size;
  });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const auto& a = by_offset[i - 1];
    const auto& b = by_offset[i];
    if (a.offset + a.size > b.offset)
      return corrupt(path + ": sections '" + kiln_section_name(a.kind) + "' [" + std::to_string(a.offset) + ", +" +
                     std::to_string(a.size) + ") and '" + kiln_section_name(b.kind) + "' [" + std::to_string(b.offset) +
                     ", +" + std::to_string(b.size) + ") overlap");
  }
  // The bytes no checksum covers (padding before, between and after the sections) must be
  // zero, so that every byte of the file is checked. A file from KilnWriter has less than
  // 16 KiB of padding before each section, so this reads little.
  uint64_t gap_start = data_start;
  for (size_t i = 0; i <= by_offset.size(); ++i) {
    const uint64_t gap_end = i < by_offset.size() ? by_offset[i].offset : bytes.size();
    for (uint64_t p = gap_start; p < gap_end; ++p)
      if (bytes[static_cast<size_t>(p)] != 0)
        return r.error_at(static_cast<size_t>(p), "padding byte is " + std::to_string(bytes[static_cast<size_t>(p)]) +
                                                      ", not 0: the file is damaged");
    if (i < by_offset.size()) gap_start = by_offset[i].offset + by_offset[i].size;
  }

  // Every section but the weights is small and read at open anyway: check it now. The weights
  // are checked only on request, so that opening does not read them.
  for (const auto& s : k->sections_)
    if (options.verify_checksums || s.kind != static_cast<uint32_t>(KilnSection::kWeights))
      KILN_RETURN_IF_ERROR(k->verify_section(s));
  KILN_RETURN_IF_ERROR(k->parse_tensor_table());
  return std::shared_ptr<const KilnFile>(std::move(k));
}

}  // namespace kiln
