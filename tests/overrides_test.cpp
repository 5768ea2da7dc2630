// The overrides file and the scheme assignment: parsing, every rule key, order, float fallback,
// and the errors (each naming what is wrong).
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "quant/overrides.h"
#include "test_util.h"

namespace kiln {
namespace {

const std::string kPath = "tiny/overrides.json";

// A 4-layer Llama-style model: dim 64, FFN 96 (so ffn_down has 96 input columns: a multiple of
// 32 but not of 64 or 128), vocabulary 100.
std::vector<WeightRef> tiny_model(int n_layers = 4) {
  const int64_t dim = 64, ffn = 96, vocab = 100;
  std::vector<WeightRef> w;
  w.push_back({"token_embd.weight", "model.embed_tokens.weight", -1, "embedding", true, vocab, dim});
  for (int l = 0; l < n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".", h = "model.layers." + std::to_string(l) + ".";
    w.push_back({b + "attn_norm.weight", h + "input_layernorm.weight", l, "attn_norm", false, 1, dim});
    w.push_back({b + "attn_q.weight", h + "self_attn.q_proj.weight", l, "attn_q", true, dim, dim});
    w.push_back({b + "attn_k.weight", h + "self_attn.k_proj.weight", l, "attn_k", true, dim / 2, dim});
    w.push_back({b + "attn_v.weight", h + "self_attn.v_proj.weight", l, "attn_v", true, dim / 2, dim});
    w.push_back({b + "attn_output.weight", h + "self_attn.o_proj.weight", l, "attn_output", true, dim, dim});
    w.push_back({b + "ffn_norm.weight", h + "post_attention_layernorm.weight", l, "ffn_norm", false, 1, dim});
    w.push_back({b + "ffn_gate.weight", h + "mlp.gate_proj.weight", l, "ffn_gate", true, ffn, dim});
    w.push_back({b + "ffn_up.weight", h + "mlp.up_proj.weight", l, "ffn_up", true, ffn, dim});
    w.push_back({b + "ffn_down.weight", h + "mlp.down_proj.weight", l, "ffn_down", true, dim, ffn});
  }
  w.push_back({"output_norm.weight", "model.norm.weight", -1, "output_norm", false, 1, dim});
  w.push_back({"output.weight", "lm_head.weight", -1, "output", true, vocab, dim});
  return w;
}

struct Assigned {
  Status status;
  std::map<std::string, QuantParams> by_name;
  std::vector<std::string> notes;
  std::string scheme(const std::string& name) const { return describe(by_name.at(name)); }
};

Assigned assign(const OverridesFile& f, const std::vector<WeightRef>& weights = tiny_model()) {
  Assigned a;
  auto r = assign_schemes(f, weights, kPath, &a.notes);
  if (!r) {
    a.status = r.status();
    return a;
  }
  EXPECT_EQ(r->size(), weights.size());
  for (size_t i = 0; i < weights.size(); ++i) a.by_name[weights[i].name] = (*r)[i];
  return a;
}

Assigned assign_json(const std::string& json, const std::vector<WeightRef>& weights = tiny_model()) {
  auto f = parse_overrides(json, kPath);
  if (!f) return {f.status(), {}, {}};
  return assign(*f, weights);
}

// The parse error of `json`, which must be one.
std::string parse_error(const std::string& json) {
  auto f = parse_overrides(json, kPath);
  EXPECT_FALSE(f) << json << " was accepted";
  if (f) return "";
  EXPECT_EQ(f.status().message().rfind(kPath + ": ", 0), 0u) << f.status().message();
  return f.status().message();
}

std::string assign_error(const std::string& json) {
  Assigned a = assign_json(json);
  EXPECT_FALSE(a.status) << json << " was accepted";
  return a.status.message();
}

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

// ---- glob and op selectors ----

TEST(OverridesGlob, Basics) {
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("*", "anything.at.all"));
  EXPECT_TRUE(glob_match("", ""));
  EXPECT_FALSE(glob_match("", "a"));
  EXPECT_TRUE(glob_match("a?c", "abc"));
  EXPECT_FALSE(glob_match("a?c", "ac"));
  EXPECT_TRUE(glob_match("blk.*.attn_*", "blk.12.attn_output.weight"));
  EXPECT_FALSE(glob_match("blk.*.attn_*", "blk.12.ffn_up.weight"));
  EXPECT_TRUE(glob_match("blk.?.ffn_*", "blk.3.ffn_down.weight"));
  EXPECT_FALSE(glob_match("blk.?.ffn_*", "blk.13.ffn_down.weight"));
  EXPECT_TRUE(glob_match("*.weight", "output.weight"));
  EXPECT_FALSE(glob_match("output.weight", "output.weight.x"));
  EXPECT_TRUE(glob_match("**a**", "xay"));
  EXPECT_TRUE(glob_match("[x]", "[x]"));  // no character classes: brackets are literal
  EXPECT_TRUE(glob_match("*ab*ab*", "xxabyyab"));
  EXPECT_FALSE(glob_match("*ab*ab*", "xxabyyba"));
}

TEST(OverridesGlob, NoExponentialBlowUp) {
  const std::string text(5000, 'a');
  std::string pattern;
  for (int i = 0; i < 100; ++i) pattern += "*a";
  pattern += "*b";
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(glob_match(pattern, text));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

TEST(OverridesOps, Selectors) {
  for (const char* k : {"embedding", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down",
                        "output"})
    EXPECT_TRUE(is_op_kind(k)) << k;
  EXPECT_FALSE(is_op_kind("attention"));
  EXPECT_TRUE(is_op_selector("attention"));
  EXPECT_TRUE(is_op_selector("ffn"));
  EXPECT_FALSE(is_op_selector("attn_norm"));
  EXPECT_TRUE(op_selector_matches("attention", "attn_output"));
  EXPECT_FALSE(op_selector_matches("attention", "ffn_up"));
  EXPECT_TRUE(op_selector_matches("ffn", "ffn_down"));
  EXPECT_FALSE(op_selector_matches("ffn", "output"));
  EXPECT_TRUE(op_selector_matches("attn_v", "attn_v"));
  EXPECT_FALSE(op_selector_matches("attn_v", "attn_k"));
}

// ---- parsing ----

TEST(OverridesParse, EmptyFileGivesDefaults) {
  auto f = parse_overrides("{}", kPath);
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ(f->defaults, (QuantParams{Scheme::kW4A16, 32, true}));
  EXPECT_TRUE(f->rules.empty());
  EXPECT_FALSE(f->auto_fallback);
}

TEST(OverridesParse, TheDocumentedExample) {
  auto f = parse_overrides(R"({"default": "w4a16", "group_size": 32, "symmetric": true,
    "rules": [
      {"match": "blk.*.attn_*", "scheme": "f16"},
      {"op": "attention", "scheme": "f16"},
      {"layers": [0, 3], "op": "ffn_down", "scheme": "w8a16"},
      {"match": "output.weight", "scheme": "w8a16"},
      {"match": "token_embd.weight", "scheme": "w4a16", "group_size": 64, "comment": "why not"}
    ]})",
                           kPath);
  ASSERT_TRUE(f) << f.status().message();
  ASSERT_EQ(f->rules.size(), 5u);
  EXPECT_EQ(f->rules[0].match, "blk.*.attn_*");
  EXPECT_EQ(f->rules[0].params.scheme, Scheme::kF16);
  EXPECT_EQ(f->rules[1].op, "attention");
  EXPECT_EQ(f->rules[2].layers, (std::pair<int, int>{0, 3}));
  EXPECT_EQ(f->rules[2].text, R"({"layers": [0, 3], "op": "ffn_down"})");
  EXPECT_EQ(f->rules[4].params, (QuantParams{Scheme::kW4A16, 64, true}));
  EXPECT_EQ(f->rules[3].params, (QuantParams{Scheme::kW8A16, 0, true}));  // canonical: no group

