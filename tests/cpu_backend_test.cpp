// The fast CPU back end against the reference, in the spirit of llama.cpp's test-backend-ops:
// every kernel of every instruction-set table this machine can run, on random inputs of many
// shapes (odd sizes, sizes that are not a multiple of the 16-row tile, one row, many rows, one
// token and many), with a stated error bound per scheme; then the thread pool, the layouts, the
// targets and the whole model.
//
// Error bounds, per output y[t][r] against backends/ref/ref_matmul.h's y_ref on the same reference bytes:
//   every scheme   |y - y_ref| <= 1e-5 * S + 1e-30,   S = sum_k |w[r][k]| * |x[t][k]|
// with w the dequantized weights and x as backends/ref/ref_matmul.h rounds it: the dequantized int8
// activations for the A8 schemes, the 16-bit ones for W4A16. The kernels widen weights exactly
// and sum in f32 (float schemes, W8A16), or sum integer products exactly (W4A16, A8), so what is
// left is the f32 rounding of sums of at most a few thousand terms, in another order.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <tuple>

#include "backends/cpu/activations.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/layouts.h"
#if defined(__x86_64__)
#include "backends/cpu/x86/amx_tile_config.h"
#endif
#include "artifact/kiln_image_reader.h"
#include "backends/ref/kernels.h"
#include "backends/ref/ref_backend.h"
#include "backends/ref/ref_matmul.h"
#include "backends/registry.h"
#include "compiler/kiln_writer.h"
#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "graph/weight_params.h"
#include "quant/weight_quantizer.h"
#include "runtime/session.h"
#include "test_util.h"

namespace kiln {
namespace {

// ---- thread pool ----

TEST(ThreadPool, EveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 4, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 3, 7, 8, 100, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      for (int rep = 0; rep < 50; ++rep)
        pool.parallel_for(n, [&](int64_t b, int64_t e, int t) {
          EXPECT_GE(t, 0);
          EXPECT_LT(t, threads);
          EXPECT_EQ(b, ThreadPool::share_begin(n, t, threads));
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
        });
      for (auto& h : hits) EXPECT_EQ(h.load(), 50) << threads << " threads, n " << n;
    }
  }
}

TEST(ThreadPool, ChunksCoverEveryIndexOnce) {
  for (int threads : {1, 2, 3, 4, 8})
    for (int64_t grain : {1, 3, 64}) {
      ThreadPool pool(threads);
      for (int64_t n : {0, 1, 2, 7, 64, 100, 1001}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        for (int rep = 0; rep < 50; ++rep)
          pool.parallel_chunks(n, grain, [&](int64_t b, int64_t e, int t) {
            EXPECT_GE(t, 0);
            EXPECT_LT(t, threads);
            EXPECT_LT(b, e);
            if (threads > 1 && n > grain) {
              EXPECT_LE(e - b, grain);
            }
            for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
          });
        for (auto& h : hits) EXPECT_EQ(h.load(), 50) << threads << " threads, n " << n << ", grain " << grain;
      }
    }
}

TEST(ThreadPool, ChunksGoToTheThreadsThatAreFree) {
  // Thread 0 is held up in its first chunk: the others take the rest of its share.
  ThreadPool pool(2);
  std::atomic<int> by_one{0};
  pool.parallel_chunks(100, 1, [&](int64_t b, int64_t e, int t) {
    if (t == 0 && b == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (t == 1) by_one += static_cast<int>(e - b);
  });
  EXPECT_GT(by_one.load(), 50);
}

TEST(ThreadPool, ManyLoopsAndIdleGaps) {
  ThreadPool pool(4);
  std::atomic<int64_t> sum{0};
  for (int rep = 0; rep < 2000; ++rep) pool.parallel_for(16, [&](int64_t b, int64_t e, int) { sum += e - b; });
  EXPECT_EQ(sum.load(), 16 * 2000);
  // Past the spin, the workers sleep; the next loop must wake them.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  pool.parallel_for(4, [&](int64_t b, int64_t e, int) { sum += e - b; });
  EXPECT_EQ(sum.load(), 16 * 2000 + 4);
}

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

TEST(ThreadPool, IdleWorkersSleep) {
  ThreadPool pool(4);
  pool.parallel_for(4, [](int64_t, int64_t, int) {});
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past the spin
  const double before = process_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // Three spinning workers would burn 0.9 s of CPU here.
  EXPECT_LT(process_cpu_seconds() - before, 0.1);
}

TEST(ThreadPool, ParallelForAllocatesNothing) {
  ThreadPool pool(3);
  std::vector<float> v(1000, 1.0f);
  pool.parallel_for(1000, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) v[static_cast<size_t>(i)] *= 2.0f;
  });
  const uint64_t before = test::allocation_count();
  for (int rep = 0; rep < 1000; ++rep)
    pool.parallel_for(1000, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) v[static_cast<size_t>(i)] += 1.0f;
    });
  EXPECT_EQ(test::allocation_count(), before);
  EXPECT_EQ(v[999], 1002.0f);
}

// ---- kernel tables ----

// The tables this machine runs; on x86 machines without AMX, the amx kernels too, over the
// software model of the tiles (the same code, so they are tested wherever AVX-512 is).
// Filled only where this machine may run AVX-512: the filler is AVX-512 code itself.
const cpu::KernelTable* emulated_amx_table() {
#if defined(KILN_TEST_AMX_EMULATION)
  if ((kCpuSetAvx512 & ~host_cpu_features()) != 0 || (host_cpu_features() & kCpuAmxBf16) != 0) return nullptr;
  static const cpu::KernelTable t = [] {
    cpu::KernelTable k;
    cpu::fill_amx_emulated(k);
    return k;
  }();
  return &t;
#else
  return nullptr;
#endif
}

std::vector<const cpu::KernelTable*> tables() {
  const cpu::KernelTable* t[8];
  const int n = cpu::available_kernel_tables(host_cpu_features(), t, 8);
  return {t, t + n};
}

std::vector<const cpu::KernelTable*> tables_to_test() {
  auto ts = tables();
  if (const auto* e = emulated_amx_table()) ts.insert(ts.begin(), e);
  return ts;
}

TEST(CpuDispatch, TablesOfThisMachine) {
  auto ts = tables();
  ASSERT_FALSE(ts.empty());
  EXPECT_STREQ(ts.back()->name, "generic");
  EXPECT_EQ(&cpu::select_kernels(0), &cpu::generic_kernels());
  for (const auto* t : ts) {
    EXPECT_EQ(t->features & ~host_cpu_features(), 0u) << t->name;
    for (auto* f : t->matmul) EXPECT_NE(f, nullptr) << t->name;
  }
  EXPECT_EQ(&cpu::select_kernels(host_cpu_features()), ts.front());
  std::printf("kernel tables here:");
  for (const auto* t : ts) std::printf(" %s", t->name);
  std::printf("\n");
}

// A table is filled (by code built for its instruction set) only where the OS lets this process
// use that set, whatever the caller asks for: asking for every feature gives this machine's.
TEST(CpuDispatch, NoTableBeyondWhatThisMachineRuns) {
  const cpu::KernelTable* all[8];
  const int n = cpu::available_kernel_tables(~0ull, all, 8);
  ASSERT_GE(n, 1);
  for (int i = 0; i < n; ++i) EXPECT_EQ(all[i]->features & ~host_cpu().enabled, 0u) << all[i]->name;
  EXPECT_STREQ(all[n - 1]->name, "generic");
  // Naming a table runs none of it.
#if defined(__x86_64__)
  EXPECT_STREQ(cpu::kernel_table_name(kCpuSetAmx), "amx");
  EXPECT_STREQ(cpu::kernel_table_name(kCpuSetAvx512 | kCpuAvxVnni), "avx512");
#elif defined(__aarch64__)
  EXPECT_STREQ(cpu::kernel_table_name(kCpuSetI8mm), "i8mm");
  EXPECT_STREQ(cpu::kernel_table_name(kCpuSetDotprod), "dotprod");
#endif
  EXPECT_STREQ(cpu::kernel_table_name(0), "generic");
}

TEST(CpuDispatch, HostFeaturesCountOnlyWhatTheOsEnables) {
  const HostCpu& h = host_cpu();
  EXPECT_EQ(h.enabled & ~h.reported, 0u);
  EXPECT_EQ(h.usable & ~h.enabled, 0u);
  EXPECT_EQ(host_cpu_features(), h.usable);
#if defined(__x86_64__)
  if (h.enabled & kCpuAvx2) EXPECT_EQ(h.xcr0 & 0x6, 0x6u);             // SSE and AVX state
  if (h.enabled & kCpuAvx512f) EXPECT_EQ(h.xcr0 & 0xe6, 0xe6u);        // and opmask, ZMM
  if (h.enabled & kCpuAmxTile) {
    EXPECT_EQ(h.xcr0 & 0x60000, 0x60000u);  // XTILECFG, XTILEDATA
    EXPECT_TRUE(h.amx_permitted);
  }
#endif
}

// Why a faster table does not run, in words a user can act on.
TEST(CpuDispatch, KernelChoiceSaysWhichTableAndWhy) {
  const std::string here = cpu::kernel_choice(kCpuBestTable);
  const std::string best = cpu::select_kernels(host_cpu_features()).name;
  EXPECT_EQ(here.substr(0, best.size()), best) << here;
  const std::string generic = cpu::kernel_choice(0);  // a file for the generic target
  EXPECT_EQ(generic.substr(0, 7), "generic") << generic;
  if (best != "generic") {
    EXPECT_NE(generic.find("the file's target stops at generic"), std::string::npos) << generic;
  }
#if defined(__x86_64__)
  if ((host_cpu().reported & kCpuAvx512f) == 0) {
    EXPECT_NE(here.find("not avx512: the CPU lacks avx512f"), std::string::npos) << here;
  }
  if ((host_cpu_features() & kCpuSetAvx2) == kCpuSetAvx2) {
    const std::string capped = cpu::kernel_choice(kCpuSetAvx2);
    EXPECT_EQ(capped.substr(0, 4), "avx2") << capped;
    if (best != "avx2") {
      EXPECT_NE(capped.find("the file's target stops at avx2"), std::string::npos) << capped;
    }
  }
#endif
}

