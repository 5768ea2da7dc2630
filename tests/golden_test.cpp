// End to end: the shipped model, greedy, must print exactly what llama2.c's own test expects.
#include <gtest/gtest.h>

#include "runtime/generate.h"
#include "runtime/loaded_model.h"
#include "runtime/session.h"
#include "test_util.h"

namespace kiln {
namespace {

using test::data_path;

const std::string& golden() {
  static const std::string g = test::read_file(data_path("golden/stories260K_greedy200.txt"));
  return g;
}

TEST(Golden, CliGreedyTextMatchesLlama2c) {
  auto r = test::run_kiln("run " + test::shell_quote(test::shipped_model()) + " --echo -p '' --temp 0 -n 200");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_FALSE(golden().empty());
  ASSERT_GE(r.out.size(), golden().size());
  EXPECT_EQ(r.out.substr(0, golden().size()), golden());
  // stderr carries the timings, stdout nothing but the text.
  EXPECT_NE(r.err.find("tok/s"), std::string::npos);
}

TEST(Golden, CliWithoutModelRunsShippedModel) {
  auto r = test::run_kiln("run --temp 0 -n 200");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, golden().size()), golden());
}

TEST(Golden, EchoPrintsPromptFirst) {
  auto r = test::run_kiln("run --temp 0 -n 20 --echo -p 'Once upon a time'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Once upon a time", 0), 0u) << r.out;
  auto plain = test::run_kiln("run --temp 0 -n 20 -p 'Once upon a time'");
  ASSERT_EQ(plain.exit_code, 0);
  EXPECT_EQ(r.out, "Once upon a time" + plain.out);
}

TEST(Golden, SameSeedSameText) {
  auto a = test::run_kiln("run -n 60 --temp 1.0 --seed 42 -p 'Lily'");
  auto b = test::run_kiln("run -n 60 --temp 1.0 --seed 42 -p 'Lily'");
  auto c = test::run_kiln("run -n 60 --temp 1.0 --seed 7 -p 'Lily'");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
}

TEST(Golden, LibraryGreedyMatches) {
  auto lm = load_model(test::shipped_model());
  ASSERT_TRUE(lm) << lm.status().message();
  auto s = Session::create(lm->model, 0);
  ASSERT_TRUE(s);
  SamplerParams sp;
  sp.temperature = 0;
  Sampler sampler(sp, lm->model->config().vocab_size);
  auto prompt = lm->tokenizer->encode("", true);
  ASSERT_TRUE(prompt);
  std::string out;
  auto st = generate(**s, sampler, *lm->tokenizer, *prompt, 200, [&](std::string_view t) { out += t; });
  ASSERT_TRUE(st) << st.status().message();
  EXPECT_EQ(out.substr(0, golden().size()), golden());
}

}  // namespace
}  // namespace kiln
