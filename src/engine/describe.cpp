#include "engine/describe.h"

#include <map>
#include <set>

#include "artifact/conformance_section.h"
#include "backends/registry.h"
#include "core/cpu_features.h"
#include "tokenizer/tokenizer_source.h"

namespace kiln {

std::string scheme_text(const WeightDesc& w) {
  std::string s(scheme_name(w.scheme));
  if (w.group_size) s += " g" + std::to_string(w.group_size) + (!is_4bit(w.scheme) ? "" : w.symmetric ? " sym" : " asym");
  return s;
}

nlohmann::json describe(const KilnImage& k) {
  const KilnFile& f = *k.file;
  const ProgramImage& img = k.image;
  const Graph& g = img.program.graph;
  const MemoryPlan& plan = img.program.plan;
  const ModelConfig& c = img.config;
  nlohmann::json j;
  // What the file needs of a CPU, and which kernels it runs on this one (and why not faster).
  const uint64_t tf = f.target().cpu_features;
  const std::string needed = cpu_feature_names(tf & ~kCpuBestTable);
  std::string needs = needed.empty() ? "nothing beyond the architecture" : needed;
  needs += (tf & kCpuBestTable) ? "; runs the best kernels of the machine that opens it" : "; runs those kernels everywhere";
  std::string here;
  if (const uint64_t missing = tf & ~kCpuBestTable & ~host_cpu_features(); missing != 0) {
    here = "none: this machine lacks " + cpu_feature_names(missing) + " (" + why_cpu_lacks(missing) + ")";
  } else if (const Backend* b = find_backend(f.target().backend); b != nullptr) {
    PrepareOptions po;
    po.cpu_features = tf;
    here = f.target().backend + ": " + b->kernel_choice(po);
  }
  j["header"] = {{"format_version", f.format_version()}, {"writer", f.writer_version()},
                 {"target", {{"backend", f.target().backend}, {"cpu_features", f.target().cpu_feature_names},
                             {"needs", needs}, {"kernels_here", here}}},
                 {"file_bytes", f.file_size()}};
  nlohmann::json sections = nlohmann::json::array();
  for (const auto& s : f.sections())
    sections.push_back({{"kind", kiln_section_name(s.kind)}, {"offset", s.offset}, {"bytes", s.size}});
  j["sections"] = sections;
  j["model"] = {{"arch", std::string(arch_name(c.arch))}, {"layers", c.n_layers}, {"dim", c.dim},
                {"heads", c.n_heads}, {"kv_heads", c.n_kv_heads}, {"head_dim", c.head_dim},
                {"vocab", c.vocab_size}, {"max_seq_len", c.max_seq_len}, {"tokenizer", img.tokenizer.kind}};
  // Whether `kiln chat` and the server find a template in the file, or need one given.
  auto chat = chat_template_of_blob(img.tokenizer, f.path() + ": tokenizer");
  j["chat_template"] = {{"stored", chat && chat->has_value()}, {"bytes", chat && chat->has_value() ? (*chat)->source.size() : 0}};
  if (!chat) j["chat_template"]["error"] = chat.status().message();
  std::map<std::string, int> ops;
  std::map<std::string, int> backend_nodes;
  std::map<std::string, uint64_t> backend_bytes;
  // Each weight counted once per back end, however many of its nodes read it (a tied embedding
  // is read by the embedding and the classifier): bytes stored, not bytes read.
  std::map<std::string, std::set<int>> backend_weights;
  for (const Node& n : g.nodes) {
    ops[std::string(op_name(n.op))]++;
    backend_nodes[n.backend]++;
    for (int w : n.weights)
      if (backend_weights[n.backend].insert(w).second) backend_bytes[n.backend] += img.weights[static_cast<size_t>(w)].size();
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
    tensors.push_back({{"name", w.name}, {"shape", w.shape}, {"scheme", scheme_text(w)}, {"bytes", img.weights[i].size()}});
    scheme_bytes[std::string(scheme_name(w.scheme))] += img.weights[i].size();
  }
  j["tensors"] = tensors;
  j["sizes"] = {{"by_scheme", scheme_bytes}};
  if (f.has_section(KilnSection::kConformance)) {
    auto r = decode_conformance_section(f.section(KilnSection::kConformance), f.path());
    if (!r) {
      j["conformance"] = {{"error", r.status().message()}};
    } else {
      // The section's own JSON, as written.
      j["conformance"] = nlohmann::json::parse(encode_conformance_section(*r), nullptr, false);
    }
  }
  return j;
}

std::string main_scheme(const Model& m) {
  std::map<std::string, uint64_t> by_scheme;
  const Graph& g = m.program().graph;
  for (size_t i = 0; i < g.weights.size(); ++i) by_scheme[std::string(scheme_name(g.weights[i].scheme))] += m.image().weights[i].size();
  std::string best;
  for (const auto& [scheme, bytes] : by_scheme)
    if (best.empty() || bytes > by_scheme[best]) best = scheme;
  return best;
}

}  // namespace kiln
