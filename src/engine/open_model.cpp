#include "engine/open_model.h"

#include <algorithm>
#include <set>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "artifact/kiln_file.h"
#include "artifact/kiln_image_reader.h"
#include "artifact/source_section.h"
#include "compiler/driver.h"
#include "compiler/kiln_writer.h"
#include "core/cpu_features.h"
#include "core/mapped_file.h"
#include "engine/compile_file.h"
#include "engine/defaults.h"
#include "tokenizer/tokenizer_source.h"

namespace kiln {

bool is_kiln_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return false;
  // The first 4 bytes of the magic: a .kiln damaged after them is still opened as one, so that
  // its reader names what is wrong.
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::memcmp(magic, kKilnMagic, 4) == 0;
}

OverridesFile f32_overrides() {
  OverridesFile o;
  o.defaults.scheme = Scheme::kF32;
  return o;
}

namespace {

const char* format_kind(ModelFormat f) {
  switch (f) {
    case ModelFormat::kLlama2c: return "llama2c";
    case ModelFormat::kGguf: return "gguf";
    case ModelFormat::kHfFolder: return "hf";
  }
  return "source";
}

// What a source model opens with: the scheme asked for, else its own precision.
CompileOptions source_options(const Import& imp, const OpenOptions& o, const std::string& path,
                              std::vector<std::string>& notes) {
  CompileOptions co;
  co.quant = o.quant ? *o.quant : source_precision(imp.model);
  co.guard_classifier = o.quant.has_value();  // the source's own precision is kept as it is
  co.tokenizer_path = o.tokenizer_path;
  co.max_tokens = o.max_tokens;
  co.progress = o.cache.quantize_progress;
  co.threads = compile_threads();
  if (o.quant && has_quantized_weights(imp.model)) {
    std::set<std::string> stored;
    for (const auto& [name, t] : imp.model.tensors)
      if (t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16) stored.insert(std::string(dtype_name(t.dtype)));
    std::string types;
    for (const auto& s : stored) types += (types.empty() ? "" : ", ") + s;
    notes.push_back(path + " stores its weights quantized already (" + types +
                    "); the scheme asked for rounds them again from their dequantized values, which costs "
                    "accuracy (kiln ppl and kiln compare measure how much); without one they run as stored");
  }
  return co;
}

// The cache entry for `rq` mapped: made when missing, made again when the one found does not open
// (damaged). Null when the cache cannot be used (a note in out.notes says why).
Result<std::optional<KilnImage>> open_cached(const OpenOptions& o, const CacheRequest& rq, OpenedModel& out) {
  for (int attempt = 0;; ++attempt) {
    KILN_ASSIGN_OR_RETURN(CacheResult r, cached_compile(o.cache, rq));
    if (r.path.empty()) {
      out.notes.push_back("the compile cache is not usable (" + r.unusable + "); compiled in memory instead");
      return std::optional<KilnImage>();
    }
    auto k = open_kiln_image(r.path, o.verify);
    if (!k && r.hit && attempt == 0) {
      drop_cache_entry(r.path);
      continue;
    }
    if (!k) return k.status();
    out.cache_path = r.path;
    out.cache_hit = r.hit;
    return std::optional<KilnImage>(std::move(*k));
  }
}

// A source model opened: through the cache when it is on and usable, else compiled in memory.
Result<ProgramImage> open_source(const std::string& path, const OpenOptions& o, OpenedModel& out) {
  // (a path that is no model goes the in-memory way, for its usual error)
  if (auto format = o.cache.enabled ? detect_model_format(path) : Result<ModelFormat>(not_found("")); format) {
    out.kind = format_kind(*format);
    CacheRequest rq;
    rq.source = path;
    rq.options_key = "open " + std::filesystem::absolute(path).lexically_normal().string() + "\nquant " +
                     (o.quant ? overrides_key(*o.quant) : std::string("as stored")) + "\nmax_tokens " +
                     std::to_string(o.max_tokens) + "\n";
    // The tokenizer is part of what is compiled: --tokenizer's file, or a llama2.c checkpoint's
    // tokenizer.bin / tok*.bin beside it.
    std::vector<std::string> tokenizers;
    if (!o.tokenizer_path.empty()) tokenizers.push_back(o.tokenizer_path);
    else if (*format == ModelFormat::kLlama2c) {
      std::error_code ec;
      const auto dir = std::filesystem::absolute(path).parent_path();
      for (const auto& e : std::filesystem::directory_iterator(dir, ec))
        if (const std::string n = e.path().filename().string(); n.starts_with("tok") && n.ends_with(".bin"))
          tokenizers.push_back(e.path().string());
      std::sort(tokenizers.begin(), tokenizers.end());
    }
    for (const std::string& t : tokenizers) {
      KILN_ASSIGN_OR_RETURN(SourceIdentity id, source_identity(t));
      rq.options_key += "tokenizer " + std::filesystem::absolute(t).string() + " " + std::to_string(id.size) + " " +
                        std::to_string(id.mtime_ns) + " " + std::to_string(id.hash) + "\n";
    }
    rq.build = [&](const std::string& entry, const std::function<void()>& announce) -> Status {
      KILN_ASSIGN_OR_RETURN(Import imp, import_model(path));
      CompileOptions co = source_options(imp, o, path, out.notes);
      co.progress = [&](double f) {
        announce();
        if (o.cache.quantize_progress) o.cache.quantize_progress(f);
      };
      CompileReport report;
      KILN_ASSIGN_OR_RETURN(ProgramImage img, compile_model(imp, co, &report));
      // A tokenizer that does not read is named by its file, and never cached.
      KILN_RETURN_IF_ERROR(tokenizer_from_blob(img.tokenizer, tokenizer_where(img.tokenizer, path)).status());
      announce();
      KILN_ASSIGN_OR_RETURN(KilnTarget target, resolve_target("auto"));
      return write_kiln(img, target, report, entry, o.cache.write_progress);
    };
    KILN_ASSIGN_OR_RETURN(std::optional<KilnImage> k, open_cached(o, rq, out));
    if (k) return std::move(k->image);
  }
  KILN_ASSIGN_OR_RETURN(Import imp, import_model(path));
  out.kind = imp.model.format;
  return compile_model(imp, source_options(imp, o, path, out.notes), nullptr);
}

// A .kiln that failed to open with `why`: rebuilt from its recorded source when the failure is a
// CPU target this machine lacks or an older format version and the source is there unchanged.
Result<ProgramImage> heal_kiln(const std::string& path, const OpenOptions& o, const Status& why, OpenedModel& out) {
  KilnOpenOptions ko;
  ko.check_target = false;
  ko.accept_older_versions = true;
  auto f = open_kiln(path, ko);
  if (!f) return why;
  const KilnFile& file = **f;
  std::string reason;
  if (file.format_version() < kKilnFormatVersion) {
    reason = path + " is of format version " + std::to_string(file.format_version()) + ", this kiln reads " +
             std::to_string(kKilnFormatVersion);
  } else if (const uint64_t missing = file.target().cpu_features & ~(host_cpu_features() | kCpuBestTable);
             missing != 0 && file.target().backend == "cpu") {
    reason = path + " was compiled for CPU features this machine lacks (" + cpu_feature_names(missing) + ")";
  } else {
    return why;
  }
  if (!file.has_section(KilnSection::kSource))
    return Status(why.code(), why.message() + " (the file records no source to rebuild it from: it was written by a "
                                              "kiln older than the source record)");
  auto record = decode_source_section(file.section(KilnSection::kSource), path);
  if (!record) return Status(why.code(), why.message() + " (" + record.status().message() + ")");
  const std::string fix = compile_command(*record, path);
  if (record->calibrated)
    return unsupported(reason + "; it was compiled with calibration statistics, which its source alone does not "
                       "reproduce: recompile it with `" + fix + "`");
  auto id = source_identity(record->path);
  if (!id)
    return unsupported(reason + "; its source " + record->path + " is missing: put it back, or recompile it with `" +
                       fix + "` where the source is");
  if (id->size != record->size || id->hash != record->hash)
    return unsupported(reason + "; its source " + record->path + " has changed since (" + std::to_string(record->size) +
                       " bytes then, " + std::to_string(id->size) + " now, or other bytes): recompile it with `" + fix + "`");
  CompileRequest rq = request_from_record(*record, "");
  if (o.cache.enabled) {
    CacheRequest cr;
    cr.source = record->path;
    cr.options_key = "rebuild\n" + encode_source_section(*record);
    cr.reason = reason;
    cr.build = [&](const std::string& entry, const std::function<void()>& announce) -> Status {
      announce();  // the source's identity is checked already
      rq.output = entry;
      rq.quantize_progress = o.cache.quantize_progress;
      rq.write_progress = o.cache.write_progress;
      return compile_to_file(rq).status();
    };
    KILN_ASSIGN_OR_RETURN(std::optional<KilnImage> k, open_cached(o, cr, out));
    if (k) return std::move(k->image);
  }
  if (o.cache.notify) o.cache.notify(reason + "; rebuilding it from its source " + record->path + " in memory");
  KILN_ASSIGN_OR_RETURN(Import imp, import_model(record->path));
  KILN_ASSIGN_OR_RETURN(CompileOptions co, compile_options(rq, imp));
  co.progress = o.cache.quantize_progress;
  co.threads = compile_threads();
  return compile_model(imp, co, nullptr);
}

}  // namespace

