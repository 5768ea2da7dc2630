#include "artifact/kiln_image_reader.h"

#include "artifact/config_section.h"
#include "artifact/program_section.h"
#include "artifact/tokenizer_section.h"
#include "core/cpu_features.h"
#include "formats/json_util.h"
#include "graph/weight_params.h"

namespace kiln {

Result<KilnImage> open_kiln_image(std::shared_ptr<const KilnFile> file) {
  const std::string& path = file->path();
  KilnImage out;
  ProgramImage& img = out.image;
  for (KilnSection s : {KilnSection::kConfig, KilnSection::kTokenizer, KilnSection::kProgram, KilnSection::kMemoryPlan})
    if (!file->has_section(s)) return corrupt(path + ": no " + kiln_section_name(s) + " section");
  KILN_ASSIGN_OR_RETURN(img.config, config_from_json(as_text(file->section(KilnSection::kConfig)), path + ": config"));
  KILN_ASSIGN_OR_RETURN(img.tokenizer, decode_tokenizer_section(file->section(KilnSection::kTokenizer), path));
  KILN_ASSIGN_OR_RETURN(img.program, program_from_json(as_text(file->section(KilnSection::kProgram)),
                                                       as_text(file->section(KilnSection::kMemoryPlan)), path));
  const Graph& g = img.program.graph;
  for (const WeightDesc& w : g.weights) {
    const KilnTensor* t = file->tensor(w.name);
    if (t == nullptr) return corrupt(path + ": the program reads tensor '" + w.name + "', which the file lacks");
    KILN_ASSIGN_OR_RETURN(QuantParams p, weight_params(w));
    if (t->dims != w.shape || t->code != static_cast<uint32_t>(p.scheme))
      return corrupt(path + ": tensor '" + w.name + "' does not match the program's shape or scheme");
    img.weights.push_back(t->bytes);
  }
  img.cpu_features = file->target().cpu_features;
  img.owners.push_back(file);
  out.file = std::move(file);
  return out;
}

namespace {

KilnOpenOptions image_open_options(bool verify, bool check_target) {
  KilnOpenOptions o;
  o.verify_checksums = verify;
  o.check_target = check_target;
  o.host_cpu_features = host_cpu_features() | kCpuBestTable;  // a file for "the best table here" runs anywhere
  return o;
}

}  // namespace

Result<KilnImage> open_kiln_image(const std::string& path, bool verify, bool check_target) {
  KILN_ASSIGN_OR_RETURN(auto file, open_kiln(path, image_open_options(verify, check_target)));
  return open_kiln_image(std::move(file));
}

Result<KilnImage> open_kiln_image(std::shared_ptr<const MappedFile> bytes, bool verify, bool check_target) {
  KILN_ASSIGN_OR_RETURN(auto file, open_kiln_bytes(std::move(bytes), image_open_options(verify, check_target)));
  return open_kiln_image(std::move(file));
}

}  // namespace kiln
