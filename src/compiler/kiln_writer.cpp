#include "compiler/kiln_writer.h"

#include "backends/cpu/cpu_backend.h"
#include "core/cpu_features.h"

namespace kiln {

Result<KilnTarget> resolve_target(const std::string& name) {
  // Each named target is the most its kernels may use; the file records what the cpu back end's
  // best kernel table within that needs (the same on any machine that compiles it), and the
  // runtime runs that table, or refuses the file on a CPU without those features. "auto" (the
  // default) records only what the file needs: the cpu back end's layouts are the same for every
  // table, so that is nothing, and the file runs the best table of whichever machine opens it.
  KilnTarget t;
  t.backend = "cpu";
  uint64_t wanted = 0;
  if (name == "auto") {
    t.cpu_features = kCpuBestTable;
    t.cpu_feature_names = cpu_feature_names(t.cpu_features);
    return t;
  }
  if (name == "native") {
    wanted = host_cpu_features();
  } else {
    bool found = false;
    std::string names = "auto, native";
    for (const CpuTarget& n : kCpuTargets) {
      names += std::string(", ") + n.name;
      if (name == n.name) {
        wanted = n.features;
        found = true;
      }
    }
    if (!found) return invalid_argument("unknown target '" + name + "' (" + names + ")");
  }
  t.cpu_features = cpu_kernel_features(wanted);
  t.cpu_feature_names = cpu_feature_names(t.cpu_features);
  return t;
}

std::string kiln_writer_name() { return std::string("kiln ") + KILN_VERSION_STRING; }

Status write_kiln(const ProgramImage& img, const KilnTarget& target, const CompileReport& report,
                  const std::string& path, const std::function<void(double)>& progress,
                  const ConformanceReport* conformance, const SourceRecord* source) {
  return write_kiln_image(img, target, report, kiln_writer_name(), path, progress, conformance,
                          source);
}

}  // namespace kiln
