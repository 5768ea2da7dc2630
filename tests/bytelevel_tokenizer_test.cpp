// Byte-level BPE (GPT-2, Llama 3, Qwen) and the HF-parity of every tokenizer.json kiln reads:
// the vectors of tests/gen/make_tokenizer_vectors_hf.py (HF tokenizers + transformers) and the
// shared ones, id for id and string for string; GGUF "gpt2" vocabularies; special tokens in text;
// streaming decode; the Unicode and regex layers; bad input; the CLI.
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "core/byte_reader.h"
#include "core/utf8.h"
#include "formats/gguf.h"
#include "engine/open_tokenizer.h"
#include "test_util.h"
#include "tokenizer/bytelevel_bpe.h"
#include "tokenizer/regex.h"
#include "tokenizer/spm_bpe.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_source.h"
#include "tokenizer/unicode_text.h"
#include "tokenizer/utf8_stream.h"

namespace kiln {
namespace {

using nlohmann::json;
using Ids = std::vector<int>;

// Tokenizers are loaded once per process (Qwen3's file is 11 MB).
const Tokenizer& load(const std::string& rel) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[rel];
  if (!slot) {
    const std::string path = test::data_path(rel);
    auto t = tokenizer_from_json(test::read_file(path), path);
    if (!t) {
      ADD_FAILURE() << t.status().message();
      std::abort();
    }
    slot = std::move(t.value());
  }
  return *slot;
}

Ids enc(const Tokenizer& t, std::string_view text, EncodeOptions o = {}) {
  auto r = t.encode(text, o);
  EXPECT_TRUE(r) << r.status().message();
  return r ? r.value() : Ids{};
}
EncodeOptions special() {
  EncodeOptions o;
  o.add_special = true;
  return o;
}
EncodeOptions plain() {
  EncodeOptions o;
  o.plain = true;
  return o;
}
DecodeOptions with_special() {
  DecodeOptions o;
  o.skip_special = false;
  return o;
}

Ids ids_of(const json& a) { return a.get<Ids>(); }

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\n") + 1 - b);
}

// ---------------------------------------------------------------------------------------------
// Vectors

struct VectorFile {
  const char* name;
  const char* vectors;
  const char* tokenizer;
  size_t min_cases;
};

const VectorFile kVectorFiles[] = {
    {"qwen3", "tokenizer-vectors/qwen3.json", "tokenizers/qwen3/tokenizer.json", 200},
    {"gpt2", "tokenizer-vectors/gpt2.json", "tokenizers/gpt2/tokenizer.json", 200},
    {"llama3_style", "tokenizer-vectors/llama3-style.json", "tokenizer-vectors/tokenizers/llama3-style/tokenizer.json", 200},
    {"gpt4o_style", "tokenizer-vectors/gpt4o-style.json", "tokenizer-vectors/tokenizers/gpt4o-style/tokenizer.json", 200},
    {"tekken_style", "tokenizer-vectors/tekken-style.json", "tokenizer-vectors/tokenizers/tekken-style/tokenizer.json", 200},
    {"llama2_style", "tokenizer-vectors/llama2-style.json", "tokenizer-vectors/tokenizers/llama2-style/tokenizer.json", 200},
    {"mistral_style", "tokenizer-vectors/mistral-style.json", "tokenizer-vectors/tokenizers/mistral-style/tokenizer.json", 200},
    {"gemma_style", "tokenizer-vectors/gemma-style.json", "tokenizer-vectors/tokenizers/gemma-style/tokenizer.json", 200},
    {"gemma3_style", "tokenizer-vectors/gemma3-style.json", "tokenizer-vectors/tokenizers/gemma3-style/tokenizer.json", 260},
    {"qwen3_shared", "tokenizers/qwen3/vectors.json", "tokenizers/qwen3/tokenizer.json", 60},
    {"gpt2_shared", "tokenizers/gpt2/vectors.json", "tokenizers/gpt2/tokenizer.json", 60},
};

// Test names carry the file's name only (the default printer shows pointer bytes, which differ
// between ctest's discovery and its runs).
void PrintTo(const VectorFile& f, std::ostream* os) { *os << f.name; }

class Vectors : public ::testing::TestWithParam<VectorFile> {};

// Every id and every string of every case.
TEST_P(Vectors, MatchHuggingFace) {
  const VectorFile& f = GetParam();
  const json v = json::parse(test::read_file(test::data_path(f.vectors)));
  const Tokenizer& t = load(f.tokenizer);
  ASSERT_GE(v["cases"].size(), f.min_cases);
  size_t n = 0, ids_ok = 0, special_ok = 0, plain_ok = 0, tokens_ok = 0, decoded_ok = 0, skip_ok = 0, rt = 0, rt_ok = 0;
  for (const json& c : v["cases"]) {
    const std::string text = c["text"].get<std::string>();
    SCOPED_TRACE("case " + std::to_string(c.value("id", -1)) + ": " + json(text).dump());
    ++n;
    const Ids ids = ids_of(c["ids"]);
    const Ids got = enc(t, text);
    EXPECT_EQ(got, ids);
    ids_ok += got == ids;
    const Ids got_special = enc(t, text, special());
    EXPECT_EQ(got_special, ids_of(c["ids_with_special_tokens"]));
    special_ok += got_special == ids_of(c["ids_with_special_tokens"]);
    if (c.contains("ids_plain")) {
      const Ids got_plain = enc(t, text, plain());
      EXPECT_EQ(got_plain, ids_of(c["ids_plain"]));
      plain_ok += got_plain == ids_of(c["ids_plain"]);
    } else {
      ++plain_ok;
    }
    // The tokens: the vocabulary strings (an added token with lstrip/rstrip shows the spaces it
    // swallowed in HF's tokens; kiln's piece() is the token itself).
    bool tok = c["tokens"].size() == ids.size();
    for (size_t i = 0; tok && i < ids.size(); ++i) {
      const std::string want = c["tokens"][i].get<std::string>();
      tok = t.piece(ids[i]) == want || (t.piece(ids[i]) == trim(want) && t.piece(ids[i]) != want);
    }
    EXPECT_TRUE(tok) << "tokens differ";
    tokens_ok += tok;
    const std::string decoded = t.decode_text(ids, with_special());
    EXPECT_EQ(decoded, c["decoded"].get<std::string>());
    decoded_ok += decoded == c["decoded"].get<std::string>();
    if (c.contains("decoded_skip_special")) {
      const std::string d = t.decode_text(ids);
      EXPECT_EQ(d, c["decoded_skip_special"].get<std::string>());
      skip_ok += d == c["decoded_skip_special"].get<std::string>();
    } else {
      ++skip_ok;
    }
    // decode(encode(text)) == text wherever HF round-trips (not where NFC changes the text, nor
    // where a prefix space is added at each special token).
    const bool hf_rt = c.contains("roundtrip") ? c["roundtrip"].get<bool>() : c["roundtrip_exact"].get<bool>();
    if (hf_rt) {
      ++rt;
      const bool ok = t.decode_text(got, with_special()) == text;
      EXPECT_TRUE(ok) << "does not round-trip";
      rt_ok += ok;
    }
    // The streaming decoder (kiln run's path): every chunk valid UTF-8, and all of them together
    // the whole decode.
    Utf8Stream stream;
    std::string streamed;
    int prev = -1;
    for (int id : ids) {
      const std::string part = stream.push(t.decode_piece(prev, id));
      EXPECT_TRUE(is_valid_utf8(part));
      streamed += part;
      prev = id;
    }
    streamed += stream.finish();
    Utf8Stream whole;
    EXPECT_EQ(streamed, whole.push(t.decode(ids)) + whole.finish());
  }
  std::printf("[ vectors  ] %-14s %zu cases: ids %zu, ids_with_special_tokens %zu, ids_plain %zu, tokens %zu, decoded %zu, "
              "decoded_skip_special %zu, round-trip %zu/%zu\n",
              f.name, n, ids_ok, special_ok, plain_ok, tokens_ok, decoded_ok, skip_ok, rt_ok, rt);
}

