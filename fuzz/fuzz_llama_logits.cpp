// llama-perplexity's saved logits (kiln ppl --kl-divergence) on arbitrary bytes: the reader either
// refuses with a status or every token and row it promises can be read; a small accepted file of
// stories260K's vocabulary also goes through the comparison against the shipped model.
#include <cstdint>
#include <vector>

#include "engine/kl_divergence.h"
#include "formats/llama_logits.h"

namespace {

const kiln::OpenedModel& model() {
  static kiln::OpenedModel* m = [] {
    auto r = kiln::open_model(KILN_MODELS_DIR "/stories260K/stories260K.bin", kiln::OpenOptions{});
    if (!r) __builtin_trap();
    return new kiln::OpenedModel(std::move(*r));
  }();
  return *m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = kiln::MappedFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.kld");
  auto l = kiln::read_llama_logits(file);
  if (!l) return 0;
  int64_t sum = 0;
  for (size_t i = 0; i < static_cast<size_t>(l->n_chunk) * static_cast<size_t>(l->n_ctx); ++i) sum += l->token(i);
  std::vector<float> row(static_cast<size_t>(l->n_vocab));
  const size_t rows = static_cast<size_t>(l->n_chunk) * static_cast<size_t>(l->rows_per_chunk());
  for (size_t r = 0; r < rows && r < 8; ++r) l->log_probs(r, row.data());
  if (l->n_vocab == 512 && l->n_ctx <= 32 && l->n_chunk <= 2) {
    kiln::PerplexityOptions o;
    (void)kiln::kl_divergence_against(model(), *l, o);
  }
  static volatile int64_t sink;
  sink = sum;  // every token read
  return 0;
}
