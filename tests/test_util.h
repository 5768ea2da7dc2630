// Helpers shared by the tests: data paths, reference files, running the kiln binary.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::test {

std::string data_path(const std::string& rel);  // under tests/data
std::string shipped_model();                     // models/stories260K/stories260K.bin
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);
std::string temp_dir();  // a fresh folder for this test process

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
// Runs the kiln binary with `args` (already shell-quoted where needed).
CommandResult run_kiln(const std::string& args);
// The same with `input` on stdin (none: /dev/null).
CommandResult run_kiln_with_input(const std::string& args, const std::optional<std::string>& input);
// The same, killed after `seconds` (exit status 124, as timeout(1) gives): for a command that
// would run on (a server) if it wrongly accepted its arguments.
CommandResult run_kiln_within(const std::string& args, int seconds);
// run_kiln_with_input with a command put before the binary (and its emulator), e.g. timeout(1).
CommandResult run_kiln_with_input(const std::string& args, const std::optional<std::string>& input,
                                  const std::string& runner);
std::string shell_quote(const std::string& s);
// True when the tests run under an emulator (KILN_TEST_EMULATOR), whose memory maps do not show
// which file pages the program touched.
bool under_emulator();
// SmolLM2-135M-Instruct's Q4_1 GGUF (scripts/fetch-smollm2.sh puts it in ~/.cache/kiln;
// KILN_SMOLLM2_GGUF names another), or "" when it is not here.
std::string smollm2_gguf();
// Qwen2.5-Coder-0.5B-Instruct Q4_K_M (scripts/fetch-qwen.sh: ~/.cache/kiln/qwen/, or
// $KILN_QWEN05_GGUF); "" when absent.
std::string qwen05_gguf();

// True in the sanitizer builds, whose shadow memory and quarantine make resident memory no measure
// of the program's own.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

// True in the ThreadSanitizer build, which runs the runtime's concurrency tests (several times
// slower: a test that needs a trained model's long reply is left to the other builds).
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThreadSanitized = true;
#else
inline constexpr bool kThreadSanitized = false;
#endif

// Counts operator new calls in this process (for the no-allocation-per-token tests).
uint64_t allocation_count();

// Largest |a - b| over the largest |b|: the relative error of a logits vector.
double relative_error(const float* a, const float* b, size_t n);

}  // namespace kiln::test
