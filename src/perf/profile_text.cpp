#include "perf/profile_text.h"

#include <cstdarg>
#include <cstdio>

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

void table(std::string& out, const char* title, const std::vector<Tally>& ts, size_t top, bool ceilings) {
  if (ts.empty()) return;
  put(out, "  %s\n    %-44s %6s %9s %6s %8s %8s", title, "", "count", "ms", "share", "GB/s", "GOP/s");
  if (ceilings) put(out, " %6s %6s", "%bw", "%comp");
  out += "\n";
  size_t shown = 0;
  for (const Tally& t : ts) {
    if (top > 0 && shown++ >= top) break;
    put(out, "    %-52.52s %6d %9.3f %5.1f%% %8.2f %8.2f", t.key.c_str(), t.count, t.seconds * 1e3, t.share * 100, t.gbs(),
        t.gops());
    if (ceilings) put(out, " %5.1f%% %5.1f%%", t.bandwidth_fraction * 100, t.compute_fraction * 100);
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
  const bool c = p.ceilings.bandwidth_gbs > 0 || !p.ceilings.product_rate.empty();
  table(out, "by back end", s.by_backend, top, c);
  table(out, "by op kind", s.by_kind, top, c);
  table(out, "top ops", s.by_op, top, c);
  table(out, "top layers", s.by_layer, top, c);
  table(out, "top instructions", s.by_node, top, c);
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
