// The conformance section every compile writes (engine/conformance.h): its numbers are those of
// `kiln compare` (source in f32 against the .kiln) on the same text; `kiln inspect` and the C API
// show them; a file without it reads as before.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "artifact/conformance_section.h"
#include "engine/conformance.h"
#include "engine/open_model.h"
#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using nlohmann::json;

// The shipped model compiled once per process: w4a16 with --eval, and f32 without the report.
struct Compiled {
  std::string w4, plain, eval;
  Compiled() {
    const std::string dir = test::temp_dir();
    w4 = dir + "/conf_w4.kiln";
    plain = dir + "/conf_none.kiln";
    eval = test::data_path("eval/tinystory.txt");
    const std::string m = test::shell_quote(test::shipped_model());
    auto a = test::run_kiln("compile " + m + " -q w4a16 --eval " + test::shell_quote(eval) + " -o " + test::shell_quote(w4));
    EXPECT_EQ(a.exit_code, 0) << a.err;
    EXPECT_NE(a.err.find("conformance against f32 (tinystory.txt text"), std::string::npos) << a.err;
    auto b = test::run_kiln("compile " + m + " -q w4a16 --no-conformance -o " + test::shell_quote(plain));
    EXPECT_EQ(b.exit_code, 0) << b.err;
  }
};
const Compiled& compiled() {
  static const Compiled c;
  return c;
}

json compare_json(const std::string& kiln, const std::string& text_file) {
  auto r = test::run_kiln("compare " + test::shell_quote(test::shipped_model()) + " " + test::shell_quote(kiln) +
                          " --threads 1 --json --file " + test::shell_quote(text_file));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out, nullptr, false);
}

void expect_same(const ConformanceText& t, const json& c) {
  EXPECT_EQ(t.tokens, c["tokens"].get<int64_t>());
  EXPECT_EQ(t.scored, c["scored"].get<int64_t>());
  EXPECT_EQ(t.n_ctx, c["n_ctx"].get<int>());
  // The same programs on the same tokens: the same numbers, whatever the thread counts.
  EXPECT_DOUBLE_EQ(t.top1_agreement, c["top1_agreement"].get<double>());
  EXPECT_DOUBLE_EQ(t.kl, c["kl"].get<double>());
  EXPECT_DOUBLE_EQ(t.max_kl, c["max_kl"].get<double>());
  EXPECT_DOUBLE_EQ(t.ppl_reference, c["ppl_a"].get<double>());
  EXPECT_DOUBLE_EQ(t.ppl_quantized, c["ppl_b"].get<double>());
  ASSERT_EQ(t.worst_layers.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const size_t l = c["ranked"][i].get<size_t>();
    EXPECT_EQ(t.worst_layers[i].layer, static_cast<int>(l));
    EXPECT_DOUBLE_EQ(t.worst_layers[i].added_error, c["layers"][l]["added_error"].get<double>());
    EXPECT_DOUBLE_EQ(t.worst_layers[i].relative_error, c["layers"][l]["relative_error"].get<double>());
  }
}

TEST(Conformance, TheSectionHoldsKilnComparesNumbers) {
  const Compiled& k = compiled();
  auto m = open_model(k.w4, OpenOptions{});
  ASSERT_TRUE(m) << m.status().message();
  ASSERT_TRUE(m->conformance.has_value());
  const ConformanceReport& r = *m->conformance;
  EXPECT_EQ(r.reference, "f32");
  ASSERT_EQ(r.texts.size(), 2u);
  EXPECT_EQ(r.texts[0].name, "built-in");
  EXPECT_EQ(r.texts[1].name, "tinystory.txt");
  EXPECT_EQ(&r.headline(), &r.texts[1]);
  const std::string builtin = test::temp_dir() + "/conformance_text.txt";
  test::write_file(builtin, std::string(kConformanceText));
  expect_same(r.texts[0], compare_json(k.w4, builtin));
  expect_same(r.texts[1], compare_json(k.w4, k.eval));
  // The README's table for this model and text (compare_test.cpp): 3.0950 in f32, 3.3926 in w4a16 g32.
  EXPECT_NEAR(r.texts[1].ppl_reference, 3.0950, 5e-5);
  EXPECT_NEAR(r.texts[1].ppl_quantized, 3.3926, 5e-5);
  EXPECT_GT(r.texts[1].kl, 0);
  EXPECT_LT(r.texts[1].top1_agreement, 1);
  // llama2.c's SentencePiece gives both texts back.
  EXPECT_TRUE(r.texts[0].round_trip);
  EXPECT_EQ(r.texts[0].round_trip_mismatch, -1);
}

