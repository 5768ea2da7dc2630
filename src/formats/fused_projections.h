// Phi-3 stores q, k and v as one matrix (qkv_proj, GGUF attn_qkv) and gate and up as another
// (gate_up_proj, GGUF's phi3 ffn_up of 2 x intermediate rows). kiln's graph reads them apart; as
// each part is consecutive rows of the fused matrix, the parts are views of its bytes.
#pragma once

#include "formats/tensor_source.h"

namespace kiln {

// Replaces, in every layer, the fused tensors `qkv` and `gate_up` (names after "blk.N.") with
// attn_q/attn_k/attn_v and ffn_gate/ffn_up; an error names a missing or misshapen one.
Status split_fused_projections(ImportedModel& m, const std::string& qkv, const std::string& gate_up);

}  // namespace kiln