INSTANTIATE_TEST_SUITE_P(All, Vectors, ::testing::ValuesIn(kVectorFiles),
                         [](const ::testing::TestParamInfo<VectorFile>& i) { return std::string(i.param.name); });

// ---------------------------------------------------------------------------------------------
// GGUF "gpt2" vocabularies, built in memory from the same tokenizer.json files

GgufValue gstr(const std::string& s) {
  GgufValue v;
  v.type = GgufType::kString;
  v.v = s;
  return v;
}
GgufValue gint(int64_t i, GgufType t = GgufType::kU32) {
  GgufValue v;
  v.type = t;
  v.v = i;
  return v;
}
GgufValue gstrings(std::vector<std::string> s) {
  GgufArray a;
  a.type = GgufType::kString;
  a.strings = std::move(s);
  GgufValue v;
  v.type = GgufType::kArray;
  v.v = std::move(a);
  return v;
}
GgufValue gints(std::vector<int64_t> i) {
  GgufArray a;
  a.type = GgufType::kI32;
  a.ints = std::move(i);
  GgufValue v;
  v.type = GgufType::kArray;
  v.v = std::move(a);
  return v;
}

// What llama.cpp's converter writes for a byte-level tokenizer.json: tokens by id, merges as
// "a b", added special tokens CONTROL (3), other added tokens USER_DEFINED (4).
GgufFile gguf_from_json(const std::string& rel, const std::string& pre, int bos, bool add_bos) {
  const json j = json::parse(test::read_file(test::data_path(rel)));
  std::vector<std::string> tokens(j["model"]["vocab"].size());
  for (auto it = j["model"]["vocab"].begin(); it != j["model"]["vocab"].end(); ++it)
    tokens[it.value().get<size_t>()] = it.key();
  std::vector<int64_t> types;
  for (const json& a : j["added_tokens"]) {
    const size_t id = a["id"].get<size_t>();
    if (id >= tokens.size()) tokens.resize(id + 1, "[PAD" + std::to_string(id) + "]");
    tokens[id] = a["content"].get<std::string>();
  }
  types.assign(tokens.size(), 1);
  for (const json& a : j["added_tokens"]) types[a["id"].get<size_t>()] = a["special"].get<bool>() ? 3 : 4;
  std::vector<std::string> merges;
  for (const json& m : j["model"]["merges"])
    merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  GgufFile g;
  g.file = MappedFile::from_bytes({}, "model.gguf");
  g.metadata["tokenizer.ggml.model"] = gstr("gpt2");
  g.metadata["tokenizer.ggml.pre"] = gstr(pre);
  g.metadata["tokenizer.ggml.tokens"] = gstrings(tokens);
  g.metadata["tokenizer.ggml.token_type"] = gints(types);
  g.metadata["tokenizer.ggml.merges"] = gstrings(merges);
  if (bos >= 0) g.metadata["tokenizer.ggml.bos_token_id"] = gint(bos);
  g.metadata["tokenizer.ggml.add_bos_token"] = gint(add_bos ? 1 : 0, GgufType::kBool);
  return g;
}

// The Gemma-style tokenizer.json as a SentencePiece-style GGUF vocabulary: its "<0xXX>" pieces
// typed BYTE (6), as llama.cpp's converter writes them.
GgufFile gemma_style_gguf(const std::string& pre) {
  GgufFile g = gguf_from_json("tokenizer-vectors/tokenizers/gemma-style/tokenizer.json", pre, -1, false);
  const auto& tokens = g.metadata["tokenizer.ggml.tokens"].as_array()->strings;
  auto& types = std::get<GgufArray>(g.metadata["tokenizer.ggml.token_type"].v).ints;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (parse_byte_piece(tokens[i]) >= 0) types[i] = 6;
  return g;
}

TEST(ByteLevelGguf, MatchesTheVectors) {
  struct Case {
    const char* tokenizer;
    const char* vectors;
    const char* pre;
    bool add_bos;
  };
  for (const Case& k : {Case{"tokenizers/qwen3/tokenizer.json", "tokenizer-vectors/qwen3.json", "qwen2", false},
                        Case{"tokenizers/gpt2/tokenizer.json", "tokenizer-vectors/gpt2.json", "gpt-2", false},
                        Case{"tokenizer-vectors/tokenizers/llama3-style/tokenizer.json", "tokenizer-vectors/llama3-style.json",
                             "llama-bpe", true},
                        Case{"tokenizer-vectors/tokenizers/gpt4o-style/tokenizer.json", "tokenizer-vectors/gpt4o-style.json",
                             "gpt-4o", false},
                        Case{"tokenizer-vectors/tokenizers/tekken-style/tokenizer.json", "tokenizer-vectors/tekken-style.json",
                             "tekken", true}}) {
    SCOPED_TRACE(k.tokenizer);
    const Tokenizer& hf = load(k.tokenizer);
    const GgufFile g = gguf_from_json(k.tokenizer, k.pre, k.add_bos ? hf.bos_id() : -1, k.add_bos);
    auto r = tokenizer_from_gguf(g);
    ASSERT_TRUE(r) << r.status().message();
    const Tokenizer& t = *r.value();
    const json v = json::parse(test::read_file(test::data_path(k.vectors)));
    size_t n = 0, same = 0;
    for (const json& c : v["cases"]) {
      const std::string text = c["text"].get<std::string>();
      // GGUF keeps no single_word or normalized flags: the llama3-style file's two such added
      // tokens match differently there.
      if (text.find("[word]") != std::string::npos || text.find("hello_world") != std::string::npos) continue;
      ++n;
      const Ids got = enc(t, text);
      EXPECT_EQ(got, ids_of(c["ids"])) << json(text).dump();
      EXPECT_EQ(enc(t, text, special()), ids_of(c["ids_with_special_tokens"])) << json(text).dump();
      EXPECT_EQ(enc(t, text, plain()), ids_of(c["ids_plain"])) << json(text).dump();
      EXPECT_EQ(t.decode_text(got, with_special()), c["decoded"].get<std::string>());
      same += got == ids_of(c["ids"]);
    }
    std::printf("[ vectors  ] gguf %-9s %zu/%zu cases\n", k.pre, same, n);
    EXPECT_GT(n, 200u);
  }
}

