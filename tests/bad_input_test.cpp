// Malformed models: each class gives one line on stderr naming the file and the problem, exit 2.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "formats/import.h"
#include "reference/load_reference.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string tmp(const std::string& name) { return test::temp_dir() + "/" + name; }

// Checks that a `kiln run` failed with exit 2 and one stderr line that starts "kiln: error: `prefix`"
// and says `problem`.
void expect_cli_error(const test::CommandResult& r, const std::string& prefix, const std::string& problem) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(r.out.empty());
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("kiln: error: " + prefix, 0), 0u) << r.err;
  EXPECT_NE(r.err.find(problem), std::string::npos) << r.err;
}

// Checks the library error and the CLI behaviour for a bad model at `path`.
void expect_rejected(const std::string& path, const std::string& problem) {
  auto imp = import_model(path);
  ASSERT_FALSE(imp) << path << " was accepted";
  const std::string& msg = imp.status().message();
  EXPECT_NE(msg.find(fs::path(path).filename().string()), std::string::npos) << "message does not name the file: " << msg;
  EXPECT_NE(msg.find(problem), std::string::npos) << "message does not say '" << problem << "': " << msg;
  expect_cli_error(test::run_kiln("run " + test::shell_quote(path) + " -n 1"), "", problem);
}

// ---- llama2.c ----

TEST(BadInput, Llama2cTruncated) {
  std::string b = test::read_file(test::shipped_model());
  test::write_file(tmp("trunc.bin"), b.substr(0, 1000));
  expect_rejected(tmp("trunc.bin"), "needs 1056540");
  test::write_file(tmp("tiny.bin"), b.substr(0, 10));
  expect_rejected(tmp("tiny.bin"), "truncated");
}

TEST(BadInput, Llama2cZeroHeads) {
  std::string b = test::read_file(test::shipped_model());
  int32_t zero = 0;
  std::memcpy(b.data() + 12, &zero, 4);
  test::write_file(tmp("zeroheads.bin"), b);
  expect_rejected(tmp("zeroheads.bin"), "n_heads");
}

TEST(BadInput, Llama2cHugeDimensionsNoHugeAllocation) {
  std::string b = test::read_file(test::shipped_model());
  int32_t huge = 1 << 30;
  std::memcpy(b.data() + 0, &huge, 4);  // dim
  test::write_file(tmp("hugedim.bin"), b);
  expect_rejected(tmp("hugedim.bin"), "dim");
}

// ---- GGUF ----

struct GgufTensor {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type;
  uint64_t offset;
};

// A minimal GGUF v3 writer for crafting bad files.
std::string make_gguf(const std::vector<GgufTensor>& tensors, size_t data_bytes, const char* magic = "GGUF") {
  std::string out(magic, 4);
  auto u32 = [&](uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); };
  auto u64 = [&](uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); };
  auto str = [&](const std::string& s) { u64(s.size()); out += s; };
  u32(3);
  u64(tensors.size());
  u64(1);
  str("general.architecture");
  u32(8);
  str("llama");
  for (const auto& t : tensors) {
    str(t.name);
    u32(static_cast<uint32_t>(t.ne.size()));
    for (uint64_t d : t.ne) u64(d);
    u32(t.type);
    u64(t.offset);
  }
  while (out.size() % 32) out.push_back('\0');
  out.append(data_bytes, '\0');
  return out;
}

TEST(BadInput, GgufWrongMagic) {
  test::write_file(tmp("magic.gguf"), "GGUX" + std::string(100, '\0'));
  auto f = MappedFile::open(tmp("magic.gguf"));
  ASSERT_TRUE(f);
  auto g = read_gguf(*f);
  ASSERT_FALSE(g);
  EXPECT_NE(g.status().message().find("bad magic 0x58554747"), std::string::npos) << g.status().message();
  // A .gguf path goes to the GGUF reader whatever its first bytes, so the CLI names the magic too
  // (not a llama2.c header field read from the same bytes).
  expect_rejected(tmp("magic.gguf"), "offset 0: bad magic 0x58554747");
  // A file too short to hold a magic says so.
  test::write_file(tmp("short.gguf"), "GG");
  expect_rejected(tmp("short.gguf"), "truncated reading magic");
}

TEST(BadInput, WrongMagicWithoutGgufNameIsReadAsLlama2c) {
  // Without the .gguf name nothing says the file meant to be GGUF: the llama2.c reader judges it.
  test::write_file(tmp("magic.bin"), "GGUX" + std::string(100, '\0'));
  expect_rejected(tmp("magic.bin"), "header:");
}

