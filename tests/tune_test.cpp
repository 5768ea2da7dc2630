// `kiln tune` (engine/precision_tune.h): the choice under a budget against exhaustive search, the
// sweep's scaled KL against the KL measured for every candidate, the tuned file at uniform W4A16
// g32's size against uniform on a text it was not tuned on, and bad input as one line, no file.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/calibration.h"
#include "engine/compile_file.h"
#include "engine/open_model.h"
#include "engine/precision_tune.h"
#include "quant/budget_choice.h"
#include "quant/overrides.h"
#include "test_util.h"

namespace kiln {
namespace {

// The least total loss within `budget` bytes, by trying every assignment.
double brute_force(const std::vector<std::vector<ChoiceOption>>& o, uint64_t fixed, uint64_t budget) {
  double best = INFINITY;
  std::vector<size_t> at(o.size(), 0);
  std::function<void(size_t, uint64_t, double)> go = [&](size_t t, uint64_t bytes, double loss) {
    if (bytes > budget) return;
    if (t == o.size()) {
      best = std::min(best, loss);
      return;
    }
    for (const ChoiceOption& c : o[t]) go(t + 1, bytes + c.bytes, loss + c.loss);
  };
  go(0, fixed, 0);
  return best;
}

TEST(BudgetChoice, OptimalAtEveryPointOfItsFrontAndWithinEveryBudget) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> bytes(10, 200);
  std::uniform_real_distribution<double> loss(0, 1);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<std::vector<ChoiceOption>> o(5);
    uint64_t least = 7, most = 7;
    for (auto& t : o) {
      const int n = 2 + trial % 3;
      uint64_t lo = UINT64_MAX, hi = 0;
      for (int i = 0; i < n; ++i) {
        t.push_back({static_cast<uint64_t>(bytes(rng)), loss(rng)});
        lo = std::min(lo, t.back().bytes), hi = std::max(hi, t.back().bytes);
      }
      least += lo, most += hi;
    }
    // Any budget: within it, and never worse than the best single change from the smallest choice.
    for (uint64_t b = least; b <= most; b += 37) {
      auto c = choose_under_budget(o, 7, {b, std::nullopt});
      ASSERT_TRUE(c) << c.status().message();
      EXPECT_LE(c->bytes, b);
      double sum = 0;
      uint64_t sum_b = 7;
      for (size_t t = 0; t < o.size(); ++t) sum += o[t][static_cast<size_t>(c->pick[t])].loss, sum_b += o[t][static_cast<size_t>(c->pick[t])].bytes;
      EXPECT_NEAR(sum, c->loss, 1e-9);
      EXPECT_EQ(sum_b, c->bytes);
      EXPECT_GE(c->loss, brute_force(o, 7, b) - 1e-9);
    }
    // At the sizes its front passes through, exactly the optimum (every tensor at a vertex of its
    // lower hull: the linear relaxation's answer, integral there).
    auto all = choose_under_budget(o, 7, {most, std::nullopt});
    ASSERT_TRUE(all);
    for (const ChoiceOption& f : all->front) {
      auto c = choose_under_budget(o, 7, {f.bytes, std::nullopt});
      ASSERT_TRUE(c);
      EXPECT_NEAR(c->loss, brute_force(o, 7, f.bytes), 1e-9) << "trial " << trial << " at " << f.bytes << " bytes";
    }
    // A loss target: the walk stops at the first point that meets it.
    const double target = (all->front.front().loss + all->front.back().loss) / 2;
    auto k = choose_under_budget(o, 7, {std::nullopt, target});
    ASSERT_TRUE(k);
    EXPECT_LE(k->loss, target);
  }
}

