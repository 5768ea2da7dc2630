// The profiler (runtime/step_trace.h, src/perf/): what a traced session records, the cost model
// against the weights, the batched decode step traced per session, --check-numerics on a model
// with a NaN weight (tests/gen/make_nan_model.py), `kiln profile`'s JSON, trace and report, and
// the C API's profiling fields.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "engine/defaults.h"
#include "engine/open_model.h"
#include "kiln/kiln.h"
#include "perf/html_report.h"
#include "perf/profile.h"
#include "perf/profile_text.h"
#include "perf/weight_summary.h"
#include "runtime/numerics_check.h"
#include "runtime/session.h"
#include "test_util.h"

namespace kiln {
namespace {

using nlohmann::json;

OpenedModel open_w4a16() {
  OpenOptions oo;
  oo.quant = *source_scheme("w4a16", 32);
  auto m = open_model(test::shipped_model(), oo);
  EXPECT_TRUE(m) << m.status().message();
  return std::move(*m);
}

std::string nan_model() { return test::data_path("nan-weight/stories260K-nan.bin"); }

// A prompt of n tokens, then `gen` greedy tokens; returns the generated ones.
std::vector<int> run_greedy(Session& s, int n, int gen) {
  std::vector<int> prompt;
  for (int i = 0; i < n; ++i) prompt.push_back((i * 37 + 1) % s.config().vocab_size);
  std::vector<int> out;
  auto l = s.decode(prompt);
  EXPECT_TRUE(l) << l.status().message();
  for (int i = 0; i < gen && l; ++i) {
    const int next = static_cast<int>(std::max_element(l->begin(), l->end()) - l->begin());
    out.push_back(next);
    l = s.decode(std::span<const int>(&next, 1));
    EXPECT_TRUE(l) << l.status().message();
  }
  return out;
}

TEST(Profile, DetailedRecordsEveryInstructionWithinItsStep) {
  OpenedModel m = open_w4a16();
  auto s = *Session::create(m.model, 128, 1, DType::kF32);
  StepTracer t(ProfileLevel::kDetailed);
  s->set_tracer(&t);
  const std::vector<int> traced = run_greedy(*s, 64, 8);
  const size_t nodes = m.model->program().graph.nodes.size();
  ASSERT_EQ(t.steps().size(), 9u);  // one prefill step (64 <= max_tokens) and 8 decode steps
  EXPECT_EQ(t.instructions().size(), 9 * nodes);
  for (const StepRecord& r : t.steps()) {
    ASSERT_EQ(r.n_instructions, nodes);
    EXPECT_GT(r.rss_bytes, 0u);
    uint64_t sum = 0, last = r.begin_ns;
    for (uint32_t k = r.first_instruction; k < r.first_instruction + r.n_instructions; ++k) {
      const InstructionRecord& i = t.instructions()[k];
      EXPECT_EQ(i.node, static_cast<int>(k - r.first_instruction));
      EXPECT_GE(i.begin_ns, last);  // in order, inside the step
      EXPECT_GE(i.end_ns, i.begin_ns);
      last = i.end_ns;
      sum += i.end_ns - i.begin_ns;
    }
    EXPECT_LE(last, r.end_ns);
    EXPECT_LE(sum, r.end_ns - r.begin_ns);
    // The prefill step (64 tokens, ~0.5 ms) is nearly all instructions; a 40-microsecond decode
    // step of this tiny model has per-step costs outside them (the TinyLlama figure is in the
    // README).
    if (r.tokens == 64) EXPECT_GT(static_cast<double>(sum), 0.95 * static_cast<double>(r.end_ns - r.begin_ns));
  }
  // Tracing changes no result.
  auto plain = *Session::create(m.model, 128, 1, DType::kF32);
  EXPECT_EQ(run_greedy(*plain, 64, 8), traced);
}

TEST(Profile, BasicRecordsStepsOnlyAndOffRecordsNothing) {
  OpenedModel m = open_w4a16();
  auto s = *Session::create(m.model, 64, 1, DType::kF32);
  StepTracer basic(ProfileLevel::kBasic);
  s->set_tracer(&basic);
  run_greedy(*s, 10, 5);
  EXPECT_EQ(basic.steps().size(), 6u);
  EXPECT_TRUE(basic.instructions().empty());
  s->reset();
  StepTracer off(ProfileLevel::kOff);
  s->set_tracer(&off);
  run_greedy(*s, 10, 5);
  EXPECT_TRUE(off.steps().empty());
  EXPECT_TRUE(off.instructions().empty());
  EXPECT_FALSE(off.fault());
}

TEST(Profile, EachMatmulReadsItsWeightBytesAndATokenReadsWhatBenchCounts) {
  OpenedModel m = open_w4a16();
  const Model& cm = *m.model;
  auto s = *Session::create(m.model, 64, 1, DType::kF32);
  StepTracer t(ProfileLevel::kDetailed);
  s->set_tracer(&t);
  run_greedy(*s, 8, 4);
  const Profile p = build_profile(cm, t, DType::kF32, 1, memory_parts(*s), Ceilings{});
  const Graph& g = cm.program().graph;
  int matmuls = 0;
  for (const InstructionSample& i : p.instructions) {
    const Node& n = g.nodes[static_cast<size_t>(i.node)];
    if (p.nodes[static_cast<size_t>(i.node)].kind != "matmul") continue;
    ++matmuls;
    uint64_t bytes = 0;
    for (int w : n.weights) bytes += cm.image().weights[static_cast<size_t>(w)].size();
    EXPECT_EQ(i.cost.weight_bytes, static_cast<double>(bytes)) << p.nodes[static_cast<size_t>(i.node)].kernel;
    EXPECT_GT(i.cost.products, 0);
  }
  EXPECT_GT(matmuls, 0);
  // A decode step reads what `kiln bench` counts per token, plus the embedding row it gathers
  // when the table is also the classifier (bench counts the table once).
  const WeightSummary ws = summarize_weights(cm);
  const int e = g.find_weight("token_embd.weight");
  ASSERT_GE(e, 0);
  bool tied = false;
  for (const Node& n : g.nodes)
    if (n.op != OpCode::kEmbed)
      for (int w : n.weights) tied = tied || w == e;
  const double row = static_cast<double>(cm.image().weights[static_cast<size_t>(e)].size()) /
                     static_cast<double>(g.weights[static_cast<size_t>(e)].shape[0]);
  ASSERT_EQ(p.decode.steps, 4);
  for (const StepSample& st : p.steps)
    if (st.phase == Phase::kDecode)
      EXPECT_DOUBLE_EQ(st.cost.weight_bytes, static_cast<double>(ws.read_per_token) + (tied ? row : 0.0));
  // The KV cache a decode step reads: every position so far, K and V, of every layer.
  const ModelConfig& c = cm.config();
  const StepSample& first_decode = p.steps[1];
  EXPECT_DOUBLE_EQ(first_decode.cost.kv_read, 2.0 * c.n_layers * c.kv_dim() * 4 * (8 + 1));
  EXPECT_DOUBLE_EQ(first_decode.cost.kv_written, 2.0 * c.n_layers * c.kv_dim() * 4);
  // The summaries add up.
  double share = 0, seconds = 0;
  for (const Tally& x : p.decode.by_op) share += x.share, seconds += x.seconds;
  EXPECT_NEAR(share, 1.0, 1e-9);
  EXPECT_NEAR(seconds, p.decode.instruction_seconds, 1e-12);
  EXPECT_EQ(p.decode.by_layer.size(), static_cast<size_t>(c.n_layers) + 3);  // and the embedding, final norm, classifier
}

// A detailed profile of the shipped model at w4a16: a prompt of 8 tokens, 4 decode steps.
struct Traced {
  OpenedModel m = open_w4a16();
  std::unique_ptr<Session> s = std::move(*Session::create(m.model, 64, 1, DType::kF32));
  StepTracer t{ProfileLevel::kDetailed};
  Traced() {
    s->set_tracer(&t);
    run_greedy(*s, 8, 4);
  }
  Profile profile(const Ceilings& c) const { return build_profile(*m.model, t, DType::kF32, 1, memory_parts(*s), c); }
};

// [begin, end) of each run of non-blank characters of a line.
std::vector<std::pair<size_t, size_t>> fields(const std::string& line) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < line.size();) {
    if (line[i] == ' ') {
      ++i;
      continue;
    }
    const size_t b = i;
    while (i < line.size() && line[i] != ' ') ++i;
    out.emplace_back(b, i);
  }
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t b = 0;
  for (size_t e; (e = text.find('\n', b)) != std::string::npos; b = e + 1) out.push_back(text.substr(b, e - b));
  return out;
}

