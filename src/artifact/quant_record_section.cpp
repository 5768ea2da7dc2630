#include "artifact/quant_record_section.h"

#include "formats/json_util.h"

namespace kiln {

std::string encode_quant_record(const ProgramImage& img, const QuantTotals& r) {
  Json tensors = Json::array();
  const Graph& g = img.program.graph;
  for (size_t i = 0; i < g.weights.size(); ++i) {
    const WeightDesc& w = g.weights[i];
    tensors.push_back({{"name", w.name}, {"scheme", scheme_name(w.scheme)}, {"group_size", w.group_size},
                       {"symmetric", w.symmetric}, {"layout", w.layout}, {"bytes", img.weights[i].size()}});
  }
  Json schemes = Json::object();
  for (const auto& [k, v] : r.scheme_bytes) schemes[k] = v;
  Json j{{"method", r.method}, {"tensors", tensors}, {"scheme_bytes", schemes},
         {"source_bytes", r.source_bytes}, {"compiled_bytes", r.compiled_bytes},
         {"parameters", r.parameters}, {"notes", r.notes}};
  if (r.method != "rtn")
    j["calibration"] = {{"source", r.calibration_source}, {"hash", r.calibration_hash}, {"tokens", r.calibration_tokens},
                        {"weights", r.weights_calibrated}};
  return j.dump();
}

}  // namespace kiln
