// kiln inspect: what a .kiln holds: header, ops, back ends, memory plan, I/O, schemes, sizes.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "runtime/kiln_image.h"
#include "tools/cli_common.h"

namespace kiln::cli {

namespace {

struct InspectCmd {
  std::string file;
  bool json = false;
  bool verify = false;
};

nlohmann::json describe(const KilnImage& k) {
  const KilnFile& f = *k.file;
  const ProgramImage& img = k.image;
  const Graph& g = img.program.graph;
  const MemoryPlan& plan = img.program.plan;
  const ModelConfig& c = img.config;
  nlohmann::json j;
  j["header"] = {{"format_version", f.format_version()}, {"writer", f.writer_version()},
                 {"target", {{"backend", f.target().backend}, {"cpu_features", f.target().cpu_feature_names}}},
                 {"file_bytes", f.file_size()}};
  nlohmann::json sections = nlohmann::json::array();
  for (const auto& s : f.sections())
    sections.push_back({{"kind", kiln_section_name(s.kind)}, {"offset", s.offset}, {"bytes", s.size}});
  j["sections"] = sections;
  j["model"] = {{"arch", std::string(arch_name(c.arch))}, {"layers", c.n_layers}, {"dim", c.dim},
                {"heads", c.n_heads}, {"kv_heads", c.n_kv_heads}, {"head_dim", c.head_dim},
                {"vocab", c.vocab_size}, {"max_seq_len", c.max_seq_len}, {"tokenizer", img.tokenizer.kind}};
  std::map<std::string, int> ops;
  std::map<std::string, int> backend_nodes;
  std::map<std::string, uint64_t> backend_bytes;
  for (const Node& n : g.nodes) {
    ops[std::string(op_name(n.op))]++;
    backend_nodes[n.backend]++;
    for (int w : n.weights) backend_bytes[n.backend] += img.weights[static_cast<size_t>(w)].size();
  }
  j["ops"] = ops;
  nlohmann::json be = nlohmann::json::object();
  for (const auto& [b, n] : backend_nodes)
    be[b] = {{"ops", n}, {"op_share", static_cast<double>(n) / static_cast<double>(g.nodes.size())},
             {"weight_bytes", backend_bytes[b]}};
  j["backends"] = be;
  j["memory_plan"] = {{"max_tokens", plan.max_tokens}, {"logit_rows", plan.logit_rows}, {"peak_bytes", plan.arena_bytes},
                      {"sum_of_activations_bytes", plan.total_bytes},
                      {"reuse_factor", plan.arena_bytes ? static_cast<double>(plan.total_bytes) / static_cast<double>(plan.arena_bytes) : 0.0}};
  j["io"] = {
      {"inputs", {{{"name", "tokens"}, {"dtype", "int32"}, {"shape", {"T", 1}}, {"T", "1.." + std::to_string(plan.max_tokens) + " per step"}}}},
      {"outputs", {{{"name", "logits"}, {"dtype", "float32"}, {"shape", {"1 (or T <= " + std::to_string(plan.logit_rows) + ")", c.vocab_size}}}}},
      {"state", {{{"name", "kv_cache"}, {"dtype", "float32"}, {"shape", {2, c.n_layers, "n_ctx", c.kv_dim()}},
                  {"bytes_per_position", 2 * 4 * c.n_layers * c.kv_dim()}}}}};
  nlohmann::json tensors = nlohmann::json::array();
  std::map<std::string, uint64_t> scheme_bytes;
  for (size_t i = 0; i < g.weights.size(); ++i) {
    const WeightDesc& w = g.weights[i];
    std::string scheme = w.scheme;
    if (w.group_size) scheme += " g" + std::to_string(w.group_size) + (w.symmetric ? " sym" : " asym");
    tensors.push_back({{"name", w.name}, {"shape", w.shape}, {"scheme", scheme}, {"bytes", img.weights[i].size()}});
    scheme_bytes[w.scheme] += img.weights[i].size();
  }
  j["tensors"] = tensors;
  j["sizes"] = {{"by_scheme", scheme_bytes}};
  return j;
}

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
