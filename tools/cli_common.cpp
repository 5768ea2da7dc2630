#include "tools/cli_common.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include <CLI/CLI.hpp>

namespace kiln::cli {

namespace fs = std::filesystem;

void add_kv_type_flag(CLI::App* cmd, std::string& kv_type) {
  cmd->add_option("--kv-type", kv_type, "KV cache element type: f32 or f16 (half the memory)")
      ->check(CLI::IsMember({"f32", "f16"}));
}

int fail(const Status& s) {
  std::fprintf(stderr, "kiln: error: %s\n", s.message().c_str());
  return kExitBadInput;
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
