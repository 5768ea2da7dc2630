#include "tools/cli_common.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <CLI/CLI.hpp>

#include "core/temp_file.h"

namespace kiln::cli {

namespace fs = std::filesystem;

void add_kv_type_flag(CLI::App* cmd, std::string& kv_type) {
  cmd->add_option("--kv-type", kv_type, "KV cache element type: f32 or f16 (half the memory)")
      ->check(CLI::IsMember({"f32", "f16"}));
}

std::function<void(double)> progress_bar(const char* what) {
  if (!isatty(STDERR_FILENO)) return {};
  return [what, last = -1](double f) mutable {
    const int pct = static_cast<int>(f * 100.0);
    if (pct == last) return;
    last = pct;
    const int w = 40, fill = pct * w / 100;
    std::fprintf(stderr, "\r%-12s [%.*s%*s] %3d%%", what, fill, "########################################", w - fill, "",
                 pct);
    if (pct >= 100) std::fputc('\n', stderr);
  };
}

void add_cache_flags(CLI::App* cmd, CacheFlags& f) {
  cmd->add_option("--cache-dir", f.dir,
                  "compile cache folder for source models (default: KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, "
                  "else ~/.cache/kiln)");
  cmd->add_flag("--no-cache", f.off, "compile a source model in memory on every start instead of once into the cache");
}

CacheOptions cache_options(const CacheFlags& f) {
  CacheOptions o;
  o.enabled = !f.off;
  o.dir = f.dir;
  o.notify = [](const std::string& line) { std::fprintf(stderr, "kiln: %s\n", line.c_str()); };
  o.quantize_progress = progress_bar("quantizing");
  o.write_progress = progress_bar("writing");
  return o;
}

void print_notes(const std::vector<std::string>& notes) {
  for (const std::string& n : notes) std::fprintf(stderr, "kiln: note: %s\n", n.c_str());
}

Status write_text(const std::string& path, const std::string& text) {
  return write_file_atomically(path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()))
      .with_context(path);
}

int fail(const Status& s) {
  std::fprintf(stderr, "kiln: error: %s\n", s.message().c_str());
  return kExitBadInput;
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "kiln: error: %s\n", message.c_str());
  return kExitUsage;
}

int finish_stdout(int exit_code) {
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int err = errno;
  // ferror: an earlier write (each streamed token is flushed) may have failed already.
  if (flushed && !std::ferror(stdout)) return exit_code;
  std::fprintf(stderr, "kiln: error: writing the output to stdout failed: %s\n",
               err ? std::strerror(err) : "a write error");
  return exit_code ? exit_code : kExitBadInput;
}

Status check_ctx_flag(int n_ctx, int model_max, const std::string& model) {
  if (n_ctx <= model_max) return Status::ok();
  return invalid_argument(model + ": --ctx " + std::to_string(n_ctx) + " exceeds the model's maximum context of " +
                          std::to_string(model_max) + " tokens");
}

std::string default_model_path() {
  const char* rel = "stories260K/stories260K.bin";
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path installed = exe.parent_path().parent_path() / "share/kiln/models" / rel;
    if (fs::exists(installed, ec)) return installed.string();
  }
  return (fs::path(KILN_SOURCE_MODELS_DIR) / rel).string();
}

}  // namespace kiln::cli