TEST(BudgetChoice, ImpossibleBudgetsAreErrors) {
  const std::vector<std::vector<ChoiceOption>> o = {{{100, 0.5}, {200, 0.1}}, {{50, 0.2}, {80, 0.0}}};
  auto low = choose_under_budget(o, 10, {159, std::nullopt});
  ASSERT_FALSE(low);
  EXPECT_EQ(low.status().message(), "the budget of 159 bytes is below the smallest choice (160 bytes: every tensor at its smallest scheme)");
  auto kl = choose_under_budget(o, 10, {std::nullopt, 0.05});
  ASSERT_FALSE(kl);
  EXPECT_EQ(kl.status().message(), "a loss of 0.05 cannot be reached: every tensor at its best option gives 0.1");
  EXPECT_FALSE(choose_under_budget(o, 10, {}));
  EXPECT_FALSE(choose_under_budget({{}}, 10, {100, std::nullopt}));
  EXPECT_FALSE(choose_under_budget({{{1, -1.0}}}, 10, {100, std::nullopt}));
  // Exactly the smallest: every tensor at it.
  auto exact = choose_under_budget(o, 10, {160, std::nullopt});
  ASSERT_TRUE(exact);
  EXPECT_EQ(exact->pick, (std::vector<int>{0, 0}));
}

TEST(SweepCandidates, ParsedAsTheCompileNamesThemAndActivationSchemesRefused) {
  auto g = parse_sweep_candidate("w4a16 g64 asym");
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_EQ(g->params, canonical(QuantParams{Scheme::kW4A16, 64, false}));
  auto q8 = parse_sweep_candidate("w8a16 g32");
  ASSERT_TRUE(q8);
  EXPECT_EQ(q8->params, parse_sweep_candidate("q8_0")->params);
  auto a8 = parse_sweep_candidate("w4a8");
  ASSERT_FALSE(a8);
  EXPECT_NE(a8.status().message().find("w4a8 stores the bytes of its a16 twin"), std::string::npos) << a8.status().message();
  EXPECT_FALSE(parse_sweep_candidate("w4a16 g48"));
  EXPECT_FALSE(parse_sweep_candidate("w4a16 fast"));
  EXPECT_FALSE(parse_sweep_candidate("int4"));
  for (const SweepCandidate& c : default_sweep_candidates()) {
    auto again = parse_sweep_candidate(c.label);
    ASSERT_TRUE(again) << c.label;
    EXPECT_EQ(again->params, c.params) << c.label;
  }
}

// Every candidate measured against the cheapest scaled: KL grows as the weighted error for small
// changes, so the scaled values stay near the measured ones. Under an emulator (the ARM64 stage),
// the fewest calibration tokens and four candidates: the same check at a sixth of the runs' cost.
TEST(SensitivitySweep, ScaledKlFollowsTheMeasuredOne) {
  auto imp = import_model(test::shipped_model());
  ASSERT_TRUE(imp);
  CompileRequest rq;
  rq.model = test::shipped_model();
  auto o = compile_options(rq, *imp);
  ASSERT_TRUE(o);
  auto ref = reference_image(*imp, *o);
  ASSERT_TRUE(ref);
  const std::string text = test::read_file(test::data_path("eval/stories260K-samples.txt"));
  auto tokens = calibration_tokens(*ref, text, "samples", test::under_emulator() ? kMinCalibTokens : 128, rq.model);
  ASSERT_TRUE(tokens);
  SweepOptions scaled, exact;
  if (test::under_emulator())
    for (const char* c : {"w4a16 g32", "q5_0", "w8a16", "f16"}) scaled.candidates.push_back(*parse_sweep_candidate(c));
  exact.candidates = scaled.candidates;
  exact.exact = true;
  auto a = sweep_sensitivity(*imp, *o, *ref, *tokens, scaled);
  auto b = sweep_sensitivity(*imp, *o, *ref, *tokens, exact);
  ASSERT_TRUE(a && b) << (a ? b.status().message() : a.status().message());
  ASSERT_EQ(a->tensors.size(), 36u);  // 7 matmuls x 5 layers and the embedding (the classifier too)
  EXPECT_EQ(a->runs, 36);
  int near = 0, compared = 0;
  for (size_t t = 0; t < a->tensors.size(); ++t) {
    const TensorSensitivity& x = a->tensors[t];
    const TensorSensitivity& y = b->tensors[t];
    for (size_t ci = 0; ci < a->candidates.size(); ++ci) {
      ASSERT_EQ(x.fits[ci], y.fits[ci]);
      if (!x.fits[ci]) continue;
      EXPECT_TRUE(y.measured[ci]);
      EXPECT_EQ(x.error[ci], y.error[ci]);
      if (x.measured[ci]) {
        EXPECT_EQ(x.kl[ci], y.kl[ci]) << x.name;
      }
      // The 4- and 5-bit ones, whose KL is well above the runs' rounding.
      if (a->candidates[ci].params.scheme != Scheme::kW4A16 && a->candidates[ci].params.scheme != Scheme::kW5A16) continue;
      ++compared;
      if (x.kl[ci] < 2 * y.kl[ci] && x.kl[ci] > 0.5 * y.kl[ci]) ++near;
    }
    // f16 adds next to nothing; the widest 4-bit groups most.
    const size_t f16 = a->candidates.size() - 1;
    ASSERT_EQ(a->candidates[f16].label, "f16");
    EXPECT_LT(y.kl[f16], 1e-5) << x.name;
  }
  EXPECT_GE(near, compared * 9 / 10) << near << " of " << compared;
}

