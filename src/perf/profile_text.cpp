#include "perf/profile_text.h"

#include <cstdarg>
#include <cstdio>
#include <string>

namespace kiln {

namespace {

void put(std::string& out, const char* fmt, ...) {
  char line[512];
  va_list a;
  va_start(a, fmt);
  std::vsnprintf(line, sizeof line, fmt, a);
  va_end(a);
  out += line;
}

double mib(uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); }

// A fraction of a ceiling, or "-" where there is none to be a fraction of (not measured, or an
// op without products for the compute ceiling): never a 0.0% that reads as a measurement.
std::string percent(bool measured, double fraction) {
  if (!measured) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", fraction * 100);
  return b;
}

// The header's fields have the widths of the values' fields, so each label sits over its column.
void table(std::string& out, const char* title, const std::vector<Tally>& ts, size_t top, const Ceilings& c) {
  if (ts.empty()) return;
  const bool ceilings = c.bandwidth_gbs > 0 || !c.product_rate.empty();
  put(out, "  %s\n    %-52s %6s %9s %6s %8s %8s", title, "", "count", "ms", "share", "GB/s", "GOP/s");
  if (ceilings) put(out, " %6s %6s", "%bw", "%comp");
  out += "\n";
  size_t shown = 0;
  for (const Tally& t : ts) {
    if (top > 0 && shown++ >= top) break;
    put(out, "    %-52.52s %6d %9.3f %5.1f%% %8.2f %8.2f", t.key.c_str(), t.count, t.seconds * 1e3, t.share * 100, t.gbs(),
        t.gops());
    if (ceilings)
      put(out, " %6s %6s", percent(c.bandwidth_gbs > 0, t.bandwidth_fraction).c_str(),
          percent(t.product_seconds > 0, t.compute_fraction).c_str());
    out += "\n";
  }
}

void phase(std::string& out, const char* name, const PhaseSummary& s, const Profile& p, size_t top) {
  if (s.steps == 0) return;
  put(out, "%s: %d tokens in %d steps, %.2f ms, %.2f tok/s", name, s.tokens, s.steps, s.seconds * 1e3,
      s.tokens_per_second());
  if (s.by_op.empty()) {
    out += "\n";
    return;
  }
  const double gbs = s.seconds > 0 ? s.cost.bytes() / s.seconds / 1e9 : 0;
  put(out, "; instructions %.2f ms (%.1f%% of the steps); %.1f MB moved, %.2f GB/s", s.instruction_seconds * 1e3,
      s.seconds > 0 ? 100 * s.instruction_seconds / s.seconds : 0, s.cost.bytes() / 1e6, gbs);
  if (p.ceilings.bandwidth_gbs > 0) put(out, " = %.1f%% of %.1f GB/s", 100 * gbs / p.ceilings.bandwidth_gbs, p.ceilings.bandwidth_gbs);
  out += "\n";
  table(out, "by back end", s.by_backend, top, p.ceilings);
  table(out, "by op kind", s.by_kind, top, p.ceilings);
  table(out, "top ops", s.by_op, top, p.ceilings);
  table(out, "top layers", s.by_layer, top, p.ceilings);
  table(out, "top instructions", s.by_node, top, p.ceilings);
}

}  // namespace

std::string profile_to_text(const Profile& p, size_t top) {
  std::string out;
  put(out, "profile (%s, %d thread%s)%s%s\n", std::string(profile_level_name(p.level)).c_str(), p.n_threads,
      p.n_threads == 1 ? "" : "s", p.model.empty() ? "" : ": ", p.model.c_str());
  if (!p.kernels.empty()) put(out, "kernels %s\n", p.kernels.c_str());
  put(out, "time to first token %.2f ms\n", p.time_to_first_token_s * 1e3);
  phase(out, "prefill", p.prefill, p, top);
  phase(out, "decode", p.decode, p, top);
  const MemoryParts& m = p.memory;
  put(out, "memory: peak RSS %.1f MiB; now %.1f MiB = weights resident %.1f of %.1f MiB mapped + arenas %.1f + KV cache %.1f + "
           "scratch %.1f MiB + the rest (code, libraries, heap) %.1f MiB\n",
      mib(m.peak_rss), mib(m.rss_now), mib(m.weights_resident), mib(m.weights_mapped), mib(m.arenas), mib(m.kv_cache),
      mib(m.scratch),
      mib(m.rss_now > m.weights_resident + m.arenas + m.kv_cache + m.scratch
              ? m.rss_now - m.weights_resident - m.arenas - m.kv_cache - m.scratch
              : 0));
  if (p.fault) put(out, "numerics: %s\n", p.fault->message().c_str());
  return out;
}

}  // namespace kiln