#if defined(__x86_64__)
// The one tile configuration every AMX path loads (x86/amx_tile_config.h): every field stored,
// read back as the bytes LDTILECFG reads, on any CPU.
TEST(CpuDispatch, AmxTileConfigHasEveryField) {
  uint8_t b[64];
  std::memcpy(b, &cpu::kAmxTileConfig, 64);
  EXPECT_EQ(b[0], 1);  // palette 1
  EXPECT_EQ(b[1], 0);  // start row
  for (int i = 2; i < 16; ++i) EXPECT_EQ(b[i], 0) << "reserved byte " << i;
  for (int t = 0; t < 16; ++t) {
    const uint16_t colsb = static_cast<uint16_t>(b[16 + 2 * t] | b[17 + 2 * t] << 8);
    EXPECT_EQ(colsb, t < cpu::kAmxTilesUsed ? 64 : 0) << "tile " << t;
    EXPECT_EQ(b[48 + t], t < cpu::kAmxTilesUsed ? 16 : 0) << "tile " << t;
  }
}

#endif

#if defined(KILN_TEST_AMX_EMULATION)
// The bytes the AMX kernels and their product loop really hand LDTILECFG (through the emulated
// tiles, which record them), wherever AVX-512 runs the emulation.
TEST(CpuDispatch, AmxPathsLoadTheWholeTileConfig) {
  const cpu::KernelTable* t = emulated_amx_table();
  if (t == nullptr) GTEST_SKIP() << "the emulated tiles need AVX-512 (or this machine has real ones)";
  for (Scheme s : {Scheme::kW4A16, Scheme::kW8A16, Scheme::kBF16, Scheme::kF16}) {
    uint8_t got[64];
    cpu::amx_emulated_forget_config();
    ASSERT_GT(t->product_loop(s, 16, 2), 0.0);
    cpu::amx_emulated_last_config(got);
    EXPECT_EQ(std::memcmp(got, &cpu::kAmxTileConfig, 64), 0) << scheme_name(s);
  }
}
#endif

// The products each table's product_loop says it did: rounds x 12 sums x the scheme's products
// per instruction of the kernel it stands for (N lanes; a 16-bit activation through int8 digits
// takes two products, a W8A16 one three; the tiles: 16 x 16 x 32 bf16 products, two per
// product of an x split in two bf16 parts, four with f16 weights split too).
// Whether the table's kernel for s and `tokens` tokens runs on the tiles is the table's own
// decision (reads_bf16_tiles), so that the loop and the kernels cannot disagree on the threshold.
double expected_products(const cpu::KernelTable& t, Scheme s, int tokens, int64_t rounds) {
  const std::string table = t.name;
  const int n = table == "avx2" ? 8 : table == "neon" || table == "dotprod" || table == "i8mm" ? 4 : 16;
  if (t.reads_bf16_tiles(s, tokens, 32)) return static_cast<double>(rounds) * 4 * 16 * 16 * 32 / (s == Scheme::kF16 ? 4 : 2);
  double per_op = 0;
  switch (s) {
    case Scheme::kW4A16:
    case Scheme::kW6A16:
    case Scheme::kW5A16: per_op = 2.0 * n; break;  // int16 pairs (avx512 words) or two int8 digits
    case Scheme::kW8A8:
    case Scheme::kW4A8: per_op = table == "i8mm" && tokens > 1 ? 32 : 4.0 * n; break;
    case Scheme::kW8A16: per_op = tokens <= std::max(1, t.rows_max_tokens) ? 4.0 * n / 3 : n; break;
    default: per_op = n;
  }
  return static_cast<double>(rounds) * 12 * per_op;
}

TEST(CpuProducts, EachTableCountsTheProductsOfItsInstruction) {
  for (const auto* t : tables_to_test()) {
    ASSERT_NE(t->product_loop, nullptr) << t->name;
    for (size_t s = 0; s < std::size(t->matmul); ++s)
      for (int tokens : {1, 2, 7, 8, 16, 23, 24, 128}) {  // either side of every table's thresholds
        const Scheme scheme = static_cast<Scheme>(s);
        EXPECT_EQ(t->product_loop(scheme, tokens, 3), expected_products(*t, scheme, tokens, 3))
            << t->name << " " << scheme_name(scheme) << " " << tokens;
      }
  }
}

TEST(CpuProducts, BackendMeasuresARate) {
  CpuBackend b;
  PrepareOptions o;
  o.cpu_features = host_cpu_features();
  for (Scheme s : {Scheme::kW4A16, Scheme::kW4A8, Scheme::kF32}) {
    auto r = b.product_rate(s, 128, o, 0.01);
    ASSERT_TRUE(r) << scheme_name(s);
    EXPECT_GT(*r, 1e6) << scheme_name(s);  // products per second; any CPU of this century does more
    EXPECT_TRUE(std::isfinite(*r)) << scheme_name(s);
  }
}

// ---- matmuls against ref_matmul ----

struct MatmulCase {
  QuantParams p;
  int64_t rows, cols;
  int n;
};

std::string describe_case(const cpu::KernelTable& t, const MatmulCase& c) {
  return std::string(t.name) + " " + describe(c.p) + " [" + std::to_string(c.rows) + ", " + std::to_string(c.cols) +
         "] x " + std::to_string(c.n) + " tokens";
}

