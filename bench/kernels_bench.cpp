// Google Benchmark micro-benchmarks of the cpu back end's matmul and attention kernels, for every
// kernel table this machine runs, in the shapes of TinyLlama-1.1B (dim 2048, hidden 5632, kv dim
// 256, vocab 32000; 32 query heads and 4 KV heads of 64). Reported per run: bytes/s (the weight
// bytes read per second, what bounds decoding) and GOP/s (2 * rows * cols * tokens per second,
// what bounds prefill); attention: GOP/s of its q k and p v products (2 each).
//
//   kiln_bench_kernels --benchmark_filter='w4a16.*/1/' --benchmark_repetitions=5
//   kiln_bench_kernels --benchmark_filter='attention'
//
// Decode runs (tokens:1/cached:0) rotate through copies of the weight totalling at least 1 GiB,
// so that they read from memory and not from the cache, as a model does; cached:1 runs reuse one
// copy (the kernel's arithmetic speed).
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/activations.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/layouts.h"
#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "layout/weight_layout.h"
#include "quant/weight_quantizer.h"

namespace kiln {
namespace {

struct Fixture {
  QuantParams p;
  int64_t rows, cols;
  std::vector<std::vector<uint8_t>> copies;  // packed weights
  std::vector<float> x, y;
  std::vector<uint8_t> scratch;  // the activations' preparation, 64-byte aligned from prep()
  uint8_t* prep() { return scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64; }
};

Fixture make(const QuantParams& p, int64_t rows, int64_t cols, int n, bool from_memory, const cpu::ActivationScratch& layout) {
  Fixture f;
  f.p = p;
  f.rows = rows;
  f.cols = cols;
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (float& v : w) v = d(rng);
  std::vector<uint8_t> ref(*quantized_size(p, rows, cols));
  (void)round_to_nearest().quantize(p, w.data(), rows, cols, ref);
  std::vector<uint8_t> packed;
  (void)cpu::pack_matrix(p, cpu::matmul_layout(p.scheme), ref, rows, cols, packed);
  const size_t copies = from_memory ? std::max<size_t>(1, (size_t{1} << 30) / packed.size() + 1) : 1;
  f.copies.assign(copies, packed);
  f.x.resize(static_cast<size_t>(n * cols));
  for (float& v : f.x) v = d(rng);
  f.y.resize(static_cast<size_t>(n * rows));
  f.scratch.resize(layout.bytes + 64);
  return f;
}

void run(benchmark::State& state, const cpu::KernelTable* t, QuantParams p, int64_t rows, int64_t cols, int threads) {
  const int n = static_cast<int>(state.range(0));
  const bool cached = state.range(1) != 0;
  const cpu::ActivationScratch layout(cols, n);
  Fixture f = make(p, rows, cols, n, n == 1 && !cached, layout);
  ThreadPool pool(threads);
  cpu::PackedMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.params = p;
  m.tile_bytes = static_cast<int64_t>(*cpu::tile_bytes(p, cpu::matmul_layout(p.scheme), cols));
  m.decode_one_stream = host_reads_one_stream_faster();  // as the back end chooses
  // A slice of work scratch per thread, as the back end plans it.
  const auto work_bytes = static_cast<size_t>((cpu::matmul_work_bytes(*t, p, cols, n) + 63) / 64 * 64);
  std::vector<uint8_t> work(work_bytes * static_cast<size_t>(threads) + 64);
  uint8_t* work_base = work.data() + (64 - reinterpret_cast<uintptr_t>(work.data()) % 64) % 64;
  cpu::Epilogue e;
  e.y = f.y.data();
  e.y_stride = rows;
  const int64_t tiles = (rows + 15) / 16;
  size_t c = 0;
  for (auto _ : state) {
    // The activations are prepared per call, as the back end does (on the calling thread).
    const cpu::Activations a = cpu::prepare_activations(*t, p, cols, f.x.data(), n, layout, f.prep(), nullptr);
    m.data = f.copies[c].data();
    c = (c + 1) % f.copies.size();
    pool.parallel_for(tiles, [&](int64_t b, int64_t end, int th) {
      t->matmul[static_cast<int>(p.scheme)](m, a, e, b, end, work_bytes ? work_base + static_cast<size_t>(th) * work_bytes : nullptr);
    });
    benchmark::DoNotOptimize(f.y.data());
  }
  const double bytes = static_cast<double>(f.copies[0].size());
  state.counters["bytes/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::OneK::kIs1024);
  state.counters["GOP/s"] = benchmark::Counter(2e-9 * static_cast<double>(rows * cols * n),
                                               benchmark::Counter::kIsIterationInvariantRate);
}

// One step of `n` tokens from position `first` over a KV cache of first + n positions (f32, or
// IEEE half), every KV head on one thread.
void run_attention(benchmark::State& state, const cpu::KernelTable* t, bool f16) {
  constexpr int kHeads = 32, kKvHeads = 4, kHeadDim = 64;
  const int n = static_cast<int>(state.range(0)), first = static_cast<int>(state.range(1)), ctx = first + n;
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(n) * kHeads * kHeadDim), out(q.size());
  std::vector<float> k(static_cast<size_t>(ctx) * kKvHeads * kHeadDim), v(k.size());
  for (auto* buf : {&q, &k, &v})
    for (float& x : *buf) x = d(rng);
  std::vector<uint16_t> k16(k.size()), v16(v.size());
  for (size_t i = 0; i < k.size(); ++i) {
    k16[i] = f32_to_f16(k[i]);
    v16[i] = f32_to_f16(v[i]);
  }
  cpu::AttentionArgs a;
  a.q = q.data();
  a.out = out.data();
  a.k = f16 ? static_cast<const void*>(k16.data()) : k.data();
  a.v = f16 ? static_cast<const void*>(v16.data()) : v.data();
  a.kv_f16 = f16;
  a.n_tokens = n;
  a.first_pos = first;
  a.n_heads = kHeads;
  a.n_kv_heads = kKvHeads;
  a.head_dim = kHeadDim;
  a.scale = 0.125f;
  for (auto _ : state) {
    for (int h = 0; h < kKvHeads; ++h) t->attention(a, h, h * (kHeads / kKvHeads), (h + 1) * (kHeads / kKvHeads));
    benchmark::DoNotOptimize(out.data());
  }
  // Positions attended, summed over the step's tokens: first + 1 .. first + n.
  const double attended = static_cast<double>(n) * first + static_cast<double>(n) * (n + 1) / 2;
  state.counters["GOP/s"] = benchmark::Counter(2e-9 * 2 * kHeads * kHeadDim * attended, benchmark::Counter::kIsIterationInvariantRate);
}

void register_all() {
  const cpu::KernelTable* tables[8];
  const int nt = cpu::available_kernel_tables(host_cpu_features(), tables, 8);
  struct Shape {
    const char* name;
    int64_t rows, cols;
  };
  const Shape shapes[] = {{"attn_q", 2048, 2048}, {"attn_kv", 256, 2048}, {"ffn_up", 5632, 2048},
                          {"ffn_down", 2048, 5632}, {"output", 32000, 2048}};
  const QuantParams schemes[] = {canonical({Scheme::kW4A16, 32, true}), canonical({Scheme::kW4A16, 32, false}),
                                 canonical({Scheme::kW8A16, 32, true}), canonical({Scheme::kF16, 32, true}),
                                 canonical({Scheme::kBF16, 32, true}),  canonical({Scheme::kF32, 32, true}),
                                 canonical({Scheme::kW8A8, 32, true}),  canonical({Scheme::kW4A8, 32, true}),
                                 // GGML's Q4_K and Q6_K super-blocks, as a GGUF's Q4_K_M keeps them
                                 canonical({Scheme::kW4A16, 256, false}), canonical({Scheme::kW6A16, 256, true})};
  for (int i = 0; i < nt; ++i) {
    const cpu::KernelTable* t = tables[i];
    for (const bool f16 : {false, true})
      benchmark::RegisterBenchmark((std::string(t->name) + (f16 ? "/attention_f16" : "/attention")).c_str(),
                                   [t, f16](benchmark::State& st) { run_attention(st, t, f16); })
          ->Args({128, 0})
          ->Args({128, 896})
          ->Args({128, 1920})
          ->Args({1, 2047})
          ->ArgNames({"tokens", "first"})
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
  }
  for (int i = 0; i < nt; ++i)
    for (const QuantParams& p : schemes)
      for (const Shape& s : shapes)
        for (int threads : {1, 2}) {
          if (s.rows == 32000 && p.scheme != Scheme::kW8A16) continue;  // the classifier is guarded to w8
          std::string name = tables[i]->name;
          name.append("/").append(describe(p)).append("/").append(s.name).append("/threads:").append(std::to_string(threads));
          const cpu::KernelTable* t = tables[i];
          benchmark::RegisterBenchmark(name.c_str(),
                                       [t, p, s, threads](benchmark::State& st) { run(st, t, p, s.rows, s.cols, threads); })
              ->Args({1, 0})
              ->Args({1, 1})
              ->Args({2, 0})  // batched decode: a step of a few sessions' tokens
              ->Args({4, 0})
              ->Args({8, 0})
              ->Args({128, 1})  // a prefill step (kDefaultMaxTokens)
              ->ArgNames({"tokens", "cached"})
              ->Unit(benchmark::kMicrosecond)
              ->UseRealTime();
        }
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  kiln::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
