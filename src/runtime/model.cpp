#include "runtime/model.h"

#include <algorithm>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "artifact/config_section.h"
#include "artifact/kiln_file.h"
#include "artifact/program_section.h"
#include "backends/registry.h"
#include "graph/weight_params.h"

namespace kiln {

Result<std::shared_ptr<const Model>> Model::create(ProgramImage image,
                                                                   std::span<const Backend* const> extra) {
  std::shared_ptr<Model> m(new Model());
  m->image_ = std::move(image);
  const Graph& g = m->image_.program.graph;
  const ModelConfig& c = m->image_.config;
  if (m->image_.weights.size() != g.weights.size()) return corrupt("program: one weight per graph weight expected");
  // One frequency per pair RoPE turns (head_dim / 2, or rotary_dim / 2).
  if (static_cast<int>(m->image_.program.rope_inv_freq.size()) != c.rope_dim() / 2)
    return corrupt("program: rope_inv_freq must have one entry per rotated pair");
  if (!m->image_.program.rope_inv_freq_local.empty() &&
      static_cast<int>(m->image_.program.rope_inv_freq_local.size()) != c.rope_dim() / 2)
    return corrupt("program: rope_inv_freq_local must have one entry per rotated pair");
  const std::vector<float>& long_freqs = m->image_.program.rope_inv_freq_long;
  if (!long_freqs.empty() && static_cast<int>(long_freqs.size()) != c.rope_dim() / 2)
    return corrupt("program: rope_inv_freq_long must have one entry per rotated pair");
  if (c.rope_scaling.long_factors_for(c.max_seq_len) && long_freqs.empty())
    return corrupt("program: a LongRoPE model of " + std::to_string(c.max_seq_len) + " positions has no long-factor "
                   "frequencies (rope_inv_freq_long) for contexts past " + std::to_string(c.rope_scaling.original_max_position) +
                   "; recompile it with this version of kiln");
  if (g.values[static_cast<size_t>(g.logits_output)].width != c.vocab_size)
    return corrupt("program: the logits are not vocab_size wide");
  auto lookup = [&](const std::string& name) -> const Backend* {
    for (const Backend* b : extra)
      if (b->name() == name) return b;
    return find_backend(name);
  };
  // Every weight must be in a layout that each back end reading it reads, and have exactly the
  // bytes its scheme, shape and layout need.
  std::vector<const Backend*> reader(g.weights.size(), nullptr);
  for (const Node& n : g.nodes) {
    const Backend* b = lookup(n.backend);
    if (b == nullptr) continue;  // reported below
    for (int wi : n.weights) {
      const WeightDesc& w = g.weights[static_cast<size_t>(wi)];
      if (!b->reads_layout(n, w, w.layout))
        return unsupported("weight '" + w.name + "' is stored in layout '" + w.layout + "', which back end '" +
                           std::string(b->name()) + "' does not read for op " + std::string(op_name(n.op)) +
                           "; recompile the model with this version of kiln");
      reader[static_cast<size_t>(wi)] = b;
    }
  }
  for (size_t i = 0; i < g.weights.size(); ++i) {
    const WeightDesc& w = g.weights[i];
    KILN_ASSIGN_OR_RETURN(QuantParams p, weight_params(w));
    std::optional<uint64_t> need;
    if (w.layout == kRowMajorLayout) need = quantized_size(p, w.shape.size() == 2 ? w.shape[0] : 1, w.shape.back());
    else if (reader[i]) need = reader[i]->layout_bytes(w);
    if (!need || *need != m->image_.weights[i].size())
      return corrupt("weight '" + w.name + "' has " + std::to_string(m->image_.weights[i].size()) + " bytes, " +
                     describe(p) + " in layout '" + w.layout + "' needs " + std::to_string(need.value_or(0)));
  }
  for (const Node& n : g.nodes)
    if (n.layer >= c.n_layers || ((n.op == OpCode::kKvStore || n.op == OpCode::kAttention || n.op == OpCode::kRopeKvStore) &&
                                  (n.layer < 0 || n.n_kv_heads != c.n_kv_heads || n.head_dim != c.head_dim ||
                                   (n.op != OpCode::kKvStore && n.n_heads != c.n_heads))))
      return corrupt("program: node " + std::string(op_name(n.op)) + " does not fit the model's attention shape");

  m->constants_.inv_freq = m->image_.program.rope_inv_freq;
  m->constants_.rope_half_split = c.rope_style == RopeStyle::kHalfSplit;
  m->constants_.rotary_dim = c.rotary_dim;
  m->constants_.inv_freq_local = m->image_.program.rope_inv_freq_local;
  for (int l = 0; l < c.n_layers; ++l) m->constants_.layer_windows.push_back(c.layer_window(l));
  m->constants_long_ = m->constants_;
  if (!long_freqs.empty()) m->constants_long_.inv_freq = long_freqs;

  PrepareOptions po;
  po.cpu_features = m->image_.cpu_features;
  const MemoryPlan& plan = m->image_.program.plan;
  for (const Node& n : g.nodes) {
    const Backend* b = lookup(n.backend);
    if (b == nullptr)
      return unsupported("the program runs op " + std::string(op_name(n.op)) + " on back end '" + n.backend +
                         "', which this build of kiln does not have; recompile the model for this machine");
    if (std::find(m->backends_.begin(), m->backends_.end(), b) == m->backends_.end()) m->backends_.push_back(b);
    std::vector<BoundWeight> bound;
    for (int w : n.weights) bound.push_back({&g.weights[static_cast<size_t>(w)], m->image_.weights[static_cast<size_t>(w)]});
    KILN_ASSIGN_OR_RETURN(auto k, b->prepare(n, g, bound, plan.offsets, plan.max_tokens, po));
    m->kernels_.push_back(std::move(k));
  }
  return std::shared_ptr<const Model>(std::move(m));
}

uint64_t Model::identity() const {
  std::call_once(identity_once_, [this] {
    const std::string program = config_to_json(image_.config) + program_to_json(image_.program);
    uint64_t h = kiln_checksum({reinterpret_cast<const uint8_t*>(program.data()), program.size()});
    for (const auto& w : image_.weights) h = h * 0x9E3779B97F4A7C15ull ^ kiln_checksum(w);
    identity_ = h;
  });
  return identity_;
}

void Model::prefault() const {
#if defined(__linux__)
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (const auto& w : image_.weights) {
    if (w.empty()) continue;
    const uintptr_t b = reinterpret_cast<uintptr_t>(w.data()) & ~(page - 1);
    const uintptr_t e = reinterpret_cast<uintptr_t>(w.data() + w.size());
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14
#endif
    if (madvise(reinterpret_cast<void*>(b), e - b, MADV_POPULATE_READ) == 0) continue;
    volatile uint8_t sink = 0;  // an older kernel: one read per page
    for (uintptr_t p = reinterpret_cast<uintptr_t>(w.data()); p < e; p += page) sink = sink + *reinterpret_cast<const uint8_t*>(p);
  }
#endif
}

std::string Model::kernel_choice() const {
  PrepareOptions po;
  po.cpu_features = image_.cpu_features;
  std::string out;
  for (const Backend* b : backends_) {
    const std::string c = b->kernel_choice(po);
    if (!c.empty()) out += (out.empty() ? "" : "; ") + std::string(b->name()) + ": " + c;
  }
  return out;
}

uint64_t Model::weight_bytes() const {
  uint64_t n = 0;
  for (const auto& w : image_.weights) n += w.size();
  return n;
}

}  // namespace kiln