TEST(BadInput, GgufTruncated) {
  std::string b = test::read_file(test::data_path("stories260K-gguf/stories260K.gguf"));
  test::write_file(tmp("trunc.gguf"), b.substr(0, 5000));
  expect_rejected(tmp("trunc.gguf"), "truncated");
  test::write_file(tmp("trunc2.gguf"), b.substr(0, b.size() - 100));
  expect_rejected(tmp("trunc2.gguf"), "past the end");
}

TEST(BadInput, GgufTensorPastEnd) {
  test::write_file(tmp("pastend.gguf"), make_gguf({{"token_embd.weight", {64, 512}, 0, 0}}, 1024));
  expect_rejected(tmp("pastend.gguf"), "past the end");
}

TEST(BadInput, GgufOverlappingTensors) {
  test::write_file(tmp("overlap.gguf"),
                   make_gguf({{"a.weight", {64, 4}, 0, 0}, {"b.weight", {64, 4}, 0, 512}}, 2048));
  expect_rejected(tmp("overlap.gguf"), "overlap");
}

TEST(BadInput, GgufUnknownTensorType) {
  test::write_file(tmp("type.gguf"), make_gguf({{"a.weight", {64}, 99, 0}}, 1024));
  expect_rejected(tmp("type.gguf"), "GGML type 99");
}

TEST(BadInput, GgufNonUtf8TensorName) {
  test::write_file(tmp("name.gguf"), make_gguf({{"a\xff\xfe.weight", {64}, 0, 0}}, 1024));
  expect_rejected(tmp("name.gguf"), "not valid UTF-8");
}

TEST(BadInput, GgufHugeArrayCountNoHugeAllocation) {
  std::string out("GGUF", 4);
  auto u32 = [&](uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); };
  auto u64 = [&](uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); };
  u32(3);
  u64(0);
  u64(1);
  u64(3);
  out += "key";
  u32(9);                  // array
  u32(6);                  // of f32
  u64(1ull << 60);         // absurd count
  test::write_file(tmp("array.gguf"), out);
  expect_rejected(tmp("array.gguf"), "runs past the end");
}

// ---- Hugging Face folders ----

std::string hf_copy(const std::string& name) {
  const std::string dir = tmp(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(test::data_path("stories260K-hf")))
    fs::copy_file(e.path(), dir + "/" + e.path().filename().string());
  return dir;
}

void edit_config(const std::string& dir, const std::function<void(json&)>& edit) {
  json j = json::parse(test::read_file(dir + "/config.json"));
  edit(j);
  test::write_file(dir + "/config.json", j.dump());
}

// Rewrites the safetensors header of `dir`, keeping the data bytes.
void edit_header(const std::string& dir, const std::function<void(json&)>& edit, bool raw_bad_name = false) {
  const std::string path = dir + "/model.safetensors";
  std::string b = test::read_file(path);
  uint64_t n;
  std::memcpy(&n, b.data(), 8);
  json h = json::parse(b.substr(8, n));
  edit(h);
  std::string hs = h.dump();
  if (raw_bad_name) {
    auto at = hs.find("model.norm.weight");
    hs.replace(at, 5, "m\xff\xfe" "el");
  }
  uint64_t m = hs.size();
  std::string out(reinterpret_cast<const char*>(&m), 8);
  out += hs;
  out += b.substr(8 + n);
  test::write_file(path, out);
}

TEST(BadInput, HfUnknownArchitecture) {
  auto dir = hf_copy("arch");
  edit_config(dir, [](json& j) { j["architectures"] = {"GPT2LMHeadModel"}; });
  expect_rejected(dir, "GPT2LMHeadModel");
}

TEST(BadInput, HfZeroHeads) {
  auto dir = hf_copy("zeroheads");
  edit_config(dir, [](json& j) { j["num_attention_heads"] = 0; });
  expect_rejected(dir, "n_heads");
}

TEST(BadInput, HfNegativeVocab) {
  auto dir = hf_copy("negvocab");
  edit_config(dir, [](json& j) { j["vocab_size"] = -512; });
  expect_rejected(dir, "vocab_size");
}

TEST(BadInput, HfMalformedConfig) {
  auto dir = hf_copy("badjson");
  test::write_file(dir + "/config.json", "{\"hidden_size\": 64,");
  expect_rejected(dir, "malformed JSON");
}