TEST(Conformance, InspectPrintsIt) {
  const Compiled& k = compiled();
  auto text = test::run_kiln("inspect " + test::shell_quote(k.w4));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("  conformance    offset"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("conformance (against f32):\n  built-in: "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("tokenizer round trip: exact"), std::string::npos) << text.out;
  auto j = test::run_kiln("inspect --json " + test::shell_quote(k.w4));
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const json d = json::parse(j.out, nullptr, false);
  ASSERT_TRUE(d.contains("conformance")) << j.out;
  EXPECT_EQ(d["conformance"]["texts"].size(), 2u);
  auto none = test::run_kiln("inspect " + test::shell_quote(k.plain));
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_NE(none.out.find("conformance: none (written before kiln measured it, or compiled with --no-conformance)"),
            std::string::npos) << none.out;
}

TEST(Conformance, TheCApiGivesTheHeadline) {
  const Compiled& k = compiled();
  auto m = open_model(k.w4, OpenOptions{});
  ASSERT_TRUE(m) << m.status().message();
  const ConformanceText& t = m->conformance->headline();
  kiln_runtime_params p = kiln_runtime_default_params();
  p.n_threads = 1;
  kiln_runtime* rt = nullptr;
  ASSERT_EQ(kiln_runtime_create(&p, &rt), KILN_OK) << kiln_last_error();
  for (const std::string& path : {k.w4, k.plain, test::shipped_model()}) {
    kiln_model* model = nullptr;
    ASSERT_EQ(kiln_model_load(rt, path.c_str(), nullptr, &model), KILN_OK) << kiln_last_error();
    kiln_model_info info;
    info.size = sizeof info;
    ASSERT_EQ(kiln_model_info_get(model, &info), KILN_OK) << kiln_last_error();
    if (path == k.w4) {
      EXPECT_EQ(info.has_conformance, 1);
      EXPECT_EQ(info.conformance_top1, t.top1_agreement);
      EXPECT_EQ(info.conformance_kl, t.kl);
      EXPECT_EQ(info.conformance_ppl_reference, t.ppl_reference);
      EXPECT_EQ(info.conformance_ppl, t.ppl_quantized);
    } else {  // compiled without it, or a source model
      EXPECT_EQ(info.has_conformance, 0) << path;
      EXPECT_TRUE(std::isnan(info.conformance_top1) && std::isnan(info.conformance_kl) &&
                  std::isnan(info.conformance_ppl_reference) && std::isnan(info.conformance_ppl)) << path;
    }
    kiln_model_free(model);
  }
  kiln_runtime_free(rt);
}

TEST(Conformance, ThreadsDoNotChangeTheFile) {
  const std::string m = test::shell_quote(test::shipped_model());
  const std::string a = test::temp_dir() + "/conf_t1.kiln", b = test::temp_dir() + "/conf_t2.kiln";
  ASSERT_EQ(test::run_kiln("compile " + m + " -q w4a8 --threads 1 -o " + test::shell_quote(a)).exit_code, 0);
  ASSERT_EQ(test::run_kiln("compile " + m + " -q w4a8 --threads 2 -o " + test::shell_quote(b)).exit_code, 0);
  EXPECT_TRUE(test::read_file(a) == test::read_file(b));
}

TEST(Conformance, BadEvalTextFailsBeforeAnyWork) {
  const std::string m = test::shell_quote(test::shipped_model());
  const std::string out = test::temp_dir() + "/conf_bad.kiln";
  const std::string empty = test::temp_dir() + "/empty.txt";
  test::write_file(empty, " \n");
  auto r = test::run_kiln("compile " + m + " --eval " + test::shell_quote(empty) + " -o " + test::shell_quote(out));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find(empty + ": the evaluation text is empty"), std::string::npos) << r.err;
  auto both = test::run_kiln("compile " + m + " --no-conformance --eval " + test::shell_quote(empty) + " -o " + test::shell_quote(out));
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.err.find("--no-conformance"), std::string::npos) << both.err;
  EXPECT_FALSE(std::ifstream(out).good());
}

TEST(Conformance, SectionDecoderRefusesDamage) {
  ConformanceReport r;
  ConformanceText t;
  t.name = "built-in";
  t.tokens = 10;
  t.scored = 9;
  t.n_ctx = 512;
  t.ppl_reference = 3;
  t.ppl_quantized = INFINITY;  // overflowed: written as null, read back as infinite
  t.worst_layers.push_back({2, 0.5, 0.75});
  r.texts.push_back(t);
  const std::string s = encode_conformance_section(r);
  auto back = decode_conformance_section({reinterpret_cast<const uint8_t*>(s.data()), s.size()}, "f.kiln");
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(encode_conformance_section(*back), s);
  EXPECT_TRUE(std::isinf(back->headline().ppl_quantized));
  for (const std::string bad : {std::string("{"), std::string("[]"), std::string(R"({"texts":[]})"),
                                std::string(R"({"texts":[{"name":"x","tokens":1,"scored":5}]})"),
                                std::string(R"({"texts":[{"name":"x","tokens":5,"scored":4,"kl":"no"}]})")}) {
    auto d = decode_conformance_section({reinterpret_cast<const uint8_t*>(bad.data()), bad.size()}, "f.kiln");
    ASSERT_FALSE(d) << bad;
    EXPECT_NE(d.status().message().find("f.kiln: conformance"), std::string::npos) << d.status().message();
  }
}

}  // namespace
}  // namespace kiln
