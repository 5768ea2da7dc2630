#include "core/temp_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

#include <signal.h>

namespace kiln {

namespace {
// The temporary files open now, for a signal handler: fixed slots of fixed-size names, so that
// the handler touches no allocator and no lock.
constexpr int kSlots = 32;
constexpr size_t kNameBytes = 4096;
struct Slot {
  std::atomic<bool> used{false};
  char name[kNameBytes];
};
Slot g_slots[kSlots];

int claim_slot(const std::string& name) {
  if (name.size() >= kNameBytes) return -1;
  for (int i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (!g_slots[i].used.compare_exchange_strong(expected, true)) continue;
    std::memcpy(g_slots[i].name, name.c_str(), name.size() + 1);
    return i;
  }
  return -1;  // more than kSlots at once: this one is not removed on a signal
}

void release_slot(int i) {
  if (i >= 0) g_slots[i].used.store(false);
}

extern "C" void remove_and_reraise(int sig) {
  remove_open_temp_files();
  signal(sig, SIG_DFL);
  raise(sig);
}
}  // namespace

void remove_open_temp_files() {
  for (Slot& s : g_slots)
    if (s.used.load()) ::unlink(s.name);
}

void remove_temp_files_on_signals() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = remove_and_reraise;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
}

std::vector<std::string> remove_stale_temp_files(const std::string& target) {
  std::vector<std::string> removed;
  const size_t slash = target.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : target.substr(0, slash);
  const std::string prefix = (slash == std::string::npos ? target : target.substr(slash + 1)) + ".tmp.";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = name.substr(prefix.size());  // <pid>.<n>
    const size_t dot = rest.find('.');
    if (dot == std::string::npos || dot == 0 || rest.find_first_not_of("0123456789.") != std::string::npos) continue;
    const long pid = std::strtol(rest.substr(0, dot).c_str(), nullptr, 10);
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // that process still runs
    if (::unlink(e.path().c_str()) == 0) removed.push_back(e.path().string());
  }
  return removed;
}

Result<std::string> regular_file_target(const std::string& target) {
  struct stat st;
  if (::lstat(target.c_str(), &st) != 0) {
    if (errno == ENOENT) return target;  // a new file
    return io_error(target + ": " + std::strerror(errno));
  }
  std::string path = target;
  if (S_ISLNK(st.st_mode)) {
    // Written through the link, which stays: the file it points to is what the user named.
    std::error_code ec;
    const auto real = std::filesystem::weakly_canonical(target, ec);
    if (ec) return io_error(target + ": cannot resolve the symbolic link: " + ec.message());
    path = real.string();
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) return path;
      return io_error(target + ": " + std::strerror(errno));
    }
  }
  if (S_ISREG(st.st_mode)) return path;
  const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "not a regular file";
  return invalid_argument(target + " is " + kind + ", not a regular file: kiln writes a file by renaming a finished "
                          "copy onto it, which would replace it; give the path of a file");
}

TempFile::~TempFile() { discard(); }

Status TempFile::create(const std::string& requested) {
  KILN_ASSIGN_OR_RETURN(std::string target, regular_file_target(requested));
  target_ = target;
  static std::atomic<uint64_t> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string name = target + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      fd_ = fd;
      path_ = std::move(name);
      slot_ = claim_slot(path_);
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

Status TempFile::commit(const std::string& requested) {
  // Checked again just before the rename: the path may have become a device or a folder since.
  KILN_ASSIGN_OR_RETURN(std::string target, regular_file_target(requested));
  if (target != target_) return invalid_argument(requested + ": not the file this temporary file was made for");
  if (::fsync(fd_) != 0) return io_error(path_ + ": fsync failed: " + std::strerror(errno));
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return io_error(path_ + ": close failed: " + std::strerror(errno));
  if (::rename(path_.c_str(), target.c_str()) != 0)
    return io_error("cannot rename " + path_ + " into place: " + std::strerror(errno));
  path_.clear();
  release_slot(std::exchange(slot_, -1));
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
  release_slot(std::exchange(slot_, -1));
}

Status write_file_atomically(const std::string& path, std::span<const uint8_t> bytes) {
  TempFile f;
  KILN_RETURN_IF_ERROR(f.create(path));
  KILN_RETURN_IF_ERROR(f.write(bytes.data(), bytes.size()));
  return f.commit(path);
}

}  // namespace kiln