  Assigned a = assign(*f);
  ASSERT_TRUE(a.status) << a.status.message();
  EXPECT_EQ(a.scheme("blk.2.attn_k.weight"), "f16");
  EXPECT_EQ(a.scheme("blk.2.ffn_down.weight"), "w8a16");
  EXPECT_EQ(a.scheme("blk.2.ffn_up.weight"), "w4a16 g32 sym");
  EXPECT_EQ(a.scheme("output.weight"), "w8a16");
  EXPECT_EQ(a.scheme("token_embd.weight"), "w4a16 g64 sym");
  EXPECT_EQ(a.scheme("blk.2.attn_norm.weight"), "f32");
  // Rule 1 is overridden by rule 2 on every attention weight: reported, not an error.
  ASSERT_EQ(a.notes.size(), 1u);
  EXPECT_HAS(a.notes[0], "rule 1 ({\"match\": \"blk.*.attn_*\"}) has no effect");
}

TEST(OverridesParse, TopLevelKeys) {
  auto f = parse_overrides(R"({"default": "w4a8", "group_size": 128, "symmetric": false, "auto_fallback": true,
                               "comment": "x", "rules": []})",
                           kPath);
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ(f->defaults, (QuantParams{Scheme::kW4A8, 128, false}));
  EXPECT_TRUE(f->auto_fallback);
  // null means absent.
  f = parse_overrides(R"({"default": null, "rules": null})", kPath);
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ(f->defaults.scheme, Scheme::kW4A16);
}

