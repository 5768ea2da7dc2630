// kiln bench on the shipped model: the JSON keys tools and tables rely on, with sane values; the
// bandwidth probe; the cold-start mode.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "runtime/bandwidth.h"
#include "test_util.h"

namespace kiln {
namespace {

using nlohmann::json;

TEST(BenchCli, JsonHasTheRooflineKeys) {
  // A small probe buffer keeps the test quick; the default is max(1 GiB, 4 x LLC).
  auto r = test::run_kiln("bench " + test::shell_quote(test::shipped_model()) +
                          " -p 16 -n 8 -r 2 --json --threads 1 --bw-mib 64 --bw-passes 3");
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
  EXPECT_GT(j["peak_rss_bytes"].get<double>(), 0.0);
  if (!test::kSanitized) {
    EXPECT_TRUE(j["rss_within_budget"].get<bool>()) << j["peak_rss_bytes"] << " > " << j["rss_budget_bytes"];
  }
}

TEST(BenchCli, TextReportAndBadArguments) {
  auto r = test::run_kiln("bench " + test::shell_quote(test::shipped_model()) +
                          " -p 8,16 -n 4 -r 1 --threads 1 --bw-mib 32 --bw-passes 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* s : {"pp8", "pp16", "tg4", "bandwidth", "roofline", "peak RSS"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  auto too_long = test::run_kiln("bench " + test::shell_quote(test::shipped_model()) + " -p 100000 -n 1 -r 1");
  EXPECT_EQ(too_long.exit_code, 2);
  EXPECT_NE(too_long.err.find("exceeds"), std::string::npos) << too_long.err;
  EXPECT_EQ(test::run_kiln("bench " + test::shell_quote(test::shipped_model()) + " -q w5a3 -r 1").exit_code, 2);
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

}  // namespace
}  // namespace kiln
