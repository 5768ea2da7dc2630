// Compiles a source model to a .kiln file: import, the scheme from flags or an overrides file,
// the target, the passes, the atomic write. `kiln compile` and the C API call this.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "artifact/conformance_section.h"
#include "artifact/source_section.h"
#include "compiler/driver.h"
#include "graph/program.h"

namespace kiln {

struct CompileRequest {
  std::string model;   // llama2.c .bin, .gguf or HF folder
  std::string output;  // the .kiln to write
  // "": w4a16, or for a GGUF whose weights are GGML blocks, the file's own quantization
  // (source_precision(): Q4_0/Q4_1 kept byte for byte).
  std::string scheme;
  int group = 32;
  bool symmetric = true;
  bool strict = false;              // a 4-bit tensor the group does not divide fails (else 8-bit, noted)
  std::string overrides;            // JSON rules file; "" : none
  std::string overrides_text;       // the rules themselves, read instead of `overrides` when set
  std::string target = "auto";
  std::string tokenizer;            // "" : the model's own
  int max_tokens = kDefaultMaxTokens;
  bool fuse = true;
  bool quantize_classifier = false;  // false: the classifier one step above the default scheme
  // The conformance section (engine/conformance.h): the compiled program against the f32 one on a
  // built-in text and `eval` (a text file, "" : none); off for a model too large to hold twice.
  bool conformance = true;
  // Data-aware rounding (engine/calibration.h): a plain text file run through the f32 model for
  // each input channel's importance, of which the first calib_tokens tokens are used.
  std::string calib;
  int64_t calib_tokens = 512;
  std::string imatrix;  // llama.cpp's importance matrix (formats/imatrix.h) as the statistics instead
  // How the statistics round: "gptq" (needs --calib), "imatrix", "rtn" (no statistics); "" : the
  // best they allow (gptq with --calib, imatrix with --imatrix).
  std::string method;
  bool act_order = false;  // gptq: the columns largest second moment first
  std::string eval;
  int threads = 0;  // for the conformance runs; 0: the balanced choice (the fastest cores, at most 4)
  std::function<void(double)> quantize_progress;  // 0..1
  std::function<void(double)> write_progress;     // 0..1
};

struct CompileSummary {
  CompileReport report;
  MemoryPlan plan;
  std::string target;  // the target written, resolved: "cpu (avx2,avx512f,...)"
  double seconds = 0;
  std::optional<ConformanceReport> conformance;  // what the file's section says, when measured
  double conformance_seconds = 0;                // of `seconds`, measuring it
  double calibration_seconds = 0;                // of `seconds`, collecting --calib's statistics
  std::vector<std::string> stale_removed;  // temporary files of killed earlier runs, removed
};

Result<CompileSummary> compile_to_file(const CompileRequest& request);
// The threads a compile rounds and packs with when the caller names none: the balanced choice
// (the fastest cores, at most 4), as the runtime's default.
int compile_threads(int asked = 0);
// -q's name with a --group the user gave: w8a16 asks for 8-bit groups then ("w8a16 g64"; alone it
// keeps one scale per row); any other name is returned as it is.
std::string scheme_with_group(const std::string& scheme, int group);
// What compile_to_file compiles `imp` with for `request` (the scheme from -q or, without it, the
// GGUF's own blocks; the overrides file; the classifier guard): `kiln inspect` on a source model
// plans with the same, so that it says what the compile will do.
Result<CompileOptions> compile_options(const CompileRequest& request, const Import& imp);

// The source record compile_to_file writes (artifact/source_section.h): the model's absolute path
// and identity, and the request's options (the overrides file's text, not its name).
Result<SourceRecord> source_record(const CompileRequest& request);
// The request a record was compiled with, writing `output` (no conformance report: a rebuild is
// for running).
CompileRequest request_from_record(const SourceRecord& record, const std::string& output);
// The `kiln compile ...` command line that makes `output` from the record's source for this
// machine: what a message offers when kiln cannot rebuild it itself.
std::string compile_command(const SourceRecord& record, const std::string& output);

}  // namespace kiln