TEST(OverridesParse, MissingKeysComeFromTheCommandLine) {
  auto base = overrides_from_flags("w8a8", 64, false, true);
  ASSERT_TRUE(base) << base.status().message();
  auto f = parse_overrides(R"({"rules": [{"op": "ffn_gate", "scheme": "w4a16"}]})", kPath, *base);
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ(f->defaults, (QuantParams{Scheme::kW8A8, 64, false}));
  EXPECT_TRUE(f->auto_fallback);
  EXPECT_EQ(f->rules[0].params, (QuantParams{Scheme::kW4A16, 64, false}));  // inherits group and symmetry
  // The file wins where it speaks.
  f = parse_overrides(R"({"default": "f16", "auto_fallback": false})", kPath, *base);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->defaults.scheme, Scheme::kF16);
  EXPECT_FALSE(f->auto_fallback);
}

TEST(OverridesParse, FromFlags) {
  auto f = overrides_from_flags("w4a16", 64, false);
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ(f->defaults, (QuantParams{Scheme::kW4A16, 64, false}));
  EXPECT_TRUE(f->rules.empty());
  Assigned a = assign(*f);
  EXPECT_FALSE(a.status);  // ffn_down's 96 columns are not a multiple of 64
  EXPECT_HAS(a.status.message(), "blk.0.ffn_down.weight");
  EXPECT_HAS(a.status.message(), "the default");

  f = overrides_from_flags("w8a16");
  ASSERT_TRUE(f);
  a = assign(*f);
  ASSERT_TRUE(a.status) << a.status.message();
  EXPECT_EQ(a.scheme("blk.3.ffn_down.weight"), "w8a16");
  EXPECT_EQ(a.by_name["blk.3.ffn_down.weight"], (QuantParams{Scheme::kW8A16, 0, true}));
  EXPECT_TRUE(a.notes.empty());

  auto bad = overrides_from_flags("int4");
  ASSERT_FALSE(bad);
  EXPECT_HAS(bad.status().message(), "'int4'");
  EXPECT_HAS(bad.status().message(), "w4a16");
  bad = overrides_from_flags("w4a16", 48);
  ASSERT_FALSE(bad);
  EXPECT_HAS(bad.status().message(), "48");
  EXPECT_TRUE(overrides_from_flags("f16", 48));  // no group size to check
}

