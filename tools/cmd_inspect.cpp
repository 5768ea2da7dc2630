// kiln inspect: what a .kiln holds: header, ops, back ends, memory plan, I/O, schemes, sizes.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/describe.h"
#include "tools/cli_common.h"

namespace kiln::cli {

namespace {

struct InspectCmd {
  std::string file;
  bool json = false;
  bool verify = false;
};

int inspect(const InspectCmd& c) {
  auto k = open_kiln_image(c.file, c.verify);
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
  return 0;
}

}  // namespace

void add_inspect_command(CLI::App& app, int& exit_code) {
  auto c = std::make_shared<InspectCmd>();
  CLI::App* cmd = app.add_subcommand("inspect", "Show what a .kiln context binary holds");
  cmd->add_option("file", c->file, "the .kiln file")->required();
  cmd->add_flag("--json", c->json, "print one JSON object");
  cmd->add_flag("--verify", c->verify, "check every section's checksum (exit 2 on a mismatch)");
  cmd->callback([c, &exit_code] { exit_code = inspect(*c); });
}

}  // namespace kiln::cli