TEST(BadInput, HfWrongTypeInConfig) {
  auto dir = hf_copy("badtype");
  edit_config(dir, [](json& j) { j["hidden_size"] = "sixty-four"; });
  expect_rejected(dir, "'hidden_size' must be an integer");
}

TEST(BadInput, SafetensorsMissingTensor) {
  auto dir = hf_copy("missing");
  edit_header(dir, [](json& h) { h.erase("model.layers.2.mlp.up_proj.weight"); });
  expect_rejected(dir, "missing tensor 'blk.2.ffn_up.weight'");
}

TEST(BadInput, SafetensorsWrongShape) {
  auto dir = hf_copy("shape");
  edit_header(dir, [](json& h) { h["model.layers.0.mlp.down_proj.weight"]["shape"] = {172, 64}; });
  expect_rejected(dir, "has shape [172, 64], expected [64, 172]");
}

TEST(BadInput, SafetensorsOffsetPastEnd) {
  auto dir = hf_copy("pastend");
  edit_header(dir, [](json& h) { h["model.norm.weight"]["data_offsets"] = {2000000, 2000256}; });
  expect_rejected(dir, "outside the data");
}

TEST(BadInput, SafetensorsOverlap) {
  auto dir = hf_copy("overlap");
  edit_header(dir, [](json& h) { h["model.norm.weight"]["data_offsets"] = h["model.layers.0.input_layernorm.weight"]["data_offsets"]; });
  expect_rejected(dir, "overlap");
}

TEST(BadInput, SafetensorsUnknownDtype) {
  auto dir = hf_copy("dtype");
  edit_header(dir, [](json& h) { h["model.norm.weight"]["dtype"] = "F8_E4M3"; });
  expect_rejected(dir, "dtype 'F8_E4M3' is not supported");
}

TEST(BadInput, SafetensorsSizeMismatch) {
  auto dir = hf_copy("size");
  edit_header(dir, [](json& h) { h["model.norm.weight"]["dtype"] = "F16"; });
  expect_rejected(dir, "do not match F16");
}

TEST(BadInput, SafetensorsNonUtf8Name) {
  auto dir = hf_copy("utf8");
  edit_header(dir, [](json&) {}, /*raw_bad_name=*/true);
  expect_rejected(dir, "not valid UTF-8");
}

TEST(BadInput, SafetensorsHugeHeaderLength) {
  auto dir = hf_copy("hugeheader");
  std::string b = test::read_file(dir + "/model.safetensors");
  uint64_t n = 1ull << 62;
  std::memcpy(b.data(), &n, 8);
  test::write_file(dir + "/model.safetensors", b);
  expect_rejected(dir, "exceeds 100 MiB");
}

// ---- tokenizers ----

// A broken tokenizer is named by its own file, not by the model that uses it.
void expect_tokenizer_named(const std::string& model, const std::string& tokenizer_path, const std::string& tokenizer_file,
                            const std::string& problem) {
  auto lm = load_reference(model, tokenizer_path);
  ASSERT_FALSE(lm) << model << " was accepted";
  const std::string& msg = lm.status().message();
  EXPECT_EQ(msg.rfind(tokenizer_file + ": ", 0), 0u) << msg;
  EXPECT_NE(msg.find(problem), std::string::npos) << msg;
  EXPECT_EQ(msg.find(": tokenizer:"), std::string::npos) << msg;
}

// The same for `kiln run`, which opens the model through the front door (src/engine/open_model.cpp).
void expect_cli_tokenizer_named(const std::string& model, const std::string& tokenizer_path,
                                const std::string& tokenizer_file, const std::string& problem) {
  // --no-cache: through the cache the first start says first that it compiles (the error then
  // names the same file, and nothing is cached).
  std::string args = "run " + test::shell_quote(model) + " -n 1 --no-cache";
  if (!tokenizer_path.empty()) args += " --tokenizer " + test::shell_quote(tokenizer_path);
  auto r = test::run_kiln(args);
  expect_cli_error(r, tokenizer_file + ": ", problem);
  EXPECT_EQ(r.err.find(": tokenizer:"), std::string::npos) << r.err;
}

// A folder `name` holding a copy of the shipped model, without a tokenizer; returns the folder.
std::string llama2c_copy(const std::string& name) {
  const std::string dir = tmp(name);
  fs::create_directories(dir);
  fs::copy_file(test::shipped_model(), dir + "/stories260K.bin", fs::copy_options::overwrite_existing);
  return dir;
}

std::string shipped_tokenizer() {
  return test::read_file(fs::path(test::shipped_model()).parent_path().string() + "/tok512.bin");
}

