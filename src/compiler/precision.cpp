#include "compiler/passes.h"
#include "formats/hf_folder.h"
#include "graph/weight_params.h"

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

Status assign_precision(Graph& g, const OverridesFile& overrides, const std::string& path, bool guard_classifier,
                        std::vector<std::string>* notes) {
  std::vector<WeightRef> refs;
  for (const WeightDesc& w : g.weights) refs.push_back(weight_ref(w));
  OverridesFile file = overrides;
  const Scheme d = overrides.defaults.scheme;
  if (guard_classifier && !is_float_scheme(d)) {
    const std::string cls = g.find_weight("output.weight") >= 0 ? "output.weight" : "token_embd.weight";
    Rule r;
    r.match = cls;
    r.params.scheme = is_4bit(d) ? widen_to_w8(d) : Scheme::kF16;
    r.params = canonical(r.params);
    r.text = "{\"match\": \"" + cls + "\"} (classifier guard)";
    file.rules.insert(file.rules.begin(), r);  // the file's own rules come after it, and win
    if (notes) notes->push_back(cls + ": kept at " + describe(r.params) + " as the classifier (--quantize-classifier to store it at " +
                                describe(overrides.defaults) + ")");
  }
  KILN_ASSIGN_OR_RETURN(std::vector<QuantParams> params, assign_schemes(file, refs, path, notes));
  for (size_t i = 0; i < g.weights.size(); ++i) set_weight_params(g.weights[i], params[i]);
  return Status::ok();
}

}  // namespace kiln