// w8a16 takes a group only where it is named: "w8a16 g32" (flags, "default", a rule's "scheme")
// or a w8a16 rule's own "group_size"; a file's group_size stays the 4-bit rules'.
TEST(OverridesParse, W8GroupsOnlyWhereNamed) {
  auto f = overrides_from_flags("w8a16 g32");
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ(f->defaults, (QuantParams{Scheme::kW8A16, 0, true, 32}));
  f = overrides_from_flags("Q8_0");
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ(f->defaults, (QuantParams{Scheme::kW8A16, 0, true, 32}));
  EXPECT_EQ(overrides_from_flags("w8a16g128")->defaults, (QuantParams{Scheme::kW8A16, 0, true, 128}));
  auto bad = overrides_from_flags("w8a16 g48");
  ASSERT_FALSE(bad);
  EXPECT_HAS(bad.status().message(), "group size 48");

  f = parse_overrides(R"({"default": "w8a16 g64", "group_size": 128, "rules": [
      {"op": "ffn_up", "scheme": "w8a16", "group_size": 32},
      {"op": "ffn_gate", "scheme": "w8a16"},
      {"op": "attn_q", "scheme": "w4a16"}]})",
                      kPath);
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ(f->defaults, (QuantParams{Scheme::kW8A16, 128, true, 64}));
  EXPECT_EQ(f->rules[0].params, (QuantParams{Scheme::kW8A16, 0, true, 32}));
  EXPECT_EQ(f->rules[1].params, (QuantParams{Scheme::kW8A16, 0, true, 0}));  // per row
  EXPECT_EQ(f->rules[2].params, (QuantParams{Scheme::kW4A16, 128, true}));
  f->auto_fallback = true;
  Assigned a = assign(*f);
  ASSERT_TRUE(a.status) << a.status.message();
  EXPECT_EQ(a.scheme("blk.1.ffn_up.weight"), "w8a16 g32");
  EXPECT_EQ(a.scheme("blk.1.ffn_gate.weight"), "w8a16");
  EXPECT_EQ(a.scheme("blk.1.attn_k.weight"), "w8a16 g64");
  // ffn_down's 96 columns are not a multiple of 64: one scale per row, with a note.
  EXPECT_EQ(a.scheme("blk.1.ffn_down.weight"), "w8a16");
  ASSERT_FALSE(a.notes.empty());
  EXPECT_HAS(a.notes.back(), "w8a16 g64") << a.notes.front();

  auto w8a8 = parse_overrides(R"({"rules": [{"op": "ffn_up", "scheme": "w8a8", "group_size": 32}]})", kPath);
  ASSERT_FALSE(w8a8);
  EXPECT_HAS(w8a8.status().message(), "'group_size' applies to 4-bit schemes");
}

// ---- every rule key ----

TEST(OverridesRules, MatchOnCanonicalNameAndOnAlias) {
  Assigned a = assign_json(R"({"default": "w4a16", "rules": [
      {"match": "blk.1.ffn_*", "scheme": "w8a16"},
      {"match": "model.layers.2.self_attn.*", "scheme": "f16"},
      {"match": "lm_head.weight", "scheme": "bf16"}]})");
  ASSERT_TRUE(a.status) << a.status.message();
  EXPECT_EQ(a.scheme("blk.1.ffn_up.weight"), "w8a16");
  EXPECT_EQ(a.scheme("blk.1.ffn_down.weight"), "w8a16");
  EXPECT_EQ(a.scheme("blk.1.ffn_norm.weight"), "f32");  // matched, but norms stay f32
  EXPECT_EQ(a.scheme("blk.1.attn_q.weight"), "w4a16 g32 sym");
  EXPECT_EQ(a.scheme("blk.2.attn_v.weight"), "f16");
  EXPECT_EQ(a.scheme("blk.2.ffn_up.weight"), "w4a16 g32 sym");
  EXPECT_EQ(a.scheme("output.weight"), "bf16");
  EXPECT_EQ(a.scheme("token_embd.weight"), "w4a16 g32 sym");
}

TEST(OverridesRules, LayersRangeAndSingleLayer) {
  Assigned a = assign_json(R"({"default": "w4a16", "rules": [
      {"layers": [1, 2], "scheme": "w8a16"},
      {"layers": 3, "scheme": "f16"}]})");
  ASSERT_TRUE(a.status) << a.status.message();
  EXPECT_EQ(a.scheme("blk.0.attn_q.weight"), "w4a16 g32 sym");
  EXPECT_EQ(a.scheme("blk.1.attn_q.weight"), "w8a16");
  EXPECT_EQ(a.scheme("blk.2.ffn_down.weight"), "w8a16");
  EXPECT_EQ(a.scheme("blk.3.ffn_gate.weight"), "f16");
  EXPECT_EQ(a.scheme("output.weight"), "w4a16 g32 sym");  // in no layer
  EXPECT_EQ(a.scheme("token_embd.weight"), "w4a16 g32 sym");
}

