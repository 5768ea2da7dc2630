#include "compiler/driver.h"

#include <algorithm>
#include <cstring>

#include "backends/registry.h"
#include "core/thread_pool.h"
#include "graph/builder.h"
#include "graph/weight_params.h"
#include "layout/ggml_blocks.h"
#include "quant/importance_quantizer.h"
#include "quant/weight_quantizer.h"
#include "tokenizer/tokenizer_source.h"

namespace kiln {

namespace {

// The source tensor a weight of the graph is made from (the compile and its plan read the same).
Result<const TensorSource*> source_of(const ImportedModel& m, const WeightDesc& w) {
  auto it = m.tensors.find(w.name);
  if (it == m.tensors.end()) return corrupt(m.path + ": missing tensor '" + w.name + "'");
  return &it->second;
}

// The f32 values of a source tensor (mapped bytes reinterpreted, or converted).
Result<std::vector<float>> source_f32(const TensorSource& t) {
  std::vector<float> out(t.elements());
  KILN_RETURN_IF_ERROR(dequantize(t.dtype, t.bytes, out).with_context(t.file + ": tensor '" + t.name + "'"));
  return out;
}

// A weight dequantized and quantized again a block of rows at a time (every layout is row after
// row), so that no whole FP32 copy of a large matrix (a 32,000 x 2,048 classifier: 250 MiB) is
// ever held: at most about 16 MiB of FP32 at once per thread. With a pool of several threads the
// blocks are cut smaller and shared among them (each row is rounded on its own, so the bytes are
// the same); a quantizer that threads itself (GPTQ) gets no pool here.
Result<std::shared_ptr<std::vector<uint8_t>>> requantize_by_rows(const TensorSource& src, const std::string& name,
                                                                 const QuantParams& p, int64_t rows, int64_t cols,
                                                                 const WeightQuantizer& quantizer, ThreadPool* pool = nullptr) {
  auto need = quantized_size(p, rows, cols);
  auto one_row = quantized_size(p, 1, cols);
  auto src_row = dtype_bytes(src.dtype, static_cast<uint64_t>(cols));
  if (!need || !one_row) return invalid_argument("weight '" + name + "': cannot store as " + describe(p));
  if (!src_row || *src_row * static_cast<uint64_t>(rows) != src.bytes.size())
    return corrupt(src.file + ": tensor '" + src.name + "' holds " + std::to_string(src.bytes.size()) +
                   " bytes, not " + std::to_string(rows) + " rows of " + std::to_string(cols) + " " +
                   std::string(dtype_info(src.dtype).name) + " values");
  auto buf = std::make_shared<std::vector<uint8_t>>(*need);
  const int threads = pool ? pool->size() : 1;
  int64_t block = std::max<int64_t>(1, (int64_t{16} << 20) / static_cast<int64_t>(sizeof(float) * cols));
  if (threads > 1) block = std::max<int64_t>(1, std::min(block, (rows + 4 * threads - 1) / (4 * threads)));
  const int64_t n_blocks = rows > 0 ? (rows + block - 1) / block : 0;
  std::vector<std::vector<float>> f(static_cast<size_t>(threads));
  std::vector<Status> failed(static_cast<size_t>(threads));
  auto run = [&](int64_t b0, int64_t b1, int t) {
    std::vector<float>& part_f = f[static_cast<size_t>(t)];
    for (int64_t b = b0; b < b1 && failed[static_cast<size_t>(t)]; ++b) {
      const int64_t r0 = b * block, n = std::min(block, rows - r0);
      part_f.resize(static_cast<size_t>(n * cols));
      const std::span<float> part(part_f.data(), static_cast<size_t>(n * cols));
      Status st = dequantize(src.dtype, src.bytes.subspan(static_cast<size_t>(r0) * *src_row, static_cast<size_t>(n) * *src_row), part)
                      .with_context(src.file + ": tensor '" + src.name + "'");
      const std::span<uint8_t> out(buf->data() + static_cast<size_t>(r0) * *one_row, static_cast<size_t>(n) * *one_row);
      if (st) st = quantizer.quantize(p, part.data(), n, cols, out).with_context("weight '" + name + "'");
      failed[static_cast<size_t>(t)] = st;
    }
  };
  if (threads > 1) pool->parallel_chunks(n_blocks, 1, run);
  else run(0, n_blocks, 0);
  for (const Status& st : failed)
    if (!st) return st;
  return buf;
}

const Backend* backend_named(std::span<const Backend* const> backends, const std::string& name) {
  for (const Backend* b : backends)
    if (b->name() == name) return b;
  return nullptr;
}

// Layouts: every node that reads a weight asks its back end for a layout (layout_for). The
// weight keeps one that all its readers read (packed layouts before the reference one); when
// there is none, each further layout gets a copy of the weight, "NAME@LAYOUT", read by the nodes
// that asked for it. Only the graph changes here (plan_weights sizes the result without any
// weight's bytes); pack_weights then writes them.
struct LayoutChoice {
  std::vector<const Backend*> packer;  // per weight: the back end that repacks it (null: none reads it)
  std::vector<size_t> original;        // per weight: itself, or the weight a copy was made of
};

Result<LayoutChoice> choose_layouts(Graph& g, std::span<const Backend* const> backends, std::vector<std::string>& notes) {
  struct Reader {
    size_t node, slot;
    const Backend* backend;
    std::string layout;
  };
  const size_t n_weights = g.weights.size();
  std::vector<std::vector<Reader>> readers(n_weights);
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node& n = g.nodes[ni];
    const Backend* b = backend_named(backends, n.backend);
    if (b == nullptr) return Status{StatusCode::kInternal, "partitioned to unknown back end '" + n.backend + "'"};
    for (size_t s = 0; s < n.weights.size(); ++s) {
      const auto wi = static_cast<size_t>(n.weights[s]);
      KILN_ASSIGN_OR_RETURN(std::string layout, b->layout_for(n, g, g.weights[wi]));
      readers[wi].push_back({ni, s, b, std::move(layout)});
    }
  }
  LayoutChoice c;
  c.packer.assign(n_weights, nullptr);
  for (size_t wi = 0; wi < n_weights; ++wi) c.original.push_back(wi);
  for (size_t wi = 0; wi < n_weights; ++wi) {
    if (readers[wi].empty()) continue;
    std::vector<std::string> wanted;
    for (const Reader& rd : readers[wi])
      if (std::find(wanted.begin(), wanted.end(), rd.layout) == wanted.end()) wanted.push_back(rd.layout);
    std::stable_partition(wanted.begin(), wanted.end(), [](const std::string& l) { return l != kRowMajorLayout; });
    auto all_read = [&](const std::string& layout) {
      for (const Reader& rd : readers[wi])
        if (!rd.backend->reads_layout(g.nodes[rd.node], g.weights[wi], layout)) return false;
      return true;
    };
    auto common = std::find_if(wanted.begin(), wanted.end(), all_read);
    if (common != wanted.end()) {
      g.weights[wi].layout = *common;
      c.packer[wi] = readers[wi].front().backend;
      continue;
    }
    // No layout suits every reader: one copy per wanted layout.
    for (size_t li = 0; li < wanted.size(); ++li) {
      size_t target = wi;
      if (li > 0) {
        WeightDesc copy = g.weights[wi];
        copy.name += "@" + wanted[li];
        target = g.weights.size();
        g.weights.push_back(std::move(copy));
        c.packer.push_back(nullptr);
        c.original.push_back(wi);
        notes.push_back("weight '" + g.weights[wi].name + "' is stored twice, in layouts " + wanted[0] + " and " +
                        wanted[li] + ", for back ends that read no common layout");
      }
      g.weights[target].layout = wanted[li];
      for (const Reader& rd : readers[wi])
        if (rd.layout == wanted[li]) {
          g.nodes[rd.node].weights[rd.slot] = static_cast<int>(target);
          c.packer[target] = rd.backend;
        }
    }
  }
  return c;
}

// Every weight repacked by a back end that reads it, in the layout choose_layouts gave it; a
// copy starts from its original's reference bytes. With a pool, a window of as many weights as it
// has threads is packed at once (one weight per thread), the bookkeeping done in order after it, so
// that at most that many reference copies are held beside the packed ones.
Status pack_weights(const Graph& g, const LayoutChoice& c, size_t n_originals, ProgramImage& img,
                    std::vector<std::shared_ptr<std::vector<uint8_t>>>& buffers, CompileReport& r,
                    std::span<const std::shared_ptr<const MappedFile>> sources, ThreadPool* pool) {
  for (size_t wi = n_originals; wi < g.weights.size(); ++wi) {
    img.weights.push_back(img.weights[c.original[wi]]);
    buffers.push_back(buffers[c.original[wi]]);
  }
  std::vector<size_t> todo;
  for (size_t wi = 0; wi < g.weights.size(); ++wi)
    if (g.weights[wi].layout != kRowMajorLayout && c.packer[wi] != nullptr) todo.push_back(wi);
  const size_t window = pool ? static_cast<size_t>(pool->size()) : 1;
  std::vector<std::shared_ptr<std::vector<uint8_t>>> outs(window);
  std::vector<Status> failed(window);
  for (size_t k0 = 0; k0 < todo.size(); k0 += window) {
    const size_t n = std::min(window, todo.size() - k0);
    auto pack_one = [&](int64_t a, int64_t b, int) {
      for (int64_t j = a; j < b; ++j) {
        const size_t wi = todo[k0 + static_cast<size_t>(j)];
        outs[static_cast<size_t>(j)] = std::make_shared<std::vector<uint8_t>>();
        failed[static_cast<size_t>(j)] = c.packer[wi]->pack(g.weights[wi], img.weights[wi], *outs[static_cast<size_t>(j)]);
      }
    };
    if (pool && n > 1) pool->parallel_for(static_cast<int64_t>(n), pack_one);
    else pack_one(0, static_cast<int64_t>(n), 0);
    for (size_t j = 0; j < n; ++j) {
      KILN_RETURN_IF_ERROR(failed[j]);
      const size_t wi = todo[k0 + j];
      const WeightDesc& w = g.weights[wi];
      std::shared_ptr<std::vector<uint8_t>> out = std::move(outs[j]);
      const auto before = static_cast<int64_t>(img.weights[wi].size()), after = static_cast<int64_t>(out->size());
      r.compiled_bytes += after - (wi < n_originals ? before : 0);
      r.scheme_bytes[std::string(scheme_name(w.scheme))] += after - (wi < n_originals ? before : 0);
      const std::span<const uint8_t> ref = img.weights[wi];
      img.weights[wi] = *out;
      buffers[wi] = std::move(out);  // the reference bytes go unless a copy still needs them
      // Packed from the source's map (blocks kept as they are): its pages can go, one tensor at a
      // time, so that the compile never holds the model twice.
      if (std::none_of(img.weights.begin(), img.weights.end(), [&](std::span<const uint8_t> x) { return x.data() == ref.data(); }))
        for (const auto& f : sources) f->release_pages(ref);
    }
  }
  return Status::ok();
}

// The passes before any weight is read: the graph, precision, fusion, the graph's check.
Result<Graph> precision_and_fusion(const ImportedModel& m, const CompileOptions& o, CompileReport& r) {
  KILN_ASSIGN_OR_RETURN(Graph g, build_decoder_graph(m.config));
  KILN_RETURN_IF_ERROR(assign_precision(g, o.quant, o.overrides_path, o.guard_classifier, &r.notes));
  if (o.fuse) r.fusion = fuse(g);
  KILN_RETURN_IF_ERROR(verify_graph(g).with_context("compiler"));
  return g;
}

std::vector<const Backend*> backends_of(const CompileOptions& o) {
  if (!o.backends.empty()) return o.backends;
  auto reg = registered_backends();
  return {reg.begin(), reg.end()};
}

}  // namespace

