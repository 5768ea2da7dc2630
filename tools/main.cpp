// kiln: one binary, one subcommand per file in tools/.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/cpu_features.h"
#include "tools/cli_common.h"

namespace {

// "  run        Generate text; ..." for each subcommand, in the order they were added.
std::string subcommand_list(CLI::App& app) {
  std::string out = "subcommands:\n";
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    char line[512];
    std::snprintf(line, sizeof line, "  %-16s %s\n", sub->get_name().c_str(), sub->get_description().c_str());
    out += line;
  }
  return out + "Run 'kiln help CMD' or 'kiln CMD --help' for a subcommand's flags.\n";
}

CLI::App* find_subcommand(CLI::App& app, const std::string& name) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    if (sub->get_name() == name) return sub;
  return nullptr;
}

int unknown_subcommand(CLI::App& app, const std::string& name) {
  std::string hint;
  if (name == "version") hint = " ('kiln --version' prints the version)";
  std::fprintf(stderr, "kiln: error: unknown subcommand '%s'%s\n%s", name.c_str(), hint.c_str(),
               subcommand_list(app).c_str());
  return kiln::cli::kExitUsage;
}

// llama.cpp flags a user may bring along that kiln does not have: a hint instead of CLI11's
// reading of, say, "-ngl 99" as "-n gl".
const char* llama_cpp_hint(const std::string& flag) {
  static const char* const kGpu[] = {"-ngl", "--n-gpu-layers", "--gpu-layers", "-ngld", "--n-gpu-layers-draft",
                                     "-sm", "--split-mode", "-ts", "--tensor-split", "-mg", "--main-gpu",
                                     "-dev", "--device", "-fa", "--flash-attn", "-nkvo", "--no-kv-offload"};
  for (const char* g : kGpu)
    if (flag == g) return "kiln runs on the CPU; %s has no meaning here";
  if (flag == "-i" || flag == "--interactive" || flag == "-if" || flag == "--interactive-first" ||
      flag == "-cnv" || flag == "--conversation")
    return "%s: for a conversation use `kiln chat`";
  if (flag == "-ctk" || flag == "--cache-type-k" || flag == "-ctv" || flag == "--cache-type-v")
    return "%s: kiln's KV cache type is --kv-type f32|f16";
  static const char* const kOther[] = {"--mlock", "--no-mmap", "--numa", "-b", "--batch-size", "-ub",
                                       "--ubatch-size", "--color", "--log-disable", "-e", "--escape",
                                       "-np", "--parallel", "-cb", "--cont-batching", "--n-keep", "--keep"};
  for (const char* o : kOther)
    if (flag == o) return "%s is a llama.cpp flag kiln does not have (see 'kiln help')";
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kiln: deploy language models to the edge", "kiln"};
  app.set_version_flag("--version", std::string("kiln ") + KILN_VERSION);
  app.require_subcommand(1);
  // Every --help shows each option's default (the subcommands inherit this).
  app.option_defaults()->always_capture_default();
  // Range errors come as "--threads: must be at least 1" (tools/cli_common.h): say it plainly.
  // Every error one line with kiln's prefix, as the subcommands' own errors are.
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    std::string m = e.what();
    if (const size_t p = m.find(": must "); p != std::string::npos) m.erase(p, 1);
    if (const size_t nl = m.find('\n'); nl != std::string::npos) m.erase(nl);
    (void)a;
    return "kiln: error: " + m + "\n";
  });
  int exit_code = 0;
  kiln::cli::add_run_command(app, exit_code);
  kiln::cli::add_chat_command(app, exit_code);
  kiln::cli::add_compile_command(app, exit_code);
  kiln::cli::add_inspect_command(app, exit_code);
  kiln::cli::add_ppl_command(app, exit_code);
  kiln::cli::add_template_command(app, exit_code);
  kiln::cli::add_tokenize_command(app, exit_code);
  kiln::cli::add_detokenize_command(app, exit_code);
  kiln::cli::add_cache_command(app, exit_code);
  kiln::cli::add_bench_tokenizer_command(app, exit_code);
  kiln::cli::add_synth_command(app, exit_code);
  kiln::cli::add_bench_command(app, exit_code);
  kiln::cli::add_profile_command(app, exit_code);
  kiln::cli::add_compare_command(app, exit_code);
  kiln::cli::add_tune_command(app, exit_code);
#ifdef KILN_HAVE_SERVER
  kiln::cli::add_serve_command(app, exit_code);
#endif

  // Before CLI11, which answers all of these with "A subcommand is required".
  if (argc < 2 || std::strcmp(argv[1], "help") == 0) {
    if (argc < 3) {
      std::fputs(app.help().c_str(), stdout);
      return 0;
    }
    CLI::App* sub = find_subcommand(app, argv[2]);
    if (sub == nullptr) return unknown_subcommand(app, argv[2]);
    std::fputs(sub->help("kiln").c_str(), stdout);
    return 0;
  }
  if (argv[1][0] != '-' && find_subcommand(app, argv[1]) == nullptr) return unknown_subcommand(app, argv[1]);
  if (argv[1][0] != '-') {
    CLI::App* sub = find_subcommand(app, argv[1]);
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--") break;
      const char* hint = llama_cpp_hint(a.substr(0, a.find('=')));
      // Only where the subcommand has no flag of that name.
      if (hint != nullptr && sub->get_option_no_throw(a.substr(0, a.find('='))) == nullptr) {
        std::fprintf(stderr, "kiln: error: ");
        std::fprintf(stderr, hint, a.substr(0, a.find('=')).c_str());
        std::fputc('\n', stderr);
        return kiln::cli::kExitUsage;
      }
    }
  }
  // KILN_CPU caps the kernel table (README); a name kiln does not know, or one this machine
  // cannot run, stops here with one line rather than being ignored.
  if (kiln::Status st = kiln::check_cpu_cap(); !st) {
    std::fprintf(stderr, "kiln: error: %s\n", st.message().c_str());
    return kiln::cli::kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kiln::cli::kExitUsage;
  }
  return kiln::cli::finish_stdout(exit_code);
}
