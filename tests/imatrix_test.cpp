// llama.cpp's importance matrices (formats/imatrix.h) as `kiln compile --imatrix`'s statistics:
// the statistics `--calib` collects, written in either of llama-imatrix's formats, give the same
// weights as --calib itself; a file for another model or a damaged one is a one-line error.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "artifact/kiln_file.h"
#include "engine/calibration.h"
#include "engine/compile_file.h"
#include "formats/imatrix.h"
#include "test_util.h"

namespace kiln {
namespace {

using Stats = std::map<std::string, std::vector<float>>;

template <typename T>
void put(std::string& b, T v) {
  b.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// llama-imatrix's legacy .dat: each entry's mean times ncall.
std::string dat_bytes(const Stats& s, int32_t ncall) {
  std::string b;
  put<int32_t>(b, static_cast<int32_t>(s.size()));
  for (const auto& [name, v] : s) {
    put<int32_t>(b, static_cast<int32_t>(name.size()));
    b += name;
    put<int32_t>(b, ncall);
    put<int32_t>(b, static_cast<int32_t>(v.size()));
    for (float x : v) put<float>(b, x * static_cast<float>(ncall));
  }
  put<int32_t>(b, 3);
  put<int32_t>(b, 8);
  b += "calib.py";
  return b;
}

// llama-imatrix's GGUF: NAME.in_sum2 (the sums) and NAME.counts per entry, f32, v3, alignment 32.
std::string gguf_bytes(const Stats& s, float count) {
  std::string b = "GGUF";
  put<uint32_t>(b, 3);
  put<uint64_t>(b, 2 * s.size());
  put<uint64_t>(b, 2);
  for (const auto& [key, value] : {std::pair<std::string, uint32_t>{"imatrix.chunk_count", 3}, {"imatrix.chunk_size", 512}}) {
    put<uint64_t>(b, key.size());
    b += key;
    put<uint32_t>(b, 4);  // u32
    put<uint32_t>(b, value);
  }
  std::string data;
  auto tensor = [&](const std::string& name, const std::vector<float>& v) {
    put<uint64_t>(b, name.size());
    b += name;
    put<uint32_t>(b, 2);
    put<uint64_t>(b, v.size());  // ne0: the values
    put<uint64_t>(b, 1);         // ne1: one matrix
    put<uint32_t>(b, 0);         // GGML_TYPE_F32
    put<uint64_t>(b, data.size());
    data.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    data.resize((data.size() + 31) / 32 * 32, '\0');
  };
  for (const auto& [name, v] : s) {
    std::vector<float> sums(v);
    for (float& x : sums) x *= count;
    tensor(name + ".in_sum2", sums);
    tensor(name + ".counts", {count});
  }
  b.resize((b.size() + 31) / 32 * 32, '\0');
  return b + data;
}

// The weights of a .kiln, tensor by tensor.
std::map<std::string, std::vector<uint8_t>> weights_of(const std::string& path) {
  auto f = open_kiln(path);
  EXPECT_TRUE(f) << f.status().message();
  std::map<std::string, std::vector<uint8_t>> out;
  for (const KilnTensor& t : (*f)->tensors()) out[t.name].assign(t.bytes.begin(), t.bytes.end());
  return out;
}

TEST(Imatrix, BothFormatsGiveCalibsWeights) {
  const std::string calib = test::data_path("eval/stories260K-samples.txt");
  auto imp = import_model(test::shipped_model());
  ASSERT_TRUE(imp) << imp.status().message();
  CompileRequest rq;
  rq.model = test::shipped_model();
  auto opts = compile_options(rq, *imp);
  ASSERT_TRUE(opts);
  auto stats = collect_importance(*imp, *opts, test::read_file(calib), calib, 512, 1, rq.model);
  ASSERT_TRUE(stats) << stats.status().message();
  EXPECT_EQ(stats->per_weight.size(), 35u);  // 7 projections x 5 layers (the classifier is the embedding table)
  const std::string dir = test::temp_dir();
  const std::string m = test::shell_quote(test::shipped_model());
  auto compile = [&](const std::string& flags, const std::string& out) {
    auto r = test::run_kiln("compile " + m + " -q w4a16 --no-conformance " + flags + " -o " + test::shell_quote(dir + out));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.err;
  };
  compile("--calib " + test::shell_quote(calib) + " --method imatrix", "/im_calib.kiln");  // the same rounding as the files give
  test::write_file(dir + "/m.imatrix", dat_bytes(stats->per_weight, 4));
  test::write_file(dir + "/m.imatrix.gguf", gguf_bytes(stats->per_weight, 4));
  for (const char* f : {"/m.imatrix", "/m.imatrix.gguf"}) {
    auto read = read_imatrix_file(dir + f);
    ASSERT_TRUE(read) << read.status().message();
    EXPECT_EQ(read->importance, stats->per_weight) << f;
    EXPECT_EQ(read->chunks, 3);
  }
  EXPECT_EQ(read_imatrix_file(dir + "/m.imatrix.gguf")->chunk_size, 512);
  EXPECT_EQ(read_imatrix_file(dir + "/m.imatrix")->chunk_size, 0);  // the legacy form does not say
  EXPECT_EQ(read_imatrix_file(dir + "/m.imatrix")->dataset, "calib.py");
  const std::string err = compile("--imatrix " + test::shell_quote(dir + "/m.imatrix"), "/im_dat.kiln");
  EXPECT_NE(err.find("method: imatrix, 35 weights rounded with the statistics of imatrix m.imatrix (dat) (tokens not recorded"),
            std::string::npos) << err;
  const std::string err_gguf = compile("--imatrix " + test::shell_quote(dir + "/m.imatrix.gguf"), "/im_gguf.kiln");
  EXPECT_NE(err_gguf.find("statistics of imatrix m.imatrix.gguf (gguf) (1536 tokens"), std::string::npos) << err_gguf;
  const auto want = weights_of(dir + "/im_calib.kiln");
  EXPECT_EQ(weights_of(dir + "/im_dat.kiln"), want);
  EXPECT_EQ(weights_of(dir + "/im_gguf.kiln"), want);
}

// The fuzzer's seeds (fuzz/corpus/imatrix/) are files the reader accepts, in both formats.
TEST(Imatrix, FuzzSeedsAreValid) {
  for (const char* seed : {"two_entries.dat", "no_trailer.dat", "two_entries.gguf"}) {
    auto r = read_imatrix_file(std::string(KILN_MODELS_DIR) + "/../fuzz/corpus/imatrix/" + seed);
    ASSERT_TRUE(r) << seed << ": " << r.status().message();
    EXPECT_EQ(r->importance.begin()->second, std::vector<float>({0.5f, 1.0f, 2.0f, 0.25f, 0.5f, 1.0f, 2.0f, 0.25f, 0.5f, 1.0f, 2.0f,
                                                                0.25f, 0.5f, 1.0f, 2.0f, 0.25f})) << seed;
  }
}

TEST(Imatrix, AnotherModelsOrDamagedFileIsOneLine) {
  const std::string dir = test::temp_dir();
  const std::string m = test::shell_quote(test::shipped_model());
  const std::string out = dir + "/im_bad.kiln";
  struct Case {
    std::string name, bytes, message;
  };
  const std::vector<Case> cases = {
      {"other.imatrix", dat_bytes({{"blk.0.attn_q.weight", std::vector<float>(896, 1.0f)}}, 1),
       "entry 'blk.0.attn_q.weight' has 896 columns but the weight in " + test::shipped_model() +
           " has 64: the importance matrix is for another model"},
      {"names.imatrix", dat_bytes({{"model.layers.0.q_proj.weight", std::vector<float>(64, 1.0f)}}, 1),
       "entry 'model.layers.0.q_proj.weight' is not a weight of " + test::shipped_model()},
      {"truncated.imatrix", dat_bytes({{"blk.0.attn_q.weight", std::vector<float>(64, 1.0f)}}, 1).substr(0, 100),
       "does not fit in the file"},
      {"negative.imatrix", dat_bytes({{"blk.0.attn_q.weight", std::vector<float>(64, -1.0f)}}, 1),
       "(an importance is a finite mean square, >= 0)"},
      {"empty.imatrix", "", "offset 0: "},
  };
  for (const Case& c : cases) {
    test::write_file(dir + "/" + c.name, c.bytes);
    auto r = test::run_kiln("compile " + m + " -q w4a16 --imatrix " + test::shell_quote(dir + "/" + c.name) + " -o " +
                            test::shell_quote(out));
    EXPECT_NE(r.exit_code, 0) << c.name;
    EXPECT_NE(r.err.find(dir + "/" + c.name), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(std::ifstream(out).good()) << c.name;
  }
  auto both = test::run_kiln("compile " + m + " --calib x --imatrix y -o " + test::shell_quote(out));
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.err.find("--calib and --imatrix both give the statistics: give one"), std::string::npos) << both.err;
}

}  // namespace
}  // namespace kiln