Result<ProgramImage> compile_model(const Import& imp, const CompileOptions& o, CompileReport* report) {
  CompileReport local;
  CompileReport& r = report ? *report : local;
  const ImportedModel& m = imp.model;
  ProgramImage img;
  img.config = m.config;
  KILN_ASSIGN_OR_RETURN(Graph g, precision_and_fusion(m, o, r));

  // Weights: quantized into the layout the reference kernels read (the fast back ends repack
  // into their own layouts here, never at load time).
  img.weights.resize(g.weights.size());
  img.cpu_features = o.cpu_features;
  std::vector<std::shared_ptr<std::vector<uint8_t>>> buffers(g.weights.size());
  std::vector<int64_t> sizes(g.weights.size(), 0);
  // One pool for the compile: rounding and packing share it, GPTQ's products too (never at once).
  std::unique_ptr<ThreadPool> pool;
  if (o.threads > 1) pool = std::make_unique<ThreadPool>(o.threads);
  const std::vector<float>* gptq_input = nullptr;
  std::shared_ptr<const GptqFactor> gptq_factor_of_input;
  int64_t weights_gptq = 0;
  for (size_t i = 0; i < g.weights.size(); ++i) {
    const WeightDesc& w = g.weights[i];
    KILN_ASSIGN_OR_RETURN(const TensorSource* found, source_of(m, w));
    const TensorSource& src = *found;
    r.source_bytes += static_cast<int64_t>(src.bytes.size());
    r.parameters += static_cast<int64_t>(src.elements());
    KILN_ASSIGN_OR_RETURN(QuantParams p, weight_params(w));
    const int64_t rows = w.shape.size() == 2 ? w.shape[0] : 1, cols = w.shape.back();
    std::shared_ptr<std::vector<uint8_t>> buf;
    switch (weight_origin(src.dtype, p)) {
      case WeightOrigin::kAsStored:
        // The source's bytes are this scheme's layout byte for byte (f32, f16, bf16; GGML Q4_0/Q4_1
        // are W4 g32 sym/asym, Q4_K w4a16 g256 asym, Q5_K w5a16, Q6_K w6a16, Q8_0 w8a16 g32): read
        // in place from the map, never rounded a second time nor copied (packing reads them from
        // there); at an odd offset (safetensors), a copy, aligned.
        if (reinterpret_cast<uintptr_t>(src.bytes.data()) % 4 == 0) img.weights[i] = src.bytes;
        else buf = std::make_shared<std::vector<uint8_t>>(src.bytes.begin(), src.bytes.end());
        break;
      case WeightOrigin::kSubBlocks:
        // Each Q4_K sub-block is a W4 asymmetric group of 32: the same 4-bit values, its scale
        // and minimum rounded once to FP16.
        buf = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(rows * (cols / 32) * 20));
        KILN_RETURN_IF_ERROR(q4_k_to_w4_asym(src.bytes, *buf).with_context(src.file + ": tensor '" + src.name + "'"));
        break;
      case WeightOrigin::kWidened:
        // Each Q5_0 or IQ4_NL block is a W8 group of 32: its scale as it is, its values as int8.
        buf = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(rows * (cols / 32) * 34));
        KILN_RETURN_IF_ERROR(blocks_to_w8_g32(src.dtype, src.bytes, *buf).with_context(src.file + ": tensor '" + src.name + "'"));
        break;
      case WeightOrigin::kRounded: {
        const std::vector<float>* imp = nullptr;
        const std::vector<float>* inputs = nullptr;
        if (o.importance && o.method == QuantMethod::kGptq && GptqQuantizer::sweeps(p))
          if (auto it = o.importance->inputs.find(w.name); it != o.importance->inputs.end() && it->second) inputs = it->second.get();
        if (o.importance && o.method != QuantMethod::kRtn && ImportanceQuantizer::searches(p))
          if (auto it = o.importance->per_weight.find(w.name); it != o.importance->per_weight.end()) imp = &it->second;
        if (inputs != nullptr && cols > 0 && inputs->size() % static_cast<size_t>(cols) == 0) {
          // The weights reading one input (q, k, v; gate, up) come one after another: one factor.
          if (gptq_input != inputs) {
            if (!pool) pool = std::make_unique<ThreadPool>(std::max(1, o.threads));
            gptq_factor_of_input.reset();
            auto f = gptq_factor(*inputs, static_cast<int64_t>(inputs->size()) / cols, cols, pool.get(), o.act_order);
            if (!f) return f.status().with_context("weight '" + w.name + "'");
            gptq_factor_of_input = std::move(*f);
            gptq_input = inputs;
          }
          KILN_ASSIGN_OR_RETURN(buf, requantize_by_rows(src, w.name, p, rows, cols, GptqQuantizer(gptq_factor_of_input, pool.get())));
          ++r.weights_calibrated;
          ++weights_gptq;
        } else if (imp != nullptr) {
          KILN_ASSIGN_OR_RETURN(buf, requantize_by_rows(src, w.name, p, rows, cols, ImportanceQuantizer(*imp), pool.get()));
          ++r.weights_calibrated;
        } else {
          KILN_ASSIGN_OR_RETURN(buf, requantize_by_rows(src, w.name, p, rows, cols, round_to_nearest(), pool.get()));
        }
        break;
      }
    }
    if (buf) {
      img.weights[i] = *buf;
      buffers[i] = std::move(buf);
    }
    if (img.weights[i].data() != src.bytes.data())
      for (const auto& f : m.files) f->release_pages(src.bytes);  // converted: the source's pages can go
    sizes[i] = static_cast<int64_t>(img.weights[i].size());
    r.compiled_bytes += sizes[i];
    r.scheme_bytes[std::string(scheme_name(w.scheme))] += sizes[i];
    if (o.progress) o.progress(static_cast<double>(i + 1) / static_cast<double>(g.weights.size()));
  }
  if (o.importance && r.weights_calibrated > 0) {
    r.method = weights_gptq == r.weights_calibrated ? "gptq" : weights_gptq > 0 ? "gptq+imatrix" : "imatrix";
    r.calibration_source = o.importance->source;
    r.calibration_hash = o.importance->hash;
    r.calibration_tokens = o.importance->tokens;
  }

  const std::vector<const Backend*> backends = backends_of(o);
  KILN_ASSIGN_OR_RETURN(r.partition, partition(g, backends, sizes));
  const size_t n_originals = g.weights.size();
  KILN_ASSIGN_OR_RETURN(LayoutChoice layouts, choose_layouts(g, backends, r.notes));
  KILN_RETURN_IF_ERROR(pack_weights(g, layouts, n_originals, img, buffers, r, m.files, pool.get()));
  for (auto& b : buffers)
    if (b) img.owners.push_back(std::move(b));
  // The source stays mapped only where a weight is used in place from it (f32 as stored): a
  // quantized or converted model lets go of the file, and its pages stop counting as resident.
  for (const auto& f : m.files) {
    const bool used = std::any_of(img.weights.begin(), img.weights.end(), [&](std::span<const uint8_t> w) {
      return !w.empty() && w.data() >= f->data() && w.data() < f->data() + f->size();
    });
    if (used) img.owners.push_back(f);
  }
  img.program.plan = plan_memory(g, o.max_tokens);
  std::vector<float> factors;
  if (auto rf = m.tensors.find("rope_freqs.weight"); rf != m.tensors.end()) {
    KILN_ASSIGN_OR_RETURN(factors, source_f32(rf->second));
  }
  img.program.rope_inv_freq = rope_inv_freq(m.config, factors);
  img.program.rope_inv_freq_local = rope_inv_freq_local(m.config);
  img.program.rope_inv_freq_long = rope_inv_freq_long(m.config, factors);
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

