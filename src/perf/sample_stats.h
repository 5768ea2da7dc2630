// Median, spread and samples of a repeated measurement: how every benchmark reports (this machine
// is shared and noisy, so medians, never means).
#pragma once

#include <vector>

namespace kiln {

struct SampleStats {
  double median = 0, min = 0, max = 0, stddev = 0;
  std::vector<double> samples;  // in the order they were taken
};

SampleStats summarize_samples(std::vector<double> samples);
// The median alone (0 for no samples).
double median_of(std::vector<double> samples);

}  // namespace kiln
