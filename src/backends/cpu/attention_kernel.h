// Attention over the KV cache, flash-style (online softmax), for one KV head and a range of its
// query heads.
#pragma once

#include "backends/cpu/float_ops.h"
#include "backends/cpu/kernel_helpers.h"

namespace kiln::cpu {
namespace {

// ---- attention ----
//
// For kv head `kvh` and its query heads [hb, he): positions are visited in blocks of 16; each
// block of K is transposed once into a [head_dim][16] buffer and, with its block of V, used by
// every (token, head) query of the range while it is in L1. Per query and block: 16 scores at
// once (head_dim FMAs of 16 lanes), one vector exp, 16 rows of V into the output. Softmax is
// online: per query the running max m, the running sum l, and the output accumulated
// unnormalised in place, rescaled by exp(m_old - m_new) when the max grows. No score matrix is
// ever materialised.
//
// A query's bits do not depend on the other queries of the call (the tokens of the step, the
// heads of the range): a token decoded alone, in a batched step, or as part of a prefill split
// anywhere gives the same output. The blocks start at multiples of the block (not at the
// chunk's first visible position), and the few-query path sums each score in the transposed
// path's order, with the queries in the lanes instead of the keys. W4A8 needs this most: its
// per-token int8 rounding turns a last-bit difference into a different token.

// exp over a vector, as fast_exp.
template <class S>
inline typename S::F vexp(typename S::F x) {
  using F = typename S::F;
  x = S::min(S::max(x, S::set1(-87.0f)), S::set1(88.0f));
  const F magic = S::set1(12582912.0f);
  const F n = S::sub(S::fma(x, S::set1(1.44269504088896341f), magic), magic);
  const F r = S::fma(n, S::set1(2.12194440e-4f), S::fma(n, S::set1(-0.693359375f), x));
  F p = S::set1(1.9875691500e-4f);
  p = S::fma(p, r, S::set1(1.3981999507e-3f));
  p = S::fma(p, r, S::set1(8.3334519073e-3f));
  p = S::fma(p, r, S::set1(4.1665795894e-2f));
  p = S::fma(p, r, S::set1(1.6666665459e-1f));
  p = S::fma(p, r, S::set1(5.0000001201e-1f));
  p = S::add(S::fma(S::mul(p, r), r, r), S::set1(1.0f));
  return S::mul(p, S::pow2i(n));
}

// Keys per block: 16, or the table's kAttnBlock. A longer block loads each query element once for
// more keys (AVX-512: 64 keys, four vectors per query element broadcast) and spreads the
// per-block softmax bookkeeping over more of them.
template <class S>
constexpr int attn_block() {
  if constexpr (requires { S::kAttnBlock; }) return S::kAttnBlock;
  else return 16;
}

// n IEEE halves at src as floats at dst.
template <class S>
inline void widen_f16(const uint16_t* src, float* dst, int n) {
  int i = 0;
  for (; i + S::N <= n; i += S::N) S::store(dst + i, S::from_f16(reinterpret_cast<const uint8_t*>(src + i)));
  for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

// For every (a, b) of A broadcasts and B vectors: the sum over d < hd of bcast(a, d) * load(d, b),
// in P partial sums by d mod P (the odd d in the first), added pairwise. The one order of a
// score's sum, whether the keys are in the lanes (a prefill's transposed block) or the queries
// (decoding), so that a query's scores have the same bits either way.
template <class S, int P, int A, int B, class Bcast, class Load>
inline void score_sums(int hd, Bcast bcast, Load load, typename S::F (&total)[A][B]) {
  using F = typename S::F;
  F sv[A][P][B];
  for (int a = 0; a < A; ++a)
    for (int p = 0; p < P; ++p)
      for (int b = 0; b < B; ++b) sv[a][p][b] = S::zero();
  int d = 0;
  for (; d + P <= hd; d += P)
    for (int p = 0; p < P; ++p)
      for (int b = 0; b < B; ++b) {
        const F x = load(d + p, b);
        for (int a = 0; a < A; ++a) sv[a][p][b] = S::fma(bcast(a, d + p), x, sv[a][p][b]);
      }
  for (; d < hd; ++d)
    for (int b = 0; b < B; ++b) {
      const F x = load(d, b);
      for (int a = 0; a < A; ++a) sv[a][0][b] = S::fma(bcast(a, d), x, sv[a][0][b]);
    }
  for (int a = 0; a < A; ++a)
    for (int b = 0; b < B; ++b) {
      if constexpr (P == 1) total[a][b] = sv[a][0][b];
      else if constexpr (P == 2) total[a][b] = S::add(sv[a][0][b], sv[a][1][b]);
      else total[a][b] = S::add(S::add(sv[a][0][b], sv[a][1][b]), S::add(sv[a][2][b], sv[a][3][b]));
    }
}

// One function of ~175 lines, a kernel body kept whole: its blocks share the registers' partial
// sums and the L1 buffers of one K/V block, which helpers would pass through memory.
template <class S>
void attention(const AttentionArgs& a, int kvh, int hb, int he) {
  using F = typename S::F;
  constexpr int kBlock = attn_block<S>(), V = kBlock / S::N, kMaxHeadDim = 256;
  // Partial sums over d per score vector, so that each chain of dependent FMAs is short: four
  // for blocks of 16 keys, two for 32, one for 64 (whose four vectors per query already make
  // four chains, sixteen for four heads).
  constexpr int P = kBlock >= 64 ? 1 : kBlock >= 32 ? 2 : 4;
  const int hd = a.head_dim, kv_dim = a.n_kv_heads * hd, qd = a.n_heads * hd;
  if (hd > kMaxHeadDim) return;  // refused by CpuBackend::supports
  // Each block's rows of K and V are read through kb and vb, ks and vs floats apart: the cache
  // itself when it holds f32, the block widened into kh and vh when it holds f16.
  const int64_t head_off = static_cast<int64_t>(kvh) * hd;
  alignas(64) float kh[kBlock * kMaxHeadDim];
  alignas(64) float vh[kBlock * kMaxHeadDim];
  auto first_of = [&](int t) {
    const int pos = a.first_pos + t;
    return (a.window > 0 && pos >= a.window) ? pos - a.window + 1 : 0;
  };
  constexpr int kMaxQueries = 512;
  const int heads = he - hb;
  const int chunk = std::max(1, kMaxQueries / heads);
  for (int t0 = 0; t0 < a.n_tokens; t0 += chunk) {
    const int t1 = std::min(a.n_tokens, t0 + chunk);
    float m[kMaxQueries], l[kMaxQueries];
    for (int i = 0; i < (t1 - t0) * heads; ++i) {
      m[i] = -INFINITY;
      l[i] = 0.0f;
    }
    for (int t = t0; t < t1; ++t)
      for (int h = hb; h < he; ++h)
        for (int i = 0; i < hd; ++i) a.out[static_cast<int64_t>(t) * qd + h * hd + i] = 0.0f;
    int block_first = a.first_pos + t1 - 1;
    for (int t = t0; t < t1; ++t) block_first = std::min(block_first, first_of(t));
    block_first = block_first / kBlock * kBlock;  // the same blocks whatever the chunk's tokens
    const int block_last = a.first_pos + t1 - 1;
    alignas(64) float kt[kMaxHeadDim][kBlock];
    // Few queries (decoding): their elements transposed, qt[d][query], zeros past the last.
    constexpr int kFewQueries = 16;  // fewer than this many queries take the rows of K as they are
    constexpr int QV = (kFewQueries + S::N - 1) / S::N;
    const int queries = (t1 - t0) * heads;
    const bool transposed = queries >= kFewQueries;
    alignas(64) float qt[kMaxHeadDim][QV * S::N];
    alignas(64) float few[kFewQueries][kBlock];  // their scores for the block's keys
    if (!transposed)
      for (int d = 0; d < hd; ++d)
        for (int i = 0; i < QV * S::N; ++i)
          qt[d][i] = i < queries ? a.q[static_cast<int64_t>(t0 + i / heads) * qd + (hb + i % heads) * hd + d] : 0.0f;
    for (int p0 = block_first; p0 <= block_last; p0 += kBlock) {
      const int nb = std::min(kBlock, block_last + 1 - p0);
      const int64_t row0 = static_cast<int64_t>(p0) * kv_dim + head_off;
      const float *kb = kh, *vb = vh;
      int64_t ks = hd, vs = hd;
      if (a.kv_f16) {
        for (int j = 0; j < nb; ++j) {
          widen_f16<S>(static_cast<const uint16_t*>(a.k) + row0 + j * kv_dim, kh + j * hd, hd);
          widen_f16<S>(static_cast<const uint16_t*>(a.v) + row0 + j * kv_dim, vh + j * hd, hd);
        }
      } else {
        kb = static_cast<const float*>(a.k) + row0;
        vb = static_cast<const float*>(a.v) + row0;
        ks = vs = kv_dim;
      }
      // Transposing pays off when many queries share the block (prefill); a few (decoding)
      // read the rows of K as they are, all their scores at once, key by key: per (query, key)
      // the same FMAs in the same order as the transposed path, P partial sums by d mod P, the
      // odd d in the first, added pairwise, times the scale.
      if (transposed) {
        for (int j = 0; j < kBlock; ++j) {
          const float* kp = kb + j * ks;
          for (int d = 0; d < hd; ++d) kt[d][j] = j < nb ? kp[d] : 0.0f;
        }
      } else {
        // KJ keys at a time: independent chains of FMAs, about eight (one key's chain of head_dim
        // dependent FMAs waited on their latency).
        constexpr int KJ = std::max(1, 8 / (P * QV));
        auto few_scores = [&](auto kjc, int j0) {
          constexpr int NJ = decltype(kjc)::value;
          F total[NJ][QV];
          score_sums<S, P, NJ, QV>(
              hd, [&](int jj, int d) { return S::set1(kb[(j0 + jj) * ks + d]); },
              [&](int d, int v) { return S::load(qt[d] + v * S::N); }, total);
          for (int jj = 0; jj < NJ; ++jj) {
            alignas(64) float lanes[QV * S::N];
            for (int v = 0; v < QV; ++v) S::store(lanes + v * S::N, S::mul(total[jj][v], S::set1(a.scale)));
            for (int i = 0; i < queries; ++i) few[i][j0 + jj] = lanes[i];
          }
        };
        int j = 0;
        for (; j + KJ <= nb; j += KJ) few_scores(std::integral_constant<int, KJ>{}, j);
        for (; j < nb; ++j) few_scores(std::integral_constant<int, 1>{}, j);
      }
      // HG query heads of token t at once, from head h0: each key column and value row loaded
      // once serves them all (one head at a time, a score took two loads per FMA). The sums run
      // in the same order whatever HG is, so a head's bits do not depend on its neighbours.
      auto heads_block = [&](auto hg, int t, int h0, int lo, int hi) {
        constexpr int HG = decltype(hg)::value;
        const float* q[HG];
        float* o[HG];
        for (int u = 0; u < HG; ++u) {
          q[u] = a.q + static_cast<int64_t>(t) * qd + (h0 + u) * hd;
          o[u] = a.out + static_cast<int64_t>(t) * qd + (h0 + u) * hd;
        }
        alignas(64) float sc[HG][kBlock];
        if (transposed) {
          // P partial sums over d: one chain of hd dependent FMAs waited on their latency.
          F total[HG][V];
          score_sums<S, P, HG, V>(
              hd, [&](int u, int d) { return S::set1(q[u][d]); }, [&](int d, int v) { return S::load(kt[d] + v * S::N); }, total);
          for (int u = 0; u < HG; ++u)
            for (int v = 0; v < V; ++v) S::store(sc[u] + v * S::N, S::mul(total[u][v], S::set1(a.scale)));
        } else {
          for (int u = 0; u < HG; ++u) {
            const float* f = few[(t - t0) * heads + (h0 + u - hb)];
            for (int j = lo; j <= hi; ++j) sc[u][j] = f[j];
          }
        }
        float corr[HG];
        for (int u = 0; u < HG; ++u) {
          float* su = sc[u];
          // Gemma 2's soft-cap of the scaled scores, before the mask: the same scalar steps as
          // activation_math.h's softcap (not included here: its copy would carry this file's flags).
          if (a.softcap > 0.0f)
            for (int j = lo; j <= hi; ++j) su[j] = a.softcap * std::tanh(su[j] / a.softcap);
          for (int j = 0; j < lo; ++j) su[j] = -INFINITY;
          for (int j = hi + 1; j < kBlock; ++j) su[j] = -INFINITY;
          F mv = S::load(su);  // the lanes outside [lo, hi] are -inf
          for (int v = 1; v < V; ++v) mv = S::max(mv, S::load(su + v * S::N));
          const float mx = S::hmax(mv);
          const int qi = (t - t0) * heads + (h0 + u - hb);
          const float m_new = std::max(m[qi], mx);
          corr[u] = fast_exp(m[qi] - m_new);
          F sum = S::zero();
          for (int v = 0; v < V; ++v) {
            const F e = vexp<S>(S::sub(S::load(su + v * S::N), S::set1(m_new)));
            S::store(su + v * S::N, e);
          }
          for (int j = 0; j < lo; ++j) su[j] = 0.0f;
          for (int j = hi + 1; j < kBlock; ++j) su[j] = 0.0f;
          for (int v = 0; v < V; ++v) sum = S::add(sum, S::load(su + v * S::N));
          l[qi] = l[qi] * corr[u] + S::sum(sum);
          m[qi] = m_new;
        }
        // o = o * corr + sum_j p_j v_j, in j order for every element, four vectors at a time.
        constexpr int kCols = 4;
        int i = 0;
        for (; i + kCols * S::N <= hd; i += kCols * S::N) {
          F acc[HG][kCols];
          for (int u = 0; u < HG; ++u)
            for (int c = 0; c < kCols; ++c) {
              const F ov = S::load(o[u] + i + c * S::N);
              acc[u][c] = corr[u] != 1.0f ? S::mul(ov, S::set1(corr[u])) : ov;
            }
          for (int j = lo; j <= hi; ++j) {
            const float* vr = vb + j * vs + i;
            F vv[kCols];
            for (int c = 0; c < kCols; ++c) vv[c] = S::load(vr + c * S::N);
            for (int u = 0; u < HG; ++u) {
              const F pj = S::set1(sc[u][j]);
              for (int c = 0; c < kCols; ++c) acc[u][c] = S::fma(pj, vv[c], acc[u][c]);
            }
          }
          for (int u = 0; u < HG; ++u)
            for (int c = 0; c < kCols; ++c) S::store(o[u] + i + c * S::N, acc[u][c]);
        }
        for (int u = 0; u < HG; ++u) {
          int iu = i;
          for (; iu + S::N <= hd; iu += S::N) {
            F acc = corr[u] != 1.0f ? S::mul(S::load(o[u] + iu), S::set1(corr[u])) : S::load(o[u] + iu);
            for (int j = lo; j <= hi; ++j)
              acc = S::fma(S::set1(sc[u][j]), S::load(vb + j * vs + iu), acc);
            S::store(o[u] + iu, acc);
          }
          for (; iu < hd; ++iu) {
            float acc = o[u][iu] * corr[u];
            for (int j = lo; j <= hi; ++j) acc += sc[u][j] * vb[j * vs + iu];
            o[u][iu] = acc;
          }
        }
      };
      for (int t = t0; t < t1; ++t) {
        const int lo = std::max(p0, first_of(t)) - p0, hi = std::min(p0 + nb - 1, a.first_pos + t) - p0;
        if (lo > hi) continue;
        int h = hb;
        for (; h + 4 <= he; h += 4) heads_block(std::integral_constant<int, 4>{}, t, h, lo, hi);
        for (; h < he; ++h) heads_block(std::integral_constant<int, 1>{}, t, h, lo, hi);
      }
    }
    for (int t = t0; t < t1; ++t)
      for (int h = hb; h < he; ++h) {
        float* o = a.out + static_cast<int64_t>(t) * qd + h * hd;
        const float inv = 1.0f / l[(t - t0) * heads + (h - hb)];
        for (int i = 0; i < hd; ++i) o[i] *= inv;
      }
  }
}

}  // namespace
}  // namespace kiln::cpu