TEST(Tune, AtUniformW4A16Size_LessKlOnAnotherTextAndTheFileCompiles) {
  const std::string dir = test::temp_dir();
  const std::string m = test::shell_quote(test::shipped_model());
  const std::string calib = test::shell_quote(test::data_path("eval/stories260K-samples.txt"));
  const std::string eval = test::shell_quote(test::data_path("eval/tinystory.txt"));
  // Under an emulator, fewer tokens and no report (its ten compiles): what is checked below is the file.
  const std::string report = test::under_emulator() ? " --calib-tokens 64" : " --report " + test::shell_quote(dir + "/tuned.html");
  auto r = test::run_kiln("tune " + m + " --calib " + calib + " --eval " + eval + " --size 'w4a16 g32' -o " +
                          test::shell_quote(dir + "/tuned.json") + report);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("budget: the size of uniform w4a16 g32 (195200 weight bytes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("blk.4.ffn_down.weight"), std::string::npos);
  const std::string json = test::read_file(dir + "/tuned.json");
  auto parsed = parse_overrides(json, "tuned.json");
  ASSERT_TRUE(parsed) << parsed.status().message();
  if (!test::under_emulator()) {
    const std::string html = test::read_file(dir + "/tuned.html");
    EXPECT_NE(html.find("<svg id=\"front\""), std::string::npos);
    EXPECT_NE(html.find("w4a16 g32"), std::string::npos);
  }
  // The file as a user compiles it, against uniform w4a16 g32, measured by the conformance report
  // on the evaluation text.
  auto tuned = test::run_kiln("compile " + m + " --overrides " + test::shell_quote(dir + "/tuned.json") + " --eval " + eval +
                              " -o " + test::shell_quote(dir + "/tuned.kiln"));
  ASSERT_EQ(tuned.exit_code, 0) << tuned.err;
  auto uniform = test::run_kiln("compile " + m + " -q w4a16 --group 32 --eval " + eval + " -o " + test::shell_quote(dir + "/u.kiln"));
  ASSERT_EQ(uniform.exit_code, 0) << uniform.err;
  auto a = open_model(dir + "/tuned.kiln", OpenOptions{});
  auto b = open_model(dir + "/u.kiln", OpenOptions{});
  ASSERT_TRUE(a && b);
  const uint64_t ta = a->model->weight_bytes(), tb = b->model->weight_bytes();
  EXPECT_LE(ta, tb + tb / 50) << ta << " against " << tb;
  EXPECT_GE(ta, tb - tb / 50);
  // Measured: KL 0.0303 tuned against 0.0829 uniform (0.37x); perplexity +1.70 % against +9.62 %.
  const ConformanceText& ka = a->conformance->headline();
  const ConformanceText& kb = b->conformance->headline();
  ASSERT_EQ(ka.name, "tinystory.txt");
  EXPECT_LE(ka.kl, 0.7 * kb.kl) << ka.kl << " against " << kb.kl;
  EXPECT_LT(ka.ppl_quantized, kb.ppl_quantized);
}

TEST(Tune, BadInputIsOneLineAndNoFile) {
  const std::string dir = test::temp_dir();
  const std::string m = test::shell_quote(test::shipped_model());
  const std::string calib = test::shell_quote(test::data_path("eval/stories260K-samples.txt"));
  test::write_file(dir + "/empty.txt", " \n");
  test::write_file(dir + "/binary.txt", std::string("ab\0cd", 5));
  test::write_file(dir + "/short.txt", "Once upon a time.");
  const std::string out = dir + "/o.json";
  const std::string o = " --calib-tokens 64 -o " + test::shell_quote(out);
  struct Case {
    std::string args, message;
    int lines = 1;  // 2: found after the runs began (their one line first)
  };
  const Case cases[] = {
      {"--calib " + test::shell_quote(dir + "/empty.txt") + " --size 'w4a16 g32'", "the calibration text is empty"},
      {"--calib " + test::shell_quote(dir + "/binary.txt") + " --size 'w4a16 g32'", "not a text file (byte 2 is NUL)"},
      {"--calib " + test::shell_quote(dir + "/short.txt") + " --size 'w4a16 g32'", "calibration needs at least 64"},
      {"--calib " + calib + " --size 1000", "--size 1000 (1000 weight bytes) is below the smallest the candidates allow"},
      {"--calib " + calib + " --size 'w4a16 g32' --max-kl 0.1", "give one budget"},
      {"--calib " + calib, "give one budget"},
      {"--calib " + calib + " --size 'w4a8 g32'", "w4a8 stores the bytes of its a16 twin"},
      {"--calib " + calib + " --size w4a16 --candidates 'w4a16 g32,w8a8'", "w8a8 stores the bytes"},
      {"--calib " + calib + " --size banana", "--size 'banana' is neither a size"},
      {"--calib " + calib + " --max-kl 0.0000001 --candidates 'w4a16 g32,w8a16'",
       "--max-kl: a loss of 1e-07 cannot be reached: every tensor at its best option gives", 2},
      {"--calib " + calib + " --max-kl 0.1 --candidates 'w4a16 g32'",
       "weight 'blk.0.ffn_down.weight' (172 columns) fits none of the candidates (w4a16 g32): add one that fits any width"},
  };
  for (const Case& c : cases) {
    auto r = test::run_kiln("tune " + m + " " + c.args + o);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), c.lines) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.args;
  }
}

TEST(Overrides, RulesTakeLlamaCppBlockNames) {
  const std::string json = R"({"default": "w4a16", "rules": [{"match": "blk.0.*", "scheme": "q5_0"},
      {"match": "blk.1.ffn_up.weight", "scheme": "Q5_1"}, {"op": "ffn_down", "scheme": "q8_0"}]})";
  auto f = parse_overrides(json, "o.json");
  ASSERT_TRUE(f) << f.status().message();
  QuantParams q5{Scheme::kW5A16, 0, true};
  q5.w5_group = 32;
  EXPECT_EQ(f->rules[0].params, canonical(q5));
  q5.symmetric = false;
  EXPECT_EQ(f->rules[1].params, canonical(q5));
  EXPECT_EQ(f->rules[2].params.w8_group, 32);
  auto bad = parse_overrides(R"({"rules": [{"match": "blk.0.*", "scheme": "q5_0", "group_size": 64}]})", "o.json");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().message(),
            "o.json: rule 1: 'group_size' does not apply: scheme \"q5_0\" is " + describe(canonical(QuantParams{Scheme::kW5A16, 0, true, 0, 32})) +
                ", its group and symmetry fixed");
}

}  // namespace
}  // namespace kiln