// Issue 38 item 14: each header label of the text tables sits over its column (it was 8 columns
// left of its values): the numbers are right-aligned, so each label ends where every value of its
// column ends, and the names start where the header's first field does. With measured ceilings
// the same holds for %bw and %comp; an op without products shows "-" as its %comp, not 0.0%.
TEST(Profile, TextTableHeadersSitOverTheirColumns) {
  Traced tr;
  Ceilings measured;
  measured.bandwidth_gbs = 10;
  for (const auto& k : needed_rates(tr.profile(Ceilings{}))) measured.product_rate[k] = 1e12;  // a fraction under 100 %, as measured ones are
  for (const Ceilings& c : {Ceilings{}, measured}) {
    const std::string text = profile_to_text(tr.profile(c), 0);
    const std::vector<std::string> lines = lines_of(text);
    const std::vector<std::string> labels = c.bandwidth_gbs > 0
        ? std::vector<std::string>{"count", "ms", "share", "GB/s", "GOP/s", "%bw", "%comp"}
        : std::vector<std::string>{"count", "ms", "share", "GB/s", "GOP/s"};
    int tables = 0, rows = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].find(" count ") == std::string::npos) continue;
      ++tables;
      const auto head = fields(lines[i]);
      ASSERT_EQ(head.size(), labels.size()) << lines[i];
      for (size_t k = 0; k < labels.size(); ++k) EXPECT_EQ(lines[i].substr(head[k].first, head[k].second - head[k].first), labels[k]);
      EXPECT_EQ(lines[i].find_first_not_of(' '), 4 + 52 + 1 + 6 - 5) << "the first label ends its field:\n" << lines[i];
      for (size_t r = i + 1; r < lines.size() && lines[r].rfind("    ", 0) == 0; ++r, ++rows) {
        const auto v = fields(lines[r]);
        ASSERT_GE(v.size(), labels.size() + 1) << lines[r];
        EXPECT_EQ(v.front().first, 4u) << lines[r];  // the name column
        for (size_t k = 0; k < labels.size(); ++k)
          EXPECT_EQ(v[v.size() - labels.size() + k].second, head[k].second)
              << "column " << labels[k] << " of\n" << lines[i] << "\n" << lines[r];
      }
    }
    EXPECT_EQ(tables, 10);  // five tables, prefill and decode
    EXPECT_GT(rows, 40);
  }
  // The norm has no products: no compute fraction to give.
  const std::string text = profile_to_text(tr.profile(measured), 0);
  const size_t norm = text.find("\n    norm ");
  ASSERT_NE(norm, std::string::npos) << text;
  const std::string line = text.substr(norm + 1, text.find('\n', norm + 1) - norm - 1);
  EXPECT_EQ(line.substr(line.size() - 2), " -") << line;
}

