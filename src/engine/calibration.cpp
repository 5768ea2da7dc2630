#include "engine/calibration.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "artifact/kiln_file.h"
#include "core/utf8.h"
#include "engine/defaults.h"
#include "engine/open_model.h"
#include "formats/imatrix.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer_source.h"

namespace kiln {

Status check_calibration_text(std::string_view text, const std::string& file) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    return invalid_argument(file + ": the calibration text is empty");
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
    return invalid_argument(file + ": not a text file (byte " + std::to_string(nul) + " is NUL); calibration needs plain text");
  if (!is_valid_utf8(text)) return invalid_argument(file + ": not a text file (not valid UTF-8); calibration needs plain text");
  return Status::ok();
}

Result<ProgramImage> reference_image(const Import& imp, const CompileOptions& options) {
  CompileOptions f32 = options;
  f32.quant = f32_overrides();
  f32.guard_classifier = false;
  f32.fuse = false;  // every projection its own matmul, reading its own input
  f32.progress = {};
  f32.importance = nullptr;
  return compile_model(imp, f32, nullptr);
}

Result<std::vector<int>> calibration_tokens(const ProgramImage& img, std::string_view text, const std::string& file,
                                            int64_t max_tokens, const std::string& source_path) {
  KILN_RETURN_IF_ERROR(check_calibration_text(text, file));
  KILN_ASSIGN_OR_RETURN(auto tok, tokenizer_from_blob(img.tokenizer, tokenizer_where(img.tokenizer, source_path)));
  KILN_ASSIGN_OR_RETURN(std::vector<int> all, tok->encode(text, add_bos_by_default(*tok)));
  if (static_cast<int64_t>(all.size()) < kMinCalibTokens)
    return invalid_argument(file + ": only " + std::to_string(all.size()) + " tokens; calibration needs at least " +
                            std::to_string(kMinCalibTokens));
  if (static_cast<int64_t>(all.size()) > max_tokens) all.resize(static_cast<size_t>(max_tokens));
  return all;
}

Status run_windows(Session& session, std::span<const int> tokens,
                   const std::function<void(size_t first, size_t rows, std::span<const float> logits)>& each) {
  const size_t n_ctx = static_cast<size_t>(session.n_ctx());
  const size_t chunk = static_cast<size_t>(session.max_logit_rows());
  for (size_t start = 0; start < tokens.size(); start += n_ctx) {
    const size_t end = std::min(tokens.size(), start + n_ctx);
    session.reset();
    // Every token's logits, so that the classifier sees every row too (it runs on the last alone else).
    for (size_t i = start; i < end; i += chunk) {
      const size_t n = std::min(end - i, chunk);
      KILN_ASSIGN_OR_RETURN(std::span<const float> logits, session.decode_all(tokens.subspan(i, n)));
      if (each) each(i, n, logits);
    }
  }
  return Status::ok();
}

int calibration_window(const Model& model) { return std::min(model.config().max_seq_len, 512); }

