// What the subcommands share: how errors end the process, and where the shipped model is.
#pragma once

#include <string>

#include "core/dtype.h"
#include "core/status.h"

namespace CLI {
class App;
}

namespace kiln::cli {

// Exit status for a model, file or input that kiln rejects.
constexpr int kExitBadInput = 2;

// Prints "kiln: error: <message>" on stderr and returns kExitBadInput.
int fail(const Status& s);

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
void add_bench_tokenizer_command(CLI::App& app, int& exit_code);
void add_synth_command(CLI::App& app, int& exit_code);
void add_bench_command(CLI::App& app, int& exit_code);

}  // namespace kiln::cli
