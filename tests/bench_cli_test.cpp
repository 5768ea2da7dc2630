// kiln bench on the shipped model: the JSON keys tools and tables rely on, with sane values; the
// bandwidth probe; the cold-start mode.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "perf/bandwidth.h"
#include "perf/compute_probe.h"
#include "test_util.h"

namespace kiln {
namespace {

using nlohmann::json;

TEST(BenchCli, JsonHasTheRooflineKeys) {
  // A small probe buffer keeps the test quick; the default is max(1 GiB, 4 x LLC).
  auto r = test::run_kiln("bench " + test::shell_quote(test::shipped_model()) +
                          " -q w4a16 -p 16 -n 8 -r 2 --json --threads 1 --bw-mib 64 --bw-passes 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  ASSERT_TRUE(j.is_object());
  for (const char* k : {"pp_tps", "tg_tps", "bandwidth_gbs", "bytes_per_token", "roofline_tps", "roofline_ratio"}) {
    ASSERT_TRUE(j.contains(k)) << k;
    ASSERT_TRUE(j[k].is_number()) << k;
    EXPECT_GT(j[k].get<double>(), 0.0) << k;
  }
  EXPECT_EQ(j["threads"], 1);
  EXPECT_EQ(j["kv_type"], "f32");
  EXPECT_EQ(j["scheme"], "w4a16");
  EXPECT_EQ(j["group"], 32);
  EXPECT_EQ(j["n_gen"], 8);
  EXPECT_EQ(j["pp"].size(), 1u);
  EXPECT_EQ(j["pp"][0]["n_prompt"], 16);
  EXPECT_EQ(j["tg"]["samples"].size(), 2u);
  // The roofline is what the numbers say it is.
  EXPECT_NEAR(j["roofline_tps"].get<double>(),
              j["bandwidth_gbs"].get<double>() * 1e9 / j["bytes_per_token"].get<double>(),
              1e-6 * j["roofline_tps"].get<double>());
  EXPECT_NEAR(j["roofline_ratio"].get<double>(), j["tg_tps"].get<double>() / j["roofline_tps"].get<double>(), 1e-9);
  EXPECT_GE(j["bytes_per_token"].get<double>(), j["weight_bytes_per_token"].get<double>());
  // The prefill's compute roofline: the products of each scheme at the rate measured for it.
  ASSERT_TRUE(j["prefill_roofline_tps"].is_number()) << j["pp"][0].dump();
  const json& pp = j["pp"][0];
  double seconds_per_token = 0;
  for (const json& p : pp["products"]) {
    EXPECT_EQ(p["backend"], "cpu");
    EXPECT_GT(p["products_per_second"].get<double>(), 0.0);
    seconds_per_token += p["products_per_token"].get<double>() / p["products_per_second"].get<double>();
  }
  ASSERT_GE(pp["products"].size(), 2u);  // w4a16 matrices, f32 attention
  EXPECT_NEAR(j["prefill_roofline_tps"].get<double>(), 1.0 / seconds_per_token, 1e-9 / seconds_per_token);
  EXPECT_NEAR(j["prefill_roofline_ratio"].get<double>(), j["pp_tps"].get<double>() / j["prefill_roofline_tps"].get<double>(), 1e-9);
  EXPECT_GT(j["peak_rss_bytes"].get<double>(), 0.0);
  if (!test::kSanitized) {
    EXPECT_TRUE(j["rss_within_budget"].get<bool>()) << j["peak_rss_bytes"] << " > " << j["rss_budget_bytes"];
  }
  // Issue 37 item 4: the scheme mix, every weight byte in one layout's row, and each layout's
  // matmuls' share of the decode step (one more 8-token run, per-instruction times); with the
  // other ops the shares make the step.
  ASSERT_TRUE(j["scheme_mix"].is_array()) << j.dump();
  double bytes = 0, read = 0, shares = 0, decode_share = 0;
  bool w4 = false;
  for (const json& s : j["scheme_mix"]) {
    bytes += s["weight_bytes"].get<double>();
    read += s["read_per_token"].get<double>();
    shares += s["weight_share"].get<double>();
    ASSERT_TRUE(s["decode_share"].is_number()) << s.dump();
    decode_share += s["decode_share"].get<double>();
    if (s["scheme"] == "w4a16 g32 sym") {
      w4 = true;
      EXPECT_GT(s["weight_share"].get<double>(), 0.3) << s.dump();
      EXPECT_GT(s["decode_share"].get<double>(), 0.0) << s.dump();
      EXPECT_GT(s["decode_gbs"].get<double>(), 0.0) << s.dump();
    }
  }
  EXPECT_TRUE(w4) << j["scheme_mix"].dump();
  EXPECT_EQ(bytes, j["weight_bytes"].get<double>());
  EXPECT_EQ(read, j["weight_bytes_per_token"].get<double>());
  EXPECT_NEAR(shares, 1.0, 1e-9);
  ASSERT_TRUE(j["decode_profile"].is_object()) << j.dump();
  EXPECT_EQ(j["decode_profile"]["tokens"], 8);
  EXPECT_GT(j["decode_profile"]["step_seconds_per_token"].get<double>(), 0.0);
  EXPECT_NEAR(decode_share + j["decode_profile"]["other_share"].get<double>(), 1.0, 1e-6);
}

TEST(BenchCli, TextReportAndBadArguments) {
  auto r = test::run_kiln("bench " + test::shell_quote(test::shipped_model()) +
                          " -p 8,16 -n 4 -r 1 --threads 1 --bw-mib 32 --bw-passes 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Without -q a source runs in its own precision, as kiln run runs it (the llama2.c file: f32).
  for (const char* s : {"scheme   f32", "pp8", "pp16", "tg4", "compute roofline", "bandwidth", "roofline", "peak RSS",
                        "schemes ", "| f32 ", "| other ops "})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  auto too_long = test::run_kiln("bench " + test::shell_quote(test::shipped_model()) + " -p 100000 -n 1 -r 1");
  EXPECT_EQ(too_long.exit_code, 2);
  EXPECT_NE(too_long.err.find("exceeds"), std::string::npos) << too_long.err;
  // An unknown scheme is a usage error (issue 23, row 12).
  EXPECT_EQ(test::run_kiln("bench " + test::shell_quote(test::shipped_model()) + " -q w5a3 -r 1").exit_code, 1);
}

// --kv-type f16: the cache and the bytes a decoded token reads from it are half the f32 ones.
// -d 40: each test starts with 40 tokens in the cache, so decoding's mean context is 40 + 4.5 of
// a cache of 40 + 16 positions.
TEST(BenchCli, F16KvCacheHalvesTheCache) {
  json j[2];
  const char* types[2] = {"f32", "f16"};
  for (int i = 0; i < 2; ++i) {
    auto r = test::run_kiln("bench " + test::shell_quote(test::shipped_model()) +
                            " -p 16 -n 8 -d 40 -r 1 --json --threads 1 --bw-mib 32 --bw-passes 1 --kv-type " + types[i]);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    j[i] = json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j[i].is_discarded()) << r.out;
    EXPECT_EQ(j[i]["kv_type"], types[i]);
    EXPECT_EQ(j[i]["depth"], 40);
    EXPECT_DOUBLE_EQ(j[i]["kv_bytes_per_token"].get<double>(), j[i]["kv_cache_bytes"].get<double>() / 56 * 44.5);
  }
  EXPECT_EQ(j[0]["kv_cache_bytes"].get<uint64_t>(), 2 * j[1]["kv_cache_bytes"].get<uint64_t>());
  EXPECT_DOUBLE_EQ(j[0]["kv_bytes_per_token"].get<double>(), 2 * j[1]["kv_bytes_per_token"].get<double>());
  EXPECT_GT(j[1]["kv_bytes_per_token"].get<double>(), 0.0);
}

TEST(BenchCli, ColdStartReportsFirstTokenTimes) {
  if (const char* e = std::getenv("KILN_TEST_EMULATOR"); e && *e) GTEST_SKIP() << "spawns /proc/self/exe";
  // A private copy: pages that another test process maps (ctest runs two at once) cannot be dropped.
  const std::string dir = test::temp_dir() + "/cold";
  std::filesystem::create_directories(dir);
  const std::string model = dir + "/stories260K.bin";
  std::filesystem::copy_file(test::shipped_model(), model);
  std::filesystem::copy_file(std::filesystem::path(test::shipped_model()).parent_path() / "tok512.bin", dir + "/tok512.bin");
  auto r = test::run_kiln("bench --cold-start " + test::shell_quote(model) + " -q f32 -r 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  for (const char* mode : {"warm", "cold"}) {
    ASSERT_TRUE(j.contains(mode)) << mode;
    const double first = j[mode]["first_token_s"]["median"].get<double>();
    EXPECT_GT(first, 0.0);
    EXPECT_GE(first, j[mode]["open_s"]["median"].get<double>());
  }
  // posix_fadvise emptied the page cache of the model file before each cold run.
  EXPECT_LT(j["cold"]["resident_before_fraction"]["max"].get<double>(), 0.5);
}

TEST(Bandwidth, ProbeMeasuresSomething) {
  BandwidthOptions o;
  o.bytes = 32u << 20;
  o.threads = 2;
  o.passes = 3;
  auto r = measure_read_bandwidth(o);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->pass_gbs.size(), 3u);
  EXPECT_GT(r->median_gbs, 0.1);
  EXPECT_LE(r->min_gbs, r->median_gbs);
  EXPECT_GE(r->max_gbs, r->median_gbs);
  EXPECT_EQ(r->bytes % (64 * 2), 0u);
  o.threads = 0;
  EXPECT_FALSE(measure_read_bandwidth(o));
}

// A prefill of 5 tokens in steps of 2 on a hand-made graph: every count is exact.
TEST(ComputeProbe, CountsThePrefillProducts) {
  Graph g;
  const int tok = g.add_value("tokens", 1), x = g.add_value("x", 32), y = g.add_value("y", 8), o = g.add_value("o", 8);
  const int logits = g.add_value("logits", 10);
  auto weight = [&](const char* name, std::vector<int64_t> shape, Scheme scheme) {
    WeightDesc w;
    w.name = name;
    w.shape = std::move(shape);
    w.scheme = scheme;
    return g.add_weight(w);
  };
  g.nodes = {
      {.op = OpCode::kEmbed, .inputs = {tok}, .outputs = {x}, .weights = {weight("token_embd.weight", {100, 32}, Scheme::kF32)}, .backend = "cpu"},
      {.op = OpCode::kMatMul, .inputs = {x}, .outputs = {y}, .weights = {weight("w", {8, 32}, Scheme::kW4A16), weight("b", {8}, Scheme::kF32)}, .backend = "cpu"},
      {.op = OpCode::kAttention, .inputs = {y}, .outputs = {o}, .n_heads = 2, .head_dim = 4, .backend = "cpu"},
      {.op = OpCode::kMatMul, .inputs = {x}, .outputs = {y}, .weights = {weight("w2", {8, 32}, Scheme::kW4A16)}, .backend = "ref"},
      {.op = OpCode::kMatMul, .inputs = {o}, .outputs = {logits}, .weights = {weight("output.weight", {10, 8}, Scheme::kF16)}, .tail = true, .backend = "cpu"},
  };

  auto c = prefill_products(g, 5, 2, 0);  // steps of 2, 2 and 1 tokens
  ASSERT_TRUE(c) << c.status().message();
  ASSERT_EQ(c->size(), 8u);
  auto products = [](const std::vector<ProductCount>& counts, const char* backend, Scheme s, int step) {
    for (const ProductCount& p : counts)
      if (p.backend == backend && p.scheme == s && p.step == step) return p.products;
    return -1.0;
  };
  EXPECT_EQ(products(*c, "cpu", Scheme::kW4A16, 2), 8 * 32 * 4);
  EXPECT_EQ(products(*c, "cpu", Scheme::kW4A16, 1), 8 * 32 * 1);
  EXPECT_EQ(products(*c, "ref", Scheme::kW4A16, 2), 8 * 32 * 4);
  EXPECT_EQ(products(*c, "ref", Scheme::kW4A16, 1), 8 * 32 * 1);
  // q k and p v up to each position: 1 + 2 + 3 + 4 in the steps of two, 5 in the last.
  EXPECT_EQ(products(*c, "cpu", Scheme::kF32, 2), 2 * 2 * 4 * (1 + 2 + 3 + 4));
  EXPECT_EQ(products(*c, "cpu", Scheme::kF32, 1), 2 * 2 * 4 * 5);
  EXPECT_EQ(products(*c, "cpu", Scheme::kF16, 2), 10 * 8 * 2);  // the tail: the last token of each step
  EXPECT_EQ(products(*c, "cpu", Scheme::kF16, 1), 10 * 8 * 1);
  auto windowed = prefill_products(g, 5, 2, 2);
  ASSERT_TRUE(windowed);
  EXPECT_EQ(products(*windowed, "cpu", Scheme::kF32, 2), 2 * 2 * 4 * (1 + 2 + 2 + 2));
  EXPECT_EQ(products(*windowed, "cpu", Scheme::kF32, 1), 2 * 2 * 4 * 2);
  // After 3 tokens already in the cache: the same matrix products, attention up to positions 4..8.
  auto deep = prefill_products(g, 5, 2, 0, 3);
  ASSERT_TRUE(deep);
  EXPECT_EQ(products(*deep, "cpu", Scheme::kW4A16, 2), 8 * 32 * 4);
  EXPECT_EQ(products(*deep, "cpu", Scheme::kF32, 2), 2 * 2 * 4 * (4 + 5 + 6 + 7));
  EXPECT_EQ(products(*deep, "cpu", Scheme::kF32, 1), 2 * 2 * 4 * 8);
  auto deep_windowed = prefill_products(g, 5, 2, 6, 3);
  ASSERT_TRUE(deep_windowed);
  EXPECT_EQ(products(*deep_windowed, "cpu", Scheme::kF32, 2), 2 * 2 * 4 * (4 + 5 + 6 + 6));
  EXPECT_FALSE(prefill_products(g, 5, 2, 0, -1));
  auto one_step = prefill_products(g, 5, 8, 0);
  ASSERT_TRUE(one_step);
  EXPECT_EQ(one_step->size(), 4u);
  EXPECT_EQ(products(*one_step, "cpu", Scheme::kW4A16, 5), 8 * 32 * 5);

  EXPECT_FALSE(prefill_products(g, 0, 2, 0));
}

// Issue 23 row 21: the peak RSS bench reports for the whole run is the one /usr/bin/time -v
// sees, the bandwidth probe's helper process (its buffer set by --bw-mib) included; kiln's own
// peak stays small.
TEST(BenchCli, RunPeakIsWhatTimeSees) {
  if (!std::filesystem::exists("/usr/bin/time") || test::under_emulator() || test::kSanitized)
    GTEST_SKIP() << "needs /usr/bin/time, natively";
  const std::string base = test::temp_dir() + "/time_bench";
  const std::string cmd = "/usr/bin/time -v " + test::shell_quote(KILN_BINARY) + " bench " +
                          test::shell_quote(test::shipped_model()) +
                          " -p 16 -n 8 -r 2 --json --threads 1 --bw-mib 128 --bw-passes 2 >" + base + ".out 2>" + base + ".err";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << test::read_file(base + ".err");
  const json j = json::parse(test::read_file(base + ".out"), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  const std::string err = test::read_file(base + ".err");
  const std::string key = "Maximum resident set size (kbytes): ";
  const size_t at = err.find(key);
  ASSERT_NE(at, std::string::npos) << err;
  const double seen = std::stod(err.substr(at + key.size())) * 1024;
  const double run_peak = j["run_peak_rss_bytes"].get<double>();
  EXPECT_GE(run_peak, 128.0 * 1024 * 1024);  // the probe's buffer is in it
  EXPECT_NEAR(run_peak, seen, 0.02 * seen);   // kiln's allocations after the JSON is written aside
  EXPECT_LT(j["peak_rss_bytes"].get<double>(), 64.0 * 1024 * 1024);
  auto text = test::run_kiln("bench " + test::shell_quote(test::shipped_model()) +
                             " -p 16 -n 8 -r 2 --threads 1 --bw-mib 128 --bw-passes 2");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("the bandwidth probe's 128.0 MiB buffer included, is "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("(what /usr/bin/time -v reports; --bw-mib sets the buffer): the probe ran in a helper process"),
            std::string::npos) << text.out;
}

}  // namespace
}  // namespace kiln
