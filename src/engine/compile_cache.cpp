#include "engine/compile_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "artifact/kiln_file.h"
#include "backends/cpu/cpu_backend.h"
#include "compiler/kiln_writer.h"
#include "core/cpu_features.h"
#include "core/mapped_file.h"
#include "core/temp_file.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kFullHashLimit = 64ull << 20;
constexpr uint64_t kEdgeBytes = 1ull << 20;
constexpr uint64_t kSampleBytes = 64ull << 10;
constexpr int kSamples = 64;

int64_t mtime_ns(const struct stat& st) { return int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec; }

uint64_t mix(uint64_t seed, uint64_t v) {
  const uint64_t both[2] = {seed, v};
  return kiln_checksum({reinterpret_cast<const uint8_t*>(both), sizeof both});
}
uint64_t mix(uint64_t seed, const std::string& s) {
  return mix(seed, kiln_checksum({reinterpret_cast<const uint8_t*>(s.data()), s.size()}));
}

Result<SourceIdentity> file_identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return not_found(path + ": cannot read it (it is missing or not accessible)");
  SourceIdentity id;
  id.size = static_cast<uint64_t>(st.st_size);
  id.mtime_ns = mtime_ns(st);
  id.hash = mix(0, id.size);
  if (id.size == 0) return id;
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  const auto b = file->bytes();
  if (b.size() <= kFullHashLimit) {
    id.hash = mix(id.hash, kiln_checksum(b));
    return id;
  }
  id.hash = mix(id.hash, kiln_checksum(b.first(kEdgeBytes)));
  const uint64_t span = b.size() - 2 * kEdgeBytes - kSampleBytes;
  for (int i = 0; i < kSamples; ++i) {
    const uint64_t at = kEdgeBytes + span * static_cast<uint64_t>(i) / (kSamples - 1);
    id.hash = mix(id.hash, kiln_checksum(b.subspan(at, kSampleBytes)));
  }
  id.hash = mix(id.hash, kiln_checksum(b.last(kEdgeBytes)));
  return id;
}

// "Qwen2.5-0.5B-q4_k_m.gguf" as a file name's first part: letters, digits, '.', '-', '_' kept.
std::string entry_stem(const std::string& source) {
  std::string name = fs::path(source).lexically_normal().filename().string();
  if (name.empty()) name = fs::path(source).lexically_normal().parent_path().filename().string();
  std::string out;
  for (char c : name)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') ? c : '_';
  if (out.size() > 80) out.resize(80);
  return out.empty() ? "model" : out;
}

bool is_entry_name(const std::string& name) {
  return name.size() > 22 && name.ends_with(".kiln") && name[name.size() - 22] == '-';
}

// An exclusive flock on `<entry>.lock`, held while the entry is compiled.
class EntryLock {
 public:
  ~EntryLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  Status lock(const std::string& entry) {
    const std::string path = entry + ".lock";
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) return io_error(path + ": cannot create the lock file");
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) return io_error(path + ": cannot lock it");
    return Status::ok();
  }

 private:
  int fd_ = -1;
};

void touch(const std::string& path) { ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0); }

bool is_regular(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

}  // namespace

std::string default_cache_dir() {
  if (const char* d = std::getenv("KILN_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return (fs::path(x) / "kiln").string();
  if (const char* h = std::getenv("HOME"); h && *h) return (fs::path(h) / ".cache" / "kiln").string();
  return (fs::temp_directory_path() / "kiln-cache").string();
}

Result<uint64_t> parse_byte_size(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0 || i > 19) return invalid_argument("'" + text + "' is not a size (bytes, or a number with K, M, G or T)");
  const uint64_t n = std::stoull(text.substr(0, i));
  std::string unit = text.substr(i);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int shift = -1;
  if (unit.empty() || unit == "B") shift = 0;
  else if (const size_t u = std::string("KMGT").find(unit[0]); u != std::string::npos &&
           (unit.size() == 1 || unit.substr(1) == "B" || unit.substr(1) == "IB"))
    shift = 10 * static_cast<int>(u + 1);
  if (shift < 0) return invalid_argument("'" + text + "' is not a size (bytes, or a number with K, M, G or T)");
  if (shift > 0 && n > (~0ull >> shift)) return invalid_argument("'" + text + "' is too large");
  return n << shift;
}

uint64_t default_cache_max_bytes() {
  if (const char* m = std::getenv("KILN_CACHE_MAX_SIZE"); m && *m)
    if (auto n = parse_byte_size(m)) return *n;
  return kDefaultCacheMaxBytes;
}

Result<SourceIdentity> source_identity(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return file_identity(path);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(path, ec))
    if (e.is_regular_file(ec)) names.push_back(e.path().filename().string());
  if (ec) return not_found(path + ": cannot list the folder");
  std::sort(names.begin(), names.end());
  SourceIdentity id;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) id.mtime_ns = mtime_ns(st);
  for (const auto& n : names) {
    KILN_ASSIGN_OR_RETURN(SourceIdentity f, file_identity((fs::path(path) / n).string()));
    id.size += f.size;
    id.mtime_ns = std::max(id.mtime_ns, f.mtime_ns);
    id.hash = mix(mix(id.hash, n), f.hash);
  }
  return id;
}