std::vector<float> random_vector(std::mt19937& rng, size_t n, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Runs the table's matmul over the tiles in `parts` contiguous pieces (as threads would), decode
// reading one tile at a time where `one_stream` (by default as the back end chooses for this host).
void run_matmul(const cpu::KernelTable& t, const MatmulCase& c, const std::vector<uint8_t>& packed, const float* x,
                const float* bias, const float* residual, float* y, int parts,
                bool one_stream = host_reads_one_stream_faster()) {
  cpu::PackedMatrix m;
  m.data = packed.data();
  m.rows = c.rows;
  m.cols = c.cols;
  m.params = c.p;
  m.tile_bytes = static_cast<int64_t>(*cpu::tile_bytes(c.p, cpu::matmul_layout(c.p.scheme), c.cols));
  m.decode_one_stream = one_stream;
  // Filled with junk first: the padding tokens of the panels must be written, not left over.
  const cpu::ActivationScratch layout(c.cols, c.n);
  std::vector<uint8_t> scratch(layout.bytes + 64, 0x5a);
  uint8_t* base = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
  const cpu::Activations a = cpu::prepare_activations(t, c.p, c.cols, x, c.n, layout, base, nullptr);
  cpu::Epilogue e;
  e.y = y;
  e.y_stride = c.rows;
  e.bias = bias;
  e.residual = residual;
  e.residual_stride = c.rows;
  // Each piece's own work scratch (junk too), as the back end gives each thread its slice.
  const auto work_bytes = static_cast<size_t>(cpu::matmul_work_bytes(t, c.p, c.cols, c.n));
  std::vector<uint8_t> work(work_bytes + 64, 0x5a);
  uint8_t* work_base = work_bytes ? work.data() + (64 - reinterpret_cast<uintptr_t>(work.data()) % 64) % 64 : nullptr;
  const int64_t tiles = (c.rows + 15) / 16;
  for (int i = 0; i < parts; ++i) {
    const int64_t b = ThreadPool::share_begin(tiles, i, parts), end = ThreadPool::share_begin(tiles, i + 1, parts);
    if (b < end) t.matmul[static_cast<int>(c.p.scheme)](m, a, e, b, end, work_base);
  }
}

// w as the reference layout (round to nearest) and packed for the CPU kernels.
Status quantize_and_pack(const QuantParams& p, const std::vector<float>& w, int64_t rows, int64_t cols,
                         std::vector<uint8_t>& ref, std::vector<uint8_t>& packed) {
  ref.assign(*quantized_size(p, rows, cols), 0);
  if (Status st = round_to_nearest().quantize(p, w.data(), rows, cols, ref); !st) return st;
  return cpu::pack_matrix(p, cpu::matmul_layout(p.scheme), ref, rows, cols, packed);
}

// A random case for comparing two runs of one table bit for bit: weights packed, activations
// with an outlier, a bias.
struct RandomMatmul {
  std::vector<float> x, bias;
  std::vector<uint8_t> packed;
};
RandomMatmul random_matmul(const MatmulCase& c, std::mt19937& rng) {
  RandomMatmul r;
  const auto w = random_vector(rng, static_cast<size_t>(c.rows * c.cols), 0.5f);
  r.x = random_vector(rng, static_cast<size_t>(c.n * c.cols), 1.0f);
  r.x[2] = 40.0f;
  std::vector<uint8_t> ref;
  EXPECT_TRUE(quantize_and_pack(c.p, w, c.rows, c.cols, ref, r.packed));
  r.bias = random_vector(rng, static_cast<size_t>(c.rows), 1.0f);
  return r;
}

void check_matmul(const cpu::KernelTable& t, const MatmulCase& c, std::mt19937& rng) {
  SCOPED_TRACE(describe_case(t, c));
  const auto w = random_vector(rng, static_cast<size_t>(c.rows * c.cols), 0.5f);
  auto x = random_vector(rng, static_cast<size_t>(c.n * c.cols), 1.0f);
  if (c.cols > 3) x[2] = 40.0f;  // an outlier, as activations have
  std::vector<uint8_t> ref, packed;
  ASSERT_TRUE(quantize_and_pack(c.p, w, c.rows, c.cols, ref, packed));
  std::vector<uint8_t> back;
  ASSERT_TRUE(cpu::unpack_matrix(c.p, cpu::matmul_layout(c.p.scheme), packed, c.rows, c.cols, back));
  ASSERT_EQ(back, ref) << "pack and unpack are not inverses";

  std::vector<float> want(static_cast<size_t>(c.n * c.rows));
  ASSERT_TRUE(ref_matmul(c.p, ref, c.rows, c.cols, x.data(), c.n, want.data()));
  // The bound's scale: sum |w| |x|, with x as the kernel sees it (dequantized int8 for A8, the
  // 16-bit values for W4A16).
  std::vector<float> wd(static_cast<size_t>(c.rows * c.cols));
  ASSERT_TRUE(dequantize_matrix(c.p, ref, c.rows, c.cols, wd.data()));
  std::vector<float> xs = x;
  if (a16_activations(c.p.scheme))
    for (int i = 0; i < c.n; ++i) {
      std::vector<int16_t> q(static_cast<size_t>(c.cols));
      std::vector<float> s(static_cast<size_t>((c.cols + 31) / 32));
      quantize_activation_a16(x.data() + i * c.cols, c.cols, q.data(), s.data());
      for (int64_t k = 0; k < c.cols; ++k) xs[static_cast<size_t>(i * c.cols + k)] = q[static_cast<size_t>(k)] * s[static_cast<size_t>(k / 32)];
    }
  if (quantizes_activations(c.p.scheme))
    for (int i = 0; i < c.n; ++i) {
      std::vector<int8_t> q(static_cast<size_t>(c.cols));
      float s;
      quantize_activation_row(x.data() + i * c.cols, c.cols, q.data(), &s);
      for (int64_t k = 0; k < c.cols; ++k) xs[static_cast<size_t>(i * c.cols + k)] = q[static_cast<size_t>(k)] * s;
    }
  const auto bias = random_vector(rng, static_cast<size_t>(c.rows), 1.0f);
  const auto residual = random_vector(rng, static_cast<size_t>(c.n * c.rows), 1.0f);
  std::vector<double> scale(static_cast<size_t>(c.n * c.rows));  // S of every output
  for (int i = 0; i < c.n; ++i)
    for (int64_t r = 0; r < c.rows; ++r) {
      double s = 0;
      for (int64_t k = 0; k < c.cols; ++k)
        s += std::fabs(wd[static_cast<size_t>(r * c.cols + k)] * xs[static_cast<size_t>(i * c.cols + k)]);
      scale[static_cast<size_t>(i * c.rows + r)] = s;
    }
  for (int parts : {1, 2, 3, 4}) {
    for (bool epilogue : {false, true}) {
      std::vector<float> got(static_cast<size_t>(c.n * c.rows), NAN);
      run_matmul(t, c, packed, x.data(), epilogue ? bias.data() : nullptr, epilogue ? residual.data() : nullptr, got.data(),
                 parts);
      double worst = 0;
      for (int i = 0; i < c.n; ++i)
        for (int64_t r = 0; r < c.rows; ++r) {
          const size_t at = static_cast<size_t>(i * c.rows + r);
          const double s = scale[at];
          const double expect = epilogue ? residual[at] + (want[at] + bias[static_cast<size_t>(r)]) : want[at];
          const double err = std::fabs(got[at] - expect);
          worst = std::max(worst, err / (s + (epilogue ? std::fabs(residual[at]) + std::fabs(bias[static_cast<size_t>(r)]) : 0) + 1e-30));
          ASSERT_LE(err, 1e-5 * (s + (epilogue ? std::fabs(residual[at]) + std::fabs(bias[static_cast<size_t>(r)]) : 0)) + 1e-30)
              << "token " << i << " row " << r << " got " << got[at] << " want " << expect << " parts " << parts;
        }
      (void)worst;
    }
  }
}

std::vector<QuantParams> all_params() {
  std::vector<QuantParams> ps;
  for (Scheme s : {Scheme::kF32, Scheme::kF16, Scheme::kBF16, Scheme::kW8A16, Scheme::kW8A8})
    ps.push_back(canonical({s, 32, true}));
  for (Scheme s : {Scheme::kW4A16, Scheme::kW4A8})
    for (int g : {32, 64, 128})
      for (bool sym : {true, false}) ps.push_back(canonical({s, g, sym}));
  for (int g : {32, 64, 128}) ps.push_back(canonical({Scheme::kW8A16, 0, true, g}));  // 8-bit groups
  ps.push_back(canonical({Scheme::kW4A16, 256, false}));  // GGML's super-blocks: Q4_K,
  ps.push_back(canonical({Scheme::kW4A16, 256, true}));   // IQ4_XS,
  ps.push_back(canonical({Scheme::kW6A16}));              // Q6_K
  ps.push_back(canonical({Scheme::kW5A16}));              // Q5_K
  ps.push_back({Scheme::kW5A16, 0, true, 0, 32});         // and the blocks of 32: Q5_0,
  ps.push_back({Scheme::kW5A16, 0, false, 0, 32});        // Q5_1
  return ps;
}

TEST(CpuMatmul, EveryTableEverySchemeManyShapes) {
  std::mt19937 rng(1234);
  int cases = 0;
  for (const cpu::KernelTable* t : tables_to_test())
    for (const QuantParams& p : all_params()) {
      const int g = scale_group(p);
      const std::vector<int64_t> cols = g != 0 ? std::vector<int64_t>{g, 3 * g, 8 * g}
                                               : std::vector<int64_t>{1, 5, 64, 131, 256, 512};
      for (int64_t r : {1, 7, 16, 33, 100})
        for (int64_t k : cols)
          for (int n : {1, 2, 5, 13, 17, 40}) {
            if (r * k * n > 400000) continue;
            check_matmul(*t, {p, r, k, n}, rng);
            ++cases;
            if (HasFatalFailure()) return;
          }
    }
  EXPECT_GT(cases, 500);
}

// The TinyLlama width, one token and a prefill block, every scheme the model runs in; and for the
// matrix-unit tables 80 tokens: more than one chunk of their token blocks.
TEST(CpuMatmul, ModelShapes) {
  std::mt19937 rng(99);
  for (const cpu::KernelTable* t : tables_to_test())
    for (Scheme s : {Scheme::kW4A16, Scheme::kW4A8, Scheme::kW8A16, Scheme::kW8A8, Scheme::kF16, Scheme::kBF16})
      for (int n : {1, 24, 80})
        if (n < 64 || t->make_bf16_tiles) check_matmul(*t, {canonical({s, 32, true}), 64, 2048, n}, rng);
  for (const cpu::KernelTable* t : tables_to_test())  // w8a16 g32: GGUF Q8_0 / Q5_0 as they are
    for (int n : {1, 24, 80}) check_matmul(*t, {canonical({Scheme::kW8A16, 0, true, 32}), 64, 2048, n}, rng);
  for (const cpu::KernelTable* t : tables_to_test())  // Q4_K, IQ4_XS, Q5_K, Q6_K, Q5_0 and Q5_1 as they are
    for (const QuantParams& p : {canonical({Scheme::kW4A16, 256, false}), canonical({Scheme::kW4A16, 256, true}),
                                 canonical({Scheme::kW5A16}), canonical({Scheme::kW6A16}), QuantParams{Scheme::kW5A16, 0, true, 0, 32},
                                 QuantParams{Scheme::kW5A16, 0, false, 0, 32}})
      for (int n : {1, 8, 24}) check_matmul(*t, {p, 64, 2048, n}, rng);
}

// Decode reads its tiles side by side or one at a time (PackedMatrix::decode_one_stream, which
// the back end sets by the host's vendor): the same bits either way, every table, every scheme, partial tiles, threads' pieces.
TEST(CpuMatmul, DecodeOneStreamGivesTheSameBits) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "one-stream decode is chosen on x86 (AMD) only";
#endif
  std::mt19937 rng(31);
  int cases = 0;
  for (const cpu::KernelTable* t : tables_to_test())
    for (const QuantParams& p : all_params())
      for (int64_t rows : {16, 100, 300}) {
        const MatmulCase c{p, rows, int64_t{4} * 128, 1};
        SCOPED_TRACE(describe_case(*t, c));
        const auto w = random_vector(rng, static_cast<size_t>(c.rows * c.cols), 0.5f);
        const auto x = random_vector(rng, static_cast<size_t>(c.cols), 1.0f);
        std::vector<uint8_t> ref, packed;
        ASSERT_TRUE(quantize_and_pack(p, w, c.rows, c.cols, ref, packed));
        const auto bias = random_vector(rng, static_cast<size_t>(c.rows), 1.0f);
        std::vector<float> side(static_cast<size_t>(c.rows)), one(side.size());
        run_matmul(*t, c, packed, x.data(), bias.data(), nullptr, side.data(), 3, false);
        run_matmul(*t, c, packed, x.data(), bias.data(), nullptr, one.data(), 3, true);
        for (size_t i = 0; i < side.size(); ++i)
          ASSERT_EQ(std::bit_cast<uint32_t>(side[i]), std::bit_cast<uint32_t>(one[i])) << "output " << i;
        ++cases;
      }
  EXPECT_GT(cases, 30);
}

