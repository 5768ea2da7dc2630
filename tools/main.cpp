// kiln: one binary, one subcommand per file in tools/.
#include <CLI/CLI.hpp>

#include "tools/cli_common.h"

int main(int argc, char** argv) {
  CLI::App app{"kiln: deploy language models to the edge"};
  app.set_version_flag("--version", std::string("kiln ") + KILN_VERSION);
  app.require_subcommand(1);
  int exit_code = 0;
  kiln::cli::add_run_command(app, exit_code);
  kiln::cli::add_chat_command(app, exit_code);
  kiln::cli::add_compile_command(app, exit_code);
  kiln::cli::add_inspect_command(app, exit_code);
  kiln::cli::add_ppl_command(app, exit_code);
  kiln::cli::add_template_command(app, exit_code);
  kiln::cli::add_tokenize_command(app, exit_code);
  kiln::cli::add_detokenize_command(app, exit_code);
  kiln::cli::add_bench_tokenizer_command(app, exit_code);
  kiln::cli::add_synth_command(app, exit_code);
  kiln::cli::add_bench_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 1;
  }
  return exit_code;
}