Result<OpenedModel> open_model(const std::string& path, const OpenOptions& o) {
  OpenedModel out;
  out.path = path;
  ProgramImage image;
  if (o.range) {
    // The weights section lies at a multiple of 16 KB in the file; mapped from an offset that is
    // not one, it would not be 16 KB-aligned in memory (nor, on a 16 KB-page device, mappable).
    if (o.range->offset() % kKilnWeightsAlignment != 0)
      return invalid_argument(o.range->name() + ": offset " + std::to_string(o.range->offset()) +
                              " is not a multiple of " + std::to_string(kKilnWeightsAlignment) +
                              ": a .kiln maps in place only from a 16 KB-aligned offset; store it uncompressed "
                              "and 16 KB-aligned (Gradle: androidResources.noCompress += \"kiln\"; "
                              "zipalign -f 16384), or copy it to a file");
    KILN_ASSIGN_OR_RETURN(auto bytes, o.range->map());
    KILN_ASSIGN_OR_RETURN(KilnImage k, open_kiln_image(std::move(bytes), o.verify));
    out.file_bytes = k.file->file_size();
    image = std::move(k.image);
    out.kind = "kiln";
  } else if (is_kiln_file(path)) {
    out.kind = "kiln";
    auto k = open_kiln_image(path, o.verify);
    if (!k && k.status().code() == StatusCode::kUnsupported) {
      KILN_ASSIGN_OR_RETURN(image, heal_kiln(path, o, k.status(), out));
    } else {
      if (!k) return k.status();
      out.file_bytes = k->file->file_size();
      if (k->file->has_section(KilnSection::kConformance)) {
        KILN_ASSIGN_OR_RETURN(out.conformance,
                              decode_conformance_section(k->file->section(KilnSection::kConformance), path));
      }
      image = std::move(k->image);
    }
  } else {
    KILN_ASSIGN_OR_RETURN(image, open_source(path, o, out));
  }
  const std::string tokenizer_file = tokenizer_where(image.tokenizer, path);
  KILN_ASSIGN_OR_RETURN(auto tok, tokenizer_from_blob(image.tokenizer, tokenizer_file));
  if (tok->vocab_size() > image.config.vocab_size)
    return corrupt(path + ": the tokenizer has " + std::to_string(tok->vocab_size()) + " tokens but the model only " +
                   std::to_string(image.config.vocab_size));
  out.tokenizer = std::move(tok);
  KILN_ASSIGN_OR_RETURN(out.chat, chat_template_of_blob(image.tokenizer, tokenizer_file));
  KILN_ASSIGN_OR_RETURN(out.model, Model::create(std::move(image)));
  return out;
}

Result<ModelChatTemplate> chat_template_for(const OpenedModel& m, const std::string& template_file) {
  if (!template_file.empty()) {
    ModelChatTemplate t;
    KILN_ASSIGN_OR_RETURN(t.source, read_text_file(template_file));
    if (m.chat) t.special_tokens = m.chat->special_tokens;
    return t;
  }
  if (m.chat) return *m.chat;
  return not_found(m.path + ": the model has no chat template (tokenizer_config.json chat_template, "
                   "chat_template.jinja or GGUF tokenizer.chat_template); give one with --chat-template FILE");
}

}  // namespace kiln