// W4A16 prefill on tables with 16-bit products (make_a16_word_panel) from a16_words_min_rows
// tokens on: the same exact integer sum per block of 32 as the digit kernel, scaled in the same
// order, so the same bits as running the tokens in smaller steps (the digit path). Every group
// size, both symmetries, partial tiles, odd token counts, tiles split in pieces.
TEST(CpuMatmul, W4A16WordsGiveTheDigitBits) {
  std::mt19937 rng(77);
  int cases = 0;
  for (const cpu::KernelTable* t : tables_to_test()) {
    // Matrix-unit tables multiply these token counts as bf16 tiles instead.
    if (!t->make_a16_word_panel || t->reads_bf16_tiles(Scheme::kW4A16, t->a16_words_min_rows - 1, 32)) continue;
    const int step = t->a16_words_min_rows - 1;
    // 3 g columns: runs of four widened tiles; 4224 (33 x 128): wide enough for runs of three.
    for (int g : {32, 64, 128})
      for (bool sym : {true, false})
        for (int64_t cols : {int64_t{3} * g, int64_t{4224}})
          for (int64_t rows : {16, 33, 100})
            for (int n : {t->a16_words_min_rows, 40, 67}) {
              if (cols > 3 * g && (rows != 100 || n != 40)) continue;
              const MatmulCase c{canonical({Scheme::kW4A16, g, sym}), rows, cols, n};
              SCOPED_TRACE(describe_case(*t, c));
              const auto [x, bias, packed] = random_matmul(c, rng);
              ASSERT_FALSE(HasFailure());
              std::vector<float> words(static_cast<size_t>(c.n * c.rows)), digits(words.size());
              run_matmul(*t, c, packed, x.data(), bias.data(), nullptr, words.data(), 3);
              for (int t0 = 0; t0 < n; t0 += step) {
                MatmulCase part = c;
                part.n = std::min(step, n - t0);
                run_matmul(*t, part, packed, x.data() + t0 * c.cols, bias.data(), nullptr, digits.data() + t0 * c.rows, 1);
              }
              for (size_t i = 0; i < words.size(); ++i)
                ASSERT_EQ(std::bit_cast<uint32_t>(words[i]), std::bit_cast<uint32_t>(digits[i]))
                    << "output " << i << ": " << words[i] << " vs " << digits[i];
              ++cases;
            }
  }
  if (cases == 0) GTEST_SKIP() << "no table with 16-bit W4A16 products on this CPU";
}

// Batched decode (several sessions' next tokens in one matmul) and a prompt split anywhere give
// each token the bits it gets alone: every row of an n-token matmul of the A8 schemes equals the
// one-token matmul of that row (their sums are exact integers, scaled per token in one order),
// every table, token counts across the blocks of tokens and panels, threads' pieces, the model's
// widths. So does every row of W4A16's and W8A16's steps of up to rows_max_tokens tokens where
// the table reads each token's row of digits (their sums as one token's are).
TEST(CpuMatmul, TokenOfAStepGetsItsOneTokenBits) {
  std::mt19937 rng(2121);
  int digit_cases = 0;
  for (const cpu::KernelTable* t : tables_to_test())
    for (const QuantParams& p : all_params()) {
      const bool digits = a16_activations(p.scheme) || p.scheme == Scheme::kW8A16;
      if (!quantizes_activations(p.scheme) && !digits) continue;
      for (int64_t cols : {int64_t{256}, int64_t{5632}})
        for (int n = 2; n <= 14; ++n) {
          if (digits) {  // only where the table reads the rows (a matrix unit's tiles do not)
            const cpu::ActivationFormat f = t->activation_format(p, n, cols);
            if (f != cpu::ActivationFormat::kA16Rows && f != cpu::ActivationFormat::kDigits) continue;
          }
          if (cols > 256 && n % 6 != 2 && !digits) continue;
          digit_cases += digits ? 1 : 0;
          const MatmulCase c{p, cols > 256 ? 48 : 100, cols, n};
          SCOPED_TRACE(describe_case(*t, c));
          const auto [x, bias, packed] = random_matmul(c, rng);
          ASSERT_FALSE(HasFailure());
          const auto residual = random_vector(rng, static_cast<size_t>(c.n * c.rows), 1.0f);
          std::vector<float> step(static_cast<size_t>(c.n * c.rows)), alone(step.size());
          run_matmul(*t, c, packed, x.data(), bias.data(), residual.data(), step.data(), 2);
          MatmulCase one = c;
          one.n = 1;
          for (int i = 0; i < n; ++i)
            run_matmul(*t, one, packed, x.data() + i * c.cols, bias.data(), residual.data() + i * c.rows, alone.data() + i * c.rows, 1);
          for (size_t i = 0; i < step.size(); ++i)
            ASSERT_EQ(std::bit_cast<uint32_t>(step[i]), std::bit_cast<uint32_t>(alone[i]))
                << "token " << i / static_cast<size_t>(c.rows) << " row " << i % static_cast<size_t>(c.rows);
        }
    }
  // The x86 AVX-512 tables read up to 8 tokens' rows.
  if ((host_cpu_features() & kCpuSetAvx512) == kCpuSetAvx512) {
    EXPECT_GT(digit_cases, 0);
  }
}

// The i8mm table's SMMLA prefill sums the same int8 products exactly and scales them in the same
// order as the dotprod kernels: the same bits, for every shape (odd chunk counts, odd token counts).
TEST(CpuMatmul, I8mmGivesTheDotprodBits) {
  const cpu::KernelTable *mm = nullptr, *dot = nullptr;
  for (const cpu::KernelTable* t : tables()) {
    if (std::string(t->name) == "i8mm") mm = t;
    if (std::string(t->name) == "dotprod") dot = t;
  }
  if (!mm || !dot) GTEST_SKIP() << "no i8mm on this CPU";
  std::mt19937 rng(5);
  int cases = 0;
  for (const QuantParams& p : all_params()) {
    if (!quantizes_activations(p.scheme)) continue;
    const int g = is_4bit(p.scheme) ? p.group_size : 1;
    const std::vector<int64_t> cols = is_4bit(p.scheme) ? std::vector<int64_t>{g, 3 * g} : std::vector<int64_t>{1, 4, 5, 12, 64, 131};
    for (int64_t r : {1, 16, 33})
      for (int64_t k : cols)
        for (int n : {2, 3, 4, 5, 9, 17}) {
          const MatmulCase c{p, r, k, n};
          SCOPED_TRACE(describe_case(*mm, c));
          const auto w = random_vector(rng, static_cast<size_t>(r * k), 0.5f);
          const auto x = random_vector(rng, static_cast<size_t>(n * k), 1.0f);
          std::vector<uint8_t> ref, packed;
          ASSERT_TRUE(quantize_and_pack(p, w, r, k, ref, packed));
          const auto bias = random_vector(rng, static_cast<size_t>(r), 1.0f);
          const auto residual = random_vector(rng, static_cast<size_t>(n * r), 1.0f);
          std::vector<float> a(static_cast<size_t>(n * r)), b(a.size());
          run_matmul(*mm, c, packed, x.data(), bias.data(), residual.data(), a.data(), 2);
          run_matmul(*dot, c, packed, x.data(), bias.data(), residual.data(), b.data(), 1);
          ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
          ++cases;
        }
  }
  EXPECT_GT(cases, 100);
}

// ---- float ops and attention against ref/kernels.h ----

TEST(CpuOps, NormRopeSwigluAdd) {
  std::mt19937 rng(7);
  for (const cpu::KernelTable* t : tables())
    for (int n : {1, 3, 16, 17, 64, 100, 2048}) {
      SCOPED_TRACE(std::string(t->name) + " n " + std::to_string(n));
      auto x = random_vector(rng, static_cast<size_t>(n), 2.0f), w = random_vector(rng, static_cast<size_t>(n), 1.0f);
      auto u = random_vector(rng, static_cast<size_t>(n), 1.0f);
      std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
      ref::rmsnorm(a.data(), x.data(), w.data(), n, 1e-5f);
      t->rmsnorm(b.data(), x.data(), w.data(), n, 1e-5f);
      for (int i = 0; i < n; ++i) EXPECT_NEAR(b[i], a[i], 2e-6 * std::fabs(a[i]) + 1e-7);
      ref::swiglu(a.data(), x.data(), u.data(), n);
      t->swiglu(b.data(), x.data(), u.data(), n);
      for (int i = 0; i < n; ++i) EXPECT_NEAR(b[i], a[i], 1e-6 * (std::fabs(x[i] * u[i]) + 1e-6));
      t->add(b.data(), x.data(), u.data(), n);
      for (int i = 0; i < n; ++i) EXPECT_EQ(b[i], x[i] + u[i]);
    }
  for (const cpu::KernelTable* t : tables())
    for (bool half : {false, true})
      for (int hd : {2, 8, 64, 128}) {
        const int heads = 3, pos = 77;
        std::vector<float> inv(static_cast<size_t>(hd / 2)), cs(static_cast<size_t>(hd));
        for (int i = 0; i < hd / 2; ++i) {
          inv[static_cast<size_t>(i)] = std::pow(10000.0f, -2.0f * i / hd);
          cs[static_cast<size_t>(i)] = std::cos(static_cast<float>(pos) * inv[static_cast<size_t>(i)]);
          cs[static_cast<size_t>(hd / 2 + i)] = std::sin(static_cast<float>(pos) * inv[static_cast<size_t>(i)]);
        }
        auto a = random_vector(rng, static_cast<size_t>(heads * hd), 1.0f), b = a;
        ref::rope(a.data(), heads, hd, pos, inv.data(), half);
        t->rope(b.data(), heads, hd, 0, cs.data(), cs.data() + hd / 2, half);
        // The same expressions; the ISA files may contract them into FMAs.
        for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-6 * (std::fabs(a[i]) + 1)) << t->name << " head_dim " << hd;
      }
}