Result<CacheResult> cached_compile(const CacheOptions& o, const CacheRequest& rq) {
  KILN_ASSIGN_OR_RETURN(SourceIdentity id, source_identity(rq.source));
  char key_text[160];
  std::snprintf(key_text, sizeof key_text, "size %" PRIu64 " mtime %" PRId64 " hash %016" PRIx64 " format %u cpu %s\n",
                id.size, id.mtime_ns, id.hash, kKilnFormatVersion, cpu_kernel_name(host_cpu_features()));
  const std::string key = std::string(key_text) + kiln_writer_name() + "\n" + rq.options_key;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, kiln_checksum({reinterpret_cast<const uint8_t*>(key.data()), key.size()}));
  const std::string dir = o.dir.empty() ? default_cache_dir() : o.dir;
  const std::string entry = (fs::path(dir) / (entry_stem(rq.source) + "-" + hex + ".kiln")).string();
  CacheResult r;
  r.path = entry;
  if (is_regular(entry)) {
    touch(entry);
    r.hit = true;
    return r;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  EntryLock lock;
  if (Status st = ec ? io_error(dir + ": cannot create the cache folder (" + ec.message() + ")") : lock.lock(entry);
      !st.ok()) {
    r.path.clear();
    r.unusable = st.message();
    return r;
  }
  if (is_regular(entry)) {  // made by the process this one waited for
    touch(entry);
    r.hit = true;
    return r;
  }
  remove_stale_temp_files(entry);
  bool announced = false;
  const auto announce = [&] {
    if (std::exchange(announced, true)) return;
    if (o.notify)
      o.notify(rq.reason.empty() ? "compiling " + rq.source + " once into " + entry + " (later starts map it)"
                                 : rq.reason + "; rebuilding it from its source " + rq.source + " into " + entry);
  };
  KILN_RETURN_IF_ERROR(rq.build(entry, announce));
  (void)prune_cache(dir, o.max_bytes ? o.max_bytes : default_cache_max_bytes(), entry);
  return r;
}

void drop_cache_entry(const std::string& entry) {
  std::error_code ec;
  fs::remove(entry, ec);
}

Result<std::vector<CacheEntry>> list_cache(const std::string& dir) {
  std::vector<CacheEntry> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    struct stat st {};
    if (!is_entry_name(name) || ::stat(e.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    out.push_back({e.path().string(), static_cast<uint64_t>(st.st_size), mtime_ns(st)});
  }
  if (ec) return io_error(dir + ": cannot list the cache folder (" + ec.message() + ")");
  std::sort(out.begin(), out.end(), [](const CacheEntry& a, const CacheEntry& b) {
    return a.last_used_ns != b.last_used_ns ? a.last_used_ns > b.last_used_ns : a.path < b.path;
  });
  return out;
}

Result<std::vector<CacheEntry>> prune_cache(const std::string& dir, uint64_t max_bytes, const std::string& keep) {
  KILN_ASSIGN_OR_RETURN(std::vector<CacheEntry> entries, list_cache(dir));
  uint64_t total = 0;
  for (const auto& e : entries) total += e.bytes;
  std::vector<CacheEntry> removed;
  for (auto it = entries.rbegin(); it != entries.rend() && total > max_bytes; ++it) {
    if (!keep.empty() && fs::path(it->path) == fs::path(keep)) continue;
    std::error_code ec;
    if (!fs::remove(it->path, ec)) continue;
    fs::remove(it->path + ".lock", ec);
    total -= it->bytes;
    removed.push_back(*it);
  }
  return removed;
}

Result<std::vector<CacheEntry>> clear_cache(const std::string& dir) {
  KILN_ASSIGN_OR_RETURN(std::vector<CacheEntry> removed, prune_cache(dir, 0));
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return removed;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.ends_with(".kiln.lock")) fs::remove(e.path(), ec);
    else if (name.find(".kiln.tmp.") != std::string::npos) remove_stale_temp_files(e.path().string().substr(0, e.path().string().find(".tmp.")));
  }
  return removed;
}

}  // namespace kiln
