// kiln inspect: what a .kiln holds: header, ops, back ends, memory plan, I/O, schemes, sizes;
// for a source model, what it is, its tensors as stored, and what `kiln compile` will make of them.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/describe.h"
#include "engine/describe_source.h"
#include "engine/open_model.h"
#include "tools/cli_common.h"

namespace kiln::cli {

namespace {

struct InspectCmd {
  std::string file;
  bool json = false;
  bool verify = false;
};

// A model that is not compiled yet: what it is, its tensors as stored, and the way to a .kiln.
int inspect_source(const InspectCmd& c) {
  if (c.verify) return usage_error("--verify checks a .kiln's checksums; " + c.file + " is a source model");
  auto imp = import_model(c.file);
  if (!imp) return fail(imp.status());
  const nlohmann::json j = describe_source(*imp);
  if (c.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  const auto& src = j["source"];
  const auto& m = j["model"];
  const std::string format = src["format"] == "gguf" ? "GGUF model"
                             : src["format"] == "hf" ? "Hugging Face model folder"
                                                     : "llama2.c checkpoint";
  std::printf("%s: a %s, a source model (not compiled), %llu bytes in %zu file(s)\n", c.file.c_str(), format.c_str(), static_cast<unsigned long long>(src["file_bytes"].get<uint64_t>()),
              src["files"].get<size_t>());
  std::printf("\nmodel: %s, %d layers, dim %d, %d heads (%d kv, head_dim %d), ffn %d, vocab %d, max context %d\n",
              m["arch"].get<std::string>().c_str(), m["layers"].get<int>(), m["dim"].get<int>(), m["heads"].get<int>(),
              m["kv_heads"].get<int>(), m["head_dim"].get<int>(), m["hidden_dim"].get<int>(), m["vocab"].get<int>(),
              m["max_seq_len"].get<int>());
  if (j.contains("gguf")) {
    const auto& g = j["gguf"];
    std::printf("gguf: name '%s', tokenizer %s (pre %s), %s\n", g["name"].get<std::string>().c_str(),
                g["tokenizer_model"].get<std::string>().c_str(), g["tokenizer_pre"].get<std::string>().c_str(),
                g["chat_template"].get<bool>() ? "a chat template" : "no chat template");
  }
  std::printf("\ntensors (as stored -> as `kiln compile` stores them):\n");
  for (const auto& t : j["tensors"]) {
    std::printf("  %-28s %-16s %-6s %12llu bytes", t["name"].get<std::string>().c_str(), t["shape"].dump().c_str(),
                t["type"].get<std::string>().c_str(), static_cast<unsigned long long>(t["bytes"].get<uint64_t>()));
    if (t.contains("compiles_to"))
      std::printf(" -> %-16s %12llu bytes", t["compiles_to"]["scheme"].get<std::string>().c_str(),
                  static_cast<unsigned long long>(t["compiles_to"]["bytes"].get<uint64_t>()));
    std::printf("\n");
  }
  std::printf("\nsize by type (%llu parameters):\n", static_cast<unsigned long long>(j["sizes"]["parameters"].get<uint64_t>()));
  for (auto it = j["sizes"]["by_type"].begin(); it != j["sizes"]["by_type"].end(); ++it)
    std::printf("  %-6s %12llu bytes\n", it.key().c_str(), static_cast<unsigned long long>(it->get<uint64_t>()));
  const auto& k = j["compile"];
  const std::string command = k["command"].get<std::string>();
  if (k.contains("error")) {
    std::printf("\n`%s` would fail: %s\n", command.c_str(), k["error"].get<std::string>().c_str());
    return 0;
  }
  std::printf("\nwhat `%s` does with each type:\n", command.c_str());
  for (const auto& t : k["by_type"])
    std::printf("  %s -> %s (%s): %d tensor%s, %llu -> %llu bytes\n", t["type"].get<std::string>().c_str(),
                t["scheme"].get<std::string>().c_str(), t["how"].get<std::string>().c_str(), t["tensors"].get<int>(),
                t["tensors"].get<int>() == 1 ? "" : "s", static_cast<unsigned long long>(t["bytes"].get<uint64_t>()),
                static_cast<unsigned long long>(t["compiled_bytes"].get<uint64_t>()));
  for (const auto& n : k["notes"]) std::printf("  note: %s\n", n.get<std::string>().c_str());
  std::printf("\nweight bytes by kiln scheme, now -> compiled:\n");
  std::string main;
  double main_share = 0;
  for (auto it = k["by_scheme"].begin(); it != k["by_scheme"].end(); ++it) {
    const double share = (*it)["share"].get<double>();
    std::printf("  %-6s %12llu -> %12llu bytes (%5.1f%%)\n", it.key().c_str(),
                static_cast<unsigned long long>((*it)["bytes"].get<uint64_t>()),
                static_cast<unsigned long long>((*it)["compiled_bytes"].get<uint64_t>()), 100.0 * share);
    if (share > main_share) main = it.key(), main_share = share;
  }
  std::printf("  %-6s %12llu -> %12llu bytes\n", "all", static_cast<unsigned long long>(k["bytes"].get<uint64_t>()),
              static_cast<unsigned long long>(k["compiled_bytes"].get<uint64_t>()));
  std::printf("\n`%s` makes the context binary (%.1f%% %s by bytes, as above; -q or --overrides choose otherwise); "
              "`kiln inspect model.kiln` then shows its ops, back ends and memory plan\n",
              command.c_str(), 100.0 * main_share, main.c_str());
  return 0;
}

// The conformance section: how far the file is from the float model, on each text measured.
void print_conformance(const nlohmann::json& j) {
  if (!j.contains("conformance")) {
    std::printf("\nconformance: none (written before kiln measured it, or compiled with --no-conformance)\n");
    return;
  }
  const auto& c = j["conformance"];
  if (c.contains("error")) {
    std::printf("\nconformance: unreadable (%s)\n", c["error"].get<std::string>().c_str());
    return;
  }
  // A null number is one that overflowed (conformance_section.h).
  auto num = [](const nlohmann::json& v) { return v.is_number() ? v.get<double>() : INFINITY; };
  std::printf("\nconformance (against %s):\n", c["reference"].get<std::string>().c_str());
  for (const auto& t : c["texts"]) {
    const double pa = num(t["ppl_reference"]), pb = num(t["ppl_quantized"]);
    std::printf("  %s: %lld tokens (%lld scored, windows of %d): top-1 agreement %.2f %%, KL mean %.6f, max %.6f nats; "
                "perplexity %.4f -> %.4f (%+.2f %%)\n",
                t["name"].get<std::string>().c_str(), static_cast<long long>(t["tokens"].get<int64_t>()),
                static_cast<long long>(t["scored"].get<int64_t>()), t["n_ctx"].get<int>(), 100 * num(t["top1_agreement"]),
                num(t["kl"]), num(t["max_kl"]), pa, pb, 100 * (pb / pa - 1));
    std::printf("    layers adding the most error:");
    for (const auto& l : t["worst_layers"])
      std::printf(" %d (%+.6f)", l["layer"].get<int>(), num(l["added_error"]));
    if (t["round_trip"].get<bool>())
      std::printf("\n    tokenizer round trip: exact\n");
    else
      std::printf("\n    tokenizer round trip: differs from byte %lld\n", static_cast<long long>(t["round_trip_mismatch"].get<int64_t>()));
  }
}

int inspect(const InspectCmd& c) {
  if (!is_kiln_file(c.file)) {
    // Only a file that is some model goes to the importer: an empty or unknown file is named
    // as such by detect_model_format.
    auto fmt = detect_model_format(c.file);
    if (!fmt) return fail(fmt.status());
    return inspect_source(c);
  }
  auto k = open_kiln_image(c.file, c.verify, /*check_target=*/false);  // inspect says what it needs
  if (!k) return fail(k.status());
  nlohmann::json j = describe(*k);
  if (c.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  const auto& h = j["header"];
  std::printf("%s: kiln format %d, written by %s, target %s [%s], %llu bytes%s\n", c.file.c_str(),
              h["format_version"].get<int>(), h["writer"].get<std::string>().c_str(),
              h["target"]["backend"].get<std::string>().c_str(), h["target"]["cpu_features"].get<std::string>().c_str(),
              static_cast<unsigned long long>(h["file_bytes"].get<uint64_t>()), c.verify ? ", checksums verified" : "");
  std::printf("needs: %s\nkernels here: %s\n", h["target"]["needs"].get<std::string>().c_str(),
              h["target"]["kernels_here"].get<std::string>().c_str());
  std::printf("\nsections:\n");
  for (const auto& s : j["sections"])
    std::printf("  %-14s offset %10llu  %12llu bytes\n", s["kind"].get<std::string>().c_str(),
                static_cast<unsigned long long>(s["offset"].get<uint64_t>()),
                static_cast<unsigned long long>(s["bytes"].get<uint64_t>()));
  const auto& m = j["model"];
  std::printf("\nmodel: %s, %d layers, dim %d, %d heads (%d kv, head_dim %d), vocab %d, max context %d, tokenizer %s\n",
              m["arch"].get<std::string>().c_str(), m["layers"].get<int>(), m["dim"].get<int>(), m["heads"].get<int>(),
              m["kv_heads"].get<int>(), m["head_dim"].get<int>(), m["vocab"].get<int>(), m["max_seq_len"].get<int>(),
              m["tokenizer"].get<std::string>().c_str());
  const auto& ct = j["chat_template"];
  if (ct.contains("error"))
    std::printf("chat template: unreadable (%s)\n", ct["error"].get<std::string>().c_str());
  else if (ct["stored"].get<bool>())
    std::printf("chat template: stored (%llu bytes; kiln chat and kiln serve's chat completions use it)\n",
                static_cast<unsigned long long>(ct["bytes"].get<uint64_t>()));
  else
    std::printf("chat template: none stored (kiln chat needs --chat-template FILE; kiln serve answers completions only)\n");
  std::printf("\nops:\n");
  for (auto it = j["ops"].begin(); it != j["ops"].end(); ++it) std::printf("  %-24s %d\n", it.key().c_str(), it->get<int>());
  std::printf("\nback ends:\n");
  for (auto it = j["backends"].begin(); it != j["backends"].end(); ++it)
    std::printf("  %-8s %d ops (%.0f%%), %llu weight bytes\n", it.key().c_str(), (*it)["ops"].get<int>(),
                100.0 * (*it)["op_share"].get<double>(), static_cast<unsigned long long>((*it)["weight_bytes"].get<uint64_t>()));
  const auto& mp = j["memory_plan"];
  std::printf("\nmemory plan: peak %lld bytes of activations for %d tokens per step; %lld without reuse (reuse factor %.2f)\n",
              static_cast<long long>(mp["peak_bytes"].get<int64_t>()), mp["max_tokens"].get<int>(),
              static_cast<long long>(mp["sum_of_activations_bytes"].get<int64_t>()), mp["reuse_factor"].get<double>());
  std::printf("\nio:\n  input  tokens   int32   [T, 1], T = %s\n  output logits   float32 [1 or T <= %d, %d]\n"
              "  state  kv_cache float32 [2, %d, n_ctx, %d] (%d bytes per position)\n",
              j["io"]["inputs"][0]["T"].get<std::string>().c_str(), mp["logit_rows"].get<int>(), m["vocab"].get<int>(), m["layers"].get<int>(),
              j["io"]["state"][0]["shape"][3].get<int>(), j["io"]["state"][0]["bytes_per_position"].get<int>());
  std::printf("\ntensors:\n");
  for (const auto& t : j["tensors"])
    std::printf("  %-28s %-16s %-18s %10llu bytes\n", t["name"].get<std::string>().c_str(), t["shape"].dump().c_str(),
                t["scheme"].get<std::string>().c_str(), static_cast<unsigned long long>(t["bytes"].get<uint64_t>()));
  std::printf("\nsize by scheme:\n");
  for (auto it = j["sizes"]["by_scheme"].begin(); it != j["sizes"]["by_scheme"].end(); ++it)
    std::printf("  %-6s %12llu bytes\n", it.key().c_str(), static_cast<unsigned long long>(it->get<uint64_t>()));
  print_conformance(j);
  return 0;
}

}  // namespace

void add_inspect_command(CLI::App& app, int& exit_code) {
  auto c = std::make_shared<InspectCmd>();
  CLI::App* cmd = app.add_subcommand("inspect", "Show what a .kiln context binary (or a source model) holds");
  cmd->add_option("file", c->file, "a .kiln file, or a .gguf, HF folder or llama2.c .bin to describe")->required();
  cmd->add_flag("--json", c->json, "print one JSON object");
  cmd->add_flag("--verify", c->verify, "check every section's checksum (exit 2 on a mismatch)");
  cmd->callback([c, &exit_code] { exit_code = inspect(*c); });
}

}  // namespace kiln::cli