// Nine blocks of 32 activations for the digit tests: random, then a zero block, an infinity, a
// NaN, block 4 left to the test (its ties), a huge and a tiny value.
std::vector<float> digit_blocks(uint32_t seed) {
  std::mt19937 rng(seed);
  auto x = random_vector(rng, 32 * 9, 3.0f);
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(32 + i)] = 0.0f;
  x[64 + 3] = std::numeric_limits<float>::infinity();
  x[96 + 5] = std::nanf("");
  x[160] = 1e30f;
  x[192] = -1e-30f;
  return x;
}

TEST(CpuOps, EveryTableMakesTheSameDigits) {
  // W8A16's decode kernel reads x as three int8 digit planes (kernels.h): every table must make
  // the same ones as the portable code, on ties, clamps, zero and non-finite blocks.
  const int64_t cols = 32 * 9;
  auto x = digit_blocks(11);
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(128 + i)] = static_cast<float>(i - 16) * 0.5f;  // halves
  auto digits = [&](const cpu::KernelTable& t) {
    std::vector<int8_t> d(static_cast<size_t>(3 * cols));
    std::vector<float> sc(static_cast<size_t>(cols / 32));
    std::vector<int32_t> sums(static_cast<size_t>(cols / 32)), ps(static_cast<size_t>(3 * cols / 32));
    t.make_digits(x.data(), cols, d.data(), sc.data(), sums.data(), ps.data());
    std::vector<uint32_t> bits;
    for (float f : sc) bits.push_back(std::bit_cast<uint32_t>(f));
    return std::make_tuple(d, bits, sums, ps);
  };
  const auto want = digits(cpu::generic_kernels());
  for (const cpu::KernelTable* t : tables_to_test()) EXPECT_TRUE(digits(*t) == want) << t->name;
}

TEST(CpuOps, EveryTableRoundsW4A16ActivationsAsTheReference) {
  // W4A16's kernels read x as backends/ref/ref_matmul.h's 16-bit values, two int8 digits each: every
  // table must make digits that put the reference's X back together (hi * 256 + lo, hi in
  // [-127, 127]), its scales bit for bit and the sums (of X, -8 times those of hi and of lo), on
  // ties, the clamp, zero and non-finite blocks.
  const int64_t cols = 32 * 9;
  auto x = digit_blocks(13);
  // x * 127 / 16 * 256 on halves and on multiples of 128 (the digit boundary), and the extremes.
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(128 + i)] = (static_cast<float>(i) - 16.0f) * 16.0f / 127.0f / 256.0f * 128.5f;
  x[128 + 31] = 16.0f;
  std::vector<int16_t> want(static_cast<size_t>(cols));
  std::vector<float> want_scales(static_cast<size_t>(cols / 32));
  quantize_activation_a16(x.data(), cols, want.data(), want_scales.data());
  for (const cpu::KernelTable* t : tables_to_test()) {
    SCOPED_TRACE(t->name);
    std::vector<int8_t> d(static_cast<size_t>(2 * cols), 1);
    std::vector<float> sc(static_cast<size_t>(cols / 32));
    std::vector<int32_t> sums(static_cast<size_t>(3 * cols / 32));
    t->make_a16(x.data(), cols, d.data(), sc.data(), sums.data());
    for (int64_t b = 0; b < cols / 32; ++b) {
      EXPECT_EQ(std::bit_cast<uint32_t>(sc[static_cast<size_t>(b)]), std::bit_cast<uint32_t>(want_scales[static_cast<size_t>(b)])) << "block " << b;
      int32_t sum = 0, sum_hi = 0, sum_lo = 0;
      for (int64_t k = b * 32; k < b * 32 + 32; ++k) {
        const int hi = d[static_cast<size_t>(k)], lo = d[static_cast<size_t>(cols + k)];
        EXPECT_LE(std::abs(hi), 127) << "element " << k;
        EXPECT_EQ(hi * 256 + lo, want[static_cast<size_t>(k)]) << "element " << k;
        sum += want[static_cast<size_t>(k)];
        sum_hi += hi;
        sum_lo += lo;
      }
      EXPECT_EQ(sums[static_cast<size_t>(3 * b)], sum) << "block " << b;
      EXPECT_EQ(sums[static_cast<size_t>(3 * b + 1)], -8 * sum_hi) << "block " << b;
      EXPECT_EQ(sums[static_cast<size_t>(3 * b + 2)], -8 * sum_lo) << "block " << b;
    }
  }
}

TEST(CpuOps, EveryTableQuantizesActivationsAlike) {
  // The A8 schemes' int8 rows: the same values on every table as in the portable code, with
  // halves (rounded away from zero), a width that is not a multiple of any vector, zero and
  // non-finite rows.
  std::mt19937 rng(12);
  const int n = 4;
  const int64_t cols = 16 * 5 + 7, stride = (cols + 3) / 4 * 4;
  auto x = random_vector(rng, static_cast<size_t>(n * cols), 3.0f);
  for (int64_t i = 0; i < cols; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i % 255 - 127) * 0.5f;  // x * inv on halves
  for (int64_t i = 0; i < cols; ++i) x[static_cast<size_t>(cols + i)] = 0.0f;
  x[static_cast<size_t>(2 * cols + 90)] = std::numeric_limits<float>::infinity();
  auto quantize = [&](const cpu::KernelTable& t) {
    std::vector<int8_t> q(static_cast<size_t>(n * stride), 1);
    std::vector<float> sc(n);
    std::vector<int32_t> sums(static_cast<size_t>(n * (cols / 29)));
    t.quantize_rows(x.data(), cols, n, cols, 29, q.data(), stride, sc.data(), sums.data());
    std::vector<uint32_t> bits;
    for (float f : sc) bits.push_back(std::bit_cast<uint32_t>(f));
    return std::make_tuple(q, bits, sums);
  };
  const auto want = quantize(cpu::generic_kernels());
  for (const cpu::KernelTable* t : tables_to_test()) EXPECT_TRUE(quantize(*t) == want) << t->name;
}

struct AttnCase {
  int n_heads, n_kv, hd, n_tokens, first_pos, window;
  float softcap = 0.0f;  // Gemma 2's cap of the scaled scores
};

TEST(CpuOps, AttentionMatchesReference) {
  std::mt19937 rng(11);
  const std::vector<AttnCase> cases = {
      {1, 1, 8, 1, 0, 0},     {4, 4, 16, 1, 9, 0},   {8, 2, 64, 1, 300, 0},  {32, 4, 64, 1, 70, 0},
      {8, 2, 64, 7, 0, 0},    {8, 4, 8, 33, 5, 0},    {6, 3, 32, 16, 40, 0},  {8, 2, 64, 5, 100, 16},
      {4, 1, 128, 64, 0, 0},  {32, 4, 64, 17, 3, 0},  {2, 2, 2, 3, 1, 2},   {10, 2, 48, 20, 7, 0}, {16, 2, 80, 9, 30, 24},
      // The many-query path over several blocks of the widest table (64 keys): unaligned starts,
      // a window across blocks, an odd head size.
      {8, 2, 64, 40, 100, 0}, {16, 2, 80, 20, 130, 70}, {12, 4, 48, 24, 150, 0}, {8, 8, 64, 130, 0, 0},
      {32, 4, 64, 70, 10, 0},  // 560 queries per KV head: two chunks
      // Soft-capped scores (their spread ~1.5 against caps of 2 and 1) on the few-query and the
      // many-query paths, one with a window.
      {8, 2, 64, 1, 300, 0, 2.0f}, {8, 2, 64, 40, 100, 0, 2.0f}, {16, 2, 80, 20, 130, 70, 1.0f},
  };
  // Over an f32 cache, and an f16 one (the reference reads the same halves, widened exactly).
  for (const bool f16 : {false, true})
  for (const cpu::KernelTable* t : tables())
    for (const AttnCase& c : cases) {
      SCOPED_TRACE(std::string(t->name) + (f16 ? " f16 cache" : " f32 cache") + " heads " + std::to_string(c.n_heads) + "/" + std::to_string(c.n_kv) + " hd " +
                   std::to_string(c.hd) + " tokens " + std::to_string(c.n_tokens) + " at " + std::to_string(c.first_pos));
      const int kv_dim = c.n_kv * c.hd, qd = c.n_heads * c.hd, n_ctx = c.first_pos + c.n_tokens;
      auto k = random_vector(rng, static_cast<size_t>(n_ctx * kv_dim), 1.0f);
      auto v = random_vector(rng, static_cast<size_t>(n_ctx * kv_dim), 1.0f);
      auto q = random_vector(rng, static_cast<size_t>(c.n_tokens * qd), 1.5f);
      std::vector<uint16_t> k16(k.size()), v16(v.size());
      for (size_t i = 0; i < k.size(); ++i) {
        k16[i] = f32_to_f16(k[i]);
        v16[i] = f32_to_f16(v[i]);
      }
      std::vector<float> want(q.size()), got(q.size(), NAN), uncapped(q.size()), scores(static_cast<size_t>(n_ctx));
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
      const int group = c.n_heads / c.n_kv;
      for (int tk = 0; tk < c.n_tokens; ++tk) {
        const int pos = c.first_pos + tk, first = (c.window > 0 && pos >= c.window) ? pos - c.window + 1 : 0;
        for (int h = 0; h < c.n_heads; ++h) {
          float* out = want.data() + tk * qd + h * c.hd;
          const float* qh = q.data() + tk * qd + h * c.hd;
          const int64_t off = (h / group) * c.hd;
          for (float cap : {c.softcap, 0.0f}) {
            float* o = cap == c.softcap ? out : uncapped.data() + tk * qd + h * c.hd;
            if (f16) ref::attend(o, qh, k16.data() + off, v16.data() + off, first, pos, kv_dim, c.hd, scale, scores.data(), cap);
            else ref::attend(o, qh, k.data() + off, v.data() + off, first, pos, kv_dim, c.hd, scale, scores.data(), cap);
          }
        }
      }
      if (c.softcap > 0.0f) {  // the cap matters at these sizes, so the comparison below tests it
        float moved = 0.0f;
        for (size_t i = 0; i < want.size(); ++i) moved = std::max(moved, std::fabs(want[i] - uncapped[i]));
        EXPECT_GT(moved, 1e-2f);
      }
      cpu::AttentionArgs a;
      a.q = q.data();
      a.out = got.data();
      a.k = f16 ? static_cast<const void*>(k16.data()) : k.data();
      a.v = f16 ? static_cast<const void*>(v16.data()) : v.data();
      a.kv_f16 = f16;
      a.n_tokens = c.n_tokens;
      a.first_pos = c.first_pos;
      a.n_heads = c.n_heads;
      a.n_kv_heads = c.n_kv;
      a.head_dim = c.hd;
      a.window = c.window;
      a.scale = scale;
      a.softcap = c.softcap;
      // Query heads split in two slices per kv head where there are two, as threads do.
      for (int kvh = 0; kvh < c.n_kv; ++kvh) {
        const int mid = kvh * group + (group + 1) / 2;
        t->attention(a, kvh, kvh * group, mid);
        if (mid < (kvh + 1) * group) t->attention(a, kvh, mid, (kvh + 1) * group);
      }
      for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-5) << "element " << i;
    }
}

