#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace kiln {

Result<std::shared_ptr<const MappedFile>> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return io_error(path + ": cannot stat: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return io_error(path + ": not a regular file");
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return io_error(path + ": cannot map: " + std::strerror(e));
    }
    f->map_ = p;
    f->map_size_ = f->size_;
    f->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return std::shared_ptr<const MappedFile>(std::move(f));
}

namespace {

// The length of bytes [offset, offset + length) of the regular file `fd` (0: to its end), checked
// against the file as it is now.
Result<uint64_t> range_length(int fd, uint64_t offset, uint64_t length, const std::string& name) {
  if (fd < 0) return invalid_argument(name + ": the file descriptor is negative");
  struct stat st {};
  if (::fstat(fd, &st) != 0) return io_error(name + ": cannot stat the file descriptor: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return io_error(name + ": the file descriptor is not a regular file");
  const auto file_size = static_cast<uint64_t>(st.st_size);
  if (offset > file_size)
    return invalid_argument(name + ": offset " + std::to_string(offset) + " is past the end of the file (" +
                            std::to_string(file_size) + " bytes)");
  if (length == 0) length = file_size - offset;
  if (length > file_size - offset)
    return invalid_argument(name + ": bytes [" + std::to_string(offset) + ", +" + std::to_string(length) +
                            ") run past the end of the file (" + std::to_string(file_size) + " bytes)");
  if (length == 0) return invalid_argument(name + ": the range is empty");
  return length;
}

}  // namespace

Result<std::shared_ptr<const MappedFile>> MappedFile::open_range(int fd, uint64_t offset, uint64_t length,
                                                                 std::string name) {
  KILN_ASSIGN_OR_RETURN(length, range_length(fd, offset, length, name));
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t delta = offset % page;
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = std::move(name);
  f->size_ = static_cast<size_t>(length);
  f->map_size_ = static_cast<size_t>(length + delta);
  void* p = ::mmap(nullptr, f->map_size_, PROT_READ, MAP_PRIVATE, fd, static_cast<off_t>(offset - delta));
  if (p == MAP_FAILED) return io_error(f->path_ + ": cannot map: " + std::strerror(errno));
  f->map_ = p;
  f->data_ = static_cast<const uint8_t*>(p) + delta;
  return std::shared_ptr<const MappedFile>(std::move(f));
}

std::shared_ptr<const MappedFile> MappedFile::from_bytes(std::vector<uint8_t> bytes, std::string name) {
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = std::move(name);
  f->owned_ = std::move(bytes);
  f->data_ = f->owned_.data();
  f->size_ = f->owned_.size();
  return f;
}

MappedFile::~MappedFile() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

void MappedFile::release_pages(std::span<const uint8_t> bytes) const {
  if (map_ == nullptr || bytes.data() < data_ || bytes.data() + bytes.size() > data_ + size_) return;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(bytes.data()) + page - 1) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(bytes.data()) + bytes.size()) / page * page;
  // Only the pages wholly inside: a neighbour tensor may share the first and last.
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

Result<std::shared_ptr<const FileRange>> FileRange::dup(int fd, uint64_t offset, uint64_t length) {
  const std::string name =
      "fd " + std::to_string(fd) + " [" + std::to_string(offset) + ", +" + std::to_string(length) + "]";
  KILN_ASSIGN_OR_RETURN(length, range_length(fd, offset, length, name));
  const int own = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) return io_error(name + ": cannot duplicate the file descriptor: " + std::strerror(errno));
  std::shared_ptr<FileRange> r(new FileRange());
  r->fd_ = own;
  r->offset_ = offset;
  r->length_ = length;
  r->name_ = "fd " + std::to_string(fd) + " [" + std::to_string(offset) + ", +" + std::to_string(length) + "]";
  return std::shared_ptr<const FileRange>(std::move(r));
}

FileRange::~FileRange() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::shared_ptr<const MappedFile>> FileRange::map() const {
  return MappedFile::open_range(fd_, offset_, length_, name_);
}

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return io_error(path + ": read error");
  return ss.str();
}

}  // namespace kiln
