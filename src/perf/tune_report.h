// `kiln tune --report`: one self-contained HTML page (inline SVG, no script, nothing fetched) with
// the Pareto front of size against KL (the tuned choices the budget walk passes, predicted; the
// tuned file and every candidate scheme compiled uniformly, measured) and the per-tensor table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct TunePoint {
  std::string label;
  double bytes = 0;
  double kl = 0;
  bool measured = false;  // false: the sweep's prediction
};

struct TuneRow {
  std::string tensor, scheme;
  uint64_t bytes = 0;
  double kl = 0, share = 0;  // share of the predicted total, 0..1
};

struct TuneReport {
  std::string model, budget, eval;
  std::vector<TunePoint> front;   // the predicted front, smallest first
  std::vector<TunePoint> points;  // labelled points
  std::vector<TuneRow> rows;
};

std::string tune_report_html(const TuneReport& r);

}  // namespace kiln