TEST(OverridesRules, OpKindsAndGroups) {
  Assigned a = assign_json(R"({"default": "f32", "rules": [
      {"op": "ffn", "scheme": "w4a16"},
      {"op": "attention", "scheme": "w8a8"},
      {"op": "attn_v", "scheme": "f16"},
      {"op": "embedding", "scheme": "w8a16"},
      {"op": "output", "scheme": "bf16"}]})");
  ASSERT_TRUE(a.status) << a.status.message();
  EXPECT_EQ(a.scheme("blk.0.ffn_gate.weight"), "w4a16 g32 sym");
  EXPECT_EQ(a.scheme("blk.0.ffn_down.weight"), "w4a16 g32 sym");
  EXPECT_EQ(a.scheme("blk.0.attn_q.weight"), "w8a8");
  EXPECT_EQ(a.scheme("blk.0.attn_output.weight"), "w8a8");
  EXPECT_EQ(a.scheme("blk.0.attn_v.weight"), "f16");
  EXPECT_EQ(a.scheme("token_embd.weight"), "w8a16");
  EXPECT_EQ(a.scheme("output.weight"), "bf16");
  EXPECT_EQ(a.scheme("blk.0.attn_norm.weight"), "f32");
}

TEST(OverridesRules, CombinedKeysMustAllMatch) {
  Assigned a = assign_json(R"({"default": "w4a16", "rules": [
      {"match": "blk.*", "layers": [0, 1], "op": "ffn_down", "scheme": "w8a16"}]})");
  ASSERT_TRUE(a.status) << a.status.message();
  EXPECT_EQ(a.scheme("blk.0.ffn_down.weight"), "w8a16");
  EXPECT_EQ(a.scheme("blk.1.ffn_down.weight"), "w8a16");
  EXPECT_EQ(a.scheme("blk.2.ffn_down.weight"), "w4a16 g32 sym");  // layer out of range
  EXPECT_EQ(a.scheme("blk.0.ffn_up.weight"), "w4a16 g32 sym");    // other op
}

TEST(OverridesRules, PerRuleGroupSizeAndSymmetry) {
  Assigned a = assign_json(R"({"default": "w4a16", "group_size": 32, "symmetric": true, "rules": [
      {"op": "attn_q", "scheme": "w4a16", "group_size": 64},
      {"op": "attn_k", "scheme": "w4a8", "symmetric": false},
      {"op": "attn_v", "scheme": "w4a16", "group_size": 64, "symmetric": false}]})");
  ASSERT_TRUE(a.status) << a.status.message();
  EXPECT_EQ(a.scheme("blk.0.attn_q.weight"), "w4a16 g64 sym");
  EXPECT_EQ(a.scheme("blk.0.attn_k.weight"), "w4a8 g32 asym");
  EXPECT_EQ(a.scheme("blk.0.attn_v.weight"), "w4a16 g64 asym");
  EXPECT_EQ(a.scheme("blk.0.attn_output.weight"), "w4a16 g32 sym");
}

TEST(OverridesRules, LastMatchWins) {
  const std::string a_then_b = R"({"default": "w4a16", "rules": [
      {"op": "ffn", "scheme": "w8a16"}, {"layers": [0, 0], "scheme": "f16"}]})";
  const std::string b_then_a = R"({"default": "w4a16", "rules": [
      {"layers": [0, 0], "scheme": "f16"}, {"op": "ffn", "scheme": "w8a16"}]})";
  Assigned x = assign_json(a_then_b), y = assign_json(b_then_a);
  ASSERT_TRUE(x.status) << x.status.message();
  ASSERT_TRUE(y.status) << y.status.message();
  EXPECT_EQ(x.scheme("blk.0.ffn_up.weight"), "f16");
  EXPECT_EQ(y.scheme("blk.0.ffn_up.weight"), "w8a16");
  EXPECT_EQ(x.scheme("blk.0.attn_q.weight"), "f16");
  EXPECT_EQ(y.scheme("blk.0.attn_q.weight"), "f16");
  EXPECT_EQ(x.scheme("blk.1.ffn_up.weight"), "w8a16");
  EXPECT_TRUE(x.notes.empty());
  EXPECT_TRUE(y.notes.empty());
}

// ---- the seed's examples ----

