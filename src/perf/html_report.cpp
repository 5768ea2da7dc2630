#include "perf/html_report.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>

#include "perf/html_text.h"

namespace kiln {

namespace {

using html::esc;
using html::fmt;

const char* kind_color(const std::string& kind) {
  static const std::map<std::string, const char*> colors = {
      {"matmul", "#4e79a7"}, {"attention", "#f28e2b"}, {"norm", "#59a14f"},
      {"rope/kv", "#e15759"}, {"elementwise", "#b07aa1"}, {"embed", "#76b7b2"}};
  auto it = colors.find(kind);
  return it == colors.end() ? "#9c755f" : it->second;
}

// The phase the charts show: decode when there was one (what a user waits on token by token).
const PhaseSummary& main_phase(const Profile& p, Phase& which) {
  which = p.decode.by_op.empty() ? Phase::kPrefill : Phase::kDecode;
  return which == Phase::kDecode ? p.decode : p.prefill;
}

// Time per layer (mean per step of the phase), one bar per layer stacked by op kind.
std::string layer_chart(const Profile& p) {
  Phase ph;
  const PhaseSummary& s = main_phase(p, ph);
  if (s.by_op.empty() || s.steps == 0) return "";
  // One bar per part of the model (the embedding, each layer, the final norm, the classifier), in
  // the program's order.
  std::vector<std::pair<std::string, std::map<std::string, double>>> ms;  // part -> kind -> ms per step
  std::map<std::string, size_t> bar_of;
  for (const NodeInfo& n : p.nodes)
    if (bar_of.emplace(n.part, ms.size()).second) ms.push_back({n.part, {}});
  std::set<std::string> kinds;
  std::vector<bool> ran(ms.size(), false);
  for (const InstructionSample& i : p.instructions) {
    if (p.steps[static_cast<size_t>(i.step)].phase != ph) continue;
    const NodeInfo& n = p.nodes[static_cast<size_t>(i.node)];
    const size_t b = bar_of[n.part];
    ms[b].second[n.kind] += i.seconds * 1e3 / s.steps;
    ran[b] = true;
    kinds.insert(n.kind);
  }
  for (size_t b = ms.size(); b-- > 0;)
    if (!ran[b]) ms.erase(ms.begin() + static_cast<std::ptrdiff_t>(b));
  double most = 0;
  for (const auto& [l, k] : ms) {
    double t = 0;
    for (const auto& [kind, v] : k) t += v;
    most = std::max(most, t);
  }
  const int bar = 18, left = 90, width = 560;
  const int height = static_cast<int>(ms.size()) * (bar + 4) + 60;
  std::string o = fmt("<svg id=\"layers\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" role=\"img\">",
                      left + width + 40, height);
  int y = 10;
  for (const auto& [l, k] : ms) {
    o += fmt("<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>", left - 6, y + bar - 4, esc(l).c_str());
    double x = left;
    for (const auto& [kind, v] : k) {
      const double w = most > 0 ? v / most * width : 0;
      o += fmt("<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>%s: %.3f ms</title></rect>", x, y,
               w, bar, kind_color(kind), esc(kind).c_str(), v);
      x += w;
    }
    y += bar + 4;
  }
  o += fmt("<text x=\"%d\" y=\"%d\">ms per %s step (longest bar %.3f ms)</text>", left, y + 14,
           std::string(phase_name(ph)).c_str(), most);
  int lx = left;
  for (const std::string& kind : kinds) {
    o += fmt("<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">%s</text>", lx, y + 24,
             kind_color(kind), lx + 14, y + 33, esc(kind).c_str());
    lx += 14 + 8 * static_cast<int>(kind.size()) + 16;
  }
  return o + "</svg>";
}

// The op of a by_node tally (its key starts with the node's index: profile.cpp), with the role of
// a node outside the layers: "matmul_add", "matmul (classifier)".
std::string dot_name(const Profile& p, const Tally& t) {
  size_t node = 0;
  const auto [end, ec] = std::from_chars(t.key.data(), t.key.data() + t.key.size(), node);
  if (ec != std::errc() || node >= p.nodes.size()) return t.key;
  const NodeInfo& n = p.nodes[node];
  return n.layer >= 0 ? n.op : n.op + " (" + n.part + ")";
}

// Log-log: FLOPs per byte against GFLOP/s; the bandwidth ceiling is the line y = bandwidth x, each
// compute ceiling a horizontal line (2 FLOPs per product).
std::string roofline_chart(const Profile& p) {
  struct Point {
    double x, y;
    std::string label, name;  // the tooltip; the op written beside the dot
    const char* color;
  };
  std::vector<Point> pts;
  for (const auto* s : {&p.prefill, &p.decode})
    for (const Tally& t : s->by_node)
      if (t.intensity() > 0 && t.gops() > 0)
        pts.push_back({t.intensity(), t.gops(),
                       fmt("%s (%s): %.3g FLOP/B, %.3g GFLOP/s, %.3f ms", t.key.c_str(), s == &p.decode ? "decode" : "prefill",
                           t.intensity(), t.gops(), t.seconds * 1e3),
                       dot_name(p, t), s == &p.decode ? "#4e79a7" : "#e15759"});
  if (pts.empty()) return "";
  std::vector<double> roofs;
  for (const auto& [k, rate] : p.ceilings.product_rate) roofs.push_back(2 * rate / 1e9);
  double x0 = 1e9, x1 = 0, y0 = 1e9, y1 = 0;
  for (const Point& q : pts) {
    x0 = std::min(x0, q.x), x1 = std::max(x1, q.x), y0 = std::min(y0, q.y), y1 = std::max(y1, q.y);
  }
  for (double r : roofs) y1 = std::max(y1, r);
  if (p.ceilings.bandwidth_gbs > 0) y1 = std::max(y1, std::min(p.ceilings.bandwidth_gbs * x1, y1 * 4));
  const double lx0 = std::floor(std::log10(x0)), lx1 = std::ceil(std::log10(x1)) + (x1 == x0 ? 1 : 0);
  const double ly0 = std::floor(std::log10(y0)), ly1 = std::ceil(std::log10(y1)) + (y1 == y0 ? 1 : 0);
  const int W = 600, H = 380, L = 60, B = 40;
  auto X = [&](double v) { return L + (std::log10(v) - lx0) / (lx1 - lx0) * (W - L - 10); };
  auto Y = [&](double v) { return H - B - (std::log10(v) - ly0) / (ly1 - ly0) * (H - B - 10); };
  std::string o = fmt("<svg id=\"roofline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" role=\"img\">", W, H);
  o += fmt("<rect x=\"%d\" y=\"10\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>", L, W - L - 10, H - B - 10);
  for (double e = lx0; e <= lx1; ++e)
    o += fmt("<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">1e%g</text>", X(std::pow(10, e)), H - B + 16, e);
  for (double e = ly0; e <= ly1; ++e)
    o += fmt("<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">1e%g</text>", L - 4, Y(std::pow(10, e)) + 4, e);
  o += fmt("<text x=\"%d\" y=\"%d\">FLOPs per byte moved</text>", L + 180, H - 6);
  o += fmt("<text x=\"12\" y=\"%d\" transform=\"rotate(-90 12 %d)\">GFLOP/s</text>", H / 2, H / 2);
  o += "<g clip-path=\"url(#plot)\">";
  o += fmt("<clipPath id=\"plot\"><rect x=\"%d\" y=\"10\" width=\"%d\" height=\"%d\"/></clipPath>", L, W - L - 10, H - B - 10);
  if (p.ceilings.bandwidth_gbs > 0) {
    const double a = std::pow(10, lx0), b = std::pow(10, lx1);
    o += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\" stroke-dasharray=\"6 3\"><title>bandwidth %.1f GB/s</title></line>",
             X(a), Y(p.ceilings.bandwidth_gbs * a), X(b), Y(p.ceilings.bandwidth_gbs * b), p.ceilings.bandwidth_gbs);
  }
  for (double r : roofs)
    o += fmt("<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#999\" stroke-dasharray=\"2 2\"><title>compute %.1f GFLOP/s</title></line>",
             L, Y(r), W - 10, Y(r), r);
  for (const Point& q : pts)
    o += fmt("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\" fill-opacity=\"0.7\"><title>%s</title></circle>", X(q.x), Y(q.y),
             q.color, esc(q.label).c_str());
  // Each dot named by its op, beside it (left of it near the right edge), where the name does not
  // cover one already written: the same op of every layer often lands on one spot, and its one
  // name serves them all (every dot's tooltip has the whole instruction).
  struct Box {
    double x0, y0, x1, y1;
  };
  std::vector<Box> written;
  for (const Point& q : pts) {
    const double x = X(q.x), y = Y(q.y), w = 5.2 * static_cast<double>(q.name.size());
    const bool left = x + 6 + w > W - 10;
    const Box b{left ? x - 6 - w : x + 6, y - 14, left ? x - 6 : x + 6 + w, y - 3};
    const bool covers = std::any_of(written.begin(), written.end(),
                                    [&](const Box& o) { return b.x0 < o.x1 && o.x0 < b.x1 && b.y0 < o.y1 && o.y0 < b.y1; });
    if (covers) continue;
    written.push_back(b);
    o += fmt("<text class=\"dot\" x=\"%.1f\" y=\"%.1f\"%s>%s</text>", left ? x - 6 : x + 6, y - 5,
             left ? " text-anchor=\"end\"" : "", esc(q.name).c_str());
  }
  o += "</g>";
  o += fmt("<circle cx=\"%d\" cy=\"24\" r=\"4\" fill=\"#4e79a7\"/><text x=\"%d\" y=\"28\">decode</text>", L + 12, L + 20);
  o += fmt("<circle cx=\"%d\" cy=\"40\" r=\"4\" fill=\"#e15759\"/><text x=\"%d\" y=\"44\">prefill</text>", L + 12, L + 20);
  if (p.ceilings.bandwidth_gbs > 0)
    o += fmt("<text x=\"%d\" y=\"60\">dashed: %.1f GB/s measured bandwidth; dotted: measured compute</text>", L + 12,
             p.ceilings.bandwidth_gbs);
  return o + "</svg>";
}

std::string memory_chart(const Profile& p) {
  if (p.steps.size() < 2) return "";
  double t1 = 0, m1 = 0;
  const double t0 = static_cast<double>(p.steps.front().record.begin_ns);
  for (const StepSample& s : p.steps) {
    t1 = std::max(t1, (static_cast<double>(s.record.end_ns) - t0) * 1e-6);
    m1 = std::max(m1, static_cast<double>(s.record.rss_bytes) / 1048576.0);
  }
  if (!(t1 > 0) || !(m1 > 0)) return "";
  const int W = 600, H = 200, L = 60, B = 30;
  // A line that would not move by a pixel says less than a sentence.
  double m0 = m1;
  for (const StepSample& s : p.steps) m0 = std::min(m0, static_cast<double>(s.record.rss_bytes) / 1048576.0);
  if ((m1 - m0) / m1 * (H - B - 20) < 1)
    return fmt("<p id=\"memory\">Resident memory stayed at %.1f MiB through all %zu steps (%.1f ms): nothing to draw.</p>", m1,
               p.steps.size(), t1);
  std::string pts;
  for (const StepSample& s : p.steps)
    pts += fmt("%.1f,%.1f ", L + (static_cast<double>(s.record.end_ns) - t0) * 1e-6 / t1 * (W - L - 10),
               H - B - static_cast<double>(s.record.rss_bytes) / 1048576.0 / m1 * (H - B - 20));
  std::string o = fmt("<svg id=\"memory\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" role=\"img\">", W, H);
  o += fmt("<rect x=\"%d\" y=\"10\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>", L, W - L - 10, H - B - 10);
  o += fmt("<polyline points=\"%s\" fill=\"none\" stroke=\"#4e79a7\" stroke-width=\"2\"/>", pts.c_str());
  o += fmt("<text x=\"%d\" y=\"24\" text-anchor=\"end\">%.1f MiB</text><text x=\"%d\" y=\"%d\" text-anchor=\"end\">0</text>",
           L - 4, m1, L - 4, H - B);
  o += fmt("<text x=\"%d\" y=\"%d\">resident memory after each step; %.1f ms in all</text>", L, H - 8, t1);
  return o + "</svg>";
}

// A fraction of a ceiling, or "-" where there is none (not measured; no products for compute).
std::string percent(bool measured, double fraction) { return measured ? fmt("%.1f%%", fraction * 100) : "-"; }

std::string tally_table(const char* title, const std::vector<Tally>& ts, size_t top, const Ceilings& c) {
  if (ts.empty()) return "";
  // Without any ceiling (--no-ceilings, the C API) there is nothing to be a fraction of: no columns.
  const bool ceilings = c.bandwidth_gbs > 0 || !c.product_rate.empty();
  std::string o = fmt("<h3>%s</h3><table><tr><th>name</th><th>count</th><th>ms</th><th>share</th><th>MB moved</th>"
                      "<th>GB/s</th><th>GFLOP/s</th><th>FLOP/B</th>%s</tr>",
                      title, ceilings ? "<th>% bandwidth</th><th>% compute</th>" : "");
  size_t n = 0;
  for (const Tally& t : ts) {
    if (n++ >= top) break;
    o += fmt("<tr><td>%s</td><td>%d</td><td>%.3f</td><td>%.1f%%</td><td>%.3f</td><td>%.2f</td><td>%.2f</td><td>%.3g</td>",
             esc(t.key).c_str(), t.count, t.seconds * 1e3, t.share * 100, t.cost.bytes() / 1e6, t.gbs(), t.gops(), t.intensity());
    if (ceilings)
      o += "<td>" + percent(c.bandwidth_gbs > 0, t.bandwidth_fraction) + "</td><td>" +
           percent(t.product_seconds > 0, t.compute_fraction) + "</td>";
    o += "</tr>";
  }
  return o + "</table>";
}

std::string phase_section(const char* name, const PhaseSummary& s, const Ceilings& c) {
  if (s.steps == 0) return "";
  std::string o = fmt("<h2>%s</h2><p>%d tokens in %d steps, %.3f ms, %.2f tokens/s; instructions %.3f ms, %.1f MB moved</p>",
                      name, s.tokens, s.steps, s.seconds * 1e3, s.tokens_per_second(), s.instruction_seconds * 1e3,
                      s.cost.bytes() / 1e6);
  o += tally_table("by back end", s.by_backend, 20, c);
  o += tally_table("by op kind", s.by_kind, 20, c);
  o += tally_table("by op", s.by_op, 30, c);
  o += tally_table("by layer", s.by_layer, 200, c);
  o += tally_table("top instructions", s.by_node, 30, c);
  return o;
}

}  // namespace

std::string profile_to_html(const Profile& p) {
  std::string o = html::page_head("kiln profile", "svg text.dot{font-size:9px;fill:#444}.charts{display:flex;flex-wrap:wrap;gap:24px}");
  o += fmt("<h1>kiln profile</h1><p>%s &mdash; level %s, %d threads; time to first token %.3f ms</p>", esc(p.model).c_str(),
           std::string(profile_level_name(p.level)).c_str(), p.n_threads, p.time_to_first_token_s * 1e3);
  if (!p.kernels.empty()) o += "<p>kernels: " + esc(p.kernels) + "</p>";
  if (p.fault) o += "<p><b>numerics:</b> " + esc(p.fault->message()) + "</p>";
  o += "<div class=\"charts\"><div><h3>time per layer, by op kind</h3>" + layer_chart(p) + "</div>";
  o += "<div><h3>roofline</h3>" + roofline_chart(p) + "</div>";
  o += "<div><h3>memory over time</h3>" + memory_chart(p) + "</div></div>";
  o += phase_section("prefill", p.prefill, p.ceilings);
  o += phase_section("decode", p.decode, p.ceilings);
  const MemoryParts& m = p.memory;
  auto mib = [](uint64_t b) { return static_cast<double>(b) / 1048576.0; };
  o += fmt("<h2>memory</h2><table><tr><th>part</th><th>MiB</th></tr><tr><td>peak RSS</td><td>%.1f</td></tr>"
           "<tr><td>RSS at the end</td><td>%.1f</td></tr><tr><td>weights resident (of %.1f mapped)</td><td>%.1f</td></tr>"
           "<tr><td>arenas</td><td>%.1f</td></tr><tr><td>KV cache</td><td>%.1f</td></tr><tr><td>scratch</td><td>%.1f</td></tr></table>",
           mib(m.peak_rss), mib(m.rss_now), mib(m.weights_mapped), mib(m.weights_resident), mib(m.arenas), mib(m.kv_cache),
           mib(m.scratch));
  return o + "</body></html>\n";
}

}  // namespace kiln
