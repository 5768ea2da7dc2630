#include "engine/compile_file.h"

#include <chrono>
#include <filesystem>

#include "compiler/kiln_writer.h"
#include "core/mapped_file.h"
#include "core/temp_file.h"
#include "engine/calibration.h"
#include "engine/conformance.h"
#include "engine/defaults.h"
#include "quant/overrides.h"
#include "quant/scheme_flag.h"
#include "runtime/perf_mode.h"

namespace kiln {

Result<CompileOptions> compile_options(const CompileRequest& c, const Import& imp) {
  const bool keep = c.scheme.empty() && has_quantized_weights(imp.model);
  KILN_ASSIGN_OR_RETURN(OverridesFile base, overrides_from_flags(c.scheme.empty() ? "w4a16" : c.scheme, c.group,
                                                                 c.symmetric, /*auto_fallback=*/!c.strict));
  if (keep) base = source_precision(imp.model);
  CompileOptions o;
  o.quant = base;
  o.tokenizer_path = c.tokenizer;
  o.max_tokens = c.max_tokens;
  o.fuse = c.fuse;
  o.guard_classifier = !c.quantize_classifier && !keep;
  if (!c.overrides.empty()) {
    KILN_ASSIGN_OR_RETURN(std::string text, read_text_file(c.overrides));
    KILN_ASSIGN_OR_RETURN(o.quant, parse_overrides(text, c.overrides, base));
    o.overrides_path = c.overrides;
  }
  return o;
}

std::string scheme_with_group(const std::string& scheme, int group) {
  if (auto p = parse_scheme_flag(scheme, group, true); p && p->scheme == Scheme::kW8A16 && p->w8_group == 0)
    return scheme + " g" + std::to_string(group);
  return scheme;
}

Result<CompileSummary> compile_to_file(const CompileRequest& c) {
  const auto t0 = std::chrono::steady_clock::now();
  CompileSummary s;
  // Before minutes of compiling: a device, FIFO or folder as the output is refused now.
  KILN_RETURN_IF_ERROR(regular_file_target(c.output).status());
  s.stale_removed = remove_stale_temp_files(c.output);
  ConformanceOptions co;
  if (!c.eval.empty()) {
    if (!c.conformance) return invalid_argument("--eval measures the conformance report, which --no-conformance turns off");
    KILN_ASSIGN_OR_RETURN(co.eval_text, read_text_file(c.eval));
    if (co.eval_text.find_first_not_of(" \t\r\n") == std::string::npos)
      return invalid_argument(c.eval + ": the evaluation text is empty");
    co.eval_name = std::filesystem::path(c.eval).filename().string();  // not the folder: the same file, the same bytes
  }
  if (!c.calib.empty() && !c.imatrix.empty())
    return invalid_argument("--calib and --imatrix both give the statistics: give one");
  std::string calib_text;
  if (!c.calib.empty()) {
    KILN_ASSIGN_OR_RETURN(calib_text, read_text_file(c.calib));
    KILN_RETURN_IF_ERROR(check_calibration_text(calib_text, c.calib));
  }
  KILN_ASSIGN_OR_RETURN(Import imp, import_model(c.model));
  KILN_ASSIGN_OR_RETURN(CompileOptions o, compile_options(c, imp));
  KILN_ASSIGN_OR_RETURN(KilnTarget target, resolve_target(c.target));
  const int threads = plan_threads(PerfMode::kBalanced, c.threads).n_threads;
  if (!c.calib.empty()) {
    const auto c0 = std::chrono::steady_clock::now();
    KILN_ASSIGN_OR_RETURN(ImportanceStats stats,
                          collect_importance(imp, o, calib_text, c.calib, c.calib_tokens, threads, c.model));
    stats.source = "calib " + std::filesystem::path(c.calib).filename().string();
    o.importance = std::make_shared<const ImportanceStats>(std::move(stats));
    s.calibration_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
  }
  if (!c.imatrix.empty()) {
    KILN_ASSIGN_OR_RETURN(ImportanceStats stats, importance_from_imatrix(c.imatrix, imp.model));
    o.importance = std::make_shared<const ImportanceStats>(std::move(stats));
  }
  o.progress = c.quantize_progress;
  KILN_ASSIGN_OR_RETURN(ProgramImage img, compile_model(imp, o, &s.report));
  if (o.importance && s.report.weights_calibrated == 0)
    s.report.notes.push_back((c.calib.empty() ? "--imatrix" : "--calib") + std::string(": no weight was rounded with the statistics (none is rounded here from f32 to an integer "
                             "scheme they apply to: w4a16/w4a8 g32-g128, w8a16, w8a8); the file is as without them"));
  if (c.conformance) {
    const auto m0 = std::chrono::steady_clock::now();
    co.threads = threads;
    KILN_ASSIGN_OR_RETURN(s.conformance, measure_conformance(imp, o, img, c.model, co));
    s.conformance_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - m0).count();
  }
  KILN_RETURN_IF_ERROR(write_kiln(img, target, s.report, c.output, c.write_progress,
                                  s.conformance ? &*s.conformance : nullptr));
  s.plan = img.program.plan;
  s.target = target.backend + (target.cpu_feature_names.empty() ? "" : " (" + target.cpu_feature_names + ")");
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

}  // namespace kiln
