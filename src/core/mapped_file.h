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
  std::vector<uint8_t> owned_;
};

// Reads a whole (small) text file, e.g. config.json.
Result<std::string> read_text_file(const std::string& path);

}  // namespace kiln