TEST(ByteLevelGguf, BadInput) {
  GgufFile g = gguf_from_json("tokenizers/gpt2/tokenizer.json", "gpt-2", -1, false);
  auto err = [&](StatusCode code, const std::string& part) {
    auto r = tokenizer_from_gguf(g);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.status().code(), code) << r.status().message();
    EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("model.gguf"), std::string::npos) << r.status().message();
  };
  g.metadata["tokenizer.ggml.pre"] = gstr("some-new-model");
  err(StatusCode::kUnsupported, "pre-tokenizer 'some-new-model'");
  g = gguf_from_json("tokenizers/gpt2/tokenizer.json", "gpt-2", -1, false);
  g.metadata["tokenizer.ggml.merges"] = gstrings({"\xC4\xA0 t", "NOT_A_TOKEN q"});
  err(StatusCode::kCorrupt, "merges[1]: 'NOT_A_TOKEN' is not in the vocabulary");
  g.metadata["tokenizer.ggml.merges"] = gstrings({"\xC4\xA0t"});
  err(StatusCode::kCorrupt, "not two tokens separated by one space");
  g.metadata["tokenizer.ggml.merges"] = gstrings({"h e", "he l"});
  EXPECT_TRUE(tokenizer_from_gguf(g));
  g.metadata["tokenizer.ggml.merges"] = gstrings({"Q Q"});  // "QQ" is no token
  err(StatusCode::kCorrupt, "which is not in the vocabulary");
  g = gguf_from_json("tokenizers/gpt2/tokenizer.json", "gpt-2", -1, false);
  g.metadata["tokenizer.ggml.token_type"] = gints({1, 2, 3});
  err(StatusCode::kCorrupt, "must hold 50257 integers");
  // The SentencePiece-style names read the same keys their own way.
  g = gguf_from_json("tokenizers/gpt2/tokenizer.json", "gemma4", -1, false);
  EXPECT_TRUE(tokenizer_from_gguf(g));
  std::get<GgufArray>(g.metadata["tokenizer.ggml.token_type"].v).ints[5] = 6;
  err(StatusCode::kCorrupt, "token 5 has the byte type but is not spelled <0xXX>");
  std::get<GgufArray>(g.metadata["tokenizer.ggml.token_type"].v).ints[5] = 9;
  err(StatusCode::kCorrupt, "token 5 has unknown type 9");
  g.metadata["tokenizer.ggml.token_type"] = gints({1, 2, 3});
  err(StatusCode::kCorrupt, "must hold 50257 integers");
  {  // Text that is not UTF-8 is one word, its stray bytes byte tokens, never handed to PCRE2.
    GgufFile v = gemma_style_gguf("gemma4");
    auto t = tokenizer_from_gguf(v);
    ASSERT_TRUE(t) << t.status().message();
    const std::string bad = "ab\xFF\xFE\xC3 cd\n\n\xE4\xB8";
    auto ids = (*t)->encode(bad, {});
    ASSERT_TRUE(ids) << ids.status().message();
    DecodeOptions keep;
    keep.skip_special = false;
    EXPECT_EQ((*t)->decode(*ids, keep), bad);
  }
  g = gguf_from_json("tokenizers/gpt2/tokenizer.json", "whitespace", -1, false);
  g.metadata["tokenizer.ggml.merges"] = gstrings({"NOT_A_TOKEN q"});
  err(StatusCode::kCorrupt, "merges[0]: 'NOT_A_TOKEN' is not in the vocabulary");
  g = gguf_from_json("tokenizers/gpt2/tokenizer.json", "gpt-2", -1, false);
  g.metadata["tokenizer.ggml.bos_token_id"] = gint(99999);
  err(StatusCode::kCorrupt, "outside the vocabulary");
  g = gguf_from_json("tokenizers/gpt2/tokenizer.json", "gpt-2", -1, false);
  g.metadata["tokenizer.ggml.tokens"] = gstrings({"a", "a"});
  err(StatusCode::kCorrupt, "appears twice");
}

// ---------------------------------------------------------------------------------------------
// Special tokens in text, add_special, plain

TEST(ByteLevel, SpecialTokensInText) {
  const Tokenizer& q = load("tokenizers/qwen3/tokenizer.json");
  const std::string chat = "<|im_start|>user\nHi<|im_end|>";
  const Ids ids = enc(q, chat);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 151644);
  EXPECT_EQ(ids.back(), 151645);
  EXPECT_TRUE(q.is_special(151644));
  EXPECT_FALSE(q.is_special(151667));  // <think> is an added token, not a special one
  // plain: the special-token strings are text, so nobody injects a turn...
  const Ids p = enc(q, chat, plain());
  for (int id : p) EXPECT_LT(id, 151643) << "a special token from plain text";
  EXPECT_EQ(q.decode_text(p, with_special()), chat);
  // ...while non-special added tokens still match, as in HF.
  EXPECT_EQ(enc(q, "<think>", plain()), Ids{151667});
  // Special tokens decode to nothing by default, to their text on request; <think> always shows.
  EXPECT_EQ(q.decode_text(ids), "user\nHi");
  EXPECT_EQ(q.decode_text(ids, with_special()), chat);
  EXPECT_EQ(q.decode_text({151667}), "<think>");
  // Qwen adds nothing around a text; the llama3-style file adds <|begin_of_text|>.
  EXPECT_EQ(enc(q, "Hello", special()), enc(q, "Hello"));
  EXPECT_EQ(q.bos_id(), -1);
  EXPECT_EQ(q.eos_id(), 151643);
  const Tokenizer& l = load("tokenizer-vectors/tokenizers/llama3-style/tokenizer.json");
  const Ids with = enc(l, "Hello", special());
  ASSERT_EQ(with.size(), enc(l, "Hello").size() + 1);
  EXPECT_EQ(with.front(), l.bos_id());
  EXPECT_EQ(l.piece(l.bos_id()), "<|begin_of_text|>");
  // The legacy entry point (kiln run, ppl): BOS first when the tokenizer has one.
  EXPECT_EQ(enc(l, "Hello", special()), l.encode("Hello", true).value());
  EXPECT_EQ(enc(q, "Hello"), q.encode("Hello", true).value());
}