TEST(BadInput, BrokenLlama2cTokenizerNamesItsFile) {
  const std::string dir = llama2c_copy("badtok");
  const std::string tok = shipped_tokenizer();
  test::write_file(dir + "/tok512.bin", tok.substr(0, 3000));  // found beside the model
  expect_tokenizer_named(dir + "/stories260K.bin", "", dir + "/tok512.bin", "offset 2998: truncated");
  test::write_file(dir + "/other.tok", tok + "xx");  // given with --tokenizer
  expect_tokenizer_named(dir + "/stories260K.bin", dir + "/other.tok", dir + "/other.tok", "2 bytes follow the last");
}

TEST(BadInput, BrokenHfTokenizerNamesItsFile) {
  auto dir = hf_copy("badtokjson");
  test::write_file(dir + "/tokenizer.json", "{\"model\": ");
  expect_tokenizer_named(dir, "", dir + "/tokenizer.json", "malformed JSON");
}

TEST(BadInput, CliBrokenTokenizerArgNamesItsFile) {
  const std::string dir = llama2c_copy("clibadtok-arg");
  const std::string tok = shipped_tokenizer();
  const std::string model = dir + "/stories260K.bin";
  test::write_file(dir + "/broken-tok512.bin", tok.substr(0, 3000));
  expect_cli_tokenizer_named(model, dir + "/broken-tok512.bin", dir + "/broken-tok512.bin", "offset 2998: truncated");
  test::write_file(dir + "/long-tok512.bin", tok + "xx");
  expect_cli_tokenizer_named(model, dir + "/long-tok512.bin", dir + "/long-tok512.bin", "2 bytes follow the last");
}

TEST(BadInput, CliBrokenTokenizerBesideModelNamesItsFile) {
  const std::string dir = llama2c_copy("clibadtok-beside");
  test::write_file(dir + "/tok512.bin", shipped_tokenizer().substr(0, 3000));
  expect_cli_tokenizer_named(dir + "/stories260K.bin", "", dir + "/tok512.bin", "offset 2998: truncated");
}

TEST(BadInput, CliBrokenHfTokenizerNamesItsFile) {
  auto dir = hf_copy("clibadtokjson");
  test::write_file(dir + "/tokenizer.json", "{\"model\": ");
  expect_cli_tokenizer_named(dir, "", dir + "/tokenizer.json", "malformed JSON");
  // A folder given with --tokenizer is named by its tokenizer.json too.
  expect_cli_tokenizer_named(test::data_path("stories260K-hf"), dir, dir + "/tokenizer.json", "malformed JSON");
}

TEST(BadInput, MissingPath) { expect_rejected(tmp("does-not-exist.bin"), "no such file"); }

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// A file kiln cannot read is named as such by its content, not read as a llama2.c header
// (issue 23 row 7): an empty file, a text file, a .kiln whose magic is wrong.
TEST(BadInputDetection, UnknownFilesAreNamedByContent) {
  const std::string dir = test::temp_dir();
  test::write_file(dir + "/prompt.txt", "Once upon a time, a prompt and not a model\n");
  test::write_file(dir + "/empty.kiln", "");
  test::write_file(dir + "/flipped.kiln", "KILX" + std::string(300, '\0'));
  test::write_file(dir + "/noext", "hello");
  const struct {
    std::string file, message;
  } cases[] = {
      {"prompt.txt", "not a model file: unknown format (it starts with 4f 6e 63 65"},
      {"empty.kiln", "the file is empty: not a model file"},
      {"flipped.kiln", "not a .kiln file: it starts with 4b 49 4c 58 00 00 00 00, not the KILN magic"},
      {"noext", "not a model file: unknown format"},
  };
  for (const auto& c : cases) {
    auto r = test::run_kiln("run " + test::shell_quote(dir + "/" + c.file) + " -n 1");
    EXPECT_EQ(r.exit_code, 2) << c.file;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.file << ": " << r.err;
    EXPECT_EQ(r.err.find("dim"), std::string::npos) << c.file << ": " << r.err;
  }
  // A llama2.c checkpoint under another name is still read by its header.
  fs::copy_file(test::shipped_model(), dir + "/stories.model", fs::copy_options::overwrite_existing);
  fs::copy_file(fs::path(test::shipped_model()).parent_path() / "tok512.bin", dir + "/tok512.bin",
                fs::copy_options::overwrite_existing);
  auto ok = test::run_kiln("run " + test::shell_quote(dir + "/stories.model") + " --temp 0 -n 5");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

}  // namespace
}  // namespace kiln