// Issue 38 item 14: with --no-ceilings (or from the C API) the report has no %-of-ceiling columns
// rather than a column of 0.0%; with the bandwidth measured and no product rates, the bandwidth
// fraction is there and the compute one is "-".
TEST(Profile, ReportShowsNoFractionOfAnUnmeasuredCeiling) {
  Traced tr;
  const std::string none = profile_to_html(tr.profile(Ceilings{}));
  EXPECT_EQ(none.find("% bandwidth"), std::string::npos);
  EXPECT_EQ(none.find("% compute"), std::string::npos);
  EXPECT_NE(none.find("<th>FLOP/B</th></tr>"), std::string::npos);
  Ceilings bw;
  bw.bandwidth_gbs = 10;
  const std::string some = profile_to_html(tr.profile(bw));
  EXPECT_NE(some.find("<th>% bandwidth</th><th>% compute</th></tr>"), std::string::npos);
  EXPECT_NE(some.find("%</td><td>-</td></tr>"), std::string::npos);  // a fraction of the bandwidth, none of compute
  EXPECT_EQ(some.find("<td>0.0%</td><td>0.0%</td>"), std::string::npos);
}

// Issue 38 item 14: the nodes outside the layers are named by their role, in the tables and in the
// report's layer chart (they were all "no layer"); the roofline's dots carry their op's name.
TEST(Profile, PartsOutsideTheLayersAreNamedAndDotsLabelled) {
  Traced tr;
  const Profile p = tr.profile(Ceilings{});
  std::vector<std::string> parts;
  for (const Tally& t : p.decode.by_layer) parts.push_back(t.key);
  std::sort(parts.begin(), parts.end());
  EXPECT_EQ(parts, (std::vector<std::string>{"classifier", "embedding", "final norm", "layer 0", "layer 1", "layer 2", "layer 3",
                                             "layer 4"}));
  const std::string text = profile_to_text(p, 0);
  EXPECT_EQ(text.find("no layer"), std::string::npos);
  EXPECT_NE(text.find("\n    classifier "), std::string::npos) << text;
  const std::string html = profile_to_html(p);
  EXPECT_EQ(html.find("no layer"), std::string::npos);
  // The layer chart's bars in the program's order: the embedding first, the classifier last.
  const size_t svg = html.find("<svg id=\"layers\"");
  const size_t embedding = html.find(">embedding</text>", svg), layer0 = html.find(">layer 0</text>", svg),
               layer4 = html.find(">layer 4</text>", svg), norm = html.find(">final norm</text>", svg),
               classifier = html.find(">classifier</text>", svg);
  ASSERT_NE(classifier, std::string::npos) << html.substr(svg, 3000);
  EXPECT_LT(embedding, layer0);
  EXPECT_LT(layer0, layer4);
  EXPECT_LT(layer4, norm);
  EXPECT_LT(norm, classifier);
  // The roofline's dots are named by their op (where names would cover each other, one stands
  // for the cluster): three dots far apart, three names.
  Profile r;
  r.nodes = {{"matmul_add", "cpu", "cpu matmul_add w4a16 g32 [r16]", "matmul", 3, "layer 3"},
             {"attention", "cpu", "cpu attention", "attention", 3, "layer 3"},
             {"matmul", "cpu", "cpu matmul w8a16 [r16]", "matmul", -1, "classifier"}};
  r.decode.steps = 1;
  for (int n = 0; n < 3; ++n) {
    Tally t;
    t.key = std::to_string(n) + " " + r.nodes[static_cast<size_t>(n)].kernel;
    t.count = 1;
    t.seconds = 1e-3;
    t.cost.weight_bytes = 1e6;
    t.cost.flops = 1e6 * std::pow(30.0, n);  // 1, 30 and 900 FLOPs per byte
    r.decode.by_node.push_back(t);
  }
  const std::string roofline = profile_to_html(r);
  const size_t roof = roofline.find("<svg id=\"roofline\"");
  ASSERT_NE(roof, std::string::npos);
  const std::string chart = roofline.substr(roof, roofline.find("</svg>", roof) - roof);
  for (const char* label : {">matmul_add</text>", ">attention</text>", ">matmul (classifier)</text>"})
    EXPECT_NE(chart.find(label), std::string::npos) << label << "\n" << chart;
  // On the real profile, every name written is an op's.
  for (size_t at = html.find("<text class=\"dot\""); at != std::string::npos; at = html.find("<text class=\"dot\"", at + 1)) {
    const size_t b = html.find('>', at) + 1;
    const std::string name = html.substr(b, html.find('<', b) - b);
    EXPECT_TRUE(std::any_of(p.nodes.begin(), p.nodes.end(), [&](const NodeInfo& n) {
      return name == n.op || name == n.op + " (" + n.part + ")";
    })) << name;
  }
}

