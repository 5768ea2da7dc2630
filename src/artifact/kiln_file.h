// The .kiln container: a header, a section table, sections of opaque bytes, and inside one
// section a table of named, 128-byte-aligned tensors. It knows bytes, not math: what a section
// or a tensor's code means is the compiler's and the runtime's business.
//
// On-disk layout, format version 1 (all integers little-endian, no implicit padding):
//
//   offset size  field
//   0      8     magic "KILN\r\n\x1a\n" (the CR/LF/^Z catch text-mode transfers, as PNG's do)
//   8      4     u32 format_version (kKilnFormatVersion)
//   12     4     u32 header_size (kKilnHeaderSize = 232: bytes before the section table)
//   16     32    writer version, UTF-8, NUL-padded (at least one NUL), e.g. "kiln 0.1.0"
//   48     32    target back end, UTF-8, NUL-padded, non-empty, e.g. "cpu"
//   80     8     u64 CPU feature bits the kernels need (opaque here; the caller defines the bits)
//   88     128   CPU feature names, NUL-padded: comma-separated, exactly one name per set bit
//                in ascending bit order (so a missing bit can be named), e.g. "avx2,fma"
//   216    4     u32 section count (at most kKilnMaxSections)
//   220    4     u32 reserved, 0
//   224    8     u64 file size (the whole file; a truncated copy fails here)
//   232    32*n  section table, n entries of
//                  u32 kind (KilnSection), u32 flags (0 in version 1),
//                  u64 offset (from the start of the file), u64 size,
//                  u64 checksum (XXH3_64bits of the section's bytes)
//   232+32n 8    u64 XXH3_64bits of bytes [0, 232+32n): the header and the table
//   ...          zero padding; then the sections, each starting at a multiple of 128 and the
//                weights section at a multiple of 16384 (a page on 4K and 16K-page systems, e.g.
//                ARM64 Android), not overlapping, the added sections in kind order (a kind
//                added later, as conformance, before the tensor table), the weights last, zero
//                padding between them, the file ending where the last section ends. Readers
//                require every byte outside the header and the sections to be zero, so that
//                a flipped byte anywhere in the file is caught.
//
// Tensor table section (kTensorTable):
//   u32 tensor count, u32 reserved (0), then per tensor, packed:
//     u32 name length, name bytes (UTF-8, non-empty, unique), u32 code (dtype/layout, opaque),
//     u32 n_dims (<= kKilnMaxDims), i64 dims[n_dims] (each >= 0, product fits in 63 bits),
//     u64 offset (from the start of the weights section, a multiple of 128), u64 size.
//   Tensors lie inside the weights section and do not overlap; the writer places them in
//   insertion order with zero padding between them.
//
// Writing: the file is written to `<path>.tmp.<pid>.<n>` in the same folder, fsync'ed and
// renamed onto `path`, so `path` holds either the old file or the complete new one, never part
// of one. A process killed mid-write leaves no new file at `path`, but may leave its stale temp
// file behind (nothing can delete it then); a failed write removes its temp file. The same
// sections and tensors (and fill callbacks that write the same bytes) give the same file: no
// timestamps, no pointers, zero padding.
//
// Reading: open_kiln maps the file read-only and checks the header, the table, the bounds and
// alignment of every section and tensor, the checksums of every section except the weights, and
// the target; it does not read the weights (a cold start is a map and a check). The weights are
// used in place, from the map. verify() (or KilnOpenOptions::verify_checksums) also checks the
// weights' checksum, which reads every page of the file.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/mapped_file.h"
#include "core/status.h"

namespace kiln {

inline constexpr uint32_t kKilnFormatVersion = 1;
inline constexpr uint8_t kKilnMagic[8] = {'K', 'I', 'L', 'N', '\r', '\n', 0x1a, '\n'};
inline constexpr uint32_t kKilnHeaderSize = 232;
inline constexpr uint32_t kKilnSectionEntrySize = 32;
inline constexpr uint32_t kKilnMaxSections = 64;
inline constexpr uint64_t kKilnSectionAlignment = 128;
inline constexpr uint64_t kKilnTensorAlignment = 128;
inline constexpr uint64_t kKilnWeightsAlignment = 16384;
inline constexpr uint32_t kKilnMaxDims = 8;
inline constexpr uint32_t kKilnMaxTensorName = 4096;
inline constexpr size_t kKilnWriterVersionField = 32;
inline constexpr size_t kKilnBackendField = 32;
inline constexpr size_t kKilnFeatureNamesField = 128;

// Section kinds. The values are on disk: never renumber, only add.
enum class KilnSection : uint32_t {
  kConfig = 1,
  kTokenizer = 2,
  kProgram = 3,
  kMemoryPlan = 4,
  kQuantRecord = 5,
  kTensorTable = 6,  // written by KilnWriter from add_tensor calls
  kWeights = 7,      // written by KilnWriter from add_tensor calls
  kConformance = 8,  // optional: the compiled program against the float one (conformance_section.h)
  kSource = 9,       // optional: the source model and the compile request (source_section.h)
};

// "config", "tokenizer", ..., or "kind N" for a kind this build does not name.
std::string kiln_section_name(uint32_t kind);
inline std::string kiln_section_name(KilnSection kind) { return kiln_section_name(static_cast<uint32_t>(kind)); }

// The checksum used throughout the file (XXH3_64bits).
uint64_t kiln_checksum(std::span<const uint8_t> bytes);

struct KilnTarget {
  std::string backend;            // e.g. "cpu"
  uint64_t cpu_features = 0;      // bits the kernels need; their meaning is the caller's
  std::string cpu_feature_names;  // one name per set bit, ascending bit order: "avx2,fma"
};

// Fills a tensor's bytes at write time; the span arrives zeroed and has exactly the declared size.
using KilnFillFn = std::function<Status(std::span<uint8_t>)>;

class KilnWriter {
 public:
  KilnWriter(KilnTarget target, std::string writer_version);