// A post-processor with a suffix, RobertaProcessing, and ByteLevel's add_prefix_space.
TEST(ByteLevel, PostProcessorsAndPrefixSpace) {
  json j = json::parse(test::read_file(test::data_path("tokenizers/gpt2/tokenizer.json")));
  j["post_processor"] = {{"type", "RobertaProcessing"},
                         {"sep", json::array({"<|endoftext|>", 50256})},
                         {"cls", json::array({"<|endoftext|>", 50256})},
                         {"trim_offsets", true},
                         {"add_prefix_space", false}};
  auto r = tokenizer_from_json(j.dump(), "roberta.json");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(enc(*r.value(), "Hello world", special()), (Ids{50256, 15496, 995, 50256}));
  EXPECT_EQ(r.value()->eos_id(), 50256);
  // add_prefix_space: "Hello" is encoded as " Hello" (the GPT-2 id of "ĠHello" is 18435).
  j["pre_tokenizer"]["add_prefix_space"] = true;
  j["post_processor"] = nullptr;
  auto r2 = tokenizer_from_json(j.dump(), "prefix.json");
  ASSERT_TRUE(r2) << r2.status().message();
  EXPECT_EQ(enc(*r2.value(), "Hello world"), (Ids{18435, 995}));
  EXPECT_EQ(enc(*r2.value(), " Hello world"), (Ids{18435, 995}));
}

// ---------------------------------------------------------------------------------------------
// Invalid UTF-8: byte-level BPE encodes text (HF takes a str), so invalid bytes are an error that
// says where; decoding never emits invalid UTF-8.

TEST(ByteLevel, InvalidUtf8IsAClearError) {
  const Tokenizer& q = load("tokenizers/qwen3/tokenizer.json");
  const Tokenizer& g = load("tokenizers/gpt2/tokenizer.json");
  struct Bad {
    std::string text;
    size_t offset;
  };
  const std::vector<Bad> bad = {
      {"\xFF", 0},
      {"ok \x80", 3},
      {"cut \xE4\xBD", 4},
      {"overlong \xC0\xAF", 9},
      {"overlong3 \xE0\x80\xAF", 10},
      {"surrogate \xED\xA0\x80", 10},
      {"too big \xF4\x90\x80\x80", 8},
      {"\xF5\x80\x80\x80", 0},
      {"abcdefgh12345678\xFE", 16},
      {"\xE4\xBD\xA0\xE5\xA5", 3},
  };
  for (const Tokenizer* t : {&q, &g}) {
    for (const Bad& b : bad) {
      for (const EncodeOptions& o : {EncodeOptions{}, special(), plain()}) {
        auto r = t->encode(b.text, o);
        ASSERT_FALSE(r) << "offset " << b.offset;
        EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
        EXPECT_NE(r.status().message().find("not valid UTF-8"), std::string::npos) << r.status().message();
        EXPECT_NE(r.status().message().find("offset " + std::to_string(b.offset)), std::string::npos)
            << r.status().message();
      }
    }
    // The legacy entry point reports the same.
    EXPECT_FALSE(t->encode("\xFF", true));
  }
  // Ids that spell half a character decode with U+FFFD in decode_text, and the streaming
  // decoder holds the half back: never invalid UTF-8.
  ASSERT_EQ(enc(q, "\xE4\xBD\xA0").size(), 1u);  // 你: one token in Qwen; now its bytes as byte tokens
  Ids split;
  for (unsigned char b : std::string("\xE4\xBD\xA0")) {
    for (int id = 0; id < q.vocab_size(); ++id) {
      if (static_cast<const ByteLevelBpeTokenizer&>(q).token_bytes(id) == std::string(1, static_cast<char>(b))) {
        split.push_back(id);
        break;
      }
    }
  }
  ASSERT_EQ(split.size(), 3u);
  EXPECT_EQ(q.decode(split), "\xE4\xBD\xA0");
  EXPECT_EQ(q.decode_text({split[0], split[1]}), "\xEF\xBF\xBD");
  Utf8Stream stream;
  EXPECT_EQ(stream.push(q.decode_piece(-1, split[0])), "");
  EXPECT_EQ(stream.push(q.decode_piece(split[0], split[1])), "");
  EXPECT_EQ(stream.push(q.decode_piece(split[1], split[2])), "\xE4\xBD\xA0");
}

// Random token sequences (not from encode) stream out as valid UTF-8.
TEST(ByteLevel, StreamingNeverEmitsInvalidUtf8) {
  const Tokenizer& q = load("tokenizers/qwen3/tokenizer.json");
  std::mt19937 rng(11);
  for (int round = 0; round < 200; ++round) {
    Utf8Stream stream;
    std::string all;
    int prev = -1;
    for (int k = 0; k < 40; ++k) {
      const int id = static_cast<int>(rng() % static_cast<uint32_t>(q.vocab_size()));
      const std::string part = stream.push(q.decode_piece(prev, id));
      ASSERT_TRUE(is_valid_utf8(part));
      all += part;
      prev = id;
    }
    all += stream.finish();
    ASSERT_TRUE(is_valid_utf8(all));
  }
}

// ---------------------------------------------------------------------------------------------
// Bad tokenizer.json files

json tiny_byte_level() {
  // Bytes as GPT-2 spells them: 'a' 'b' 'c', space = "Ġ", and the merges a+b, ab+c, Ġ+a.
  json vocab = json::object();
  int id = 0;
  for (int b = 0; b < 256; ++b) vocab[byte_level_encode(std::string(1, static_cast<char>(b)))] = id++;
  for (const char* p : {"ab", "abc", "\xC4\xA0" "a"}) vocab[p] = id++;
  return {{"version", "1.0"},
          {"added_tokens", json::array({{{"id", id}, {"content", "<|end|>"}, {"special", true}, {"normalized", false}}})},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
          {"post_processor", {{"type", "ByteLevel"}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({"a b", "ab c", "\xC4\xA0 a"})}}}};
}

void expect_error(const json& j, StatusCode code, const std::vector<std::string>& parts) {
  auto r = tokenizer_from_json(j.dump(), "bl.json");
  ASSERT_FALSE(r) << "accepted";
  EXPECT_EQ(r.status().code(), code) << r.status().message();
  for (const std::string& p : parts) EXPECT_NE(r.status().message().find(p), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("bl.json"), std::string::npos) << r.status().message();
}

