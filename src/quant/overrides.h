// Which scheme each tensor gets: the defaults from the command line or an overrides file, the
// file's rules, and the float fallback.
//
// ---- The overrides file (JSON, UTF-8) -------------------------------------------------------
//
//   {
//     "default": "w8a16",          scheme of every matmul weight no rule picks (optional)
//     "group_size": 32,            4-bit group size: 32, 64 or 128 (optional)
//     "symmetric": true,           4-bit symmetric (int4, scale) or asymmetric (uint4, scale, min)
//     "auto_fallback": false,      true: a 4-bit tensor whose input dimension the group size does
//                                  not divide gets w8 of the same activation width instead of an
//                                  error (w4a16 -> w8a16, w4a8 -> w8a8), reported in the notes
//     "comment": "...",            ignored, here and in rules (JSON has no comments)
//     "rules": [                   optional; applied in order, the LAST rule matching a tensor wins
//       {"op": "attention", "scheme": "f16"},
//       {"match": "blk.*.ffn_down.weight", "layers": [0, 3], "scheme": "w4a16", "group_size": 128},
//       {"match": "output.weight", "scheme": "w8a16"}
//     ]
//   }
//
// Every key is optional; keys missing from the file take the command line's values (or w4a16,
// group 32, symmetric, no auto fallback). A rule has a "scheme" and at least one selector; all
// the selectors it has must match:
//   "match"   a glob on the tensor name: '*' is any run of characters (dots included), '?' any
//             one character, everything else literal. It is tried on the canonical GGUF-style
//             name (token_embd.weight, blk.N.attn_q.weight, blk.N.attn_k.weight,
//             blk.N.attn_v.weight, blk.N.attn_output.weight, blk.N.ffn_gate.weight,
//             blk.N.ffn_up.weight, blk.N.ffn_down.weight, output.weight, blk.N.attn_norm.weight,
//             ...) and on the Hugging Face name (model.layers.N.self_attn.q_proj.weight,
//             lm_head.weight, ...); either may match.
//   "layers"  [first, last], an inclusive range of block numbers, or one number. Tensors outside
//             the blocks (token_embd, output) are in no layer.
//   "op"      an op kind: embedding, attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up,
//             ffn_down, output; or a group: attention (attn_q, attn_k, attn_v, attn_output),
//             ffn (ffn_gate, ffn_up, ffn_down).
// and may set "group_size" and "symmetric" (4-bit schemes only; otherwise the file's values).
// A rule's scheme may also be a llama.cpp block name (q4_0, q4_1, q4_k, iq4_xs, q5_0, q5_1, q5_k,
// q6_k, q8_0; quant/scheme_flag.h), which fixes its group and symmetry: no "group_size" or
// "symmetric" with it.
// A w8a16 rule with a "group_size" (or the scheme "w8a16 g32", also for "default") stores 8-bit
// weights with an f16 scale per group of 32, 64 or 128 (GGML Q8_0's layout for 32); without
// one, w8a16 keeps one scale per row.
// Rules are numbered from 1 in messages.
//
// Float fallback: tensors that are not matmul weights (norm weights, biases) always stay f32, as
// the norms, softmax, RoPE and the residual stream do. Rules only choose among matmul weights; a
// rule whose tensors are all non-matmul and that asks for anything but f32 is an error (it would
// quantize a norm), and so is a rule that matches no tensor at all. A rule that matches tensors
// but is overridden by later rules on every one of them is reported in the notes.
//
// Examples. The seed's "all weights int8, attention kept in FP16":
//   {"default": "w8a16", "rules": [{"op": "attention", "scheme": "f16"}]}
// W4A16 with the embedding and the LM head at 8 bits:
//   {"default": "w4a16", "rules": [{"op": "embedding", "scheme": "w8a16"},
//                                  {"op": "output", "scheme": "w8a16"}]}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "layout/weight_layout.h"

namespace kiln {

// One tensor of the model, as the compiler describes it to the scheme assignment.
struct WeightRef {
  std::string name;   // canonical GGUF-style name: blk.3.attn_q.weight
  std::string alias;  // Hugging Face name: model.layers.3.self_attn.q_proj.weight (may be empty)
  int layer = -1;     // block number, -1 outside the blocks
  std::string op;     // op kind (embedding, attn_q, ..., output) for matmul weights
  bool is_matmul_weight = true;  // false for norm weights and biases: they stay f32
  int64_t rows = 0, cols = 0;    // output channels, input elements
};

struct Rule {
  std::optional<std::string> match;             // glob on name or alias
  std::optional<std::pair<int, int>> layers;    // inclusive [first, last]
  std::optional<std::string> op;                // op kind or group
  QuantParams params;                           // what the rule assigns
  std::string text;  // the selectors, for messages: {"match": "blk.*.attn_*", "layers": [0, 3]}
};

struct OverridesFile {
  QuantParams defaults;
  std::vector<Rule> rules;
  bool auto_fallback = false;  // 4-bit tensors the group size does not fit fall back to w8
};

// Parses an overrides file. `path` names it in messages. Keys the file leaves out take their
// values from `base` (the command line's scheme, group size, symmetry and fallback; base's
// rules are not kept).
Result<OverridesFile> parse_overrides(std::string_view json, const std::string& path);
Result<OverridesFile> parse_overrides(std::string_view json, const std::string& path, const OverridesFile& base);

// The command line alone: one scheme for every matmul weight, no rules. `scheme` is a name
// (w4a16, ...) or an alias (q4_0, fp16: quant/scheme_flag.h); the group size is checked for
// 4-bit schemes.
Result<OverridesFile> overrides_from_flags(std::string_view scheme, int group_size = 32, bool symmetric = true,
                                           bool auto_fallback = false);

// The scheme of each weight, in the order given (canonical(): group_size 0 and symmetric true
// for schemes that have neither). Errors (prefixed with `path`): a rule that matches no tensor,
// a rule that would quantize only norms or biases, a 4-bit scheme whose group size does not
// divide a tensor's input dimension (unless auto_fallback; then a note), a negative shape.
// `notes` (may be null) receives one line per fallback and per rule without effect.
Result<std::vector<QuantParams>> assign_schemes(const OverridesFile& file, const std::vector<WeightRef>& weights,
                                                const std::string& path, std::vector<std::string>* notes);

// Everything `file` decides, as one deterministic line of text (equal files give equal text): what
// the compile cache keys an entry by (engine/compile_cache.h). Not a format anything reads back.
std::string overrides_key(const OverridesFile& file);

// Pieces, exposed for tests and for `kiln inspect`.
bool glob_match(std::string_view pattern, std::string_view text);  // '*' and '?', else literal
bool is_op_kind(std::string_view op);                   // embedding, attn_q, ..., output
bool is_op_selector(std::string_view selector);         // an op kind, "attention" or "ffn"
bool op_selector_matches(std::string_view selector, std::string_view op);
bool rule_matches(const Rule& rule, const WeightRef& w);

}  // namespace kiln
