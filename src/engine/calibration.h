// Calibration for data-aware quantization (`kiln compile --calib FILE`): the text checked and
// tokenized with the model's tokenizer, then run once through the model's f32 program, unfused,
// whose every matmul's input is read after it runs: per weight, the mean square of each input
// channel over the tokens (llama.cpp's importance matrix), which quant/importance_quantizer.h
// rounds with. The statistics are a vector per weight (its input width), not per token.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/driver.h"

namespace kiln {

class Model;
class Session;

inline constexpr int64_t kDefaultCalibTokens = 512;
inline constexpr int64_t kMinCalibTokens = 64;

// A one-line error naming `file` when `text` cannot calibrate: empty, or not text (a NUL byte,
// invalid UTF-8). Cheap: a compile checks it before any work.
Status check_calibration_text(std::string_view text, const std::string& file);

// `text` (checked as above) tokenized with the model's tokenizer, BOS first where it has one, cut
// to `max_tokens` (fewer than kMinCalibTokens is an error), run through `imp` compiled with
// `options` but f32 and unfused, in windows of up to 512 tokens. `source_path` names the model in
// tokenizer errors. With `keep_inputs`, each matmul's inputs are kept too (ImportanceStats::inputs,
// for GPTQ: tokens x the sum of the distinct input widths floats, 371 MB for Qwen2.5-0.5B's 512).
Result<ImportanceStats> collect_importance(const Import& imp, const CompileOptions& options, std::string_view text,
                                           const std::string& file, int64_t max_tokens, int threads,
                                           const std::string& source_path, bool keep_inputs = false);

// The pieces of collect_importance, for other passes over the f32 model (engine/sensitivity_sweep.h):
// the f32 program, unfused; the text's tokens as above; one run of them through a model (f32,
// unfused) giving the statistics, and with `logits` every row's logits, [tokens][vocab].
Result<ProgramImage> reference_image(const Import& imp, const CompileOptions& options);
Result<std::vector<int>> calibration_tokens(const ProgramImage& img, std::string_view text, const std::string& file,
                                            int64_t max_tokens, const std::string& source_path);
Result<ImportanceStats> importance_of_run(std::shared_ptr<const Model> model, std::span<const int> tokens, int threads,
                                          bool keep_inputs, std::vector<float>* logits);
// The window a calibration run takes the tokens in (the cache reset between windows).
int calibration_window(const Model& model);
// `tokens` through `session` in windows of its n_ctx, every row's logits handed to `each` (the
// index of the window's first row in `tokens`, the rows, their logits [rows][vocab]).
Status run_windows(Session& session, std::span<const int> tokens,
                   const std::function<void(size_t first, size_t rows, std::span<const float> logits)>& each);

// An importance matrix of llama.cpp (formats/imatrix.h) as the statistics, checked against the
// model: every entry a weight of it with as many input columns, else a one-line error saying the
// file is for another model. The hash is the file's.
Result<ImportanceStats> importance_from_imatrix(const std::string& imatrix_path, const ImportedModel& model);

}  // namespace kiln