TEST(ByteLevel, TinyFile) {
  auto r = tokenizer_from_json(tiny_byte_level().dump(), "bl.json");
  ASSERT_TRUE(r) << r.status().message();
  const Tokenizer& t = *r.value();
  EXPECT_EQ(t.vocab_size(), 260);
  EXPECT_EQ(enc(t, "abc"), Ids{257});
  EXPECT_EQ(enc(t, "abc a"), (Ids{257, 258}));
  EXPECT_EQ(enc(t, "cab<|end|>"), (Ids{'c', 256, 259}));
  EXPECT_EQ(t.piece(258), "\xC4\xA0" "a");
  EXPECT_EQ(t.decode({257, 258, 259}), "abc a");
  EXPECT_EQ(t.decode_text({257, 259}, with_special()), "abc<|end|>");
  EXPECT_EQ(t.eos_id(), -1);
  EXPECT_EQ(t.bos_id(), -1);
}

TEST(ByteLevelBadInput, TokenizerJson) {
  json j = tiny_byte_level();
  j["model"]["merges"].push_back("a zz");
  expect_error(j, StatusCode::kCorrupt, {"merges[3]", "'zz' is not in the vocab"});
  j = tiny_byte_level();
  j["model"]["merges"].push_back("c c");
  expect_error(j, StatusCode::kCorrupt, {"makes 'cc', which is not in the vocabulary"});
  j = tiny_byte_level();
  j["model"]["type"] = "Unigram";
  expect_error(j, StatusCode::kUnsupported, {"model type 'Unigram'"});
  j = tiny_byte_level();
  j["model"]["type"] = "WordLevel";
  expect_error(j, StatusCode::kUnsupported, {"model type 'WordLevel'"});
  j = tiny_byte_level();
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers", json::array({{{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}},
                                                       {{"type", "ByteLevel"}, {"use_regex", false}}})}};
  expect_error(j, StatusCode::kInvalidArgument, {"regex '(unclosed' does not compile"});
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Regex", "\\s+"}};
  j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways";
  expect_error(j, StatusCode::kCorrupt, {"split behavior 'Sideways'"});
  j = tiny_byte_level();
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers", json::array({{{"type", "ByteLevel"}}, {{"type", "Digits"}}})}};
  expect_error(j, StatusCode::kUnsupported, {"ByteLevel as its last pre-tokenizer"});
  j = tiny_byte_level();
  j["pre_tokenizer"] = {{"type", "UnicodeScripts"}};
  j["decoder"] = {{"type", "ByteLevel"}};
  expect_error(j, StatusCode::kUnsupported, {"pre-tokenizer 'UnicodeScripts'"});
  j = tiny_byte_level();
  j["normalizer"] = {{"type", "BertNormalizer"}};
  expect_error(j, StatusCode::kUnsupported, {"normalizer 'BertNormalizer'"});
  j = tiny_byte_level();
  j["decoder"] = {{"type", "WordPiece"}};
  expect_error(j, StatusCode::kUnsupported, {"decoder 'WordPiece'"});
  j = tiny_byte_level();
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", json::array({{{"SpecialToken", {{"id", "<nope>"}, {"type_id", 0}}}},
                                                 {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})}};
  expect_error(j, StatusCode::kCorrupt, {"BOS token '<nope>'"});
  j = tiny_byte_level();
  j["model"]["dropout"] = 0.1;
  expect_error(j, StatusCode::kUnsupported, {"dropout"});
  j = tiny_byte_level();
  j["added_tokens"][0]["id"] = 5;
  expect_error(j, StatusCode::kCorrupt, {"added_tokens[0]", "which the vocab gives to"});
  j = tiny_byte_level();
  j["model"]["vocab"] = json::object();
  expect_error(j, StatusCode::kCorrupt, {"'vocab' is empty"});
  j = tiny_byte_level();
  j["model"]["merges"] = "a b";
  expect_error(j, StatusCode::kCorrupt, {"'merges' must be an array"});
  // Truncated and garbled files.
  const std::string text = tiny_byte_level().dump();
  for (size_t cut : {size_t{0}, size_t{1}, text.size() / 3, text.size() / 2, text.size() - 1}) {
    auto r = tokenizer_from_json(text.substr(0, cut), "bl.json");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
  }
  // A vocabulary that lacks some bytes: those are dropped (no unk), as HF does; no crash.
  j = tiny_byte_level();
  j["model"]["vocab"] = {{"a", 0}, {"b", 1}, {"ab", 2}};
  j["model"]["merges"] = json::array({"a b"});
  j["added_tokens"] = json::array();
  auto r = tokenizer_from_json(j.dump(), "bl.json");
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(enc(*r.value(), "abc"), Ids{2});
  EXPECT_EQ(enc(*r.value(), "xyz \xE4\xBD\xA0"), Ids{});
}

// ---------------------------------------------------------------------------------------------
// The Unicode layer