// A query's output does not depend on the other queries of the call: each token of a step, alone
// at its position with the cache up to it, and each head, alone or with the heads a thread's
// slice gives it, gets the same bits. (Decoding reads the rows of K, a prefill a transposed
// block: a token decoded after a prompt split anywhere, or in a batched step, must be the token
// of the whole prompt.) Every table, both caches, a window, head counts that make the few-query
// path take several vectors of queries.
TEST(CpuOps, AttentionOfAQueryIsTheSameInAnyStep) {
  std::mt19937 rng(21);
  const std::vector<AttnCase> cases = {
      {32, 4, 64, 47, 0, 0}, {8, 2, 64, 20, 70, 0}, {8, 4, 8, 21, 0, 0}, {16, 2, 80, 9, 130, 24},
      {12, 4, 48, 30, 3, 0}, {2, 2, 2, 5, 1, 2},    {15, 1, 32, 3, 60, 0}, {8, 2, 64, 70, 100, 90},
  };
  for (const bool f16 : {false, true})
    for (const cpu::KernelTable* t : tables())
      for (const AttnCase& c : cases) {
        SCOPED_TRACE(std::string(t->name) + (f16 ? " f16 cache" : " f32 cache") + " heads " + std::to_string(c.n_heads) + "/" +
                     std::to_string(c.n_kv) + " hd " + std::to_string(c.hd) + " tokens " + std::to_string(c.n_tokens) + " at " +
                     std::to_string(c.first_pos) + " window " + std::to_string(c.window));
        const int kv_dim = c.n_kv * c.hd, qd = c.n_heads * c.hd, n_ctx = c.first_pos + c.n_tokens;
        const auto k = random_vector(rng, static_cast<size_t>(n_ctx * kv_dim), 1.0f);
        const auto v = random_vector(rng, static_cast<size_t>(n_ctx * kv_dim), 1.0f);
        const auto q = random_vector(rng, static_cast<size_t>(c.n_tokens * qd), 1.5f);
        std::vector<uint16_t> k16(k.size()), v16(v.size());
        for (size_t i = 0; i < k.size(); ++i) k16[i] = f32_to_f16(k[i]), v16[i] = f32_to_f16(v[i]);
        const int group = c.n_heads / c.n_kv;
        // Tokens [t0, t0 + n) in one call per slice of `slices` per kv head, into out.
        auto run = [&](int t0, int n, int slices, std::vector<float>& out) {
          cpu::AttentionArgs a;
          a.q = q.data() + t0 * qd;
          a.out = out.data() + t0 * qd;
          a.k = f16 ? static_cast<const void*>(k16.data()) : k.data();
          a.v = f16 ? static_cast<const void*>(v16.data()) : v.data();
          a.kv_f16 = f16;
          a.n_tokens = n;
          a.first_pos = c.first_pos + t0;
          a.n_heads = c.n_heads;
          a.n_kv_heads = c.n_kv;
          a.head_dim = c.hd;
          a.window = c.window;
          a.scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
          const int per = (group + slices - 1) / slices;
          for (int kvh = 0; kvh < c.n_kv; ++kvh)
            for (int h0 = kvh * group; h0 < (kvh + 1) * group; h0 += per)
              t->attention(a, kvh, h0, std::min(h0 + per, (kvh + 1) * group));
        };
        std::vector<float> whole(q.size(), NAN);
        run(0, c.n_tokens, 1, whole);
        for (int slices : {1, 2, group}) {
          std::vector<float> alone(q.size(), NAN), split(q.size(), NAN);
          for (int tk = 0; tk < c.n_tokens; ++tk) run(tk, 1, slices, alone);
          const int cut = c.n_tokens * 2 / 3;  // a prompt in two steps
          run(0, cut, slices, split);
          run(cut, c.n_tokens - cut, slices, split);
          for (size_t i = 0; i < whole.size(); ++i) {
            ASSERT_EQ(std::bit_cast<uint32_t>(alone[i]), std::bit_cast<uint32_t>(whole[i]))
                << "token " << i / qd << " element " << i % qd << " alone, " << slices << " slices: " << alone[i] << " vs " << whole[i];
            ASSERT_EQ(std::bit_cast<uint32_t>(split[i]), std::bit_cast<uint32_t>(whole[i]))
                << "token " << i / qd << " element " << i % qd << " split at " << cut << ", " << slices << " slices";
          }
        }
      }
}

// ---- layouts in the compiled program ----

CompileOptions options(const std::string& scheme, uint64_t features = ~0ull) {
  CompileOptions o;
  o.require_tokenizer = false;
  auto q = overrides_from_flags(scheme, 32, true, true);
  EXPECT_TRUE(q);
  o.quant = *q;
  o.cpu_features = features;
  return o;
}

TEST(CpuLayouts, CompilerPacksForTheCpuBackEnd) {
  auto imp = import_model(test::shipped_model());
  CompileReport r;
  auto img = compile_model(*imp, options("w4a16"), &r);
  ASSERT_TRUE(img) << img.status().message();
  EXPECT_EQ(r.partition.nodes["cpu"], static_cast<int>(img->program.graph.nodes.size()));
  const Graph& g = img->program.graph;
  for (const WeightDesc& w : g.weights) {
    // The tied embedding is read by the embedding and the classifier: one copy, packed.
    EXPECT_EQ(w.name.find('@'), std::string::npos) << w.name;
    if (w.shape.size() == 2) EXPECT_EQ(w.layout, w.scheme == Scheme::kW8A16 ? "r16k4" : "r16") << w.name << " " << scheme_name(w.scheme);
    else EXPECT_EQ(w.layout, "rowmajor") << w.name;
  }
}

TEST(CpuLayouts, UnknownLayoutRefused) {
  auto imp = import_model(test::shipped_model());
  auto img = compile_model(*imp, options("w8a16"), nullptr);
  ASSERT_TRUE(img);
  for (WeightDesc& w : img->program.graph.weights)
    if (w.name == "blk.2.ffn_up.weight") w.layout = "r32";
  auto m = Model::create(std::move(img).value());
  ASSERT_FALSE(m);
  EXPECT_NE(m.status().message().find("layout 'r32'"), std::string::npos) << m.status().message();
}

// A back end that reads matmul weights only in its own layout "test.rows" (the reference bytes
// under another name), so that a tied embedding read by the cpu back end's embed must be stored
// twice.
class OwnLayoutBackend final : public Backend {
 public:
  std::string_view name() const override { return "own-layout"; }
  bool supports(const Node& n, const Graph& g) const override {
    return n.op == OpCode::kMatMul && g.weights[static_cast<size_t>(n.weights[0])].name == "token_embd.weight";
  }
  Result<std::string> layout_for(const Node&, const Graph&, const WeightDesc&) const override { return std::string("test.rows"); }
  bool reads_layout(const Node&, const WeightDesc&, std::string_view l) const override { return l == "test.rows"; }
  std::optional<uint64_t> layout_bytes(const WeightDesc& w) const override {
    WeightDesc r = w;
    r.layout = "rowmajor";
    return reference_bytes(r);
  }
  Status pack(const WeightDesc&, std::span<const uint8_t> ref, std::vector<uint8_t>& out) const override {
    out.assign(ref.begin(), ref.end());
    return Status::ok();
  }
  Result<std::unique_ptr<Kernel>> prepare(const Node& n, const Graph& g, std::span<const BoundWeight> w,
                                          std::span<const int64_t> offsets, int max_tokens) const override {
    Graph copy = g;
    std::vector<BoundWeight> bound(w.begin(), w.end());
    descs_.clear();
    for (BoundWeight& b : bound) {
      descs_.push_back(std::make_unique<WeightDesc>(*b.desc));
      descs_.back()->layout = "rowmajor";
      b.desc = descs_.back().get();
    }
    return ref_.prepare(n, copy, bound, offsets, max_tokens);
  }
  size_t scratch_bytes(const Graph& g, int t, int c) const override { return ref_.scratch_bytes(g, t, c); }

 private:
  RefBackend ref_;
  mutable std::vector<std::unique_ptr<WeightDesc>> descs_;
};

