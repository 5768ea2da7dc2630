#include "engine/compile_file.h"

#include <chrono>
#include <filesystem>

#include "compiler/kiln_writer.h"
#include "core/mapped_file.h"
#include "core/temp_file.h"
#include "engine/compile_cache.h"
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
  if (!c.overrides_text.empty() || !c.overrides.empty()) {
    const std::string name = c.overrides.empty() ? "the recorded overrides" : c.overrides;
    std::string text = c.overrides_text;
    if (text.empty()) {
      KILN_ASSIGN_OR_RETURN(text, read_text_file(c.overrides));
    }
    KILN_ASSIGN_OR_RETURN(o.quant, parse_overrides(text, name, base));
    o.overrides_path = name;
  }
  return o;
}

int compile_threads(int asked) { return plan_threads(PerfMode::kBalanced, asked).n_threads; }

std::string scheme_with_group(const std::string& scheme, int group) {
  if (auto p = parse_scheme_flag(scheme, group, true); p && p->scheme == Scheme::kW8A16 && p->w8_group == 0)
    return scheme + " g" + std::to_string(group);
  return scheme;
}

Result<SourceRecord> source_record(const CompileRequest& c) {
  SourceRecord r;
  std::error_code ec;
  r.path = std::filesystem::absolute(c.model, ec).lexically_normal().string();
  if (ec) r.path = c.model;
  KILN_ASSIGN_OR_RETURN(SourceIdentity id, source_identity(c.model));
  r.size = id.size;
  r.hash = id.hash;
  // The scheme as one spelling (q4_0 and w4a16 --group 32 are one request, and one file's bytes).
  r.scheme = c.scheme;
  r.group = c.group;
  r.symmetric = c.symmetric;
  if (auto p = parse_scheme_flag(c.scheme, c.group, c.symmetric); !c.scheme.empty() && p) {
    const QuantParams q = canonical(*p);
    r.scheme = std::string(scheme_name(q.scheme)) + (q.w8_group ? " g" + std::to_string(q.w8_group) : "");
    r.group = q.group_size ? q.group_size : CompileRequest().group;
    r.symmetric = q.symmetric;
  }
  r.strict = c.strict;
  r.quantize_classifier = c.quantize_classifier;
  r.fuse = c.fuse;
  r.max_tokens = c.max_tokens;
  if (!c.tokenizer.empty()) r.tokenizer = std::filesystem::absolute(c.tokenizer, ec).lexically_normal().string();
  r.overrides = c.overrides_text;
  if (r.overrides.empty() && !c.overrides.empty()) {
    KILN_ASSIGN_OR_RETURN(r.overrides, read_text_file(c.overrides));
  }
  r.calibrated = !c.calib.empty() || !c.imatrix.empty();
  return r;
}

CompileRequest request_from_record(const SourceRecord& r, const std::string& output) {
  CompileRequest c;
  c.model = r.path;
  c.output = output;
  c.scheme = r.scheme;
  c.group = r.group;
  c.symmetric = r.symmetric;
  c.strict = r.strict;
  c.quantize_classifier = r.quantize_classifier;
  c.fuse = r.fuse;
  if (r.max_tokens > 0) c.max_tokens = r.max_tokens;
  c.tokenizer = r.tokenizer;
  c.overrides_text = r.overrides;
  c.conformance = false;
  return c;
}

std::string compile_command(const SourceRecord& r, const std::string& output) {
  const CompileRequest d;
  std::string cmd = "kiln compile " + r.path + " -o " + output;
  if (!r.scheme.empty()) cmd += " -q " + r.scheme;
  if (r.group != d.group) cmd += " --group " + std::to_string(r.group);
  if (!r.symmetric) cmd += " --asym";
  if (r.strict) cmd += " --strict";
  if (!r.overrides.empty()) cmd += " --overrides RULES.json";
  if (!r.tokenizer.empty()) cmd += " --tokenizer " + r.tokenizer;
  if (r.max_tokens > 0 && r.max_tokens != d.max_tokens) cmd += " --max-tokens " + std::to_string(r.max_tokens);
  if (!r.fuse) cmd += " --no-fuse";
  if (r.quantize_classifier) cmd += " --quantize-classifier";
  if (r.calibrated) cmd += " --calib TEXT";
  return cmd;
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
  const bool stats = !c.calib.empty() || !c.imatrix.empty();
  QuantMethod method = c.calib.empty() ? (c.imatrix.empty() ? QuantMethod::kRtn : QuantMethod::kImatrix) : QuantMethod::kGptq;
  if (c.method == "rtn") {
    if (stats) return invalid_argument("--method rtn rounds to nearest and reads no statistics: drop " + std::string(c.calib.empty() ? "--imatrix" : "--calib"));
    method = QuantMethod::kRtn;
  } else if (c.method == "imatrix" || c.method == "gptq") {
    if (!stats) return invalid_argument("--method " + c.method + " rounds with calibration statistics: give --calib TEXT" +
                                        (c.method == "imatrix" ? " or --imatrix FILE" : ""));
    if (c.method == "gptq" && c.calib.empty())
      return invalid_argument("--method gptq needs the calibration inputs themselves (--calib TEXT); an importance matrix holds only their mean squares");
    method = c.method == "gptq" ? QuantMethod::kGptq : QuantMethod::kImatrix;
  } else if (!c.method.empty()) {
    return invalid_argument("--method '" + c.method + "' is not a rounding method (rtn, imatrix, gptq)");
  }
  if (c.act_order && method != QuantMethod::kGptq) return invalid_argument("--act-order orders GPTQ's columns: it needs --method gptq (and --calib TEXT)");
  std::string calib_text;
  if (!c.calib.empty()) {
    KILN_ASSIGN_OR_RETURN(calib_text, read_text_file(c.calib));
    KILN_RETURN_IF_ERROR(check_calibration_text(calib_text, c.calib));
  }
  KILN_ASSIGN_OR_RETURN(Import imp, import_model(c.model));
  KILN_ASSIGN_OR_RETURN(CompileOptions o, compile_options(c, imp));
  KILN_ASSIGN_OR_RETURN(KilnTarget target, resolve_target(c.target));
  const int threads = compile_threads(c.threads);
  if (!c.calib.empty()) {
    const auto c0 = std::chrono::steady_clock::now();
    KILN_ASSIGN_OR_RETURN(ImportanceStats stats,
                          collect_importance(imp, o, calib_text, c.calib, c.calib_tokens, threads, c.model,
                                             /*keep_inputs=*/method == QuantMethod::kGptq));
    stats.source = "calib " + std::filesystem::path(c.calib).filename().string();
    o.importance = std::make_shared<const ImportanceStats>(std::move(stats));
    s.calibration_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
  }
  if (!c.imatrix.empty()) {
    KILN_ASSIGN_OR_RETURN(ImportanceStats stats, importance_from_imatrix(c.imatrix, imp.model));
    o.importance = std::make_shared<const ImportanceStats>(std::move(stats));
  }
  o.progress = c.quantize_progress;
  o.method = method;
  o.act_order = c.act_order;
  o.threads = threads;
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
  KILN_ASSIGN_OR_RETURN(const SourceRecord record, source_record(c));
  KILN_RETURN_IF_ERROR(write_kiln(img, target, s.report, c.output, c.write_progress,
                                  s.conformance ? &*s.conformance : nullptr, &record));
  s.plan = img.program.plan;
  s.target = target.backend + (target.cpu_feature_names.empty() ? "" : " (" + target.cpu_feature_names + ")");
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

}  // namespace kiln
