// kiln synth: a Hugging Face folder with random weights in the shapes of a published model.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>

#include "tools/cli_common.h"
#include "tools/synth/synth_model.h"

namespace kiln::cli {

namespace {

struct SynthCmd {
  std::string preset, out, dtype = "f16";
  int layers = 0;
  uint64_t seed = 0;
  bool force = false;
  bool list = false;
};

int synth(const SynthCmd& c) {
  if (c.list || c.preset.empty()) {
    std::printf("%-16s %6s %6s %7s %6s %4s %9s %8s %6s  %s\n", "preset", "dim", "ffn", "layers", "heads", "kv",
                "head_dim", "vocab", "tied", "shapes of");
    for (const SynthPreset& p : synth_presets())
      std::printf("%-16s %6d %6d %7d %6d %4d %9d %8d %6s  %s\n", p.name.c_str(), p.hidden_size, p.intermediate_size,
                  p.num_layers, p.num_heads, p.num_kv_heads, p.head_dim(), p.vocab_size, p.tie_embeddings ? "yes" : "no",
                  p.model.c_str());
    if (!c.list) return usage_error("synth: --preset is required");
    return 0;
  }
  if (c.out.empty()) return usage_error("synth: -o DIR is required");
  SynthOptions o;
  o.preset = c.preset;
  o.out_dir = c.out;
  o.layers = c.layers;
  o.seed = c.seed;
  o.force = c.force;
  if (c.dtype == "f16") o.dtype = DType::kF16;
  else if (c.dtype == "bf16") o.dtype = DType::kBF16;
  else return usage_error("--dtype must be f16 or bf16, not '" + c.dtype + "'");
  if (isatty(STDERR_FILENO)) {
    o.progress = [last = -1](double f) mutable {
      const int pct = static_cast<int>(f * 100.0);
      if (pct == last) return;
      last = pct;
      const int w = 40, fill = pct * w / 100;
      std::fprintf(stderr, "\rwriting      [%.*s%*s] %3d%%", fill, "########################################", w - fill,
                   "", pct);
      if (pct >= 100) std::fputc('\n', stderr);
    };
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto r = write_synth_model(o);
  if (!r) return fail(r.status());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const SynthPreset& p = r->preset;
  std::fprintf(stderr, "kiln: wrote %s in %.1f s: %s shapes, %d layers, %.2f M parameters, %.1f MiB of %s weights\n",
               c.out.c_str(), secs, p.name.c_str(), p.num_layers, static_cast<double>(r->parameters) / 1e6,
               static_cast<double>(r->weight_bytes) / (1024.0 * 1024.0), c.dtype.c_str());
  for (const auto& f : r->files) std::fprintf(stderr, "  %s\n", f.c_str());
  return 0;
}

}  // namespace

void add_synth_command(CLI::App& app, int& exit_code) {
  auto c = std::make_shared<SynthCmd>();
  CLI::App* cmd = app.add_subcommand(
      "synth", "Write a Hugging Face folder with random weights in the shapes of a published model (for benchmarks)");
  cmd->add_option("--preset", c->preset,
                  "tinyllama-1.1b, llama-3.2-1b, qwen2.5-0.5b, qwen2.5-1.5b, qwen3-0.6b, qwen3-1.7b, llama-2-7b (--list for all)");
  cmd->add_option("-o,--output", c->out, "the folder to write (made under a temporary name, then renamed)");
  cmd->add_option("--layers", c->layers, "keep only the first N layers (default: all)")->check(at_least(1));
  cmd->add_option("--dtype", c->dtype, "f16 (default) or bf16");
  cmd->add_option("--seed", c->seed, "weights are a function of the seed (default 0)")->check(at_least<int64_t>(0));
  cmd->add_flag("--force", c->force, "replace the output folder if it exists");
  cmd->add_flag("--list", c->list, "list the presets");
  cmd->callback([c, &exit_code] { exit_code = synth(*c); });
}

}  // namespace kiln::cli
