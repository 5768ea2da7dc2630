// The compute roofline of a prefill, measured in the same run as a benchmark, as the bandwidth
// probe (bandwidth.h) gives decoding's.
//
// A prefill of T tokens runs in steps of at most the session's step size; a step of n tokens
// multiplies every matrix of the program by its n activations (a tail node's by the last token
// alone) and, in attention, each query by the keys and the values of the positions up to its own.
// Each back end says how many products of a scheme one thread can do per second in the kernels it
// runs for steps of n tokens (Backend::product_rate: the instruction they multiply with, back to
// back); the roofline is T over the time all of the prefill's products take at those rates,
// every thread of the run measuring at once.
#pragma once

#include <map>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "backends/api/backend.h"
#include "core/status.h"

namespace kiln {

class Model;

// The products of one back end's nodes in one scheme (attention: f32) in the steps of one size,
// over a whole prefill.
struct ProductCount {
  std::string backend;
  Scheme scheme = Scheme::kF32;
  int step = 0;  // tokens per step (the last step of a prefill may be shorter than the others)
  double products = 0;
};

// A prefill of `tokens` tokens after `depth` already in the cache, in steps of at most
// `step_tokens`, by back end, scheme and step size (in the order first met); `window` > 0 limits
// attention to that many positions in every layer, unless `layer_windows` gives each layer its own
// (ModelConstants::layer_windows; 0: the whole context).
Result<std::vector<ProductCount>> prefill_products(const Graph& g, int tokens, int step_tokens, int window,
                                                   int depth = 0, std::span<const int> layer_windows = {});

struct PrefillRoofline {
  std::vector<ProductCount> counts;
  std::vector<double> rates;  // products per second on all threads, per count
  double tps = 0;             // tokens per second if every product ran at its rate (> 0)
};

// Not thread-safe: one probe per benchmark run.
class ComputeProbe {
 public:
  // `seconds` per pass, `passes` passes per rate (the fastest), on `threads` threads at once
  // (each at least 1, or prefill() says so).
  ComputeProbe(const Model& model, int threads, double seconds = 0.1, int passes = 3)
      : model_(model), threads_(threads), seconds_(seconds), passes_(passes) {}

  // The roofline of a `tokens`-token prefill; an error names the back end without a measure.
  Result<PrefillRoofline> prefill(int tokens, int step_tokens, int depth = 0);
  // Products of `s` per second on all threads in `backend`'s kernels for steps of `step_tokens`.
  Result<double> rate(const std::string& backend, Scheme s, int step_tokens);

 private:
  const Model& model_;
  int threads_;
  double seconds_;
  int passes_;
  std::map<std::tuple<std::string, Scheme, int>, double> rates_;  // measured once per run
};

}  // namespace kiln