TEST(OverridesSeed, AllWeightsInt8AttentionInFp16) {
  Assigned a = assign_json(R"({"default": "w8a8", "rules": [{"op": "attention", "scheme": "f16"}]})");
  ASSERT_TRUE(a.status) << a.status.message();
  for (const WeightRef& w : tiny_model()) {
    const std::string got = a.scheme(w.name);
    const char* want = !w.is_matmul_weight ? "f32" : op_selector_matches("attention", w.op) ? "f16" : "w8a8";
    EXPECT_EQ(got, want) << w.name;
  }
}

TEST(OverridesSeed, LmHeadAndEmbeddingsAt8Bits) {
  Assigned a = assign_json(R"({"default": "w4a16", "rules": [
      {"match": "model.embed_tokens.weight", "scheme": "w8a16"},
      {"match": "lm_head.weight", "scheme": "w8a16"}]})");
  ASSERT_TRUE(a.status) << a.status.message();
  EXPECT_EQ(a.scheme("token_embd.weight"), "w8a16");
  EXPECT_EQ(a.scheme("output.weight"), "w8a16");
  EXPECT_EQ(a.scheme("blk.0.attn_q.weight"), "w4a16 g32 sym");
}

// ---- float fallback ----

TEST(OverridesFloatFallback, NormsAlwaysStayF32) {
  for (const char* def : {"w4a16", "w8a8", "f16", "bf16"}) {
    Assigned a = assign_json(std::string(R"({"default": ")") + def + R"(", "rules": [{"match": "*", "scheme": "w8a16"}]})");
    ASSERT_TRUE(a.status) << a.status.message();
    EXPECT_EQ(a.by_name["blk.0.attn_norm.weight"], (QuantParams{Scheme::kF32, 0, true})) << def;
    EXPECT_EQ(a.scheme("output_norm.weight"), "f32");
    EXPECT_EQ(a.scheme("blk.0.attn_q.weight"), "w8a16");
  }
}

TEST(OverridesFloatFallback, QuantizingANormIsRefused) {
  std::string e = assign_error(R"({"rules": [{"match": "*norm*", "scheme": "w8a16"}]})");
  EXPECT_HAS(e, kPath + ": rule 1 ({\"match\": \"*norm*\"})");
  EXPECT_HAS(e, "not a matmul weight");
  EXPECT_HAS(e, "blk.0.attn_norm.weight");
  e = assign_error(R"({"rules": [{"match": "model.norm.weight", "scheme": "f16"}]})");
  EXPECT_HAS(e, "output_norm.weight");
  // Keeping a norm in f32 says nothing new, but it is not wrong.
  Assigned a = assign_json(R"({"rules": [{"match": "*_norm.weight", "scheme": "f32"}]})");
  EXPECT_TRUE(a.status) << a.status.message();
}

TEST(OverridesFloatFallback, FourBitThatDoesNotDivideFallsBackToW8WhenAsked) {
  const std::string rules = R"("rules": [{"op": "ffn", "scheme": "w4a8", "group_size": 64}])";
  std::string e = assign_error("{\"default\": \"w4a16\", " + rules + "}");
  EXPECT_HAS(e, "blk.0.ffn_down.weight");
  EXPECT_HAS(e, "w4a8 g64 sym");
  EXPECT_HAS(e, "96");
  EXPECT_HAS(e, "rule 1 ({\"op\": \"ffn\"})");
  EXPECT_HAS(e, "auto_fallback");

  Assigned a = assign_json("{\"default\": \"w4a16\", \"auto_fallback\": true, " + rules + "}");
  ASSERT_TRUE(a.status) << a.status.message();
  EXPECT_EQ(a.scheme("blk.0.ffn_down.weight"), "w8a8");  // same activation width
  EXPECT_EQ(a.scheme("blk.0.ffn_up.weight"), "w4a8 g64 sym");
  ASSERT_EQ(a.notes.size(), 4u);  // one per layer
  EXPECT_HAS(a.notes[0], "blk.0.ffn_down.weight");
  EXPECT_HAS(a.notes[0], "using w8a8");

  a = assign_json(R"({"default": "w4a16", "group_size": 64, "auto_fallback": true})");
  ASSERT_TRUE(a.status) << a.status.message();
  EXPECT_EQ(a.scheme("blk.0.ffn_down.weight"), "w8a16");
  EXPECT_EQ(a.scheme("blk.0.ffn_up.weight"), "w4a16 g64 sym");
  a = assign_json(R"({"default": "w4a16", "group_size": 128, "auto_fallback": true})");
  ASSERT_TRUE(a.status) << a.status.message();
  EXPECT_EQ(a.scheme("blk.0.ffn_up.weight"), "w8a16");  // 64 columns: no group of 128 fits
  EXPECT_EQ(a.notes.size(), tiny_model().size() - 9);   // every matmul weight (9 are norms)
}

// ---- errors, each naming its cause ----

TEST(OverridesErrors, RuleThatMatchesNothing) {
  std::string e = assign_error(R"({"rules": [{"op": "attention", "scheme": "f16"},
                                             {"match": "blk.*.atn_*", "scheme": "f16"}]})");
  EXPECT_EQ(e, kPath + ": rule 2 ({\"match\": \"blk.*.atn_*\"}) matches no tensor");
  e = assign_error(R"({"rules": [{"layers": [7, 9], "scheme": "f16"}]})");
  EXPECT_EQ(e, kPath + ": rule 1 ({\"layers\": [7, 9]}) matches no tensor");
  e = assign_error(R"({"rules": [{"match": "blk.0.*", "op": "output", "scheme": "f16"}]})");
  EXPECT_HAS(e, "matches no tensor");
}

