// The front door: opens whatever a user names as a model — a .kiln (mapped and checked) or a
// source model (llama2.c, GGUF, HF folder) compiled in memory or once into the compile cache —
// with its tokenizer and chat template. A .kiln this kiln cannot run as it is (a CPU target this
// machine lacks, an older format version) is rebuilt from the source it records when that source
// is present and unchanged (into the cache, one line through cache.notify); otherwise the error
// says what is missing and the command that fixes it. The CLI, the C API and everything above
// them open models here and nowhere else.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "artifact/conformance_section.h"
#include "core/mapped_file.h"
#include "engine/compile_cache.h"
#include "quant/overrides.h"
#include "runtime/model.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace kiln {

struct OpenOptions {
  std::string tokenizer_path;  // source models only ("" : the model's own)
  // Source models only; nullopt (the default): the source's own precision (source_precision():
  // F32/F16/BF16 as stored, Q4_0/Q4_1 as the same W4 bytes), no classifier guard.
  std::optional<OverridesFile> quant;
  bool verify = false;         // .kiln: check every section's checksum
  int max_tokens = kDefaultMaxTokens;
  // Set: the model is the .kiln in this range of an open file (an uncompressed APK entry), mapped
  // in place; the path only names it in messages. Its offset must keep the .kiln's 16 KB
  // alignment (kiln_model_load_fd in kiln.h).
  std::shared_ptr<const FileRange> range;
  // Source models (and a .kiln rebuilt from its source): compiled once into this cache and mapped
  // from it (engine/compile_cache.h); off (the default here; the CLI and the C API turn it on):
  // compiled in memory on every open.
  CacheOptions cache;
};

struct OpenedModel {
  std::shared_ptr<const Model> model;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::string path;
  std::string kind;  // "kiln", "llama2c", "gguf", "hf"
  std::optional<ModelChatTemplate> chat;  // the model's chat template, when it has one
  uint64_t file_bytes = 0;                // a .kiln's size on disk; 0 for a source model
  std::optional<ConformanceReport> conformance;  // a .kiln's conformance section, when it has one
  // What the user should know about how it was opened (a CLI prints each on stderr): a scheme
  // asked for on weights the source stores quantized already re-rounds them.
  std::vector<std::string> notes;
  std::string cache_path;  // the cache entry mapped (a source model, or a .kiln rebuilt); "" : none
  bool cache_hit = false;  // that entry was made before this open
};

bool is_kiln_file(const std::string& path);
Result<OpenedModel> open_model(const std::string& path, const OpenOptions& options);
// The template a chat uses: the Jinja file `template_file` when given (with the model's special
// tokens), else the model's own; an error saying what to do when there is none.
Result<ModelChatTemplate> chat_template_for(const OpenedModel& m, const std::string& template_file);
// The f32 default for running a source model as published.
OverridesFile f32_overrides();

}  // namespace kiln