// Issue 38 item 14: resident memory that does not change is a sentence, not a flat line; memory
// that does is drawn.
TEST(Profile, UnchangingMemoryIsSaidNotDrawn) {
  Profile p;
  for (int i = 0; i < 5; ++i) {
    StepSample s;
    s.record.tokens = 1;
    s.record.begin_ns = 1000000ull * i;
    s.record.end_ns = 1000000ull * i + 900000;
    s.record.rss_bytes = 50ull << 20;
    p.steps.push_back(s);
  }
  const std::string flat = profile_to_html(p);
  EXPECT_NE(flat.find("<p id=\"memory\">Resident memory stayed at 50.0 MiB through all 5 steps (4.9 ms): nothing to draw.</p>"),
            std::string::npos)
      << flat;
  EXPECT_EQ(flat.find("<svg id=\"memory\""), std::string::npos);
  p.steps.back().record.rss_bytes = 60ull << 20;
  const std::string grows = profile_to_html(p);
  EXPECT_NE(grows.find("<svg id=\"memory\""), std::string::npos);
  EXPECT_EQ(grows.find("Resident memory stayed"), std::string::npos);
}

// Two sessions decoding at once share steps (Session::run_batch); each tracer records
// every step its session had a row in, and tracing changes no token.
TEST(Profile, BatchedDecodeStepsAreTracedPerSession) {
  OpenedModel m = open_w4a16();
  auto exec = std::make_shared<StepExecutor>(2);
  std::vector<int> want[2];
  for (int i = 0; i < 2; ++i) {
    auto solo = *Session::create(m.model, 64, 1, DType::kF32);
    want[i] = run_greedy(*solo, 5 + i, 12);
  }
  std::unique_ptr<Session> s[2];
  StepTracer t[2] = {StepTracer(ProfileLevel::kDetailed, true), StepTracer(ProfileLevel::kBasic, true)};
  std::vector<int> got[2];
  for (int i = 0; i < 2; ++i) {
    s[i] = *Session::create(m.model, 64, exec, DType::kF32);
    s[i]->set_tracer(&t[i]);
  }
  exec->decoding().fetch_add(2);
  {
    std::jthread a([&] { got[0] = run_greedy(*s[0], 5, 12); });
    std::jthread b([&] { got[1] = run_greedy(*s[1], 6, 12); });
  }
  exec->decoding().fetch_sub(2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(got[i], want[i]) << "session " << i;
    ASSERT_EQ(t[i].steps().size(), 13u);
    EXPECT_FALSE(t[i].fault());
    for (const StepRecord& r : t[i].steps()) EXPECT_GE(r.end_ns, r.begin_ns);
  }
  EXPECT_EQ(t[0].instructions().size(), 13 * m.model->program().graph.nodes.size());
  EXPECT_TRUE(t[1].instructions().empty());
}