TEST(Unicode, NormalizationMatchesUtf8proc) {
  // Code points that take every path: ASCII, Latin-1, precomposed and combining Latin, Hangul
  // syllables and conjoining jamo, kana and voicing marks, CJK and compatibility ideographs,
  // singletons, composition exclusions, ccc reordering, emoji, compatibility characters.
  const std::vector<uint32_t> pool = {
      'a', 'e', 'A', ' ', 0xe9, 0xc5, 0x300, 0x301, 0x302, 0x323, 0x327, 0x308, 0x344, 0x1100, 0x1161, 0x11a8,
      0xac00, 0xd55c, 0x304b, 0x3099, 0x309a, 0x30ab, 0x4e2d, 0xf900, 0xfa30, 0x212b, 0x2126, 0x958, 0x93c,
      0x1e9b, 0xfb01, 0x2460, 0xff21, 0x1f600, 0x1d400, 0xb3e, 0xb47, 0xcd5, 0xcc6, 0x1b35, 0x1b05, 0x2adc,
      0x0f73, 0x0f71, 0x0f72, 0x05b0, 0x0591, 0x180e, 0x200d, 0x1f3fb};
  std::mt19937 rng(3);
  for (int round = 0; round < 3000; ++round) {
    std::string s;
    const int len = 1 + static_cast<int>(rng() % 12);
    for (int k = 0; k < len; ++k) unicode::append_utf8(s, pool[rng() % pool.size()]);
    using Form = std::pair<unicode::NormalForm, int>;
    for (auto [form, opt] : {Form{unicode::NormalForm::kNfc, UTF8PROC_COMPOSE},
                             Form{unicode::NormalForm::kNfd, UTF8PROC_DECOMPOSE},
                             Form{unicode::NormalForm::kNfkc, UTF8PROC_COMPOSE | UTF8PROC_COMPAT},
                             Form{unicode::NormalForm::kNfkd, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT}}) {
      utf8proc_uint8_t* ref = nullptr;
      const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()),
                                  &ref, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | opt));
      ASSERT_GE(n, 0);
      const std::string want(reinterpret_cast<const char*>(ref), static_cast<size_t>(n));
      std::free(ref);
      ASSERT_EQ(unicode::normalized(s, form), want) << json(s).dump() << " form " << static_cast<int>(form);
    }
  }
  // Every BMP code point after 'e' and before a combining mark, NFC.
  for (uint32_t cp = 0x80; cp < 0x30000; ++cp) {
    if (cp >= 0xd800 && cp < 0xe000) continue;
    std::string s = "e";
    unicode::append_utf8(s, cp);
    unicode::append_utf8(s, 0x301);
    utf8proc_uint8_t* ref = utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(s.c_str()));
    const std::string want(reinterpret_cast<const char*>(ref));
    std::free(ref);
    ASSERT_EQ(unicode::normalized(s, unicode::NormalForm::kNfc), want) << std::hex << cp;
  }
  std::string out;
  EXPECT_FALSE(unicode::normalize("plain ASCII", unicode::NormalForm::kNfc, out));
  EXPECT_FALSE(unicode::normalize("\xE4\xB8\xAD\xE6\x96\x87 \xED\x95\x9C", unicode::NormalForm::kNfc, out));
  EXPECT_TRUE(unicode::normalize("e\xCC\x81", unicode::NormalForm::kNfc, out));
  EXPECT_EQ(out, "\xC3\xA9");
}

TEST(Unicode, Utf8AndClasses) {
  EXPECT_EQ(unicode::invalid_utf8_offset(""), unicode::kNpos);
  EXPECT_EQ(unicode::invalid_utf8_offset("\xF0\x9F\x98\x80 ok"), unicode::kNpos);
  EXPECT_EQ(unicode::invalid_utf8_offset("12345678\xC3"), 8u);
  EXPECT_EQ(unicode::lowercase("\xC4\xB0STANBUL \xCE\xA3"), "i\xCC\x87stanbul \xCF\x83");
  EXPECT_TRUE(unicode::is_whitespace(0x3000));
  EXPECT_FALSE(unicode::is_whitespace(0x180e));
  EXPECT_FALSE(unicode::is_whitespace(0x200b));
  EXPECT_TRUE(unicode::is_numeric(0x2160));
  EXPECT_TRUE(unicode::is_word_char(0x301));
  EXPECT_TRUE(unicode::is_punctuation(0x3002));
  EXPECT_EQ(byte_level_encode(" \n"), "\xC4\xA0\xC4\x8A");
  std::string back;
  EXPECT_TRUE(byte_level_decode("\xC4\xA0hi", back));
  EXPECT_EQ(back, " hi");
  EXPECT_FALSE(byte_level_decode("\xE4\xB8\xAD", back));
  for (int b = 0; b < 256; ++b) EXPECT_EQ(unicode_to_byte(byte_to_unicode(static_cast<uint8_t>(b))), b);
}

TEST(Regex, OnigurumaReadings) {
  // \s is White_Space (no U+180E), also inside classes; \w has marks.
  auto re = Regex::compile(R"(\s+|[^\s\p{L}]+)", "test");
  ASSERT_TRUE(re) << re.status().message();
  std::vector<std::pair<uint32_t, uint32_t>> m;
  ASSERT_TRUE((*re)->find_all("a\xE1\xA0\x8E" "b \xE3\x80\x80", m).is_ok());
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0], (std::pair<uint32_t, uint32_t>{1, 4}));  // U+180E is not space here
  EXPECT_EQ(m[1], (std::pair<uint32_t, uint32_t>{5, 9}));  // ' ' + U+3000
  EXPECT_EQ(onig_to_pcre2(R"([\s\d])"), std::string("[") + "\\t-\\r\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}" + "\\d]");
  auto w = Regex::compile(R"(\w+)", "test");
  ASSERT_TRUE(w);
  m.clear();
  ASSERT_TRUE((*w)->find_all("e\xCC\x81t\xC3\xA9 x", m).is_ok());
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0], (std::pair<uint32_t, uint32_t>{0, 6}));
  // Empty matches, as Rust's find_iter yields them.
  auto e = Regex::compile("x*", "test");
  ASSERT_TRUE(e);
  m.clear();
  ASSERT_TRUE((*e)->find_all("axxb", m).is_ok());
  EXPECT_EQ(m, (std::vector<std::pair<uint32_t, uint32_t>>{{0, 0}, {1, 3}, {4, 4}}));
  // Long runs under the JIT: no stack limit.
  auto s = Regex::compile(kGpt2Regex, "test");
  ASSERT_TRUE(s);
  m.clear();
  ASSERT_TRUE((*s)->find_all(std::string(1 << 20, ' ') + "x", m).is_ok());
  EXPECT_EQ(m.size(), 2u);
  auto bad = Regex::compile("[a-", "where");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("where: the regex '[a-' does not compile"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Speed and threads

TEST(ByteLevel, LongInputsAndThreads) {
  const Tokenizer& q = load("tokenizers/qwen3/tokenizer.json");
  const json v = json::parse(test::read_file(test::data_path("tokenizer-vectors/qwen3.json")));
  std::string text;
  while (text.size() < (1u << 20))
    for (const json& c : v["cases"]) text += c["text"].get<std::string>() + "\n";
  const auto t0 = std::chrono::steady_clock::now();
  const Ids ids = enc(q, text);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
  EXPECT_GT(ids.size(), text.size() / 8);
  // Degenerate: one letter a million times, a million spaces, a long run of one CJK character.
  for (const std::string& s : {std::string(1 << 20, 'a'), std::string(1 << 20, ' '), [] {
         std::string r;
         for (int i = 0; i < 100000; ++i) r += "\xE5\x95\x8A";
         return r;
       }()}) {
    const auto t1 = std::chrono::steady_clock::now();
    EXPECT_EQ(q.decode(enc(q, s)), s);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count(), 30.0);
  }
  // The per-call word and pair caches change nothing: on, for every vector case; off, for the
  // long text.
  {
    auto own = tokenizer_from_json(test::read_file(test::data_path("tokenizers/qwen3/tokenizer.json")), "qwen3");
    ASSERT_TRUE(own);
    auto& b = static_cast<ByteLevelBpeTokenizer&>(*own.value());
    b.set_cache_min_bytes(0);
    for (const json& c : v["cases"]) EXPECT_EQ(enc(b, c["text"].get<std::string>()), ids_of(c["ids"]));
    b.set_cache_min_bytes(SIZE_MAX);
    EXPECT_EQ(enc(b, text), ids);
  }
  // encode is const and thread-safe: four threads agree with one.
  std::vector<std::string> texts;
  for (const json& c : v["cases"]) texts.push_back(c["text"].get<std::string>());
  std::vector<Ids> serial;
  for (const auto& s : texts) serial.push_back(enc(q, s));
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (int rep = 0; rep < 3; ++rep)
        for (size_t i = 0; i < texts.size(); ++i) {
          auto r = q.encode(texts[i], EncodeOptions{});
          if (!r || *r != serial[i]) ++bad[static_cast<size_t>(k)];
        }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad, std::vector<int>(4, 0));
}

