// Constant factors of an architecture folded into its weights at import, so that the graph needs
// no op for them: Gemma's (1 + w) norms, MiniCPM's residual and logit scales. The folded tensors
// are rewritten once, in f32, and held in memory (the file stays mapped and untouched); MiniCPM's
// residual scale needs no tensor at all (below).
#pragma once

#include <functional>
#include <string>

#include "formats/tensor_source.h"

namespace kiln {

// Every tensor `which` picks becomes f(w) element by element, in f32. A tensor not stored as f32,
// f16 or bf16 (a quantized GGUF block) is refused, naming the tensor and `why`.
Status rewrite_weights(ImportedModel& m, const std::function<bool(const std::string& canonical)>& which,
                       const std::function<float(float)>& f, const std::string& why);

// Gemma stores w of its norms' (1 + w); GGUF files have the 1 already folded in.
Status fold_gemma_norms(ImportedModel& m);

// MiniCPM: each residual branch times r = residual_scale, the classifier's input times logit_scale
// (folded into the final norm's weight, f32 in every GGUF). RMSNorm ignores its input's scale but
// for its eps, so the residual stream divided by r is the same model with every norm's eps / r^2
// and the embedding times scale_emb / r: exact, and no projection is rewritten, so a quantized
// GGUF's attention output and FFN down blocks run as stored.
Status fold_minicpm_scales(ImportedModel& m);

}  // namespace kiln
