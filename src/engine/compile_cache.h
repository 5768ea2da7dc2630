// The compile cache: a source model (GGUF, HF folder, llama2.c) compiled once into a .kiln under
// a cache folder, and later starts map that file. An entry is named by what it was made from:
// the source's identity (size, mtime and an XXH3 of its bytes: all of them for a file up to
// 64 MiB, else its first and last MiB and 64 blocks of 64 KiB spread between), the options the
// caller gives as text (scheme, overrides, tokenizer, ...), the .kiln format version, the kiln
// version and the CPU kernel table of this machine. A changed source has another name: it is
// compiled again, never served stale; the old entry ages out.
//
// The folder holds nothing to parse: entries are `<source name>-<16 hex digits>.kiln`, their mtime
// is their last use (set on every hit), and `<entry>.lock` files serialize the compile of one
// entry between processes (flock; a process that waited finds the entry made). Entries are
// written by the .kiln writer (a temp file renamed into place), so a reader never sees half of
// one; after each compile the folder is pruned to its bound, least recently used first.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"

namespace kiln {

inline constexpr uint64_t kDefaultCacheMaxBytes = 8ull << 30;

struct CacheOptions {
  bool enabled = false;  // false: a source is compiled in memory on every open
  std::string dir;       // "" : default_cache_dir()
  uint64_t max_bytes = 0;  // 0 : default_cache_max_bytes()
  // The one line a compile into the cache (or a rebuild) says, before it starts; null: silent.
  std::function<void(const std::string&)> notify;
  std::function<void(double)> quantize_progress;  // 0..1, while a compile quantizes
  std::function<void(double)> write_progress;     // 0..1, while it writes the entry
};

// KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln.
std::string default_cache_dir();
// KILN_CACHE_MAX_SIZE (parse_byte_size) when set and valid, else kDefaultCacheMaxBytes.
uint64_t default_cache_max_bytes();
// "1073741824", "512K", "500M", "8G", "1T" (powers of 1024; "MiB", "GB" and the like read the same).
Result<uint64_t> parse_byte_size(const std::string& text);

// What names a source's bytes: a file's, or a folder's regular files' (not recursing) together.
struct SourceIdentity {
  uint64_t size = 0;     // bytes
  int64_t mtime_ns = 0;  // the newest modification time
  uint64_t hash = 0;     // XXH3 of the bytes (all, or samples: see the top of this header), names included
};
Result<SourceIdentity> source_identity(const std::string& path);

struct CacheRequest {
  std::string source;       // the file or folder compiled: its identity keys the entry
  std::string options_key;  // everything else the result depends on, as text
  // The line said before compiling: "" says "compiling SOURCE once into ENTRY"; else
  // "<reason>; rebuilding it from its source SOURCE into ENTRY".
  std::string reason;
  // Writes the .kiln at `entry`; calls `announce` (which says the line; once, later calls do
  // nothing) when the source has read well — at the quantizer's first progress, or when the
  // compile is done — so that a source that is no model fails with its error alone.
  std::function<Status(const std::string& entry, const std::function<void()>& announce)> build;
};

struct CacheResult {
  std::string path;   // the entry, ready to map; "" when the cache could not be used
  bool hit = false;   // found made (by this process earlier or another); false: compiled now
  std::string unusable;  // why the cache was not used (a folder that cannot be made or locked)
};

// The entry for `request`, compiled by request.build when it is missing. An error from build is
// returned as it is; a cache folder kiln cannot use is not an error (result.unusable says why).
Result<CacheResult> cached_compile(const CacheOptions& options, const CacheRequest& request);
// Removes an entry that failed to open (damaged), so that the next cached_compile makes it again.
void drop_cache_entry(const std::string& entry);

struct CacheEntry {
  std::string path;
  uint64_t bytes = 0;
  int64_t last_used_ns = 0;
};
// The entries of `dir`, most recently used first (none when the folder does not exist).
Result<std::vector<CacheEntry>> list_cache(const std::string& dir);
// Removes the least recently used entries until the rest fit in `max_bytes`; never `keep`.
// Returns the removed ones.
Result<std::vector<CacheEntry>> prune_cache(const std::string& dir, uint64_t max_bytes, const std::string& keep = "");
// Removes every entry (and lock and stale temporary file); returns the entries removed.
Result<std::vector<CacheEntry>> clear_cache(const std::string& dir);

}  // namespace kiln
