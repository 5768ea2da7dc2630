#include "core/temp_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

namespace kiln {

TempFile::~TempFile() { discard(); }

Status TempFile::create(const std::string& target) {
  static std::atomic<uint64_t> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string name = target + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      fd_ = fd;
      path_ = std::move(name);
      return Status::ok();
    }
    if (errno != EEXIST) return io_error("cannot create the temporary file " + name + ": " + std::strerror(errno));
  }
  return io_error("cannot create a temporary file beside it (all names taken)");
}

Status TempFile::write(const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd_, p, std::min<size_t>(n, size_t{1} << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      return io_error(path_ + ": write failed: " + std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
    pos_ += static_cast<uint64_t>(w);
  }
  return Status::ok();
}

Status TempFile::pwrite_at(uint64_t offset, std::span<const uint8_t> bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (w < 0) {
      if (errno == EINTR) continue;
      return io_error(path_ + ": write failed: " + std::strerror(errno));
    }
    done += static_cast<size_t>(w);
  }
  return Status::ok();
}

Status TempFile::commit(const std::string& target) {
  if (::fsync(fd_) != 0) return io_error(path_ + ": fsync failed: " + std::strerror(errno));
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return io_error(path_ + ": close failed: " + std::strerror(errno));
  if (::rename(path_.c_str(), target.c_str()) != 0)
    return io_error("cannot rename " + path_ + " into place: " + std::strerror(errno));
  path_.clear();
  // Make the rename itself durable; the file is complete at `target` already, so this is
  // best effort (some file systems refuse fsync on a folder).
  const size_t slash = target.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : target.substr(0, slash);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return Status::ok();
}

void TempFile::discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!path_.empty()) ::unlink(path_.c_str());
  path_.clear();
}

Status write_file_atomically(const std::string& path, std::span<const uint8_t> bytes) {
  TempFile f;
  KILN_RETURN_IF_ERROR(f.create(path));
  KILN_RETURN_IF_ERROR(f.write(bytes.data(), bytes.size()));
  return f.commit(path);
}

}  // namespace kiln
