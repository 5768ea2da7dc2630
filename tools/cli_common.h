// What the subcommands share: how errors end the process, and where the shipped model is.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "engine/compile_cache.h"

namespace kiln::cli {

// Exit status for a command line kiln cannot use: an unknown flag, a bad value, a missing or
// contradictory option.
constexpr int kExitUsage = 1;
// Exit status for a model, file or input that kiln rejects (or output it cannot write).
constexpr int kExitBadInput = 2;

// --group's help, one text for every command that takes it (run, chat, bench, ppl, profile,
// compare, compile).
inline constexpr const char* kGroupHelp =
    "group size of -q's scheme: 32, 64 or 128 for the 4-bit schemes and w8a16 (grouped when given), "
    "256 for GGML's super-blocks (w4a16 g256: IQ4_XS, or Q4_K with compile's --asym)";

// A progress bar on stderr when it is a terminal; nothing (null) otherwise.
std::function<void(double)> progress_bar(const char* what);

// --cache-dir DIR and --no-cache (run, chat, bench, ppl, serve): where a source model's compile
// goes, or that it is compiled in memory on every start.
struct CacheFlags {
  std::string dir;
  bool off = false;
};
void add_cache_flags(CLI::App* cmd, CacheFlags& f);
// The engine's cache options for the flags: its one line on stderr ("kiln: compiling ..."), the
// progress bars on a terminal.
CacheOptions cache_options(const CacheFlags& f);

// Prints each as "kiln: note: <note>" on stderr.
void print_notes(const std::vector<std::string>& notes);
// Prints "kiln: error: <message>" on stderr and returns kExitBadInput.
int fail(const Status& s);
// `text` written to `path` atomically (a temporary file renamed); the error names the path.
Status write_text(const std::string& path, const std::string& text);
// Prints "kiln: error: <message>" on stderr and returns kExitUsage.
int usage_error(const std::string& message);

// Validators whose message names the flag plainly: CLI11 prints "--threads: must be at least 1",
// which main() turns into "--threads must be at least 1" (CLI11's own range text prints
// DBL_MAX in full).
template <typename T>
std::string as_number(const std::string& s, T& v) {
  if (CLI::detail::lexical_cast(s, v)) return {};
  return std::is_integral_v<T> ? "must be a whole number, not '" + s + "'" : "must be a number, not '" + s + "'";
}
template <typename T>
std::string show(T v) {
  std::ostringstream o;
  o << v;
  return o.str();
}
template <typename T>
CLI::Validator at_least(T min) {
  return CLI::Validator(
      [min](std::string& s) {
        T v{};
        if (std::string e = as_number(s, v); !e.empty()) return e;
        return v < min ? "must be at least " + show(min) : std::string();
      },
      ">=" + show(min));
}
template <typename T>
CLI::Validator between(T lo, T hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) {
        T v{};
        if (std::string e = as_number(s, v); !e.empty()) return e;
        return v < lo || v > hi ? "must be from " + show(lo) + " to " + show(hi) : std::string();
      },
      show(lo) + ".." + show(hi));
}
template <typename T>
CLI::Validator greater_than(T min) {
  return CLI::Validator(
      [min](std::string& s) {
        T v{};
        if (std::string e = as_number(s, v); !e.empty()) return e;
        return v <= min ? "must be greater than " + show(min) : std::string();
      },
      ">" + show(min));
}

// Flushes stdout at the end of a command: a write that failed (a full disk, a closed pipe) is an
// error, exit kExitBadInput, not a silent success. Returns `exit_code` when all was written.
int finish_stdout(int exit_code);

// --ctx against the model, one rule for run, chat and ppl: OK when `n_ctx` is 0 (the command's
// default) or fits; else an error naming --ctx, the value and the model's limit (exit 2: the
// model rejects it). Never cut to fit.
Status check_ctx_flag(int n_ctx, int model_max, const std::string& model);

// The stories260K checkpoint shipped with kiln: installed beside the binary or in the source tree.
std::string default_model_path();

// --kv-type: the element type of a session's KV cache, f32 (the default) or f16 (half the
// memory; each key and value rounded once when stored).
void add_kv_type_flag(CLI::App* cmd, std::string& kv_type);
inline DType kv_dtype(const std::string& kv_type) { return kv_type == "f16" ? DType::kF16 : DType::kF32; }

// Each subcommand adds itself to the app; its callback stores the exit status in `exit_code`.
void add_run_command(CLI::App& app, int& exit_code);
void add_chat_command(CLI::App& app, int& exit_code);
void add_compile_command(CLI::App& app, int& exit_code);
void add_inspect_command(CLI::App& app, int& exit_code);
void add_ppl_command(CLI::App& app, int& exit_code);
void add_template_command(CLI::App& app, int& exit_code);
void add_tokenize_command(CLI::App& app, int& exit_code);
void add_detokenize_command(CLI::App& app, int& exit_code);
void add_cache_command(CLI::App& app, int& exit_code);
void add_bench_tokenizer_command(CLI::App& app, int& exit_code);
void add_synth_command(CLI::App& app, int& exit_code);
void add_bench_command(CLI::App& app, int& exit_code);
void add_profile_command(CLI::App& app, int& exit_code);
void add_compare_command(CLI::App& app, int& exit_code);
void add_tune_command(CLI::App& app, int& exit_code);
void add_serve_command(CLI::App& app, int& exit_code);

// --group: the sizes some scheme takes (which one a scheme takes is the compiler's to say).
inline CLI::Validator group_size() {
  return CLI::Validator(
      [](std::string& s) {
        int v = 0;
        if (std::string e = as_number(s, v); !e.empty()) return e;
        return v == 32 || v == 64 || v == 128 || v == 256 ? std::string() : "must be 32, 64, 128 or 256, not " + s;
      },
      "");
}

}  // namespace kiln::cli
