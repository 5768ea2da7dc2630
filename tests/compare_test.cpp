// kiln compare (engine/model_compare.h) on the shipped model: its perplexities are `kiln ppl`'s, a
// model against itself is cosine 1 and KL 0 at every layer, a quantized one is ranked layer by
// layer.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/open_model.h"
#include "engine/model_compare.h"
#include "test_util.h"

namespace kiln {
namespace {

using nlohmann::json;

json run_json(const std::string& args) {
  auto r = test::run_kiln(args + " --json");
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
  json j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  return j;
}

TEST(Compare, PerplexitiesAreThoseOfKilnPpl) {
  const std::string m = test::shell_quote(test::shipped_model());
  const std::string text = " --file " + test::shell_quote(test::data_path("eval/tinystory.txt"));
  const json c = run_json("compare " + m + " " + m + " --quant-b w4a16 --group 32" + text);
  const json f32 = run_json("ppl " + m + text);
  const json w4 = run_json("ppl " + m + " -q w4a16" + text);
  EXPECT_EQ(c["scored"], f32["tokens"]);
  // ppl prints 6 decimals.
  EXPECT_NEAR(c["ppl_a"].get<double>(), f32["ppl"].get<double>(), 5e-7);
  EXPECT_NEAR(c["ppl_b"].get<double>(), w4["ppl"].get<double>(), 5e-7);
  EXPECT_NEAR(c["ppl_delta"].get<double>(), w4["ppl"].get<double>() / f32["ppl"].get<double>() - 1, 1e-6);
  // The README's table: 3.0950 and 3.3926.
  EXPECT_NEAR(c["ppl_a"].get<double>(), 3.0950, 5e-5);
  EXPECT_NEAR(c["ppl_b"].get<double>(), 3.3926, 5e-5);
  EXPECT_GT(c["kl"].get<double>(), 0);
  EXPECT_LT(c["top1_agreement"].get<double>(), 1);
  EXPECT_GT(c["top1_agreement"].get<double>(), 0.5);
  ASSERT_EQ(c["layers"].size(), 5u);
  double previous = 0;
  for (const json& l : c["layers"]) {
    EXPECT_LT(l["cosine"].get<double>(), 1);
    EXPECT_GT(l["cosine"].get<double>(), 0.9);
    EXPECT_LE(l["min_cosine"].get<double>(), l["cosine"].get<double>());
    EXPECT_NEAR(l["added_error"].get<double>(), l["relative_error"].get<double>() - previous, 1e-12);
    previous = l["relative_error"].get<double>();
  }
  // Ranked by added error, most first.
  ASSERT_EQ(c["ranked"].size(), 5u);
  for (size_t i = 1; i < 5; ++i)
    EXPECT_GE(c["layers"][c["ranked"][i - 1].get<size_t>()]["added_error"].get<double>(),
              c["layers"][c["ranked"][i].get<size_t>()]["added_error"].get<double>());
}

TEST(Compare, AModelAgainstItselfIsExact) {
  const std::string m = test::shell_quote(test::shipped_model());
  const json c = run_json("compare " + m + " " + m + " --file " + test::shell_quote(test::data_path("eval/tinystory.txt")));
  EXPECT_EQ(c["kl"].get<double>(), 0.0);
  EXPECT_EQ(c["max_kl"].get<double>(), 0.0);
  EXPECT_EQ(c["top1_agreement"].get<double>(), 1.0);
  EXPECT_EQ(c["ppl_a"], c["ppl_b"]);
  for (const json& l : c["layers"]) {
    EXPECT_EQ(l["cosine"].get<double>(), 1.0);
    EXPECT_EQ(l["min_cosine"].get<double>(), 1.0);
    EXPECT_EQ(l["relative_error"].get<double>(), 0.0);
  }
  auto text = test::run_kiln("compare " + m + " " + m);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("top-1 agreement 100.00 %; KL(A||B) mean 0.000000, max 0.000000 nats"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("0      blk.0.x.ffn        1.000000   1.000000     0.000000    +0.000000"), std::string::npos) << text.out;
}

TEST(Compare, RefusesWhatItCannotScore) {
  auto a = open_model(test::shipped_model(), OpenOptions{});
  ASSERT_TRUE(a) << a.status().message();
  auto short_text = compare_models(a->model, a->model, std::vector<int>{1}, CompareOptions{});
  ASSERT_FALSE(short_text);
  EXPECT_EQ(short_text.status().message(), "too short to compare (needs at least two tokens)");
  auto outside = compare_models(a->model, a->model, std::vector<int>{1, 512}, CompareOptions{});
  ASSERT_FALSE(outside);
  EXPECT_EQ(outside.status().message(), "token id 512 is outside the vocabulary");
}

}  // namespace
}  // namespace kiln
