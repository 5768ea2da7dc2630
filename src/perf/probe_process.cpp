#include "perf/probe_process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "perf/bandwidth.h"

namespace kiln {

namespace {

bool write_all(int fd, const void* p, size_t n) {
  const auto* b = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    b += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* p, size_t n) {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::read(fd, b, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    b += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// The helper's life: make the buffer, report its size, then one pass per 'p' request.
[[noreturn]] void serve_passes(int cmd, int res, uint64_t bytes, int threads) {
  auto probe = BandwidthProbe::create(bytes, threads);
  uint64_t made = probe ? (*probe)->bytes() : 0;
  if (!write_all(res, &made, sizeof made) || !probe) ::_exit(1);
  char c = 0;
  while (::read(cmd, &c, 1) == 1 && c == 'p') {
    const double gbs = (*probe)->pass_gbs();
    if (!write_all(res, &gbs, sizeof gbs)) break;
  }
  ::_exit(0);
}

}  // namespace

std::unique_ptr<ProbeProcess> ProbeProcess::start(uint64_t bytes, int threads) {
  int to_child[2], from_child[2];
  if (::pipe(to_child) != 0) return nullptr;
  if (::pipe(from_child) != 0) {
    ::close(to_child[0]);
    ::close(to_child[1]);
    return nullptr;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) ::close(fd);
    return nullptr;
  }
  if (pid == 0) {
    ::close(to_child[1]);
    ::close(from_child[0]);
    serve_passes(to_child[0], from_child[1], bytes, threads);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  std::unique_ptr<ProbeProcess> p(new ProbeProcess());
  p->pid_ = pid;
  p->cmd_ = to_child[1];
  p->res_ = from_child[0];
  uint64_t made = 0;
  if (!read_all(p->res_, &made, sizeof made) || made == 0) return nullptr;  // the destructor reaps it
  p->bytes_ = made;
  return p;
}

ProbeProcess::~ProbeProcess() {
  ::close(cmd_);
  ::close(res_);
  int status = 0;
  ::waitpid(pid_, &status, 0);
}

Result<double> ProbeProcess::pass() {
  double gbs = 0;
  if (!write_all(cmd_, "p", 1) || !read_all(res_, &gbs, sizeof gbs)) return io_error("the bandwidth probe process stopped");
  return gbs;
}

}  // namespace kiln
