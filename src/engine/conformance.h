// The conformance report a compile writes into the .kiln (artifact/conformance_section.h): the
// compiled program against the same model compiled to f32, on a short built-in text and the
// user's --eval text, by the same measure as `kiln compare` (engine/model_compare.h).
#pragma once

#include <string>
#include <string_view>

#include "artifact/conformance_section.h"
#include "compiler/driver.h"

namespace kiln {

// A paragraph of English prose with a line of code: short (about 150 tokens), so that measuring
// costs a few forward passes of the model.
extern const std::string_view kConformanceText;

struct ConformanceOptions {
  std::string eval_name;         // the --eval file's name; "" : the built-in text only
  std::string eval_text;         // its contents (read before the compile, so a bad file fails first)
  int threads = 1;
  int64_t max_eval_tokens = 2048;  // an --eval text is cut to its first this many tokens
};

// `compiled` is what compile_model made of `imp` with `compiled_with`; the reference is `imp` with
// the same options but every weight f32 (and compiled only when `compiled` is not all f32 itself).
// `source_path` names the model in tokenizer errors.
Result<ConformanceReport> measure_conformance(const Import& imp, const CompileOptions& compiled_with,
                                              const ProgramImage& compiled, const std::string& source_path,
                                              const ConformanceOptions& options);

}  // namespace kiln