TEST(Profile, CheckNumericsNamesTheOpAndLayerOfTheNaNWeight) {
  OpenOptions oo;  // f32: a NaN cannot be quantized
  oo.tokenizer_path = test::data_path("nan-weight/tok512.bin");
  auto m = open_model(nan_model(), oo);
  ASSERT_TRUE(m) << m.status().message();
  auto s = *Session::create(m->model, 64, 1, DType::kF32);
  StepTracer t(ProfileLevel::kOff, true);
  s->set_tracer(&t);
  const int prompt[3] = {1, 20, 30};
  auto r = s->decode(prompt);
  ASSERT_FALSE(r);
  ASSERT_TRUE(t.fault());
  const NumericsFault& f = *t.fault();
  EXPECT_EQ(f.layer, 2);
  EXPECT_EQ(f.op, OpCode::kRmsNormMatMulQKV);
  EXPECT_EQ(f.position, 0);
  EXPECT_EQ(f.value, "blk.2.q");
  EXPECT_EQ(f.index, 0);
  ASSERT_EQ(f.inputs.size(), 1u);
  EXPECT_EQ(f.inputs[0].value, "blk.1.x.ffn");
  EXPECT_EQ(f.inputs[0].nonfinite, 0);
  EXPECT_LT(f.inputs[0].min, f.inputs[0].max);
  EXPECT_EQ(r.status().message(), f.message());
  EXPECT_NE(f.message().find("rms_norm_matmul_qkv (node 13, layer 2) at token position 0"), std::string::npos) << f.message();
  EXPECT_EQ(s->position(), 0);  // the step did not count
  // Unchecked, the same step "succeeds" with NaN logits: what the check is for.
  s->set_tracer(nullptr);
  auto unchecked = s->decode(prompt);
  ASSERT_TRUE(unchecked);
  EXPECT_TRUE(std::isnan((*unchecked)[0]));
}

TEST(ProfileCli, CheckNumericsExitsTwoNamingLayerAndOp) {
  const std::string tok = " --tokenizer " + test::shell_quote(test::data_path("nan-weight/tok512.bin"));
  auto r = test::run_kiln("run " + test::shell_quote(nan_model()) + tok + " --check-numerics -p Once -n 4");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("kiln: error: non-finite value (nan) in 'blk.2.q' [0], written by rms_norm_matmul_qkv (node 13, "
                       "layer 2) at token position 0; its inputs: blk.1.x.ffn in ["),
            std::string::npos)
      << r.err;
  auto p = test::run_kiln("profile " + test::shell_quote(nan_model()) + tok +
                          " -q f32 --check-numerics --level basic -p 8 -n 4 -t 1 --json");
  EXPECT_EQ(p.exit_code, 2);
  const json j = json::parse(p.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << p.out;
  EXPECT_EQ(j["numerics_fault"]["layer"], 2);
  EXPECT_EQ(j["numerics_fault"]["op"], "rms_norm_matmul_qkv");
  EXPECT_EQ(j["numerics_fault"]["position"], 0);
  // The shipped model passes the check.
  auto ok = test::run_kiln("run " + test::shell_quote(test::shipped_model()) + " --check-numerics -p Once -n 8 --seed 1");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

TEST(ProfileCli, JsonSummary) {
  auto r = test::run_kiln("profile " + test::shell_quote(test::shipped_model()) +
                          " -p 16 -n 8 -t 1 --json --top 0 --no-ceilings");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["level"], "detailed");
  EXPECT_EQ(j["threads"], 1);
  EXPECT_EQ(j["prefill"]["tokens"], 16);
  EXPECT_EQ(j["prefill"]["steps"], 1);
  EXPECT_EQ(j["decode"]["tokens"], 8);
  EXPECT_EQ(j["decode"]["steps"], 8);
  EXPECT_GT(j["time_to_first_token_s"].get<double>(), 0);
  EXPECT_GT(j["decode"]["tokens_per_second"].get<double>(), 0);
  for (const char* k : {"by_op", "by_kind", "by_backend", "by_layer", "by_instruction"}) {
    ASSERT_TRUE(j["decode"][k].is_array()) << k;
    double share = 0;
    for (const json& t : j["decode"][k]) {
      share += t["share"].get<double>();
      EXPECT_GT(t["count"].get<int>(), 0);
      EXPECT_GE(t["seconds"].get<double>(), 0);
    }
    EXPECT_NEAR(share, 1.0, 1e-6) << k;
  }
  EXPECT_EQ(j["decode"]["by_backend"][0]["name"], "cpu");
  EXPECT_EQ(j["decode"]["by_layer"].size(), 8u);  // 5 layers, the embedding, the final norm and the classifier
  std::set<std::string> parts;
  for (const json& t : j["decode"]["by_layer"]) parts.insert(t["name"].get<std::string>());
  for (const char* part : {"embedding", "final norm", "classifier", "layer 4"}) EXPECT_EQ(parts.count(part), 1u) << part;
  const json& mem = j["memory"];
  EXPECT_GT(mem["peak_rss_bytes"].get<uint64_t>(), 0u);
  EXPECT_GT(mem["weights_mapped_bytes"].get<uint64_t>(), 0u);
  EXPECT_LE(mem["weights_resident_bytes"].get<uint64_t>(), mem["weights_mapped_bytes"].get<uint64_t>());
  EXPECT_EQ(mem["kv_cache_bytes"].get<uint64_t>(), 2u * 5 * 24 * 32 * 4);  // K and V, 5 layers, 24 positions, kv_dim 32, f32
  EXPECT_EQ(j["ceilings"]["bandwidth_gb_per_s"], 0);
}

