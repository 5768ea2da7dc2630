#include "compiler/kiln_writer.h"

#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "core/cpu_features.h"
#include "formats/json_util.h"
#include "quant/weight_params.h"

namespace kiln {

Result<KilnTarget> resolve_target(const std::string& name) {
  // Each target names the most its kernels may use; the file records what the cpu back end's
  // best kernel table within that needs (the same on any machine that compiles it), and the
  // runtime runs that table, or refuses the file on a CPU without those features.
  KilnTarget t;
  t.backend = "cpu";
  uint64_t wanted = 0;
  if (name == "native") {
    wanted = host_cpu_features();
  } else {
    bool found = false;
    std::string names = "native";
    for (const CpuTarget& n : kCpuTargets) {
      names += std::string(", ") + n.name;
      if (name == n.name) {
        wanted = n.features;
        found = true;
      }
    }
    if (!found) return invalid_argument("unknown target '" + name + "' (" + names + ")");
  }
  t.cpu_features = cpu_kernel_features(wanted);
  t.cpu_feature_names = cpu_feature_names(t.cpu_features);
  return t;
}

std::vector<uint8_t> encode_tokenizer_section(const TokenizerBlob& blob) {
  Json h{{"kind", blob.kind}, {"vocab_size", blob.vocab_size}};
  if (blob.chat) {
    h["chat_template"] = blob.chat->source;
    Json specials = Json::array();
    for (const auto& [name, text] : blob.chat->special_tokens) specials.push_back({name, text});
    h["special_tokens"] = std::move(specials);
  }
  const std::string header = h.dump();
  std::vector<uint8_t> out(4);
  const auto n = static_cast<uint32_t>(header.size());
  std::memcpy(out.data(), &n, 4);
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), blob.bytes.begin(), blob.bytes.end());
  return out;
}

namespace {

std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

std::string quant_record(const ProgramImage& img, const CompileReport& r) {
  Json tensors = Json::array();
  const Graph& g = img.program.graph;
  for (size_t i = 0; i < g.weights.size(); ++i) {
    const WeightDesc& w = g.weights[i];
    tensors.push_back({{"name", w.name}, {"scheme", w.scheme}, {"group_size", w.group_size},
                       {"symmetric", w.symmetric}, {"layout", w.layout}, {"bytes", img.weights[i].size()}});
  }
  Json schemes = Json::object();
  for (const auto& [k, v] : r.scheme_bytes) schemes[k] = v;
  return Json{{"method", "rtn"}, {"tensors", tensors}, {"scheme_bytes", schemes},
              {"source_bytes", r.source_bytes}, {"compiled_bytes", r.compiled_bytes},
              {"parameters", r.parameters}, {"notes", r.notes}}
      .dump();
}

}  // namespace

Status write_kiln(const ProgramImage& img, const KilnTarget& target, const CompileReport& report,
                  const std::string& path, const std::function<void(double)>& progress) {
  KilnWriter w(target, std::string("kiln ") + KILN_VERSION_STRING);
  KILN_RETURN_IF_ERROR(w.add_section(KilnSection::kConfig, bytes_of(config_to_json(img.config))));
  KILN_RETURN_IF_ERROR(w.add_section(KilnSection::kTokenizer, encode_tokenizer_section(img.tokenizer)));
  KILN_RETURN_IF_ERROR(w.add_section(KilnSection::kProgram, bytes_of(program_to_json(img.program))));
  KILN_RETURN_IF_ERROR(w.add_section(KilnSection::kMemoryPlan, bytes_of(plan_to_json(img.program.plan))));
  KILN_RETURN_IF_ERROR(w.add_section(KilnSection::kQuantRecord, bytes_of(quant_record(img, report))));
  const Graph& g = img.program.graph;
  for (size_t i = 0; i < g.weights.size(); ++i) {
    const WeightDesc& d = g.weights[i];
    KILN_ASSIGN_OR_RETURN(QuantParams p, weight_params(d));
    std::span<const uint8_t> src = img.weights[i];
    KILN_RETURN_IF_ERROR(w.add_tensor(d.name, static_cast<uint32_t>(p.scheme), d.shape, src.size(),
                                      [src](std::span<uint8_t> out) {
                                        std::memcpy(out.data(), src.data(), src.size());
                                        return Status::ok();
                                      }));
  }
  return w.write(path, progress);
}

}  // namespace kiln
