#include "perf/profile.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <functional>

#include "perf/process_memory.h"
#include "runtime/model.h"
#include "runtime/session.h"

namespace kiln {

namespace {

// Bytes of [data, data + size) in memory now; a range mincore cannot look at counts as resident
// (weights in ordinary memory).
uint64_t resident_bytes(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + size + page - 1) & ~(page - 1);
  std::vector<unsigned char> in((end - begin) / page);
  if (::mincore(reinterpret_cast<void*>(begin), end - begin, in.data()) != 0) return size;
  uint64_t pages = 0;
  for (unsigned char c : in) pages += c & 1;
  return std::min<uint64_t>(pages * page, size);
}

}  // namespace

MemoryParts memory_parts(const Session& s) {
  MemoryParts m;
  m.peak_rss = peak_rss_bytes();
  m.rss_now = resident_bytes_now();
  for (std::span<const uint8_t> w : s.model()->image().weights) {
    m.weights_mapped += w.size();
    m.weights_resident += resident_bytes(w.data(), w.size());
  }
  m.arenas = s.arena_bytes();
  m.kv_cache = s.kv_cache_bytes();
  m.scratch = s.scratch_bytes();
  return m;
}

std::string_view phase_name(Phase p) { return p == Phase::kPrefill ? "prefill" : "decode"; }

namespace {

std::string op_kind(OpCode op) {
  switch (op) {
    case OpCode::kMatMul:
    case OpCode::kMatMulQKV:
    case OpCode::kGateUpSwiGLU:
    case OpCode::kMatMulAdd:
    case OpCode::kRmsNormMatMulQKV:
    case OpCode::kRmsNormGateUpSwiGLU: return "matmul";
    case OpCode::kAttention: return "attention";
    case OpCode::kRmsNorm:
    case OpCode::kHeadRmsNorm: return "norm";
    case OpCode::kEmbed: return "embed";
    case OpCode::kKvStore:
    case OpCode::kRopeKvStore:
    case OpCode::kRope: return "rope/kv";
    case OpCode::kSwiGLU:
    case OpCode::kGeGLU:
    case OpCode::kSoftcap:
    case OpCode::kAdd: return "elementwise";
  }
  return "other";
}

// The nodes outside the decoder layers are named by what they do (the builder makes one of each).
std::string node_part(const Node& n) {
  if (n.layer >= 0) return "layer " + std::to_string(n.layer);
  switch (n.op) {
    case OpCode::kEmbed: return "embedding";
    case OpCode::kRmsNorm: return "final norm";
    case OpCode::kMatMul: return "classifier";
    case OpCode::kSoftcap: return "logit soft-cap";
    default: return "outside the layers";
  }
}

void add_cost(InstructionCost& a, const InstructionCost& b) {
  a.weight_bytes += b.weight_bytes;
  a.activation_read += b.activation_read;
  a.activation_written += b.activation_written;
  a.kv_read += b.kv_read;
  a.kv_written += b.kv_written;
  a.products += b.products;
  a.flops += b.flops;
}

double product_seconds(const Ceilings& c, const std::string& backend, const InstructionCost& cost, int step_tokens) {
  if (cost.products <= 0) return 0;
  auto it = c.product_rate.find({backend, cost.scheme, step_tokens});
  return it == c.product_rate.end() || !(it->second > 0) ? 0 : cost.products / it->second;
}

// Tallies of `samples` grouped by key(sample), largest time first; shares of `total` seconds.
std::vector<Tally> tally(const std::vector<const InstructionSample*>& samples, const Profile& p,
                         const std::function<std::pair<std::string, int>(const InstructionSample&)>& key,
                         double total) {
  std::map<std::pair<std::string, int>, Tally> by;
  for (const InstructionSample* s : samples) {
    const auto k = key(*s);
    Tally& t = by[k];
    t.key = k.first;
    t.layer = k.second;
    t.count += 1;
    t.seconds += s->seconds;
    add_cost(t.cost, s->cost);
    t.product_seconds += product_seconds(p.ceilings, p.nodes[static_cast<size_t>(s->node)].backend, s->cost, s->step_tokens);
  }
  std::vector<Tally> out;
  for (auto& [k, t] : by) {
    t.share = total > 0 ? t.seconds / total : 0;
    if (p.ceilings.bandwidth_gbs > 0) t.bandwidth_fraction = t.gbs() / p.ceilings.bandwidth_gbs;
    if (t.seconds > 0) t.compute_fraction = t.product_seconds / t.seconds;
    out.push_back(std::move(t));
  }
  std::stable_sort(out.begin(), out.end(), [](const Tally& a, const Tally& b) { return a.seconds > b.seconds; });
  return out;
}

void summarize_phase(Profile& p, Phase phase, PhaseSummary& out) {
  std::vector<const InstructionSample*> samples;
  for (const StepSample& s : p.steps) {
    if (s.phase != phase) continue;
    out.steps += 1;
    out.tokens += s.record.tokens;
    out.seconds += s.seconds;
    out.instruction_seconds += s.instruction_seconds;
    add_cost(out.cost, s.cost);
  }
  for (const InstructionSample& i : p.instructions)
    if (p.steps[static_cast<size_t>(i.step)].phase == phase) samples.push_back(&i);
  if (samples.empty()) return;
  const double total = out.instruction_seconds;
  auto node = [&](const InstructionSample& s) -> const NodeInfo& { return p.nodes[static_cast<size_t>(s.node)]; };
  out.by_op = tally(samples, p, [&](const InstructionSample& s) { return std::make_pair(node(s).op, -1); }, total);
  out.by_layer = tally(samples, p, [&](const InstructionSample& s) { return std::make_pair(node(s).part, node(s).layer); }, total);
  out.by_backend = tally(samples, p, [&](const InstructionSample& s) { return std::make_pair(node(s).backend, -1); }, total);
  out.by_kind = tally(samples, p, [&](const InstructionSample& s) { return std::make_pair(node(s).kind, -1); }, total);
  out.by_node = tally(samples, p, [&](const InstructionSample& s) {
    return std::make_pair(std::to_string(s.node) + " " + node(s).kernel, node(s).layer); }, total);
}

}  // namespace