TEST(ProfileCli, OverheadTimesTracedAgainstUntracedSteps) {
  auto r = test::run_kiln("profile " + test::shell_quote(test::shipped_model()) +
                          " -p 8 -n 4 -t 1 --no-ceilings --overhead 12");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Both estimates and the count: 12 traced steps, each with an untraced one on either side.
  EXPECT_NE(r.err.find("kiln: overhead: decode step median "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" ms detailed ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("median of each traced step against its untraced neighbours "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("), 12 steps each, alternated"), std::string::npos) << r.err;
}

TEST(ProfileCli, CeilingsAreMeasuredAndFractionsFollow) {
  auto r = test::run_kiln("profile " + test::shell_quote(test::shipped_model()) +
                          " -p 16 -n 4 -t 1 --json --top 0 --bw-mib 64 --bw-passes 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  const double bw = j["ceilings"]["bandwidth_gb_per_s"].get<double>();
  EXPECT_GT(bw, 0);
  ASSERT_FALSE(j["ceilings"]["products_per_s"].empty());
  for (const json& t : j["decode"]["by_op"])
    EXPECT_NEAR(t["bandwidth_fraction"].get<double>(), t["gb_per_s"].get<double>() / bw, 1e-9);
  bool some_compute = false;
  for (const json& t : j["prefill"]["by_kind"])
    if (t["name"] == "matmul") some_compute = t["compute_fraction"].get<double>() > 0;
  EXPECT_TRUE(some_compute);
}

// Every event of the trace: the trace-event format's fields for its phase, slices of instructions
// inside their step's slice on the same track, one instruction slice per node per step.
TEST(ProfileCli, TraceIsValidTraceEventJson) {
  const std::string path = test::temp_dir() + "/trace.json";
  auto r = test::run_kiln("profile " + test::shell_quote(test::shipped_model()) + " -p 8 -n 3 -t 1 --no-ceilings --trace " +
                          test::shell_quote(path));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(test::read_file(path), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["displayTimeUnit"], "ms");
  const json& ev = j["traceEvents"];
  ASSERT_TRUE(ev.is_array());
  struct Slice {
    double ts, dur;
    int tid;
  };
  std::vector<Slice> steps;
  int instructions = 0, counters = 0, metadata = 0;
  for (const json& e : ev) {
    ASSERT_TRUE(e.is_object());
    ASSERT_TRUE(e["name"].is_string()) << e.dump();
    ASSERT_TRUE(e["ph"].is_string()) << e.dump();
    ASSERT_TRUE(e["pid"].is_number_integer()) << e.dump();
    const std::string ph = e["ph"];
    if (ph == "M") {
      ++metadata;
      ASSERT_TRUE(e["tid"].is_number_integer());
      ASSERT_TRUE(e["args"]["name"].is_string()) << e.dump();
      EXPECT_TRUE(e["name"] == "process_name" || e["name"] == "thread_name") << e.dump();
    } else if (ph == "C") {
      ++counters;
      ASSERT_TRUE(e["ts"].is_number()) << e.dump();
      ASSERT_TRUE(e["args"].is_object());
      for (const auto& [k, v] : e["args"].items()) EXPECT_TRUE(v.is_number()) << k;
    } else {
      ASSERT_EQ(ph, "X") << e.dump();
      ASSERT_TRUE(e["ts"].is_number()) << e.dump();
      ASSERT_TRUE(e["dur"].is_number()) << e.dump();
      ASSERT_TRUE(e["tid"].is_number_integer()) << e.dump();
      ASSERT_TRUE(e["cat"].is_string()) << e.dump();
      EXPECT_GE(e["dur"].get<double>(), 0);
      const Slice s{e["ts"].get<double>(), e["dur"].get<double>(), e["tid"].get<int>()};
      if (e["cat"] == "step") {
        steps.push_back(s);
        continue;
      }
      ++instructions;
      for (const char* k : {"node", "layer", "rows"}) ASSERT_TRUE(e["args"][k].is_number_integer()) << k;
      for (const char* k : {"backend", "kernel"}) ASSERT_TRUE(e["args"][k].is_string()) << k;
      for (const char* k : {"weight_bytes", "activation_bytes", "kv_bytes", "flops", "gb_per_s", "gop_per_s"})
        ASSERT_TRUE(e["args"][k].is_number()) << k;
      bool inside = false;
      for (const Slice& st : steps)
        inside = inside || (st.tid == s.tid && s.ts >= st.ts - 1e-3 && s.ts + s.dur <= st.ts + st.dur + 1e-3);
      EXPECT_TRUE(inside) << e.dump();
    }
  }
  EXPECT_EQ(metadata, 2);  // the process and its one thread
  EXPECT_EQ(steps.size(), 4u);
  EXPECT_EQ(counters, 4);
  EXPECT_EQ(instructions, 4 * 33);  // the shipped model's w4a16 program has 33 instructions
}

// Headless Chromium (Debian's `chromium`, where installed) opens the report without a console
// message (the page forbids every fetch, so a reference to anything outside it would log a
// violation) and draws it; a page with a script error shows that the log would tell.
TEST(ProfileCli, HtmlReportOpensInChromiumWithoutConsoleErrors) {
  const std::string dir = test::temp_dir();
  const std::string report = dir + "/report.html";
  auto r = test::run_kiln("profile " + test::shell_quote(test::shipped_model()) + " -p 16 -n 8 -t 1 --bw-mib 64 --bw-passes 2 --report " +
                          test::shell_quote(report));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string html = test::read_file(report);
  for (const char* id : {"<svg id=\"layers\"", "<svg id=\"roofline\"", "<h2>decode</h2>", "<h2>memory</h2>"})
    EXPECT_NE(html.find(id), std::string::npos) << id;
  // Memory over time: a chart, or the sentence that says it did not change.
  EXPECT_TRUE(html.find("<svg id=\"memory\"") != std::string::npos || html.find("<p id=\"memory\">Resident memory stayed at ") != std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  if (!std::filesystem::exists("/usr/bin/chromium")) GTEST_SKIP() << "no /usr/bin/chromium";
  auto open = [&](const std::string& page, const std::string& shot) {
    const std::string log = shot + ".log";
    const std::string cmd = "timeout 120 /usr/bin/chromium --headless=new --disable-gpu --no-sandbox --window-size=1400,1000 "
                            "--enable-logging=stderr --v=0 --screenshot=" + test::shell_quote(shot) + " " +
                            test::shell_quote("file://" + page) + " > " + test::shell_quote(log) + " 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << test::read_file(log);
    return test::read_file(log);
  };
  const std::string log = open(report, dir + "/report.png");
  EXPECT_EQ(log.find(":CONSOLE"), std::string::npos) << log;
  EXPECT_EQ(log.find("Content Security Policy"), std::string::npos) << log;
  // A drawn 1400 x 1000 page of charts, not a blank one (a blank PNG is a few kB).
  EXPECT_GT(std::filesystem::file_size(dir + "/report.png"), 20000u);
  const std::string bad = dir + "/bad.html";
  test::write_file(bad, "<html><body><script>console.error('boom'); missing();</script></body></html>");
  const std::string bad_log = open(bad, dir + "/bad.png");
  EXPECT_NE(bad_log.find(":CONSOLE"), std::string::npos) << bad_log;
}

TEST(ProfileCli, UsageErrors) {
  const std::string model = test::shell_quote(test::shipped_model());
  auto r = test::run_kiln("profile " + model + " --level everything");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("unknown profiling level 'everything' (off, basic or detailed)"), std::string::npos) << r.err;
  r = test::run_kiln("profile " + model + " --level basic --trace /tmp/x.json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--trace and --report need --level detailed"), std::string::npos) << r.err;
}

struct CRuntime {
  kiln_runtime* rt = nullptr;
  kiln_model* m = nullptr;
  explicit CRuntime(const std::string& path, const char* tokenizer = nullptr) {
    kiln_runtime_params p = kiln_runtime_default_params();
    p.n_threads = 1;
    EXPECT_EQ(kiln_runtime_create(&p, &rt), KILN_OK) << kiln_last_error();
    kiln_model_params mp = kiln_model_default_params();
    mp.tokenizer_path = tokenizer;
    EXPECT_EQ(kiln_model_load(rt, path.c_str(), &mp, &m), KILN_OK) << kiln_last_error();
  }
  ~CRuntime() {
    kiln_model_free(m);
    kiln_runtime_free(rt);
  }
  kiln_session* session(kiln_profiling level, int check_numerics, size_t size = sizeof(kiln_session_params)) {
    kiln_session_params p = kiln_session_default_params();
    p.sampling.temperature = 0;
    p.profiling = level;
    p.check_numerics = check_numerics;
    p.size = size;
    kiln_session* s = nullptr;
    EXPECT_EQ(kiln_session_create(m, &p, &s), KILN_OK) << kiln_last_error();
    return s;
  }
};

kiln_status generate(kiln_session* s, int max_tokens, kiln_generate_result* r) {
  kiln_generate_params g = kiln_generate_default_params();
  g.max_tokens = max_tokens;
  return kiln_session_generate(s, "Once upon a time", &g, nullptr, nullptr, r);
}

TEST(ProfileCApi, DetailedProfileOfTheLastCall) {
  CRuntime rt(test::shipped_model());
  kiln_session* s = rt.session(KILN_PROFILE_DETAILED, 0);
  kiln_generate_result r = {};
  r.size = sizeof r;
  ASSERT_EQ(generate(s, 8, &r), KILN_OK) << kiln_last_error();
  size_t len = 0;
  char small[8];
  EXPECT_EQ(kiln_session_profile_json(s, small, sizeof small, &len), KILN_E_BUFFER_TOO_SMALL);
  EXPECT_GT(len, sizeof small);
  std::string buf(len + 1, '\0');
  ASSERT_EQ(kiln_session_profile_json(s, buf.data(), buf.size(), &len), KILN_OK) << kiln_last_error();
  EXPECT_EQ(buf[len], '\0');
  const json j = json::parse(buf.substr(0, len), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << buf;
  EXPECT_EQ(j["level"], "detailed");
  EXPECT_EQ(j["prefill"]["tokens"], r.prompt_tokens);
  // Each generated token but the last is fed back as a decode step.
  EXPECT_EQ(j["decode"]["tokens"], r.generated_tokens - 1);
  EXPECT_FALSE(j["decode"]["by_op"].empty());
  EXPECT_GT(j["memory"]["kv_cache_bytes"].get<uint64_t>(), 0u);
  // The next call replaces it.
  ASSERT_EQ(generate(s, 3, &r), KILN_OK) << kiln_last_error();
  ASSERT_EQ(kiln_session_profile_json(s, nullptr, 0, &len), KILN_E_BUFFER_TOO_SMALL);
  buf.assign(len, '\0');
  ASSERT_EQ(kiln_session_profile_json(s, buf.data(), buf.size(), &len), KILN_OK);
  const json k = json::parse(buf);
  EXPECT_EQ(k["decode"]["tokens"], r.generated_tokens - 1);
  // The prompt was in the cache: its last token is decoded again for its logits.
  EXPECT_EQ(r.reused_tokens, r.prompt_tokens - 1);
  EXPECT_EQ(k["prefill"]["tokens"], 1);
  kiln_session_free(s);
}

TEST(ProfileCApi, OffByDefaultAndForAnOlderCaller) {
  CRuntime rt(test::shipped_model());
  EXPECT_EQ(kiln_session_default_params().profiling, KILN_PROFILE_OFF);
  EXPECT_EQ(kiln_session_default_params().check_numerics, 0);
  // A caller built before the two fields: its struct ends at priority.
  kiln_session* s = rt.session(KILN_PROFILE_DETAILED, 1, offsetof(kiln_session_params, profiling));
  kiln_generate_result r = {};
  r.size = sizeof r;
  ASSERT_EQ(generate(s, 4, &r), KILN_OK) << kiln_last_error();
  size_t len = 0;
  EXPECT_EQ(kiln_session_profile_json(s, nullptr, 0, &len), KILN_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("created without profiling"), std::string::npos) << kiln_last_error();
  kiln_session_free(s);
  kiln_session_params bad = kiln_session_default_params();
  bad.profiling = static_cast<kiln_profiling>(7);
  kiln_session* none = nullptr;
  EXPECT_EQ(kiln_session_create(rt.m, &bad, &none), KILN_E_INVALID_ARGUMENT);
  EXPECT_EQ(none, nullptr);
}

TEST(ProfileCApi, CheckNumericsStopsTheCall) {
  const std::string tok = test::data_path("nan-weight/tok512.bin");
  CRuntime rt(nan_model(), tok.c_str());
  kiln_session* s = rt.session(KILN_PROFILE_BASIC, 1);
  kiln_generate_result r = {};
  r.size = sizeof r;
  EXPECT_EQ(generate(s, 4, &r), KILN_E_INTERNAL);
  const std::string e = kiln_last_error();
  EXPECT_NE(e.find("kiln_session_generate: non-finite value (nan) in 'blk.2.q' [0], written by rms_norm_matmul_qkv "
                   "(node 13, layer 2) at token position 0"),
            std::string::npos)
      << e;
  size_t len = 0;
  ASSERT_EQ(kiln_session_profile_json(s, nullptr, 0, &len), KILN_E_BUFFER_TOO_SMALL);
  std::string buf(len, '\0');
  ASSERT_EQ(kiln_session_profile_json(s, buf.data(), buf.size(), &len), KILN_OK);
  EXPECT_EQ(json::parse(buf)["numerics_fault"]["layer"], 2);
  kiln_session_free(s);
}

}  // namespace
}  // namespace kiln