// Issue 23, row 3: compile puts a classifier guard before the file's rules; a one-rule file's rule
// is still "rule 1".
TEST(OverridesErrors, RuleNumberIsTheFilesOwnThroughCompile) {
  const std::string path = test::temp_dir() + "/one_rule.json";
  test::write_file(path, R"({"rules": [{"match": "nope*", "scheme": "w8a16"}]})");
  auto r = test::run_kiln("compile " + test::shell_quote(test::shipped_model()) + " -q w4a16 -o " +
                          test::shell_quote(test::temp_dir() + "/one_rule.kiln") + " --overrides " + test::shell_quote(path));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err, "kiln: error: " + path + ": rule 1 ({\"match\": \"nope*\"}) matches no tensor\n");
}

TEST(OverridesErrors, LayersPastTheModelAreANote) {
  Assigned a = assign_json(R"({"rules": [{"layers": [2, 40], "scheme": "f16"}]})");
  ASSERT_TRUE(a.status) << a.status.message();
  ASSERT_EQ(a.notes.size(), 1u);
  EXPECT_HAS(a.notes[0], "last layer is 3");
}

TEST(OverridesErrors, UnknownNamesAreNamed) {
  std::string e = parse_error(R"({"default": "w4a17"})");
  EXPECT_HAS(e, "'default'");
  EXPECT_HAS(e, "\"w4a17\"");
  EXPECT_HAS(e, "w4a16");  // lists the known ones
  e = parse_error(R"({"rules": [{"match": "x", "scheme": "int8"}]})");
  EXPECT_HAS(e, "rule 1");
  EXPECT_HAS(e, "\"int8\"");
  e = parse_error(R"({"rules": [{"op": "attn", "scheme": "f16"}]})");
  EXPECT_HAS(e, "\"attn\"");
  EXPECT_HAS(e, "attention");
  e = parse_error(R"({"defualt": "w8a16"})");
  EXPECT_HAS(e, "unknown key \"defualt\"");
  e = parse_error(R"({"rules": [{"op": "ffn", "scheme": "f16"}, {"op": "ffn", "sheme": "f16"}]})");
  EXPECT_HAS(e, "rule 2: unknown key \"sheme\"");
}

