// Writing a file so that a crash never leaves half of it: the bytes go to
// `<path>.tmp.<pid>.<n>` in the same folder, are fsync'ed and renamed onto `path`; a TempFile
// destroyed before commit() removes its temporary file. `path` must be a regular file or not
// exist: a rename would replace a device (/dev/null), a FIFO, a socket or a folder with a file,
// so those are refused; a symbolic link is written through (the link stays).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace kiln {

class TempFile {
 public:
  TempFile() = default;
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  // Creates the temporary file beside `target`.
  Status create(const std::string& target);
  Status write(const uint8_t* p, size_t n);
  Status pwrite_at(uint64_t offset, std::span<const uint8_t> bytes);
  // fsync, close and rename onto `target`; the temp file is gone afterwards either way.
  Status commit(const std::string& target);
  // Closes and removes the temporary file (nothing when committed).
  void discard();
  uint64_t pos() const { return pos_; }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
  uint64_t pos_ = 0;
  std::string target_;  // the regular file create() resolved `target` to
  int slot_ = -1;  // its place among the files a signal removes
};

// Where writing `target` goes: itself (a regular file, or none yet), or the file a symbolic link
// names; an error naming the kind of file for anything else.
Result<std::string> regular_file_target(const std::string& target);

// The whole file in one call.
Status write_file_atomically(const std::string& path, std::span<const uint8_t> bytes);

// Makes SIGINT, SIGTERM and SIGHUP remove every temporary file still open before the process
// ends as the signal would end it (a CLI calls this; a library leaves the app's signals alone).
void remove_temp_files_on_signals();
// Removes every temporary file still open now (what the handler does; async-signal-safe).
void remove_open_temp_files();

// Temporary files `<target>.tmp.<pid>.<n>` beside `target` left by a process that no longer
// runs (killed with SIGKILL, or a crash): removed; returns their names.
std::vector<std::string> remove_stale_temp_files(const std::string& target);

}  // namespace kiln
