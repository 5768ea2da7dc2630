#include "engine/open_model.h"

#include <set>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "compiler/driver.h"
#include "core/mapped_file.h"
#include "engine/defaults.h"
#include "artifact/kiln_file.h"
#include "artifact/kiln_image_reader.h"
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
    KILN_ASSIGN_OR_RETURN(KilnImage k, open_kiln_image(path, o.verify));
    out.file_bytes = k.file->file_size();
    if (k.file->has_section(KilnSection::kConformance)) {
      KILN_ASSIGN_OR_RETURN(out.conformance, decode_conformance_section(k.file->section(KilnSection::kConformance), path));
    }
    image = std::move(k.image);
    out.kind = "kiln";
  } else {
    KILN_ASSIGN_OR_RETURN(Import imp, import_model(path));
    CompileOptions co;
    co.quant = o.quant ? *o.quant : source_precision(imp.model);
    co.guard_classifier = o.quant.has_value();  // the source's own precision is kept as it is
    co.tokenizer_path = o.tokenizer_path;
    co.max_tokens = o.max_tokens;
    if (o.quant && has_quantized_weights(imp.model)) {
      std::set<std::string> stored;
      for (const auto& [name, t] : imp.model.tensors)
        if (t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16) stored.insert(std::string(dtype_name(t.dtype)));
      std::string types;
      for (const auto& s : stored) types += (types.empty() ? "" : ", ") + s;
      out.notes.push_back(path + " stores its weights quantized already (" + types +
                          "); the scheme asked for rounds them again from their dequantized values, which costs "
                          "accuracy (kiln ppl and kiln compare measure how much); without one they run as stored");
    }
    KILN_ASSIGN_OR_RETURN(image, compile_model(imp, co, nullptr));
    out.kind = imp.model.format;
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
