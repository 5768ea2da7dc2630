#include "perf/tune_report.h"

#include <algorithm>
#include <cmath>

#include "perf/html_text.h"

namespace kiln {

namespace {

using html::esc;
using html::fmt;

// Size (MiB, linear) against KL (log): the front as a line, each point a dot with its label.
std::string front_chart(const TuneReport& r) {
  std::vector<const TunePoint*> all;
  for (const TunePoint& p : r.front) all.push_back(&p);
  for (const TunePoint& p : r.points) all.push_back(&p);
  double x0 = 1e300, x1 = 0, y0 = 1e300, y1 = 0;
  for (const TunePoint* p : all) {
    if (!(p->kl > 0)) continue;
    x0 = std::min(x0, p->bytes), x1 = std::max(x1, p->bytes);
    y0 = std::min(y0, p->kl), y1 = std::max(y1, p->kl);
  }
  if (x1 <= 0) return "<p>no point has a positive KL to draw</p>";
  if (x1 == x0) x1 = x0 * 1.1 + 1;
  const double lx0 = x0 - 0.03 * (x1 - x0), lx1 = x1 + 0.03 * (x1 - x0);
  const double ly0 = std::floor(std::log10(y0)), ly1 = std::ceil(std::log10(y1)) + (y1 == y0 ? 1 : 0);
  const int W = 760, H = 440, L = 70, B = 42;
  auto X = [&](double v) { return L + (v - lx0) / (lx1 - lx0) * (W - L - 10); };
  auto Y = [&](double v) { return H - B - (std::log10(v) - ly0) / (ly1 - ly0) * (H - B - 10); };
  std::string o = fmt("<svg id=\"front\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" role=\"img\">", W, H);
  o += fmt("<rect x=\"%d\" y=\"10\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>", L, W - L - 10, H - B - 10);
  for (int i = 0; i <= 5; ++i) {
    const double v = lx0 + (lx1 - lx0) * i / 5;
    o += fmt("<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.4g</text>", X(v), H - B + 16, v / 1048576.0);
  }
  for (double e = ly0; e <= ly1; ++e)
    o += fmt("<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">1e%g</text>", L - 4, Y(std::pow(10, e)) + 4, e);
  o += fmt("<text x=\"%d\" y=\"%d\">weight bytes (MiB)</text>", L + 260, H - 6);
  o += fmt("<text x=\"14\" y=\"%d\" transform=\"rotate(-90 14 %d)\">KL to f32 (nats)</text>", H / 2 + 40, H / 2 + 40);
  std::string line;
  for (const TunePoint& p : r.front)
    if (p.kl > 0) line += fmt("%.1f,%.1f ", X(p.bytes), Y(p.kl));
  if (!line.empty())
    o += "<polyline fill=\"none\" stroke=\"#76b7b2\" stroke-width=\"2\" points=\"" + line + "\"><title>tuned, predicted</title></polyline>";
  // Each dot named beside it where the name covers no other (several schemes can land on one spot:
  // the tooltip names every dot).
  struct Box {
    double x0, y0, x1, y1;
  };
  std::vector<Box> written;
  for (const TunePoint& p : r.points) {
    if (!(p.kl > 0)) continue;
    const bool tuned = p.label.rfind("tuned", 0) == 0;
    const char* color = tuned ? "#e15759" : "#4e79a7";
    const double x = X(p.bytes), y = Y(p.kl);
    o += fmt("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\" stroke=\"%s\" stroke-width=\"2\"><title>%s: %.0f bytes, KL %.6f (%s)</title></circle>",
             x, y, p.measured ? color : "white", color, esc(p.label).c_str(), p.bytes, p.kl, p.measured ? "measured" : "predicted");
    const double w = 6.2 * static_cast<double>(p.label.size());
    for (const double dy : {-6.0, 14.0, 26.0, -18.0}) {
      const bool left = x + 7 + w > W - 10;
      const Box b{left ? x - 7 - w : x + 7, y + dy - 10, left ? x - 7 : x + 7 + w, y + dy + 2};
      if (std::any_of(written.begin(), written.end(), [&](const Box& q) { return b.x0 < q.x1 && q.x0 < b.x1 && b.y0 < q.y1 && q.y0 < b.y1; }))
        continue;
      written.push_back(b);
      o += fmt("<text x=\"%.1f\" y=\"%.1f\"%s>%s</text>", left ? x - 7 : x + 7, y + dy, left ? " text-anchor=\"end\"" : "",
               esc(p.label).c_str());
      break;
    }
  }
  return o + "</svg>";
}

}  // namespace

std::string tune_report_html(const TuneReport& r) {
  std::string o = html::page_head("kiln tune");
  o += "<h1>kiln tune</h1><p>" + esc(r.model) + " &mdash; budget: " + esc(r.budget) + "; measured on " + esc(r.eval) + "</p>";
  o += "<h3>size against KL</h3>" + front_chart(r) +
       "<p>line: the tuned choice at each size, predicted by the sweep; filled dots: compiled and measured; hollow: predicted</p>";
  o += "<h2>points</h2><table><tr><th>compile</th><th>weight bytes</th><th>KL</th><th></th></tr>";
  for (const TunePoint& p : r.points)
    o += fmt("<tr><td>%s</td><td>%.0f</td><td>%.6f</td><td>%s</td></tr>", esc(p.label).c_str(), p.bytes, p.kl,
             p.measured ? "measured" : "predicted");
  o += "</table><h2>per tensor</h2><table><tr><th>tensor</th><th>scheme</th><th>bytes</th><th>KL alone</th><th>share</th></tr>";
  for (const TuneRow& t : r.rows)
    o += fmt("<tr><td>%s</td><td>%s</td><td>%llu</td><td>%.6f</td><td>%.2f %%</td></tr>", esc(t.tensor).c_str(),
             esc(t.scheme).c_str(), static_cast<unsigned long long>(t.bytes), t.kl, 100 * t.share);
  return o + "</table></body></html>\n";
}

}  // namespace kiln