// ---------------------------------------------------------------------------------------------
// load_tokenizer and the CLI

TEST(ByteLevel, LoadTokenizerPaths) {
  auto folder = load_tokenizer(test::data_path("tokenizers/gpt2"));
  ASSERT_TRUE(folder) << folder.status().message();
  EXPECT_EQ(enc(*folder.value(), "Hello world"), (Ids{15496, 995}));
  auto bin = load_tokenizer(std::string(KILN_MODELS_DIR) + "/stories260K/tok512.bin");  // records counted
  ASSERT_TRUE(bin) << bin.status().message();
  EXPECT_EQ(bin.value()->vocab_size(), 512);
  EXPECT_EQ(enc(*bin.value(), "Hello world"), (Ids{346, 306, 414, 263, 304, 341}));
  EXPECT_EQ(enc(*bin.value(), "Hello world", special()), (Ids{1, 346, 306, 414, 263, 304, 341}));
  auto ck = load_tokenizer(std::string(KILN_MODELS_DIR) + "/stories260K/stories260K.bin");
  EXPECT_FALSE(ck);  // a checkpoint, not a tokenizer
  EXPECT_FALSE(load_tokenizer("/nonexistent/tokenizer.json"));
  auto gg = load_tokenizer(test::data_path("stories260K-gguf/stories260K.gguf"));
  ASSERT_TRUE(gg) << gg.status().message();
  EXPECT_EQ(enc(*gg.value(), "Hello world", special()), (Ids{1, 346, 306, 414, 263, 304, 341}));
}

TEST(TokenizeCli, TokenizeAndDetokenize) {
  const std::string q = test::shell_quote(test::data_path("tokenizers/qwen3/tokenizer.json"));
  auto r = test::run_kiln("tokenize " + q + " --text 'Hello world'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[9707, 1879]\n");
  r = test::run_kiln("tokenize " + q + " --text '<|im_start|>user'");
  EXPECT_EQ(r.out, "[151644, 872]\n");
  r = test::run_kiln("tokenize " + q + " --plain --text '<|im_start|>'");
  EXPECT_EQ(r.out, "[27, 91, 318, 4906, 91, 29]\n") << r.err;
  const std::string l3 = test::shell_quote(test::data_path("tokenizer-vectors/tokenizers/llama3-style"));
  const Tokenizer& lt = load("tokenizer-vectors/tokenizers/llama3-style/tokenizer.json");
  r = test::run_kiln("tokenize " + l3 + " --add-special --text hi");
  Ids want = enc(lt, "hi", special());
  EXPECT_EQ(json::parse(r.out).get<Ids>(), want) << r.err;
  // --jsonl: one {"ids": [...]} per {"text": ...}.
  const std::string in = test::temp_dir() + "/texts.jsonl";
  test::write_file(in, "{\"text\": \"Hello world\"}\n{\"text\": \"\\u4f60\\u597d\"}\n{\"text\": \"\"}\n");
  r = test::run_kiln("tokenize " + q + " --jsonl " + test::shell_quote(in));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"ids\": [9707, 1879]}\n{\"ids\": [108386]}\n{\"ids\": []}\n");
  r = test::run_kiln("detokenize " + q + " --ids 151644,9707,11,220,108386");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<|im_start|>Hello, \xE4\xBD\xA0\xE5\xA5\xBD");
  r = test::run_kiln("detokenize " + q + " --skip-special --ids '[151644, 9707]'");
  EXPECT_EQ(r.out, "Hello");
  // The llama2.c .bin and a .kiln (its tokenizer section).
  const std::string tok512 = test::shell_quote(std::string(KILN_MODELS_DIR) + "/stories260K/tok512.bin");
  r = test::run_kiln("tokenize " + tok512 + " --text 'Hello world'");
  EXPECT_EQ(r.out, "[346, 306, 414, 263, 304, 341]\n") << r.err;
  const std::string kiln_file = test::temp_dir() + "/tok.kiln";
  auto c = test::run_kiln("compile " + test::shell_quote(test::shipped_model()) + " -o " + test::shell_quote(kiln_file));
  ASSERT_EQ(c.exit_code, 0) << c.err;
  r = test::run_kiln("tokenize " + test::shell_quote(kiln_file) + " --add-special --text 'Hello world'");
  EXPECT_EQ(r.out, "[1, 346, 306, 414, 263, 304, 341]\n") << r.err;
  r = test::run_kiln("detokenize " + test::shell_quote(kiln_file) + " --ids 1,346,306");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(TokenizeCli, BadInputExits2WithOneLine) {
  const std::string q = test::shell_quote(test::data_path("tokenizers/gpt2/tokenizer.json"));
  const std::string bad_jsonl = test::temp_dir() + "/bad.jsonl";
  test::write_file(bad_jsonl, "{\"text\": \"ok\"}\n{\"txt\": 1}\n");
  const std::string bad_utf8 = test::temp_dir() + "/bad_utf8.jsonl";
  test::write_file(bad_utf8, "{\"text\": \"ok\"}\n");
  const std::string bad_json = test::temp_dir() + "/bad_tokenizer.json";
  test::write_file(bad_json, "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a b\"]}}");
  for (const std::string& args : std::vector<std::string>{
           "tokenize /nonexistent/tokenizer.json --text hi", "tokenize " + q + " --jsonl " + test::shell_quote(bad_jsonl),
        "tokenize " + q + " --jsonl /nonexistent.jsonl", "tokenize " + q + " --text \"$(printf '\\377')\"",
        "tokenize " + test::shell_quote(bad_json) + " --text hi", "detokenize " + q + " --ids 1,x",
        "detokenize " + q + " --ids 99999999", "detokenize " + q + " --ids ' -5'",
        "bench-tokenizer " + q + " --file /nonexistent.txt"}) {
    auto r = test::run_kiln(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("kiln: error: ", 0), 0u) << args << "\n" << r.err;
  }
  // Neither or both of --text and --jsonl: a usage error, exit 1 (issue 23, row 12).
  for (const std::string& args :
       std::vector<std::string>{"tokenize " + q, "tokenize " + q + " --text a --jsonl " + test::shell_quote(bad_utf8)}) {
    auto r = test::run_kiln(args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("kiln: error: ", 0), 0u) << args << "\n" << r.err;
  }
}

