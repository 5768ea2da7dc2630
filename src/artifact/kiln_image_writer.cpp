#include "artifact/kiln_image_writer.h"

#include <cstring>

#include "artifact/config_section.h"
#include "artifact/program_section.h"
#include "artifact/source_section.h"
#include "artifact/tokenizer_section.h"
#include "graph/weight_params.h"

namespace kiln {

namespace {
std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }
}  // namespace

Status write_kiln_image(const ProgramImage& img, const KilnTarget& target, const QuantTotals& totals,
                        const std::string& writer, const std::string& path,
                        const std::function<void(double)>& progress, const ConformanceReport* conformance, const SourceRecord* source) {
  KilnWriter w(target, writer);
  KILN_RETURN_IF_ERROR(w.add_section(KilnSection::kConfig, bytes_of(config_to_json(img.config))));
  KILN_RETURN_IF_ERROR(w.add_section(KilnSection::kTokenizer, encode_tokenizer_section(img.tokenizer)));
  KILN_RETURN_IF_ERROR(w.add_section(KilnSection::kProgram, bytes_of(program_to_json(img.program))));
  KILN_RETURN_IF_ERROR(w.add_section(KilnSection::kMemoryPlan, bytes_of(plan_to_json(img.program.plan))));
  KILN_RETURN_IF_ERROR(w.add_section(KilnSection::kQuantRecord, bytes_of(encode_quant_record(img, totals))));
  if (conformance != nullptr)
    KILN_RETURN_IF_ERROR(w.add_section(KilnSection::kConformance, bytes_of(encode_conformance_section(*conformance))));
  if (source != nullptr) KILN_RETURN_IF_ERROR(w.add_section(KilnSection::kSource, bytes_of(encode_source_section(*source))));
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