TEST(OverridesErrors, BadValues) {
  EXPECT_HAS(parse_error(R"({"group_size": 48})"), "48 is not one of 32, 64, 128");
  EXPECT_HAS(parse_error(R"({"group_size": "32"})"), "'group_size' must be an integer");
  EXPECT_HAS(parse_error(R"({"symmetric": 1})"), "'symmetric' must be true or false");
  EXPECT_HAS(parse_error(R"({"auto_fallback": "yes"})"), "'auto_fallback'");
  EXPECT_HAS(parse_error(R"({"default": 4})"), "'default' must be a string");
  EXPECT_HAS(parse_error(R"({"rules": {"op": "ffn"}})"), "'rules' must be an array");
  EXPECT_HAS(parse_error(R"({"rules": ["ffn"]})"), "rule 1: a rule is a JSON object");
  EXPECT_HAS(parse_error(R"({"rules": [{"op": "ffn"}]})"), "rule 1: has no 'scheme'");
  EXPECT_HAS(parse_error(R"({"rules": [{"scheme": "f16"}]})"), "has no 'match', 'layers' or 'op'");
  EXPECT_HAS(parse_error(R"({"rules": [{"match": "", "scheme": "f16"}]})"), "'match' is empty");
  EXPECT_HAS(parse_error(R"({"rules": [{"match": 3, "scheme": "f16"}]})"), "'match' must be a string");
  EXPECT_HAS(parse_error(R"({"rules": [{"layers": [3, 1], "scheme": "f16"}]})"), "first is after last");
  EXPECT_HAS(parse_error(R"({"rules": [{"layers": [1, 2, 3], "scheme": "f16"}]})"), "[first, last]");
  EXPECT_HAS(parse_error(R"({"rules": [{"layers": [-1, 2], "scheme": "f16"}]})"), "not a layer number");
  EXPECT_HAS(parse_error(R"({"rules": [{"layers": [0, 1e9], "scheme": "f16"}]})"), "'layers'");
  EXPECT_HAS(parse_error(R"({"rules": [{"layers": "0-3", "scheme": "f16"}]})"), "'layers'");
  EXPECT_HAS(parse_error(R"({"rules": [{"layers": [0, 99999999999], "scheme": "f16"}]})"), "not a layer number");
  EXPECT_HAS(parse_error(R"({"rules": [{"op": "ffn", "scheme": "w8a8", "group_size": 64}]})"),
             "'group_size' applies to 4-bit schemes (w4a16, w4a8) and w8a16 groups only, not w8a8");
  EXPECT_HAS(parse_error(R"({"rules": [{"op": "ffn", "scheme": "w8a16", "group_size": 48}]})"), "48");
  EXPECT_HAS(parse_error(R"({"rules": [{"op": "ffn", "scheme": "f16", "symmetric": false}]})"),
             "'symmetric' applies to 4-bit schemes");
  EXPECT_HAS(parse_error(R"({"rules": [{"op": "ffn", "scheme": "w4a16", "group_size": 16}]})"),
             "rule 1: 'group_size' 16");
}

TEST(OverridesErrors, MalformedJson) {
  EXPECT_HAS(parse_error(""), "malformed JSON");
  EXPECT_HAS(parse_error("{\"default\": \"w4a16\""), "malformed JSON");
  EXPECT_HAS(parse_error("{\"default\": \"w4a16\",}"), "malformed JSON");
  EXPECT_HAS(parse_error("{\"default\": \"\xff\"}"), "UTF-8");
  EXPECT_HAS(parse_error("[]"), "is a JSON object");
  EXPECT_HAS(parse_error("\"w4a16\""), "is a JSON object");
}

TEST(OverridesErrors, NegativeShape) {
  auto weights = tiny_model(1);
  weights[2].cols = -5;
  auto f = overrides_from_flags("w8a16");
  ASSERT_TRUE(f);
  Assigned a = assign(*f, weights);
  ASSERT_FALSE(a.status);
  EXPECT_HAS(a.status.message(), "blk.0.attn_q.weight: negative shape");
}

TEST(OverridesErrors, ProgrammaticRulesAreChecked) {
  OverridesFile f;
  Rule r;
  r.op = "ffn";
  r.params = {Scheme::kW4A16, 40, true};
  f.rules.push_back(r);
  Assigned a = assign(f);
  ASSERT_FALSE(a.status);
  EXPECT_HAS(a.status.message(), "rule 1 ({\"op\": \"ffn\"})");
  EXPECT_HAS(a.status.message(), "group size 40");
  // Notes may be discarded.
  auto ok = assign_schemes(overrides_from_flags("f16").value(), tiny_model(), kPath, nullptr);
  EXPECT_TRUE(ok);
}

}  // namespace
}  // namespace kiln