Result<std::vector<WeightPlan>> plan_weights(const Import& imp, const CompileOptions& o, CompileReport* report) {
  CompileReport local;
  CompileReport& r = report ? *report : local;
  const ImportedModel& m = imp.model;
  KILN_ASSIGN_OR_RETURN(Graph g, precision_and_fusion(m, o, r));
  std::vector<WeightPlan> plan(g.weights.size());
  std::vector<int64_t> sizes(g.weights.size(), 0);
  for (size_t i = 0; i < g.weights.size(); ++i) {
    const WeightDesc& w = g.weights[i];
    KILN_ASSIGN_OR_RETURN(const TensorSource* found, source_of(m, w));
    const TensorSource& src = *found;
    KILN_ASSIGN_OR_RETURN(QuantParams p, weight_params(w));
    WeightPlan& e = plan[i];
    e.source_type = src.dtype;
    e.source_bytes = src.bytes.size();
    e.origin = weight_origin(src.dtype, p);
    // Kept bytes are the source's; everything else is the reference layout of p (as compile_model
    // writes it, and fails where that does not exist).
    const int64_t rows = w.shape.size() == 2 ? w.shape[0] : 1, cols = w.shape.back();
    auto ref = quantized_size(p, rows, cols);
    if (!ref) return invalid_argument("weight '" + w.name + "': cannot store as " + describe(p));
    e.bytes = e.origin == WeightOrigin::kAsStored ? src.bytes.size() : *ref;
    sizes[i] = static_cast<int64_t>(e.bytes);
    r.source_bytes += static_cast<int64_t>(src.bytes.size());
    r.parameters += static_cast<int64_t>(src.elements());
  }
  const std::vector<const Backend*> backends = backends_of(o);
  KILN_ASSIGN_OR_RETURN(r.partition, partition(g, backends, sizes));
  KILN_ASSIGN_OR_RETURN(LayoutChoice layouts, choose_layouts(g, backends, r.notes));
  for (size_t i = plan.size(); i < g.weights.size(); ++i) {
    WeightPlan copy = plan[layouts.original[i]];
    copy.source_bytes = 0;
    plan.push_back(std::move(copy));
  }
  for (size_t i = 0; i < g.weights.size(); ++i) {
    WeightPlan& e = plan[i];
    e.weight = g.weights[i];
    if (e.weight.layout != kRowMajorLayout && layouts.packer[i] != nullptr) {
      auto packed = layouts.packer[i]->layout_bytes(e.weight);
      if (!packed) return invalid_argument("weight '" + e.weight.name + "': no size in layout '" + e.weight.layout + "'");
      e.bytes = *packed;
    }
    r.compiled_bytes += static_cast<int64_t>(e.bytes);
    r.scheme_bytes[std::string(scheme_name(e.weight.scheme))] += static_cast<int64_t>(e.bytes);
  }
  return plan;
}

}  // namespace kiln