TEST(CpuLayouts, WeightReadInTwoLayoutsIsStoredTwice) {
  OwnLayoutBackend own;
  CpuBackend cpu;
  CompileOptions o = options("f32");
  o.backends = {&own, &cpu};
  auto imp = import_model(test::shipped_model());
  CompileReport r;
  auto img = compile_model(*imp, o, &r);
  ASSERT_TRUE(img) << img.status().message();
  EXPECT_EQ(r.partition.nodes["own-layout"], 1);
  // One copy keeps the name, the other is NAME@LAYOUT; between them, both layouts.
  std::vector<std::string> layouts;
  for (const WeightDesc& w : img->program.graph.weights)
    if (w.name.rfind("token_embd.weight", 0) == 0) layouts.push_back(w.layout);
  std::sort(layouts.begin(), layouts.end());
  EXPECT_EQ(layouts, (std::vector<std::string>{"rowmajor", "test.rows"}));
  EXPECT_GE(img->program.graph.find_weight("token_embd.weight@rowmajor"), 0);
  const Backend* extra[] = {&own};
  auto m = Model::create(std::move(img).value(), extra);
  ASSERT_TRUE(m) << m.status().message();
  auto s = Session::create(*m, 0);
  ASSERT_TRUE(s);
  auto l = (*s)->decode(std::vector<int>{1, 403, 407});
  ASSERT_TRUE(l);
}

// ---- the whole model ----

std::shared_ptr<const Model> compiled(const std::string& scheme, uint64_t features) {
  auto imp = import_model(test::shipped_model());
  auto img = compile_model(*imp, options(scheme, features), nullptr);
  EXPECT_TRUE(img) << img.status().message();
  auto m = Model::create(std::move(img).value());
  EXPECT_TRUE(m) << m.status().message();
  return *m;
}

std::vector<float> logits_of(std::shared_ptr<const Model> m, int threads, size_t chunk,
                             DType kv = DType::kF32) {
  const std::vector<int> tokens = {1, 403, 407, 261, 378, 429, 271, 280, 300, 416, 259, 73, 89, 115, 17, 450, 3, 99};
  auto s = Session::create(m, 0, threads, kv);
  EXPECT_TRUE(s);
  std::vector<float> all;
  for (size_t i = 0; i < tokens.size(); i += chunk) {
    const size_t n = std::min(chunk, tokens.size() - i);
    auto l = (*s)->decode_all(std::span<const int>(tokens).subspan(i, n));
    EXPECT_TRUE(l);
    all.insert(all.end(), l->begin(), l->end());
  }
  return all;
}

TEST(CpuModel, SameLogitsAtEveryThreadCount) {
  for (const char* scheme : {"w4a16", "w8a8", "f16"}) {
    auto m = compiled(scheme, ~0ull);
    for (size_t chunk : {size_t{1}, size_t{7}, size_t{18}}) {  // 18: the matrix-unit prefill too
      const auto one = logits_of(m, 1, chunk);
      for (int threads : {2, 3, 4, 8}) EXPECT_EQ(logits_of(m, threads, chunk), one) << scheme << " threads " << threads;
    }
  }
}

// An f16 KV cache: the CPU back end computes what the reference back end computes over its own
// halves, the same bits at every thread count, and logits near the f32 cache's. The two back ends
// round keys and values that differ in summation order (~1e-7), so a value near the midpoint of
// two halves may round one way here and the other there: one half's ulp (2^-11) on a few
// elements, ~5e-5 of the largest logit here (with an f32 cache the back ends agree to 2e-6).
// Against the f32 cache every key and value of the five layers carries its rounding: 3.4e-3.
TEST(CpuModel, F16KvCache) {
  RefBackend ref;
  CompileOptions o = options("f32");
  o.backends = {&ref};
  auto imp = import_model(test::shipped_model());
  auto img = compile_model(*imp, o, nullptr);
  ASSERT_TRUE(img) << img.status().message();
  const Backend* only_ref[] = {&ref};
  auto on_ref = Model::create(std::move(img).value(), only_ref);
  ASSERT_TRUE(on_ref) << on_ref.status().message();
  auto on_cpu = compiled("f32", ~0ull);
  const size_t v = static_cast<size_t>(on_cpu->config().vocab_size);
  for (size_t chunk : {size_t{1}, size_t{18}}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    const auto want = logits_of(*on_ref, 1, chunk, DType::kF16);
    const auto got = logits_of(on_cpu, 1, chunk, DType::kF16);
    const auto f32 = logits_of(on_cpu, 1, chunk, DType::kF32);
    ASSERT_EQ(got.size(), want.size());
    ASSERT_EQ(got.size(), f32.size());
    for (size_t i = 0; i < got.size(); i += v) {
      EXPECT_LT(test::relative_error(got.data() + i, want.data() + i, v), 1e-4) << "token " << i / v;
      EXPECT_LT(test::relative_error(got.data() + i, f32.data() + i, v), 1e-2) << "token " << i / v;
      auto argmax = [&](const std::vector<float>& l) { return std::max_element(l.begin() + i, l.begin() + i + v) - l.begin(); };
      EXPECT_EQ(argmax(got), argmax(f32)) << "token " << i / v;
    }
    EXPECT_NE(got, f32);  // the cache did round
    for (int threads : {2, 4}) EXPECT_EQ(logits_of(on_cpu, threads, chunk, DType::kF16), got) << "threads " << threads;
  }
  auto s16 = Session::create(on_cpu, 64, 1, DType::kF16);
  auto s32 = Session::create(on_cpu, 64, 1, DType::kF32);
  ASSERT_TRUE(s16 && s32);
  EXPECT_EQ((*s16)->kv_cache_bytes() * 2, (*s32)->kv_cache_bytes());
  EXPECT_EQ((*s16)->kv_cache_bytes(), 2u * 64u * static_cast<size_t>(on_cpu->config().n_layers * on_cpu->config().kv_dim()) * 2u);
  auto bad = Session::create(on_cpu, 64, 1, DType::kBF16);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("f32 or f16"), std::string::npos);
}

// A step longer than the tail's kLogitRows: decode() gets the last token's logits from row 0 of
// the tail's values, those of the same tokens run in the steps decode_all() may take.
TEST(CpuModel, LongStepLastLogitsFromTheTail) {
  auto m = compiled("w4a16", ~0ull);
  ASSERT_GT(m->program().plan.max_tokens, m->program().plan.logit_rows);
  std::vector<int> tokens;
  for (int i = 0; i < m->program().plan.logit_rows + 9; ++i) tokens.push_back(3 + (i * 37) % 500);
  auto one = Session::create(m, 0, 2);
  ASSERT_TRUE(one);
  auto last = (*one)->decode(tokens);
  ASSERT_TRUE(last) << last.status().message();
  EXPECT_FALSE((*one)->decode_all(tokens));  // more than max_logit_rows()
  auto all = Session::create(m, 0, 2);
  ASSERT_TRUE(all);
  const auto rows = static_cast<size_t>((*all)->max_logit_rows());
  const size_t v = static_cast<size_t>(m->config().vocab_size);
  std::vector<float> tail;
  for (size_t i = 0; i < tokens.size(); i += rows) {
    const size_t n = std::min(rows, tokens.size() - i);
    auto l = (*all)->decode_all(std::span<const int>(tokens).subspan(i, n));
    ASSERT_TRUE(l) << l.status().message();
    tail.assign(l->end() - static_cast<std::ptrdiff_t>(v), l->end());
  }
  // Not the same bits: one step against two, and the classifier on one row (the decode kernel)
  // against several (the prefill kernel) order their sums differently; a wrong row would be off
  // by whole units.
  ASSERT_EQ(last->size(), tail.size());
  float worst = 0;
  for (size_t i = 0; i < tail.size(); ++i) worst = std::max(worst, std::fabs((*last)[i] - tail[i]));
  EXPECT_LT(worst, 1e-4f);
}

TEST(CpuModel, DecodeAllocatesNothing) {
  for (const char* scheme : {"w4a16", "w4a8"}) {
    auto s = Session::create(compiled(scheme, ~0ull), 256, 2);
    ASSERT_TRUE(s);
    const std::vector<int> prompt = {1, 403, 407, 261, 378};
    ASSERT_TRUE((*s)->decode(prompt));  // warm
    const uint64_t before = test::allocation_count();
    for (int i = 0; i < 100; ++i) {
      const int tok = 3 + i % 500;
      ASSERT_TRUE((*s)->decode(std::span<const int>(&tok, 1)));
    }
    ASSERT_TRUE((*s)->decode(prompt));  // a prefill step too
    EXPECT_EQ(test::allocation_count(), before) << scheme;
  }
}

// The targets this machine can run.
std::vector<std::string> runnable_targets() {
  std::vector<std::string> out = {"generic", "auto"};
  for (const char* t : {"x86-avx2", "x86-avx512", "x86-amx", "arm64-dotprod", "arm64-i8mm"}) {
    auto r = resolve_target(t);
    if (r && (r->cpu_features & ~host_cpu_features()) == 0) out.push_back(t);
  }
  return out;
}