  // One section of each kind, any kind but kTensorTable and kWeights (those come from add_tensor).
  Status add_section(KilnSection kind, std::vector<uint8_t> bytes);

  // A tensor whose bytes are copied now.
  Status add_tensor(std::string name, uint32_t code, std::vector<int64_t> dims, std::vector<uint8_t> bytes);
  // A tensor of `size` bytes produced by `fill` during write(), one tensor at a time, so that a
  // large model is not held twice in memory. An error from `fill` fails the write.
  Status add_tensor(std::string name, uint32_t code, std::vector<int64_t> dims, uint64_t size, KilnFillFn fill);

  // Writes the file (see the top of this header). An error from an earlier add_* call is
  // returned here too, so that a caller who ignored it does not get a file missing a part.
  // `progress` receives the fraction of bytes written, from 0 to 1.
  Status write(const std::string& path, const std::function<void(double)>& progress = {}) const;

 private:
  struct PendingTensor {
    std::string name;
    uint32_t code = 0;
    std::vector<int64_t> dims;
    uint64_t size = 0;
    std::vector<uint8_t> bytes;  // when copied
    KilnFillFn fill;             // when filled at write time
  };
  Status check_tensor(const std::string& name, const std::vector<int64_t>& dims);
  Status remember(Status st);

  KilnTarget target_;
  std::string writer_version_;
  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> sections_;
  std::vector<PendingTensor> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
  Status first_error_;
};

struct KilnSectionInfo {
  uint32_t kind = 0;
  uint32_t flags = 0;
  uint64_t offset = 0;  // from the start of the file
  uint64_t size = 0;
  uint64_t checksum = 0;
};

struct KilnTensor {
  std::string name;
  uint32_t code = 0;
  std::vector<int64_t> dims;
  uint64_t offset = 0;              // within the weights section
  std::span<const uint8_t> bytes;   // in the map, never copied
};

struct KilnOpenOptions {
  bool verify_checksums = false;        // also check the weights' checksum (reads the whole file)
  uint64_t host_cpu_features = ~0ull;   // the bits this machine has, in the compiler's numbering
  bool check_target = true;
  std::vector<std::string> host_backends;  // back ends this runtime has; empty: do not check
  // Also accept a file of an older format version (its header and section table laid out as
  // version 1's: every version keeps them), to read what it records, e.g. its source; a runtime
  // never runs such a file.
  bool accept_older_versions = false;
};

class KilnFile {
 public:
  KilnFile(const KilnFile&) = delete;
  KilnFile& operator=(const KilnFile&) = delete;

  const std::string& path() const { return file_->path(); }
  const std::shared_ptr<const MappedFile>& file() const { return file_; }
  uint32_t format_version() const { return format_version_; }
  const std::string& writer_version() const { return writer_version_; }
  const KilnTarget& target() const { return target_; }
  uint64_t file_size() const { return file_->size(); }

  // The sections in table order.
  const std::vector<KilnSectionInfo>& sections() const { return sections_; }
  bool has_section(KilnSection kind) const { return find_section(static_cast<uint32_t>(kind)) != nullptr; }
  // The bytes of a section in the map; empty when the file has none of that kind.
  std::span<const uint8_t> section(KilnSection kind) const;

  // The tensors in table order; lookup by name (nullptr when absent).
  const std::vector<KilnTensor>& tensors() const { return tensors_; }
  const KilnTensor* tensor(std::string_view name) const;

  // Checks the checksum of every section, the weights included.
  Status verify() const;

 private:
  friend Result<std::shared_ptr<const KilnFile>> open_kiln_bytes(std::shared_ptr<const MappedFile>,
                                                                 const KilnOpenOptions&);
  KilnFile() = default;
  const KilnSectionInfo* find_section(uint32_t kind) const;
  Status verify_section(const KilnSectionInfo& s) const;
  Status parse_tensor_table();

  std::shared_ptr<const MappedFile> file_;
  uint32_t format_version_ = 0;
  std::string writer_version_;
  KilnTarget target_;
  std::vector<KilnSectionInfo> sections_;
  std::vector<KilnTensor> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;  // keys view the names in the map
};

// Maps `path` and checks it as described at the top of this header.
Result<std::shared_ptr<const KilnFile>> open_kiln(const std::string& path, const KilnOpenOptions& options = {});
// The same on bytes already mapped or in memory (tests, fuzzing).
Result<std::shared_ptr<const KilnFile>> open_kiln_bytes(std::shared_ptr<const MappedFile> file,
                                                        const KilnOpenOptions& options = {});

}  // namespace kiln
