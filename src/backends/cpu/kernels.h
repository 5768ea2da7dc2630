// The CPU back end's kernel table: what one instruction set provides. Every entry is written once,
// as a template over a small SIMD traits type (microkernels.h), and instantiated by one thin file
// per instruction set (generic.cpp, x86/avx2.cpp, x86/avx512.cpp, arm/neon.cpp, ...) with its
// matmul parts compiled apart (table_parts.h); the matrix-unit files (x86/amx.cpp, arm/i8mm.cpp)
// replace some entries with their own kernels. dispatch.cpp is the one place that picks a table
// for a set of CPU features.
//
// Numerics (documented in cpu_backend.h): float schemes and W8A16 multiply f32 activations with
// f32 weights in f32 (FMA), like the reference, in another summation order; W4A16 rounds each
// activation row to 16 bits per block of 32 and A8 schemes to int8 per row, exactly as
// backends/ref/ref_matmul.h does, and sum the integer products exactly.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "layout/weight_layout.h"

namespace kiln::cpu {

// A matrix in its packed layout (layouts.h).
struct PackedMatrix {
  const uint8_t* data = nullptr;
  int64_t rows = 0, cols = 0;
  int64_t tile_bytes = 0;
  QuantParams params;
  // Decode reads one tile at a time (one stream) instead of several side by side: the plan's
  // choice for the host (CpuBackend, from host_reads_one_stream_faster), read by the x86 tables.
  // The bits do not depend on it (each tile's sums are the same), as a test checks both ways.
  bool decode_one_stream = false;
};

// What a matmul kernel is handed besides the rows of x: one format per call, chosen from the
// table, the scheme, the width and the tokens (KernelTable::activation_format; the back end
// fixes it per matrix and token count when it prepares a node). The kernels branch on it; the
// pointers of Activations it names are set, the others are not read.
enum class ActivationFormat : uint8_t {
  kRows,          // x alone: the float kernels' one token
  kXPanels,       // x_panels: float prefill, and W8A16's one token where the digits do not fit
  kBf16Tiles,     // bf16_tiles: prefill on matrix units (float schemes, W8A16)
  kDigits,        // digits, digit_scale, digit_sums, digit_plane_sums: W8A16's one token
  kA16Rows,       // a16, a16_scale, a16_sums: W4A16's one token, or a few (rows_max_tokens); W6A16, W5A16 and Q4_K: any
  kA16Panels,     // the a16 rows, and a16_panels with their scales and sums: W4A16 prefill
  kA16Words,      // the a16 rows, and a16_words with the panel scales and sums (16-bit products)
  kA16Bf16Tiles,  // the a16 rows, and bf16_tiles of their rounded values: W4A16 on matrix units
  kQRows,         // q, q_scale, q_group_sums: A8's one token
  kQPanels,       // the q rows, and q_panels with q_panel_sums: A8 prefill
};

// The activations of one matmul: n rows of x, and what the A8 and A16 kernels precompute from
// them once (prepare_activations), in `format`.
struct Activations {
  const float* x = nullptr;  // [n][x_stride]
  int64_t x_stride = 0;
  int n = 0;
  ActivationFormat format = ActivationFormat::kRows;
  // W4A16: x as backends/ref/ref_matmul.h's 16-bit X per block of 32, x ~ a16_scale[block] * X, each
  // X written as two int8 digits X = 256 hi + lo (make_a16), so that the nibbles times X are two
  // exact integer dot products.
  const int8_t* a16 = nullptr;         // [n][2][cols]: per token the hi digits, then the lo ones
  const float* a16_scale = nullptr;    // [n][cols / 32]
  // [n][cols / 32][3]: per block the sum of X (asymmetric groups' min term), and -8 times the
  // sums of hi and of lo (where a symmetric group's two integer sums start).
  const int32_t* a16_sums = nullptr;
  // The same for many tokens in panels of P = panel_tokens (make_a16_panel): per quad of
  // elements the hi then the lo digits of P tokens, [ceil(n / P)][cols / 4][2][P] u32, and the
  // scales as [ceil(n / P)][cols / 32][P] and the sums as [ceil(n / P)][cols / 32][3][P]; the last
  // panel padded with zero tokens.
  const int32_t* a16_panels = nullptr;
  const float* a16_panel_scale = nullptr;
  const int32_t* a16_panel_sums = nullptr;
  // Instead of the digit panels, on tables with 16-bit products (make_a16_word_panel) and enough
  // tokens: per pair of elements (2j, 2j + 1) and token the u32 X[2j] | X[2j + 1] << 16,
  // [ceil(n / P)][cols / 2][P], with the same panel scales and sums.
  const int32_t* a16_words = nullptr;
  // W8A16, one token or a few (decoding): per token x as 21-bit fixed point per block of 32 elements,
  //   x[k] ~ scale[k / 32] * X[k],  X = 16384 d1 + 128 d2 + d3  with int8 digits d1, d2, d3,
  // |x - scale X| <= 2.4e-7 * max |x| of the block (make_digits); the products with the
  // nibbles are then exact integer sums.
  const int8_t* digits = nullptr;       // [n][3][cols]: per token the planes d1, d2, d3
  const float* digit_scale = nullptr;   // [n][cols / 32]
  const int32_t* digit_sums = nullptr;  // [n][cols / 32]: sum of X over the block
  const int32_t* digit_plane_sums = nullptr;  // [n][3][cols / 32]: sums of d1, d2, d3 over the block
  // Many tokens, on tables with matrix units (AMX): x (W4A16: its rounded s X) split into two
  // bf16 parts, x = hi + lo + r with |r| <= 2^-17 |x|, laid out as the tiles the units multiply
  // (make_bf16_tiles, make_bf16_tiles_a16); null where the table has none.
  const uint16_t* bf16_tiles = nullptr;
  // Prefill (n > 1) on the float kernels: x in panels of the table's panel_tokens (NT) tokens,
  // [ceil(n / NT)][cols][NT], the last one padded with zero tokens (make_x_panels): a block of
  // NT tokens then reads its activations through one pointer at fixed offsets.
  const float* x_panels = nullptr;
  // A8: per row, int8 values (k padded with zeros to a multiple of 4), scale, and for the 4-bit
  // schemes the per-group integer sums of the int8 values.
  const int8_t* q = nullptr;
  int64_t q_stride = 0;
  const float* q_scale = nullptr;        // [n]
  const int32_t* q_group_sums = nullptr;  // [n][cols / g]
  // A8, many tokens, on tables whose prefill reads them (make_q_panel): the same int8 values in
  // panels of panel_tokens (P) tokens, each u32 four consecutive elements of one token,
  // [ceil(n / P)][q_stride / 4][P], and the group sums as [ceil(n / P)][cols / g][P], the last
  // panel padded with zero tokens (no sums for W8A8): a block of tokens reads every broadcast
  // through one pointer.
  const int32_t* q_panels = nullptr;
  const int32_t* q_panel_sums = nullptr;
};

// Where the products go: y[t][r] = residual[t][r] + bias[r] + (W x[t])[r], for rows of the
// tiles a call is given.
struct Epilogue {
  float* y = nullptr;
  int64_t y_stride = 0;
  const float* bias = nullptr;      // [rows] or null
  const float* residual = nullptr;  // [n][residual_stride] or null
  int64_t residual_stride = 0;
};

// Computes the rows of tiles [tile_begin, tile_end) for all n activation rows. `work`: this
// call's own scratch, 64-byte aligned, of matmul_work_bytes() bytes (nobody else touches it
// during the call; null where that is 0).
using MatmulFn = void (*)(const PackedMatrix& w, const Activations& a, const Epilogue& e, int64_t tile_begin,
                          int64_t tile_end, uint8_t* work);

// Attention over the KV cache for one KV head and a range of its query heads (see
// attention_kernel.h: online softmax, K and V read once per block for all the range's queries).
struct AttentionArgs {
  const float* q = nullptr;  // [n_tokens][n_heads * head_dim], rotated
  float* out = nullptr;      // [n_tokens][n_heads * head_dim]
  const void* k = nullptr;  // this layer's cache: [n_ctx][kv_dim], f32 or (kv_f16) IEEE half
  const void* v = nullptr;
  bool kv_f16 = false;
  int n_tokens = 0, first_pos = 0;
  int n_heads = 0, n_kv_heads = 0, head_dim = 0;
  int window = 0;  // sliding window, 0: none
  float scale = 0.0f;
  float softcap = 0.0f;  // the scaled scores capped, s -> softcap * tanh(s / softcap); 0: none
};

struct KernelTable {
  const char* name = "";
  uint64_t features = 0;  // the CPU features these kernels use
  MatmulFn matmul[kSchemeCount] = {};  // by Scheme
  // Per row t < n: int8 values, scale and (group > 0) per-group sums, as backends/ref/ref_matmul.h.
  void (*quantize_rows)(const float* x, int64_t x_stride, int n, int64_t cols, int group, int8_t* q, int64_t q_stride,
                        float* scales, int32_t* group_sums) = nullptr;
  // For tables with matrix units: the tiles of bf16_tiles above for n rows (null elsewhere), the
  // schemes (a bit per Scheme) whose prefill reads them when cols is a multiple of 32, and the
  // fewest rows worth them.
  void (*make_bf16_tiles)(const float* x, int64_t x_stride, int n, int64_t cols, uint16_t* tiles) = nullptr;
  // The same tiles of W4A16's rounded activations s X, from n tokens' a16 digits and scales.
  void (*make_bf16_tiles_a16)(const int8_t* digits, const float* scales, int n, int64_t cols, uint16_t* tiles) = nullptr;
  uint32_t bf16_tile_schemes = 0;
  int bf16_tiles_min_rows = 0;
  bool reads_bf16_tiles(Scheme s, int n, int64_t cols) const {
    return make_bf16_tiles && (bf16_tile_schemes >> static_cast<int>(s) & 1u) && n >= bf16_tiles_min_rows && cols % 32 == 0;
  }
  int panel_tokens = 0;
  void (*make_x_panels)(const float* x, int64_t x_stride, int n, int64_t cols, float* panels) = nullptr;
  // W8A16's digits, where the width is a multiple of their block of 32: one token, or a few
  // (rows_max_tokens below), each token's row of digits read as a lone token's is, so that a
  // batched decode step gives every session the bits of its step alone.
  bool reads_digits(Scheme s, int n, int64_t cols) const {
    return n <= std::max(1, rows_max_tokens) && s == Scheme::kW8A16 && cols % 32 == 0;
  }
  // W4A16 (its widths are multiples of the group, itself of 32): a16 for one token, the a16
  // panels (or, on matrix units, the bf16 tiles of s X) for more. W6A16, W5A16 and the k-quant
  // super-blocks of W4A16 (is_ggml_superblock) read the a16 rows of any number of tokens.
  static bool reads_a16(Scheme s) { return a16_activations(s); }
  // The float kernels' many-token path reads them, and so does w8a16's one-token path where the
  // digits do not fit.
  bool reads_x_panels(Scheme s, int n, int64_t cols) const {
    if (quantizes_activations(s) || reads_a16(s) || reads_bf16_tiles(s, n, cols)) return false;
    return n > 1 || (s == Scheme::kW8A16 && !reads_digits(s, n, cols));
  }
  // Panel p of the A8 rows (q, and the group sums where group > 0) into q_panels / q_panel_sums
  // above: the tokens [p P, min(n, p P + P)). Null where the table's A8 prefill reads the rows.
  void (*make_q_panel)(const int8_t* q, int64_t q_stride, const int32_t* group_sums, int n, int64_t cols, int group,
                       int p, int32_t* quads, int32_t* sums) = nullptr;
  // Up to this many tokens (at most kMaxRowsTokens) the W4A16, W8A16 and A8 kernels read each
  // token's activation row (a16, digits or q) themselves, not panels (a batched decode step of a
  // few sessions): packing the rows into panels cost more than the panels save there.
  int rows_max_tokens = 1;
  static constexpr int kMaxRowsTokens = 8;
  bool reads_q_panels(Scheme s, int n) const { return make_q_panel && quantizes_activations(s) && n > rows_max_tokens; }
  // Where the sums start after the quads of n tokens (in int32s from q_panels).
  int64_t q_panel_quads(int n, int64_t q_stride) const {
    return (n + panel_tokens - 1) / panel_tokens * panel_tokens * (q_stride / 4);
  }
  // One row of x (cols a multiple of 32) as the a16 digits, scales and sums above.
  void (*make_a16)(const float* x, int64_t cols, int8_t* digits, float* scales, int32_t* sums) = nullptr;
  // Panel p of the a16 panels from the rows of n tokens.
  void (*make_a16_panel)(const int8_t* digits, const float* scales, const int32_t* sums, int n, int64_t cols, int p,
                         int32_t* quads, float* panel_scales, int32_t* panel_sums) = nullptr;
  // The same panels as 16-bit pairs (Activations::a16_words), on tables whose W4A16 prefill reads
  // them from a16_words_min_rows tokens on (it widens each tile's nibbles once per call, which
  // fewer tokens do not repay); null elsewhere.
  void (*make_a16_word_panel)(const int8_t* digits, const float* scales, const int32_t* sums, int n, int64_t cols, int p,
                              int32_t* words, float* panel_scales, int32_t* panel_sums) = nullptr;
  int a16_words_min_rows = 0;
  bool reads_a16_words(int n) const { return make_a16_word_panel && n >= a16_words_min_rows; }
  // Where the scales start after the quads (or words) of n tokens (in int32s from a16_panels),
  // and the sums after the scales.
  int64_t a16_panel_quads(int n, int64_t cols) const {
    return (n + panel_tokens - 1) / panel_tokens * panel_tokens * (cols / 2);
  }
  // The format this table's kernel for scheme s reads for n rows of cols elements.
  ActivationFormat activation_format(Scheme s, int n, int64_t cols) const {
    if (s == Scheme::kW6A16 || s == Scheme::kW5A16) return ActivationFormat::kA16Rows;
    if (reads_a16(s)) {
      if (reads_bf16_tiles(s, n, cols)) return ActivationFormat::kA16Bf16Tiles;
      if (n <= rows_max_tokens) return ActivationFormat::kA16Rows;
      return reads_a16_words(n) ? ActivationFormat::kA16Words : ActivationFormat::kA16Panels;
    }
    if (reads_bf16_tiles(s, n, cols)) return ActivationFormat::kBf16Tiles;
    if (reads_digits(s, n, cols)) return ActivationFormat::kDigits;
    if (reads_x_panels(s, n, cols)) return ActivationFormat::kXPanels;
    if (quantizes_activations(s)) return reads_q_panels(s, n) ? ActivationFormat::kQPanels : ActivationFormat::kQRows;
    return ActivationFormat::kRows;
  }
  // The same for a weight's parameters: 8-bit groups have no matrix-unit kernel, so their
  // prefill reads x panels (w8a16_prefill) where the scheme's would read bf16 tiles.
  ActivationFormat activation_format(const QuantParams& p, int n, int64_t cols) const {
    if (p.w8_group != 0 && reads_bf16_tiles(p.scheme, n, cols)) return ActivationFormat::kXPanels;
    if (is_ggml_superblock(p)) return ActivationFormat::kA16Rows;
    return activation_format(p.scheme, n, cols);
  }
  void (*make_digits)(const float* x, int64_t cols, int8_t* digits, float* scales, int32_t* sums,
                      int32_t* plane_sums) = nullptr;
  void (*rmsnorm)(float* y, const float* x, const float* w, int64_t n, float eps) = nullptr;
  // rmsnorm over each of n_heads consecutive heads of head_dim, with one weight[head_dim] (Qwen3's q/k norms).
  void (*head_rmsnorm)(float* y, const float* x, const float* w, int n_heads, int64_t head_dim, float eps) = nullptr;
  void (*swiglu)(float* y, const float* gate, const float* up, int64_t n) = nullptr;
  void (*add)(float* y, const float* a, const float* b, int64_t n) = nullptr;
  // Rotates the first rotary_dim elements (0: all) of each of n_heads heads of x by the angles
  // whose cos/sin are given per pair.
  void (*rope)(float* x, int n_heads, int head_dim, int rotary_dim, const float* cos, const float* sin, bool half_split) = nullptr;
  void (*attention)(const AttentionArgs& a, int kv_head, int head_begin, int head_end) = nullptr;
  // The ceiling of the many-token kernels: `rounds` rounds of the instruction the kernel of
  // scheme s for `tokens` tokens multiplies with, on independent sums (product_loop.h:
  // product_loop); returns the scheme's products (weight times activation) done, so that their
  // rate is the most that kernel could reach on this core. The attention kernels multiply as f32.
  double (*product_loop)(Scheme s, int tokens, int64_t rounds) = nullptr;
};

// The instruction-set tables this build has (dispatch.cpp), and the best one usable with the
// given CPU features.
const KernelTable& generic_kernels();
// The features of the best table of any architecture (built here or not) within `wanted`: what a
// .kiln for a target with `wanted` records.
uint64_t target_kernel_features(uint64_t wanted);
// The best table this machine can run within `cpu_features` (never one whose features the OS
// does not enable here, whatever the caller asks), and its name without running it.
const KernelTable& select_kernels(uint64_t cpu_features);
const char* kernel_table_name(uint64_t cpu_features);
// The table a program whose target records `target` runs here, and why each faster table does
// not: "avx2 (not amx: the CPU lacks ...; not avx512: KILN_CPU=avx2 caps it)".
std::string kernel_choice(uint64_t target);
// Every table this build has whose features are a subset of `cpu_features` and that this
// machine can run, best first (for tests).
int available_kernel_tables(uint64_t cpu_features, const KernelTable** out, int max);

// Bytes of one W4A16 tile widened to 16-bit pairs (the a16 words kernel): [cols / 2][16] u32
// pairs, then the group scales [groups][16] f32, then (asymmetric groups) the mins.
inline int64_t w4_words_tile_bytes(const QuantParams& p, int64_t cols) {
  const int64_t groups = p.group_size > 0 ? cols / p.group_size : 0;
  return cols / 2 * 16 * 4 + groups * 16 * 4 * (p.symmetric ? 1 : 2);
}

// The scratch one call of table t's matmul of p's scheme, cols wide, needs to itself for up to
// n tokens (MatmulFn's `work`): W4A16 prefill on 16-bit products widens runs of up to four
// tiles there once, then multiplies every block of tokens by them; W6A16 keeps the tokens'
// digit sums per 16 elements there (w6a16_half_sums). 0 for every other kernel.
inline int64_t matmul_work_bytes(const KernelTable& t, const QuantParams& p, int64_t cols, int n) {
  if (p.scheme == Scheme::kW6A16) return int64_t{n} * (cols / 16) * 2 * 4;
  return p.scheme == Scheme::kW4A16 && !is_ggml_superblock(p) && n > 1 && t.reads_a16_words(n) ? 4 * w4_words_tile_bytes(p, cols) : 0;
}

// Fills a table with the kernels of one instruction set (defined in that set's file).
void fill_generic(KernelTable& t);
void fill_avx2(KernelTable& t);
void fill_avx512(KernelTable& t);
void fill_amx(KernelTable& t);
// Tests only (x86 builds of kiln_tests): the amx kernels over a software model of the tiles
// (x86/amx_emulation.h), runnable wherever the avx512 table is.
void fill_amx_emulated(KernelTable& t);
// The 64 bytes the emulated tiles' last LDTILECFG read on this thread (tests only).
void amx_emulated_last_config(uint8_t out[64]);
void amx_emulated_forget_config();
void fill_neon(KernelTable& t);
void fill_dotprod(KernelTable& t);
void fill_i8mm(KernelTable& t);

}  // namespace kiln::cpu
