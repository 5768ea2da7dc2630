#include "compiler/driver.h"

#include <cstring>

#include "backends/registry.h"
#include "graph/builder.h"
#include "quant/ggml_blocks.h"
#include "quant/weight_params.h"

namespace kiln {

namespace {

// The f32 values of a source tensor (mapped bytes reinterpreted, or converted).
Result<std::vector<float>> source_f32(const TensorSource& t) {
  std::vector<float> out(t.elements());
  KILN_RETURN_IF_ERROR(dequantize(t.dtype, t.bytes, out).with_context(t.file + ": tensor '" + t.name + "'"));
  return out;
}

}  // namespace

Result<ProgramImage> compile_model(const Import& imp, const CompileOptions& o, CompileReport* report) {
  CompileReport local;
  CompileReport& r = report ? *report : local;
  const ImportedModel& m = imp.model;
  ProgramImage img;
  img.config = m.config;
  KILN_ASSIGN_OR_RETURN(Graph g, build_decoder_graph(m.config));
  KILN_RETURN_IF_ERROR(assign_precision(g, o.quant, o.overrides_path, o.guard_classifier, &r.notes));
  if (o.fuse) r.fusion = fuse(g);
  KILN_RETURN_IF_ERROR(verify_graph(g).with_context("compiler"));

  // Weights: quantized into the layout the reference kernels read (the fast back ends repack
  // into their own layouts here, never at load time).
  img.weights.resize(g.weights.size());
  std::vector<int64_t> sizes(g.weights.size(), 0);
  for (size_t i = 0; i < g.weights.size(); ++i) {
    const WeightDesc& w = g.weights[i];
    auto it = m.tensors.find(w.name);
    if (it == m.tensors.end()) return corrupt(m.path + ": missing tensor '" + w.name + "'");
    const TensorSource& src = it->second;
    r.source_bytes += static_cast<int64_t>(src.bytes.size());
    r.parameters += static_cast<int64_t>(src.elements());
    KILN_ASSIGN_OR_RETURN(QuantParams p, weight_params(w));
    const int64_t rows = w.shape.size() == 2 ? w.shape[0] : 1, cols = w.shape.back();
    if (p.scheme == Scheme::kF32 && src.dtype == DType::kF32 &&
        reinterpret_cast<uintptr_t>(src.bytes.data()) % alignof(float) == 0) {
      img.weights[i] = src.bytes;  // used in place from the source's map
    } else {
      KILN_ASSIGN_OR_RETURN(std::vector<float> f, source_f32(src));
      auto need = quantized_size(p, rows, cols);
      if (!need) return invalid_argument("weight '" + w.name + "': cannot store as " + describe(p));
      auto buf = std::make_shared<std::vector<uint8_t>>(*need);
      KILN_RETURN_IF_ERROR(round_to_nearest().quantize(p, f.data(), rows, cols, *buf).with_context("weight '" + w.name + "'"));
      img.weights[i] = *buf;
      img.owners.push_back(buf);
    }
    sizes[i] = static_cast<int64_t>(img.weights[i].size());
    r.compiled_bytes += sizes[i];
    r.scheme_bytes[w.scheme] += sizes[i];
    if (o.progress) o.progress(static_cast<double>(i + 1) / static_cast<double>(g.weights.size()));
  }
  for (const auto& f : m.files) img.owners.push_back(f);

  std::vector<const Backend*> backends = o.backends;
  if (backends.empty()) {
    auto reg = registered_backends();
    backends.assign(reg.begin(), reg.end());
  }
  KILN_ASSIGN_OR_RETURN(r.partition, partition(g, backends, sizes));
  img.program.plan = plan_memory(g, o.max_tokens);
  img.program.rope_inv_freq = rope_inv_freq(m.config);
  if (auto rf = m.tensors.find("rope_freqs.weight"); rf != m.tensors.end()) {
    KILN_ASSIGN_OR_RETURN(std::vector<float> factors, source_f32(rf->second));
    for (size_t i = 0; i < img.program.rope_inv_freq.size() && i < factors.size(); ++i)
      img.program.rope_inv_freq[i] /= factors[i];
  }
  img.program.graph = std::move(g);
  auto tok = tokenizer_blob_for(imp, o.tokenizer_path);
  if (tok) {
    img.tokenizer = std::move(tok).value();
  } else if (o.require_tokenizer || !o.tokenizer_path.empty()) {
    return tok.status();
  } else {
    img.tokenizer.kind = "none";
  }
  return img;
}

}  // namespace kiln
