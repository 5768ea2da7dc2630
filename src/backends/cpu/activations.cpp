#include "backends/cpu/activations.h"

#include <algorithm>

#include "core/thread_pool.h"

namespace kiln::cpu {

namespace {

size_t align64(size_t n) { return (n + 63) / 64 * 64; }

template <typename T>
T* at(uint8_t* base, size_t off) {
  return reinterpret_cast<T*>(base + off);
}

}  // namespace

ActivationScratch::ActivationScratch(int64_t cols, int tokens) {
  const auto T = static_cast<size_t>(tokens), W = static_cast<size_t>(cols);
  const size_t groups = W / 32 + 1;
  q = 0;
  scales = align64(q + T * (W + 4));
  qsums = align64(scales + 4 * T);
  // W8A16's digits: three int8 planes, a scale and four sums per block of 32, for the few tokens
  // that read them.
  const auto D = static_cast<size_t>(std::min(tokens, KernelTable::kMaxRowsTokens));
  digits = align64(qsums + 4 * T * groups);
  dscales = align64(digits + 3 * D * W);
  dsums = align64(dscales + 4 * D * groups);
  psums = align64(dsums + 4 * D * groups);
  // W4A16's rows: two int8 digits per element, a scale and three sums per block of 32.
  a16 = align64(psums + 12 * D * groups);
  a16_scales = align64(a16 + 2 * T * W);
  a16_sums = align64(a16_scales + 4 * T * groups);
  panels = align64(a16_sums + 12 * T * groups);
  // The bf16 tiles (2 bf16 per element, tokens rounded up to 16), the f32 prefill panels
  // (tokens rounded up to the table's panel of at most 16) or the int8 or a16 ones with their
  // sums (fewer bytes: (T + 16) (2 W + 16 groups)).
  bytes = align64(panels + 4 * ((T + 15) / 16 * 16 + 16) * W);
}

namespace {

// The a16 rows of n tokens (every W4A16 format has them).
void make_a16_rows(const KernelTable& t, int64_t cols, const float* x, int n, const ActivationScratch& layout,
                   uint8_t* scratch, ThreadPool* pool, Activations& a) {
  const int64_t nb = cols / 32;
  auto* digits = at<int8_t>(scratch, layout.a16);
  auto* scales = at<float>(scratch, layout.a16_scales);
  auto* sums = at<int32_t>(scratch, layout.a16_sums);
  for_each_index(pool, n, [&](int64_t r) { t.make_a16(x + r * cols, cols, digits + r * 2 * cols, scales + r * nb, sums + r * nb * 3); });
  a.a16 = digits;
  a.a16_scale = scales;
  a.a16_sums = sums;
}

// The a16 rows in panels, as digit quads or (words) 16-bit pairs, with the panel scales and sums.
void make_a16_panels(const KernelTable& t, int64_t cols, int n, bool words, const ActivationScratch& layout,
                     uint8_t* scratch, ThreadPool* pool, Activations& a) {
  const int64_t nb = cols / 32;
  auto* quads = at<int32_t>(scratch, layout.panels);
  const int64_t pt = t.panel_tokens, np = (n + pt - 1) / pt;
  auto* pscales = reinterpret_cast<float*>(quads + t.a16_panel_quads(n, cols));
  auto* psums = reinterpret_cast<int32_t*>(pscales + np * pt * nb);
  const auto make = words ? t.make_a16_word_panel : t.make_a16_panel;
  for_each_index(pool, np, [&](int64_t i) { make(a.a16, a.a16_scale, a.a16_sums, n, cols, static_cast<int>(i), quads, pscales, psums); });
  (words ? a.a16_words : a.a16_panels) = quads;
  a.a16_panel_scale = pscales;
  a.a16_panel_sums = psums;
}

// The A8 rows: int8 values, scales and (4-bit schemes) group sums.
void make_q_rows(const KernelTable& t, const QuantParams& p, int64_t cols, const float* x, int n,
                 const ActivationScratch& layout, uint8_t* scratch, ThreadPool* pool, Activations& a) {
  const int g = is_4bit(p.scheme) ? p.group_size : 0;
  auto* q = at<int8_t>(scratch, layout.q);
  auto* scales = at<float>(scratch, layout.scales);
  auto* qsums = at<int32_t>(scratch, layout.qsums);
  const int64_t stride = (cols + 3) / 4 * 4, groups = g > 0 ? cols / g : 0;
  for_each_index(pool, n, [&](int64_t r) {
    t.quantize_rows(x + r * cols, cols, 1, cols, g, q + r * stride, stride, scales + r, qsums + r * groups);
  });
  a.q = q;
  a.q_stride = stride;
  a.q_scale = scales;
  a.q_group_sums = qsums;
}

}  // namespace

Activations prepare_activations(const KernelTable& t, ActivationFormat format, const QuantParams& p, int64_t cols,
                                const float* x, int n, const ActivationScratch& layout, uint8_t* scratch, ThreadPool* pool) {
  Activations a;
  a.x = x;
  a.x_stride = cols;
  a.n = n;
  a.format = format;
  const int64_t nb = cols / 32;
  switch (format) {
    case ActivationFormat::kRows: break;
    case ActivationFormat::kA16Rows: make_a16_rows(t, cols, x, n, layout, scratch, pool, a); break;
    case ActivationFormat::kA16Bf16Tiles: {
      make_a16_rows(t, cols, x, n, layout, scratch, pool, a);
      auto* tiles = at<uint16_t>(scratch, layout.panels);
      // Block-major: each block of 16 rows is written by itself.
      for_each_index(pool, (n + 15) / 16, [&](int64_t tb) {
        t.make_bf16_tiles_a16(a.a16 + tb * 16 * 2 * cols, a.a16_scale + tb * 16 * nb,
                              static_cast<int>(std::min<int64_t>(16, n - tb * 16)), cols, tiles + tb * nb * 2 * 16 * 32);
      });
      a.bf16_tiles = tiles;
      break;
    }
    case ActivationFormat::kA16Panels:
    case ActivationFormat::kA16Words:
      make_a16_rows(t, cols, x, n, layout, scratch, pool, a);
      make_a16_panels(t, cols, n, format == ActivationFormat::kA16Words, layout, scratch, pool, a);
      break;
    case ActivationFormat::kDigits: {
      auto* digits = at<int8_t>(scratch, layout.digits);
      auto* dscales = at<float>(scratch, layout.dscales);
      auto* dsums = at<int32_t>(scratch, layout.dsums);
      auto* psums = at<int32_t>(scratch, layout.psums);
      for_each_index(pool, n, [&](int64_t r) {
        t.make_digits(x + r * cols, cols, digits + r * 3 * cols, dscales + r * nb, dsums + r * nb, psums + r * 3 * nb);
      });
      a.digits = digits;
      a.digit_scale = dscales;
      a.digit_sums = dsums;
      a.digit_plane_sums = psums;
      break;
    }
    case ActivationFormat::kBf16Tiles: {
      auto* tiles = at<uint16_t>(scratch, layout.panels);
      for_each_index(pool, (n + 15) / 16, [&](int64_t tb) {
        t.make_bf16_tiles(x + tb * 16 * cols, cols, static_cast<int>(std::min<int64_t>(16, n - tb * 16)), cols,
                          tiles + tb * nb * 2 * 16 * 32);
      });
      a.bf16_tiles = tiles;
      break;
    }
    case ActivationFormat::kXPanels: {
      auto* panels = at<float>(scratch, layout.panels);
      const int64_t pt = t.panel_tokens;
      for_each_index(pool, (n + pt - 1) / pt, [&](int64_t i) {
        t.make_x_panels(x + i * pt * cols, cols, static_cast<int>(std::min<int64_t>(pt, n - i * pt)), cols, panels + i * pt * cols);
      });
      a.x_panels = panels;
      break;
    }
    case ActivationFormat::kQRows: make_q_rows(t, p, cols, x, n, layout, scratch, pool, a); break;
    case ActivationFormat::kQPanels: {
      make_q_rows(t, p, cols, x, n, layout, scratch, pool, a);
      // Quads then sums, in the region the float schemes' panels use.
      const int g = is_4bit(p.scheme) ? p.group_size : 0;
      auto* quads = at<int32_t>(scratch, layout.panels);
      int32_t* sums = quads + t.q_panel_quads(n, a.q_stride);
      for_each_index(pool, (n + t.panel_tokens - 1) / t.panel_tokens, [&](int64_t i) {
        t.make_q_panel(a.q, a.q_stride, a.q_group_sums, n, cols, g, static_cast<int>(i), quads, sums);
      });
      a.q_panels = quads;
      a.q_panel_sums = sums;
      break;
    }
  }
  return a;
}

Activations prepare_activations(const KernelTable& t, const QuantParams& p, int64_t cols, const float* x, int n,
                                const ActivationScratch& layout, uint8_t* scratch, ThreadPool* pool) {
  return prepare_activations(t, t.activation_format(p, n, cols), p, cols, x, n, layout, scratch, pool);
}

}  // namespace kiln::cpu