TEST(CpuModel, TargetsRecordTheirKernelsFeatures) {
  auto g = resolve_target("generic");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->cpu_features, 0u);
  auto n = resolve_target("native");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->cpu_features, cpu_kernel_features(host_cpu_features()));
  EXPECT_EQ(n->cpu_features & ~host_cpu_features(), 0u);
  auto a = resolve_target("arm64-dotprod");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->cpu_features, kCpuNeon | kCpuDotprod);
  auto i8 = resolve_target("arm64-i8mm");
  ASSERT_TRUE(i8);
  EXPECT_EQ(i8->cpu_features, kCpuNeon | kCpuDotprod | kCpuI8mm);
  // Every table of this build records what its own fill_ function says it uses.
  for (const cpu::KernelTable* t : tables()) EXPECT_EQ(cpu_kernel_features(t->features), t->features) << t->name;
  EXPECT_FALSE(resolve_target("x86-sse2"));
  // The default: what the file needs (nothing, for the cpu back end's layouts), and the best
  // table of whichever machine opens it.
  auto best = resolve_target("auto");
  ASSERT_TRUE(best);
  EXPECT_EQ(best->cpu_features, kCpuBestTable);
  EXPECT_EQ(best->cpu_feature_names, "best");
  EXPECT_EQ(cpu_features_for(best->cpu_features), host_cpu_features());
  EXPECT_EQ(cpu_features_for(n->cpu_features), n->cpu_features);
}

// A file of the default target runs on every table this machine has, each capped by KILN_CPU
// as a user would, with the golden text; `inspect` says what it needs and what runs here. A
// name kiln does not know, or a table this machine cannot run, is one line and exit 1.
TEST(CpuModel, DefaultTargetRunsOnEveryTableAndKilnCpuCapsIt) {
  const std::string golden = test::read_file(test::data_path("golden/stories260K_greedy200.txt"));
  const std::string path = test::temp_dir() + "/auto_target.kiln";
  auto c = test::run_kiln("compile " + test::shell_quote(test::shipped_model()) + " -q f32 -o " + test::shell_quote(path));
  ASSERT_EQ(c.exit_code, 0) << c.err;
  auto ins = test::run_kiln("inspect " + test::shell_quote(path));
  ASSERT_EQ(ins.exit_code, 0) << ins.err;
  EXPECT_NE(ins.out.find("needs: nothing beyond the architecture; runs the best kernels of the machine that opens it"),
            std::string::npos) << ins.out;
  EXPECT_NE(ins.out.find(std::string("kernels here: cpu: ") + cpu::select_kernels(host_cpu_features()).name),
            std::string::npos) << ins.out;
  const char* saved = std::getenv("KILN_CPU");
  const std::string keep = saved ? saved : "";
  int ran = 0;
  for (const CpuCap& cap : kCpuCaps) {
    setenv("KILN_CPU", cap.name, 1);
    auto r = test::run_kiln("run " + test::shell_quote(path) + " --temp 0 -n 200");
    if ((cap.features & ~host_cpu().enabled) != 0) {
      EXPECT_EQ(r.exit_code, 1) << cap.name;
      EXPECT_NE(r.err.find(std::string("kiln: error: KILN_CPU=") + cap.name + ": this machine cannot run that table ("),
                std::string::npos) << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
      continue;
    }
    ASSERT_EQ(r.exit_code, 0) << cap.name << ": " << r.err;
    EXPECT_EQ(r.out.substr(0, golden.size()), golden) << cap.name;
    auto b = test::run_kiln("bench " + test::shell_quote(path) + " -p 0 -n 2 -r 1 --bw-mib 8 --bw-passes 1");
    ASSERT_EQ(b.exit_code, 0) << cap.name << ": " << b.err;
    EXPECT_NE(b.out.find(std::string("kernels  cpu: ") + cpu::kernel_table_name(cap.features)), std::string::npos)
        << cap.name << ": " << b.out;
    ++ran;
  }
  setenv("KILN_CPU", "sse9", 1);
  auto bad = test::run_kiln("run " + test::shell_quote(path) + " -n 1");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.err, "kiln: error: KILN_CPU=sse9 is not a kernel table (portable, generic, avx2, avx512, amx, neon, "
                     "dotprod, i8mm)\n");
  if (saved) setenv("KILN_CPU", keep.c_str(), 1);
  else unsetenv("KILN_CPU");
  EXPECT_GE(ran, 2);  // portable, generic and this machine's own at least
}

TEST(CpuModel, GreedyTextIsTheGoldenOnEveryTarget) {
  const std::string golden = test::read_file(test::data_path("golden/stories260K_greedy200.txt"));
  auto imp = import_model(test::shipped_model());
  for (const std::string& target : runnable_targets())
    for (const char* scheme : {"f32", "w8a16"}) {
      CompileReport r;
      auto img = compile_model(*imp, options(scheme), &r);
      ASSERT_TRUE(img);
      auto t = resolve_target(target);
      ASSERT_TRUE(t);
      const std::string path = test::temp_dir() + "/golden_" + target + "_" + scheme + ".kiln";
      ASSERT_TRUE(write_kiln(*img, *t, r, path));
      for (int threads : {1, 2}) {
        auto run = test::run_kiln("run " + test::shell_quote(path) + " --temp 0 -n 200 --threads " + std::to_string(threads));
        ASSERT_EQ(run.exit_code, 0) << run.err;
        EXPECT_EQ(run.out.substr(0, golden.size()), golden) << target << " " << scheme << " threads " << threads;
      }
    }
  std::printf("golden text on targets:");
  for (const auto& t : runnable_targets()) std::printf(" %s", t.c_str());
  std::printf("\n");
}

TEST(CpuModel, FileForMissingFeaturesRefused) {
  // A target for another architecture can be compiled here but not opened.
  auto imp = import_model(test::shipped_model());
  CompileReport r;
  auto img = compile_model(*imp, options("w4a16"), &r);
  ASSERT_TRUE(img);
#if defined(__x86_64__)
  auto t = resolve_target("arm64-dotprod");
#else
  auto t = resolve_target("x86-avx512");
#endif
  ASSERT_TRUE(t);
  const std::string path = test::temp_dir() + "/other_arch.kiln";
  ASSERT_TRUE(write_kiln(*img, *t, r, path));
  auto k = open_kiln_image(path, false);
  ASSERT_FALSE(k);
  EXPECT_NE(k.status().message().find("kiln compile --target native"), std::string::npos) << k.status().message();
  // inspect still reads it, and says why it cannot run here.
  auto ins = test::run_kiln("inspect " + test::shell_quote(path));
  ASSERT_EQ(ins.exit_code, 0) << ins.err;
  EXPECT_NE(ins.out.find("kernels here: none: this machine lacks"), std::string::npos) << ins.out;
}

// W4A16 prefill on 16-bit products widens tiles into scratch of each thread's own, planned with
// the session: a scratch planned for one thread is refused (a Status naming the bytes) when the
// step runs on two, and one planned for two gives the bits of the one-thread run.
TEST(CpuBackend, PerThreadScratchIsPlannedAndChecked) {
  const cpu::KernelTable& t = cpu::select_kernels(host_cpu_features());
  const QuantParams p = canonical({Scheme::kW4A16, 32, true});
  const int T = 32;
  const int64_t rows = 64, cols = 256;
  if (cpu::matmul_work_bytes(t, p, cols, T) == 0) GTEST_SKIP() << t.name << " widens no tiles";
  std::mt19937 rng(7);
  const auto w = random_vector(rng, static_cast<size_t>(rows * cols), 0.5f);
  std::vector<uint8_t> ref, packed;
  ASSERT_TRUE(quantize_and_pack(p, w, rows, cols, ref, packed));
  Graph g;
  g.add_value("x", cols);
  g.add_value("y", rows);
  WeightDesc wd;
  wd.name = "blk.0.ffn_down.weight";
  wd.shape = {rows, cols};
  wd.scheme = Scheme::kW4A16;
  wd.group_size = 32;
  wd.layout = std::string(cpu::matmul_layout(Scheme::kW4A16));
  g.add_weight(wd);
  Node n;
  n.op = OpCode::kMatMul;
  n.inputs = {0};
  n.outputs = {1};
  n.weights = {0};
  g.nodes.push_back(n);
  const BoundWeight bw{&g.weights[0], packed};
  const std::vector<int64_t> offsets = {0, int64_t{T} * cols * 4};
  CpuBackend cpu;
  auto k = cpu.prepare(n, g, {&bw, 1}, offsets, T, PrepareOptions{host_cpu_features()});
  ASSERT_TRUE(k) << k.status().message();
  const auto x = random_vector(rng, static_cast<size_t>(T * cols), 1.0f);
  ModelConstants constants;
  ThreadPool pool(2);
  auto run = [&](size_t scratch_bytes, ThreadPool* on, std::vector<float>& y) {
    std::vector<float> arena(static_cast<size_t>(T * (cols + rows)));
    std::memcpy(arena.data(), x.data(), x.size() * 4);
    std::vector<uint8_t> scratch(scratch_bytes + 64);
    StepContext ctx;
    ctx.arena = reinterpret_cast<uint8_t*>(arena.data());
    ctx.n_tokens = T;
    ctx.n_ctx = 16;
    ctx.model = &constants;
    ctx.scratch = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
    ctx.scratch_size = scratch_bytes;
    ctx.pool = on;
    Status st = (*k)->run(ctx);
    y.assign(arena.begin() + T * cols, arena.end());
    return st;
  };
  const size_t one = cpu.session_scratch_bytes(g, T, 16, 1), two = cpu.session_scratch_bytes(g, T, 16, 2);
  EXPECT_EQ(cpu.scratch_bytes(g, T, 16), one);
  EXPECT_GE(two - one, static_cast<size_t>(cpu::matmul_work_bytes(t, p, cols, T)));
  std::vector<float> want, got;
  ASSERT_TRUE(run(one, nullptr, want));
  const Status refused = run(one, &pool, got);
  EXPECT_EQ(refused.code(), StatusCode::kInternal);
  EXPECT_NE(refused.message().find("not planned for this node on 2 threads"), std::string::npos) << refused.message();
  ASSERT_TRUE(run(two, &pool, got));
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i])) << i;
}

}  // namespace
}  // namespace kiln