Profile build_profile(const Model& model, const StepTracer& tracer, DType kv_dtype, int n_threads,
                      const MemoryParts& memory, const Ceilings& ceilings, int prompt_tokens) {
  Profile p;
  p.level = tracer.level();
  p.n_threads = n_threads;
  p.kernels = model.kernel_choice();
  p.memory = memory;
  p.ceilings = ceilings;
  p.fault = tracer.fault();
  const Graph& g = model.program().graph;
  for (const Node& n : g.nodes)
    p.nodes.push_back({std::string(op_name(n.op)), n.backend, kernel_label(g, n), op_kind(n.op), n.layer, node_part(n)});
  const int window = model.config().sliding_window;
  const int kv_bytes = static_cast<int>(dtype_info(kv_dtype).block_bytes);
  const auto& records = tracer.instructions();
  int prompt_left = prompt_tokens;
  for (const StepRecord& r : tracer.steps()) {
    StepSample s;
    s.record = r;
    const bool prefill = prompt_tokens >= 0 ? prompt_left > 0 : r.tokens > 1 || r.first_pos == 0;
    prompt_left -= r.tokens;
    s.phase = prefill ? Phase::kPrefill : Phase::kDecode;
    s.seconds = static_cast<double>(r.end_ns - r.begin_ns) * 1e-9;
    StepShape shape;
    shape.rows = r.batch;
    shape.all_logits = r.all_logits;
    shape.kv_element_bytes = kv_bytes;
    shape.attended = attended_positions(r.first_pos, r.tokens, window) * r.batch / std::max(r.tokens, 1);
    shape.attended_global = attended_positions(r.first_pos, r.tokens, 0) * r.batch / std::max(r.tokens, 1);
    const int step_index = static_cast<int>(p.steps.size());
    for (uint32_t k = r.first_instruction; k < r.first_instruction + r.n_instructions && k < records.size(); ++k) {
      const InstructionRecord& ir = records[k];
      InstructionSample is;
      is.step = step_index;
      is.node = ir.node;
      is.begin_s = static_cast<double>(ir.begin_ns) * 1e-9;
      is.seconds = static_cast<double>(ir.end_ns - ir.begin_ns) * 1e-9;
      is.cost = instruction_cost(model, ir.node, shape);
      is.step_tokens = r.batch;
      s.instruction_seconds += is.seconds;
      add_cost(s.cost, is.cost);
      p.instructions.push_back(is);
    }
    p.steps.push_back(s);
  }
  // Time to the first token: up to the end of the prefill step before the first decode step (or
  // of the last step, when there is no decode).
  if (!p.steps.empty()) {
    const uint64_t start = p.steps.front().record.begin_ns;
    uint64_t end = p.steps.back().record.end_ns;
    for (size_t i = 1; i < p.steps.size(); ++i)
      if (p.steps[i].phase == Phase::kDecode) {
        end = p.steps[i - 1].record.end_ns;
        break;
      }
    p.time_to_first_token_s = static_cast<double>(end - start) * 1e-9;
  }
  summarize_phase(p, Phase::kPrefill, p.prefill);
  summarize_phase(p, Phase::kDecode, p.decode);
  return p;
}

std::vector<std::tuple<std::string, Scheme, int>> needed_rates(const Profile& p) {
  std::vector<std::tuple<std::string, Scheme, int>> out;
  for (const InstructionSample& i : p.instructions) {
    if (i.cost.products <= 0) continue;
    auto k = std::make_tuple(p.nodes[static_cast<size_t>(i.node)].backend, i.cost.scheme, i.step_tokens);
    if (std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  }
  return out;
}

}  // namespace kiln
