#include "compiler/passes.h"
#include "formats/hf_folder.h"
#include "quant/weight_params.h"

namespace kiln {

WeightRef weight_ref(const WeightDesc& w) {
  WeightRef r;
  r.name = w.name;
  r.alias = canonical_to_hf_name(w.name);
  r.rows = w.shape.size() == 2 ? w.shape[0] : 1;
  r.cols = w.shape.back();
  const std::string suffix = ".weight";
  std::string base = w.name;
  if (base.compare(0, 4, "blk.") == 0) {
    size_t dot = base.find('.', 4);
    r.layer = std::stoi(base.substr(4, dot - 4));
    base = base.substr(dot + 1);
  }
  r.is_matmul_weight = w.shape.size() == 2;
  if (base == "token_embd.weight") r.op = "embedding";
  else if (base == "output.weight") r.op = "output";
  else if (r.is_matmul_weight && base.size() > suffix.size()) r.op = base.substr(0, base.size() - suffix.size());
  return r;
}

Status assign_precision(Graph& g, const OverridesFile& overrides, const std::string& path,
                        std::vector<std::string>* notes) {
  std::vector<WeightRef> refs;
  for (const WeightDesc& w : g.weights) refs.push_back(weight_ref(w));
  KILN_ASSIGN_OR_RETURN(std::vector<QuantParams> params, assign_schemes(overrides, refs, path, notes));
  for (size_t i = 0; i < g.weights.size(); ++i) set_weight_params(g.weights[i], params[i]);
  return Status::ok();
}

}  // namespace kiln