// kiln run streams a byte-level tokenizer's pieces through Utf8Stream: whatever bytes a random
// model samples, stdout is valid UTF-8.
TEST(TokenizeCli, RunStreamsValidUtf8WithByteLevel) {
  const std::string tok = test::temp_dir() + "/tiny_bytelevel.json";
  test::write_file(tok, tiny_byte_level().dump());
  for (int seed : {1, 2, 3}) {
    auto r = test::run_kiln("run " + test::shell_quote(test::data_path("hf-tiny/qwen2")) + " --tokenizer " +
                            test::shell_quote(tok) + " -p 'abc cab' -n 48 --temp 1.5 --seed " + std::to_string(seed));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(is_valid_utf8(r.out));
    EXPECT_FALSE(r.out.empty());
  }
}

TEST(TokenizeCli, BenchTokenizer) {
  const std::string f = test::temp_dir() + "/bench.txt";
  std::string text;
  for (int i = 0; i < 200; ++i) text += "Hello world, \xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C. ";
  test::write_file(f, text);
  auto r = test::run_kiln("bench-tokenizer " + test::shell_quote(test::data_path("tokenizers/gpt2")) + " --file " +
                          test::shell_quote(f) + " --seconds 0.2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["bytes"].get<size_t>(), text.size());
  EXPECT_GT(j["mb_per_s"].get<double>(), 0.0);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// A published GGUF's own vocabulary with llama.cpp as the oracle (issue 22): SmolLM2's
// tokenizer.ggml.pre "smollm" (each digit alone, then GPT-2's regex), extracted from
// SmolLM2-135M-Instruct.Q4_1.gguf with its ids from llama_tokenize
// (tests/gen/make_gguf_tokenizer_vectors.py).
TEST(ByteLevelGguf, SmolLM2MatchesLlamaCpp) {
  auto t = open_tokenizer(test::data_path("tokenizers/smollm2/vocab.gguf"), 0);
  ASSERT_TRUE(t) << t.status().message();
  const json v = json::parse(test::read_file(test::data_path("tokenizer-vectors/smollm2-llamacpp.json")));
  size_t n = 0;
  for (const json& c : v["cases"]) {
    const std::string text = c["text"].get<std::string>();
    EXPECT_EQ(enc(**t, text), ids_of(c["ids"])) << json(text).dump();
    EXPECT_EQ(enc(**t, text, special()), ids_of(c["ids_with_special_tokens"])) << json(text).dump();
    ++n;
  }
  EXPECT_GT(n, 240u);
}

// Every tokenizer.ggml.pre name llama.cpp reads (src/llama-vocab.cpp), with llama.cpp as the
// oracle: llama_tokenize's ids of 122 texts under each name (tests/gen/make_gguf_pre_vectors.py).
// The 87 byte-level names with two vocabularies, SmolLM2's and GPT-2's (which has tokens for
// numbers of two and three digits, so the ways of cutting numbers show); the four names llama.cpp
// reads as SentencePiece-style BPE with a Gemma-style vocabulary.
TEST(ByteLevelGguf, EveryPreTokenizerNameMatchesLlamaCpp) {
  auto file = MappedFile::open(test::data_path("tokenizers/smollm2/vocab.gguf"));
  ASSERT_TRUE(file) << file.status().message();
  auto smollm2 = read_gguf(*file);
  ASSERT_TRUE(smollm2) << smollm2.status().message();
  GgufFile gpt2 = gguf_from_json("tokenizers/gpt2/tokenizer.json", "gpt-2", -1, false);
  GgufFile gemma = gemma_style_gguf("gemma4");
  const json v = json::parse(test::read_file(test::data_path("tokenizer-vectors/gguf-pre-llamacpp.json")));
  const std::vector<std::string> texts = v["texts"].get<std::vector<std::string>>();
  ASSERT_EQ(texts.size(), 122u);
  ASSERT_EQ(v["vocabularies"].size(), 3u);
  for (const json& vocabulary : v["vocabularies"]) {
    const std::string which = vocabulary["name"].get<std::string>();
    GgufFile& g = which == "gpt2" ? gpt2 : which == "gemma-style" ? gemma : *smollm2;
    size_t names = 0, aborted = 0;
    for (const json& group : vocabulary["groups"])
      for (const json& name : group["names"]) {
        const std::string pre = name.get<std::string>();
        SCOPED_TRACE(which + " vocabulary, pre-tokenizer " + pre);
        g.metadata["tokenizer.ggml.pre"] = gstr(pre);
        auto t = tokenizer_from_gguf(g);
        ASSERT_TRUE(t) << t.status().message();
        ASSERT_EQ(group["ids"].size(), texts.size());
        // Qwen2's tokenizer.json normalizes to NFC, and so does kiln under these names; llama.cpp
        // does not: the texts NFC changes (decomposed kana and jamo, the Kelvin sign, reordered
        // Arabic marks) are left out for them.
        const bool nfc = pre == "qwen2" || pre == "deepseek-r1-qwen" || pre == "megrez";
        for (size_t i = 0; i < texts.size(); ++i) {
          if (nfc) {
            char* n = reinterpret_cast<char*>(utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(texts[i].c_str())));
            const bool changed = n == nullptr || texts[i] != n;
            std::free(n);
            if (changed) continue;
          }
          // null: llama.cpp aborts on the text (under "whitespace", a run of whitespace holding a
          // space is one word, and its find_bpe_rank asserts that no token holds a space).
          if (group["ids"][i].is_null()) {
            EXPECT_EQ(pre, "whitespace");
            ++aborted;
            continue;
          }
          EXPECT_EQ(enc(**t, texts[i]), ids_of(group["ids"][i])) << json(texts[i]).dump();
          // SentencePiece-style pieces are the text itself ("▁" for a space), bytes where none is:
          // decoding gives the text back.
          if (which == "gemma-style") {
            DecodeOptions keep;
            keep.skip_special = false;
            EXPECT_EQ((*t)->decode(enc(**t, texts[i]), keep), texts[i]);
          }
        }
        ++names;
      }
    EXPECT_EQ(names, which == "gemma-style" ? 4u : 87u) << which;
    EXPECT_LT(aborted, 40u) << which;
  }
}

}  // namespace
}  // namespace kiln