Result<ImportanceStats> importance_of_run(std::shared_ptr<const Model> model, std::span<const int> tokens, int threads,
                                          bool keep_inputs, std::vector<float>* logits) {
  const Program& p = model->program();
  const Graph& g = p.graph;
  // Per weight: the sum of squares of each input column, and the rows summed.
  std::vector<std::vector<double>> sums(g.weights.size());
  std::vector<int64_t> rows_seen(g.weights.size(), 0);
  // With keep_inputs: per input value, its rows as they come, and the weights that read it.
  std::map<int, std::shared_ptr<std::vector<float>>> inputs;
  std::map<size_t, int> input_of;
  StepTracer tracer{ProfileLevel::kOff};
  tracer.after_instruction = [&](int node, const StepContext& ctx, int rows) {
    const Node& n = g.nodes[static_cast<size_t>(node)];
    if (n.op != OpCode::kMatMul || n.weights.empty() || n.inputs.empty()) return;
    const auto w = static_cast<size_t>(n.weights[0]);
    const auto width = static_cast<size_t>(g.values[static_cast<size_t>(n.inputs[0])].width);
    // The input lives until this node has run (the memory plan keeps it): read it now.
    const auto* x = reinterpret_cast<const float*>(ctx.arena + p.plan.offsets[static_cast<size_t>(n.inputs[0])]);
    std::vector<double>& s = sums[w];
    s.resize(width, 0.0);
    for (int r = 0; r < rows; ++r)
      for (size_t j = 0; j < width; ++j) s[j] += static_cast<double>(x[r * width + j]) * x[r * width + j];
    rows_seen[w] += rows;
    if (keep_inputs) {
      const int value = n.inputs[0];
      input_of[w] = value;
      // The weights reading one input run one after another on the same rows: keep them once.
      auto& kept = inputs[value];
      if (!kept) kept = std::make_shared<std::vector<float>>();
      const size_t want = static_cast<size_t>(rows_seen[w]) * width;
      if (kept->size() < want) kept->insert(kept->end(), x, x + static_cast<size_t>(rows) * width);
    }
  };
  KILN_ASSIGN_OR_RETURN(auto session, Session::create(model, calibration_window(*model), threads, DType::kF32));
  session->set_tracer(&tracer);
  if (logits) logits->clear();
  KILN_RETURN_IF_ERROR(run_windows(*session, tokens, [&](size_t, size_t, std::span<const float> l) {
    if (logits) logits->insert(logits->end(), l.begin(), l.end());
  }));
  // A table the embedding also reads (a classifier tied to it) keeps every row's values as they
  // are looked up: the classifier's input statistics say nothing of that use, so it is not
  // rounded by them.
  std::vector<bool> embedded(g.weights.size(), false);
  for (const Node& n : g.nodes)
    if (n.op == OpCode::kEmbed)
      for (int w : n.weights) embedded[static_cast<size_t>(w)] = true;
  ImportanceStats stats;
  for (size_t w = 0; w < g.weights.size(); ++w) {
    if (rows_seen[w] == 0 || embedded[w]) continue;
    std::vector<float>& v = stats.per_weight[g.weights[w].name];
    for (double s : sums[w]) v.push_back(static_cast<float>(s / static_cast<double>(rows_seen[w])));
    if (auto in = input_of.find(w); in != input_of.end()) stats.inputs[g.weights[w].name] = inputs[in->second];
  }
  stats.tokens = static_cast<int64_t>(tokens.size());
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(kiln_checksum(
      {reinterpret_cast<const uint8_t*>(tokens.data()), tokens.size() * sizeof(int)})));
  stats.hash = hex;
  return stats;
}

Result<ImportanceStats> collect_importance(const Import& imp, const CompileOptions& options, std::string_view text,
                                           const std::string& file, int64_t max_tokens, int threads,
                                           const std::string& source_path, bool keep_inputs) {
  KILN_RETURN_IF_ERROR(check_calibration_text(text, file));
  KILN_ASSIGN_OR_RETURN(ProgramImage img, reference_image(imp, options));
  KILN_ASSIGN_OR_RETURN(std::vector<int> tokens, calibration_tokens(img, text, file, max_tokens, source_path));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Model> model, Model::create(std::move(img)));
  return importance_of_run(std::move(model), tokens, threads, keep_inputs, nullptr);
}

Result<ImportanceStats> importance_from_imatrix(const std::string& path, const ImportedModel& model) {
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  KILN_ASSIGN_OR_RETURN(ImatrixFile im, read_imatrix(*file));
  ImportanceStats stats;
  for (auto& [name, v] : im.importance) {
    auto t = model.tensors.find(name);
    if (t == model.tensors.end())
      return invalid_argument(path + ": entry '" + name + "' is not a weight of " + model.path +
                              ": the importance matrix is for another model");
    const TensorSource& src = t->second;
    if (src.shape.size() != 2 || src.shape.back() != static_cast<int64_t>(v.size()))
      return invalid_argument(path + ": entry '" + name + "' has " + std::to_string(v.size()) + " columns but the weight in " +
                              model.path + " has " + std::to_string(src.shape.empty() ? 0 : src.shape.back()) +
                              ": the importance matrix is for another model");
    stats.per_weight.emplace(name, std::move(v));
  }
  stats.source = "imatrix " + std::filesystem::path(path).filename().string() + " (" + im.format + ")";
  // The tokens behind it, where the file says (chunks times their size); 0: not recorded.
  if (im.chunks > 0 && im.chunk_size > 0 && im.chunks < (int64_t{1} << 31) && im.chunk_size < (int64_t{1} << 31))
    stats.tokens = im.chunks * im.chunk_size;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(kiln_checksum(file->bytes())));
  stats.hash = hex;
  return stats;
}

}  // namespace kiln
