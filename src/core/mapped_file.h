// A read-only view of a whole file: memory-mapped, or owned bytes (for fuzzing and tests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace kiln {

class MappedFile {
 public:
  static Result<std::shared_ptr<const MappedFile>> open(const std::string& path);
  // Wraps bytes already in memory; `name` stands in for the path in error messages.
  static std::shared_ptr<const MappedFile> from_bytes(std::vector<uint8_t> bytes, std::string name);
  // Maps bytes [offset, offset + length) of the open file `fd` (an uncompressed entry inside an
  // APK or zip) in place, read-only, without copying: from the page at or below `offset`, the
  // view starting at `offset` itself. length 0: to the end of the file. The descriptor is not
  // kept (the map holds the file); `name` stands in for the path in error messages.
  static Result<std::shared_ptr<const MappedFile>> open_range(int fd, uint64_t offset, uint64_t length,
                                                              std::string name);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Tells the kernel this process is done with the whole pages inside `bytes` (MADV_DONTNEED on
  // the read-only file map): they stop counting as resident and come back from the file if
  // touched again. For a source tensor once it is converted, so that importing a model does not
  // hold it all resident beside its converted copy. A no-op for bytes outside this map and for a
  // file held in memory (from_bytes), whose pages have no file to come back from.
  void release_pages(std::span<const uint8_t> bytes) const;

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  void* map_ = nullptr;  // non-null when mmap'ed
  size_t map_size_ = 0;  // from map_, which lies up to a page below data_ for a range
  std::vector<uint8_t> owned_;
};

// A byte range of an open file that kiln holds on to: its own duplicate of the caller's
// descriptor (so the caller may close theirs at once), closed when the last holder goes.
class FileRange {
 public:
  // length 0: to the end of the file, as the file is now.
  static Result<std::shared_ptr<const FileRange>> dup(int fd, uint64_t offset, uint64_t length);
  ~FileRange();
  FileRange(const FileRange&) = delete;
  FileRange& operator=(const FileRange&) = delete;

  uint64_t offset() const { return offset_; }
  uint64_t length() const { return length_; }
  // "fd 7 [4096, +1000]": the caller's descriptor number, for messages.
  const std::string& name() const { return name_; }
  Result<std::shared_ptr<const MappedFile>> map() const;

 private:
  FileRange() = default;
  int fd_ = -1;
  uint64_t offset_ = 0;
  uint64_t length_ = 0;
  std::string name_;
};

// Reads a whole (small) text file, e.g. config.json.
Result<std::string> read_text_file(const std::string& path);

}  // namespace kiln
