#include "engine/model_compare.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "perf/token_stats.h"
#include "runtime/session.h"

namespace kiln {

namespace {

// Per node: the layer whose hidden state it writes (its layer's last node, whose first output is
// the residual stream, `dim` wide), else -1.
Result<std::vector<int>> hidden_state_nodes(const Model& m, const std::string& which) {
  const Graph& g = m.program().graph;
  const int layers = m.config().n_layers;
  std::vector<int> last(static_cast<size_t>(layers), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].layer >= 0 && g.nodes[i].layer < layers) last[static_cast<size_t>(g.nodes[i].layer)] = static_cast<int>(i);
  std::vector<int> layer_of(g.nodes.size(), -1);
  for (int l = 0; l < layers; ++l) {
    const int n = last[static_cast<size_t>(l)];
    if (n < 0) return invalid_argument(which + ": layer " + std::to_string(l) + " has no instructions");
    const Node& node = g.nodes[static_cast<size_t>(n)];
    if (node.outputs.empty() || g.values[static_cast<size_t>(node.outputs[0])].width != m.config().dim)
      return invalid_argument(which + ": the last instruction of layer " + std::to_string(l) + " (" +
                              std::string(op_name(node.op)) + ") does not write the hidden state");
    layer_of[static_cast<size_t>(n)] = l;
  }
  return layer_of;
}

// A session whose tracer copies each layer's hidden state out of every step.
struct Probe {
  std::unique_ptr<Session> session;
  StepTracer tracer{ProfileLevel::kOff};
  std::vector<int> layer_of;
  std::vector<std::vector<float>> hidden;  // per layer, [rows][dim] of the last step

  Status open(std::shared_ptr<const Model> m, int n_ctx, int threads, const std::string& which) {
    KILN_ASSIGN_OR_RETURN(layer_of, hidden_state_nodes(*m, which));
    hidden.assign(static_cast<size_t>(m->config().n_layers), {});
    const size_t dim = static_cast<size_t>(m->config().dim);
    const Program* p = &m->program();
    tracer.after_instruction = [this, p, dim](int node, const StepContext& ctx, int rows) {
      const int l = layer_of[static_cast<size_t>(node)];
      if (l < 0) return;
      const int v = p->graph.nodes[static_cast<size_t>(node)].outputs[0];
      const auto* x = reinterpret_cast<const float*>(ctx.arena + p->plan.offsets[static_cast<size_t>(v)]);
      hidden[static_cast<size_t>(l)].assign(x, x + dim * static_cast<size_t>(rows));
    };
    KILN_ASSIGN_OR_RETURN(session, Session::create(std::move(m), n_ctx, threads, DType::kF32));
    session->set_tracer(&tracer);
    return Status::ok();
  }
};

}  // namespace

