// Prometheus text exposition format 0.0.4: # HELP and # TYPE lines, then the samples.
#include "server/metrics.h"

#include <cstdio>

namespace kiln::server {

namespace {

constexpr double kTtftBounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
constexpr size_t kNumBounds = sizeof kTtftBounds / sizeof kTtftBounds[0];

// A label value with \, " and newline escaped, as the format asks.
std::string label(const std::string& v) {
  std::string o;
  for (char c : v) {
    if (c == '\\' || c == '"') o += '\\';
    if (c == '\n') { o += "\\n"; continue; }
    o += c;
  }
  return o;
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

}  // namespace

Metrics::PerModel& Metrics::at_locked(const std::string& model) {
  for (PerModel& m : models_)
    if (m.model == model) return m;
  models_.push_back(PerModel{});
  models_.back().model = model;
  models_.back().ttft_buckets.assign(kNumBounds + 1, 0);
  return models_.back();
}

void Metrics::record(const RequestRecord& r) {
  std::lock_guard<std::mutex> lock(mu_);
  PerModel& m = at_locked(r.model);
  ++m.requests;
  if (!r.ok) ++m.failed;
  if (r.cancelled) ++m.cancelled;
  m.prompt_tokens += static_cast<uint64_t>(r.prompt_tokens);
  m.reused_tokens += static_cast<uint64_t>(r.reused_tokens);
  m.generated_tokens += static_cast<uint64_t>(r.generated_tokens);
  if (r.ok && r.generated_tokens > 0) {
    const double s = r.ttft_ms / 1000.0;
    for (size_t i = 0; i < kNumBounds; ++i)
      if (s <= kTtftBounds[i]) ++m.ttft_buckets[i];
    ++m.ttft_buckets[kNumBounds];
    m.ttft_sum_s += s;
    ++m.ttft_count;
    m.last_tokens_per_second = r.decode_tokens_per_second;
  }
}

void Metrics::record_rejected(const std::string& model, int http_status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (model.empty()) {
    ++invalid_;
    return;
  }
  PerModel& m = at_locked(model);
  if (http_status == 429 || http_status == 503) ++m.rejected_busy;
  else ++m.rejected_bad;
}

std::string Metrics::prometheus(const std::vector<ModelGauges>& gauges, const kiln_runtime_stats& rt) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  auto per_model = [&](const char* name, const char* type, const char* help, auto value) {
    header(out, name, type, help);
    for (const PerModel& m : models_) out += std::string(name) + "{model=\"" + label(m.model) + "\"} " + num(value(m)) + "\n";
  };
  per_model("kiln_requests_total", "counter", "Generation requests that ran (chat and completions).",
            [](const PerModel& m) { return static_cast<double>(m.requests); });
  header(out, "kiln_requests_invalid_total", "counter", "Requests refused before a model was chosen (bad JSON, fields, model name).");
  out += "kiln_requests_invalid_total " + std::to_string(invalid_) + "\n";
  per_model("kiln_requests_failed_total", "counter", "Requests that ran and failed.",
            [](const PerModel& m) { return static_cast<double>(m.failed); });
  per_model("kiln_requests_cancelled_total", "counter", "Requests cancelled because the client disconnected.",
            [](const PerModel& m) { return static_cast<double>(m.cancelled); });
  per_model("kiln_requests_rejected_busy_total", "counter", "Requests refused with 429: every slot busy and the queue full.",
            [](const PerModel& m) { return static_cast<double>(m.rejected_busy); });
  per_model("kiln_prompt_tokens_total", "counter", "Prompt tokens of the requests.",
            [](const PerModel& m) { return static_cast<double>(m.prompt_tokens); });
  per_model("kiln_prompt_tokens_reused_total", "counter", "Prompt tokens found in a slot's KV cache (not recomputed).",
            [](const PerModel& m) { return static_cast<double>(m.reused_tokens); });
  per_model("kiln_generated_tokens_total", "counter", "Tokens generated.",
            [](const PerModel& m) { return static_cast<double>(m.generated_tokens); });
  per_model("kiln_decode_tokens_per_second", "gauge", "Decode speed of the last finished request.",
            [](const PerModel& m) { return m.last_tokens_per_second; });
  header(out, "kiln_time_to_first_token_seconds", "histogram", "Time from the request to its first token.");
  for (const PerModel& m : models_) {
    const std::string l = "model=\"" + label(m.model) + "\"";
    for (size_t i = 0; i < kNumBounds; ++i)
      out += "kiln_time_to_first_token_seconds_bucket{" + l + ",le=\"" + num(kTtftBounds[i]) + "\"} " +
             std::to_string(m.ttft_buckets[i]) + "\n";
    out += "kiln_time_to_first_token_seconds_bucket{" + l + ",le=\"+Inf\"} " + std::to_string(m.ttft_buckets[kNumBounds]) + "\n";
    out += "kiln_time_to_first_token_seconds_sum{" + l + "} " + num(m.ttft_sum_s) + "\n";
    out += "kiln_time_to_first_token_seconds_count{" + l + "} " + std::to_string(m.ttft_count) + "\n";
  }
  auto gauge = [&](const char* name, const char* help, auto value) {
    header(out, name, "gauge", help);
    for (const ModelGauges& g : gauges) out += std::string(name) + "{model=\"" + label(g.model) + "\"} " + num(value(g)) + "\n";
  };
  gauge("kiln_slots", "Sessions (--parallel) per model.", [](const ModelGauges& g) { return g.slots; });
  gauge("kiln_slots_busy", "Slots running a request.", [](const ModelGauges& g) { return g.busy; });
  gauge("kiln_queue_depth", "Requests waiting for a slot.", [](const ModelGauges& g) { return g.queued; });
  header(out, "kiln_memory_held_bytes", "gauge", "What the runtime holds: mapped weights, KV caches, arenas.");
  out += "kiln_memory_held_bytes " + std::to_string(rt.held_bytes) + "\n";
  header(out, "kiln_memory_peak_held_bytes", "gauge", "The most the runtime has held.");
  out += "kiln_memory_peak_held_bytes " + std::to_string(rt.peak_held_bytes) + "\n";
  header(out, "kiln_memory_budget_bytes", "gauge", "The runtime's memory budget (0: none).");
  out += "kiln_memory_budget_bytes " + std::to_string(rt.memory_budget_bytes) + "\n";
  header(out, "kiln_decode_steps_total", "counter", "Batched decode steps run.");
  out += "kiln_decode_steps_total " + std::to_string(rt.decode_steps) + "\n";
  header(out, "kiln_decode_step_tokens_total", "counter", "Tokens those steps carried (tokens/steps: the mean batch).");
  out += "kiln_decode_step_tokens_total " + std::to_string(rt.decode_tokens) + "\n";
  return out;
}

}  // namespace kiln::server