Result<CompareResult> compare_models(std::shared_ptr<const Model> a, std::shared_ptr<const Model> b,
                                     std::span<const int> tokens, const CompareOptions& o) {
  if (!a || !b) return invalid_argument("compare: two models are needed");
  const ModelConfig& ca = a->config();
  const ModelConfig& cb = b->config();
  if (ca.n_layers != cb.n_layers || ca.dim != cb.dim || ca.vocab_size != cb.vocab_size)
    return invalid_argument("the models differ in shape (layers " + std::to_string(ca.n_layers) + "/" +
                            std::to_string(cb.n_layers) + ", dim " + std::to_string(ca.dim) + "/" + std::to_string(cb.dim) +
                            ", vocabulary " + std::to_string(ca.vocab_size) + "/" + std::to_string(cb.vocab_size) +
                            "): compare two compiles of one model");
  if (tokens.size() < 2) return invalid_argument("too short to compare (needs at least two tokens)");
  for (int t : tokens)
    if (t < 0 || t >= ca.vocab_size) return invalid_argument("token id " + std::to_string(t) + " is outside the vocabulary");
  CompareResult r;
  KILN_ASSIGN_OR_RETURN(r.n_ctx, scoring_window(o.n_ctx, std::min(ca.max_seq_len, cb.max_seq_len)));
  Probe pa, pb;
  KILN_RETURN_IF_ERROR(pa.open(a, r.n_ctx, o.threads, "A"));
  KILN_RETURN_IF_ERROR(pb.open(b, r.n_ctx, o.threads, "B"));
  const size_t chunk = static_cast<size_t>(std::min(pa.session->max_logit_rows(), pb.session->max_logit_rows()));
  const size_t vocab = static_cast<size_t>(ca.vocab_size), dim = static_cast<size_t>(ca.dim);
  const size_t layers = static_cast<size_t>(ca.n_layers);
  std::vector<double> cos_sum(layers, 0), err_sum(layers, 0), cos_min(layers, 1);
  double nll_a = 0, nll_b = 0, kl = 0, agree = 0;
  for (size_t start = 0; start + 1 < tokens.size(); start += static_cast<size_t>(r.n_ctx)) {
    const size_t end = std::min(tokens.size(), start + static_cast<size_t>(r.n_ctx));
    pa.session->reset();
    pb.session->reset();
    for (size_t i = start; i < end; i += chunk) {
      const size_t n = std::min(end - i, chunk);
      KILN_ASSIGN_OR_RETURN(std::span<const float> la, pa.session->decode_all(tokens.subspan(i, n)));
      KILN_ASSIGN_OR_RETURN(std::span<const float> lb, pb.session->decode_all(tokens.subspan(i, n)));
      for (size_t t = 0; t < n; ++t) {
        ++r.tokens;
        for (size_t l = 0; l < layers; ++l) {
          const float* x = pa.hidden[l].data() + t * dim;
          const float* y = pb.hidden[l].data() + t * dim;
          double xy = 0, xx = 0, yy = 0, dd = 0;
          for (size_t k = 0; k < dim; ++k) {
            xy += static_cast<double>(x[k]) * y[k];
            xx += static_cast<double>(x[k]) * x[k];
            yy += static_cast<double>(y[k]) * y[k];
            dd += (static_cast<double>(y[k]) - x[k]) * (static_cast<double>(y[k]) - x[k]);
          }
          // Equal vectors are cosine 1 exactly (their norms' rounding aside).
          const double c = dd == 0 ? 1.0 : xx > 0 && yy > 0 ? xy / std::sqrt(xx * yy) : 0.0;
          cos_sum[l] += c;
          cos_min[l] = std::min(cos_min[l], c);
          err_sum[l] += xx > 0 ? std::sqrt(dd / xx) : 0.0;
        }
        if (i + t + 1 >= end) continue;
        const float* pa_t = la.data() + t * vocab;
        const float* pb_t = lb.data() + t * vocab;
        const int target = tokens[i + t + 1];
        nll_a += token_nll(pa_t, vocab, target);
        nll_b += token_nll(pb_t, vocab, target);
        const double k = kl_divergence(pa_t, pb_t, vocab);
        kl += k;
        r.max_kl = std::max(r.max_kl, k);
        agree += argmax(pa_t, vocab) == argmax(pb_t, vocab) ? 1 : 0;
        ++r.scored;
      }
    }
  }
  const double s = static_cast<double>(r.scored);
  r.ppl_a = std::exp(nll_a / s);
  r.ppl_b = std::exp(nll_b / s);
  r.kl = kl / s;
  r.top1_agreement = agree / s;
  double previous = 0;
  for (size_t l = 0; l < layers; ++l) {
    LayerDelta d;
    d.layer = static_cast<int>(l);
    for (size_t n = 0; n < pa.layer_of.size(); ++n)
      if (pa.layer_of[n] == d.layer)
        d.value = a->program().graph.values[static_cast<size_t>(a->program().graph.nodes[n].outputs[0])].name;
    d.cosine = cos_sum[l] / static_cast<double>(r.tokens);
    d.min_cosine = cos_min[l];
    d.relative_error = err_sum[l] / static_cast<double>(r.tokens);
    d.added_error = d.relative_error - previous;
    previous = d.relative_error;
    r.layers.push_back(d);
  }
  r.ranked.resize(layers);
  std::iota(r.ranked.begin(), r.ranked.end(), 0);
  std::stable_sort(r.ranked.begin(), r.ranked.end(),
                   [&](int x, int y) { return r.layers[static_cast<size_t>(x)].added_error > r.layers[static_cast<size_t>(y)].added_error; });
  return r;
}

}  // namespace kiln
