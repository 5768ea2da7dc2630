// Gemma 3's tokenizer.json as HF writes it (normalizer Replace " " -> "▁", pre-tokenizer Split on
// " " MergedWithPrevious, decoder Replace/ByteFallback/Fuse, TemplateProcessing "<bos> $A"): the
// Gemma-3-style file of tests/gen/make_gemma3_tokenizer.py, whose ids, tokens and decodings are
// checked case by case with the other HF vectors (bytelevel_tokenizer_test.cpp, Vectors.gemma3_style).
// Here: the file's structure, the Split pre-tokenizer where it really cuts, invalid UTF-8, the chat
// template as transformers renders and tokenizes it, and the variants kiln refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "runtime/chat_format.h"
#include "template/chat_template.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace kiln {
namespace {

using nlohmann::json;
using OJson = nlohmann::ordered_json;
using Ids = std::vector<int>;

const char* const kFolder = "tokenizer-vectors/tokenizers/gemma3-style";

json tokenizer_json() { return json::parse(test::read_file(test::data_path(std::string(kFolder) + "/tokenizer.json"))); }

std::unique_ptr<Tokenizer> load(const json& j, const std::string& name = "gemma3.json") {
  auto t = tokenizer_from_json(j.dump(), name);
  EXPECT_TRUE(t) << t.status().message();
  return t ? std::move(t.value()) : nullptr;
}

Ids enc(const Tokenizer& t, std::string_view text) {
  auto r = t.encode(text, EncodeOptions{});
  EXPECT_TRUE(r) << r.status().message();
  return r ? r.value() : Ids{};
}

DecodeOptions keep_special() {
  DecodeOptions o;
  o.skip_special = false;
  return o;
}

// The file is Gemma 3's shape (so that regenerating it cannot drop what this test is about), and
// kiln reads it: Gemma 3's ids for its control tokens, BOS added, <image_soft_token> past the vocab.
TEST(Gemma3Tokenizer, LoadsGemma3sStructure) {
  const json j = tokenizer_json();
  EXPECT_EQ(j["normalizer"], json::parse(R"({"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"})"));
  EXPECT_EQ(j["pre_tokenizer"],
            json::parse(R"({"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": false})"));
  EXPECT_EQ(j["decoder"], json::parse(R"({"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]})"));
  EXPECT_EQ(j["post_processor"]["type"], "TemplateProcessing");
  EXPECT_TRUE(j["model"]["byte_fallback"].get<bool>());
  auto t = load(j);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->bos_id(), 2);
  EXPECT_EQ(t->eos_id(), 1);
  EXPECT_EQ(enc(*t, "<start_of_turn>"), Ids{105});
  EXPECT_EQ(enc(*t, "<end_of_turn>"), Ids{106});
  EXPECT_TRUE(t->is_special(106));
  EXPECT_EQ(enc(*t, "\n"), Ids{107});  // a user-defined piece: not special, decodes to itself
  EXPECT_FALSE(t->is_special(107));
  EXPECT_EQ(t->decode({107}), "\n");
  const int soft = t->vocab_size() - 1;
  EXPECT_EQ(static_cast<size_t>(soft), j["model"]["vocab"].size());
  EXPECT_EQ(enc(*t, "<image_soft_token>"), Ids{soft});
  EXPECT_EQ(t->encode("Hi", EncodeOptions{true}).value().front(), 2);
  // A tab is a piece of its own (Gemma's "<0x09>" is spelled "\t").
  EXPECT_EQ(t->piece(enc(*t, "\t").at(0)), "\t");
}

// Gemma 3's Split cuts nothing (no " " is left after the normalizer), so these variants of the
// same file, with a Split that does cut, are where the pre-tokenizer's cutting is checked: ids from
// HF tokenizers (and transformers) for every text holding a space or a "▁".
TEST(Gemma3Tokenizer, SplitOnAStringMatchesHuggingFace) {
  const json doc = json::parse(test::read_file(test::data_path("tokenizer-vectors/gemma3-style-splits.json")));
  const json main = json::parse(test::read_file(test::data_path("tokenizer-vectors/gemma3-style.json")));
  std::map<std::string, std::pair<Ids, std::string>> unsplit;  // text -> HF's ids and decoding with Gemma 3's own Split
  for (const json& c : main["cases"]) unsplit[c["text"].get<std::string>()] = {c["ids"].get<Ids>(), c["decoded"].get<std::string>()};
  const auto& texts = doc["texts"];
  ASSERT_GE(texts.size(), 150u);
  ASSERT_EQ(doc["variants"].size(), 3u);
  size_t checked = 0;
  for (const json& v : doc["variants"]) {
    const std::string name = v["name"].get<std::string>();
    SCOPED_TRACE(name);
    json j = tokenizer_json();
    j["pre_tokenizer"] = v["pre_tokenizer"];
    auto t = load(j, name + ".json");
    ASSERT_TRUE(t);
    ASSERT_EQ(v["ids"].size(), texts.size());
    size_t same = 0, differs = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::string text = texts[i].get<std::string>();
      SCOPED_TRACE(json(text).dump());
      const Ids want = v["ids"][i].get<Ids>();
      const Ids got = enc(*t, text);
      EXPECT_EQ(got, want);
      same += got == want;
      // A different cut, the same text back.
      ASSERT_TRUE(unsplit.count(text));
      EXPECT_EQ(t->decode_text(got, keep_special()), unsplit[text].second);
      differs += want != unsplit[text].first;
    }
    std::printf("[ vectors  ] gemma3 %-44s %zu/%zu texts, %zu cut differently from Gemma 3's\n", name.c_str(), same,
                texts.size(), differs);
    EXPECT_GT(differs, 10u) << "the variant cuts as Gemma 3's own file: it checks nothing";
    checked += same;
  }
  EXPECT_EQ(checked, 3 * texts.size());
}

// Python strings cannot hold invalid UTF-8, so HF has no ids for it. A stray byte is a symbol of its
// own that no merge joins: the text around it encodes as HF encodes each side, the byte becomes its
// byte piece, and the ids decode to HF's decoding of each side with the same bytes between (as the
// GGUF Gemma vocabularies decode them: raw bytes; a typed "▁" comes back as " ", as in HF).
TEST(Gemma3Tokenizer, InvalidUtf8BecomesBytePieces) {
  auto t = load(tokenizer_json());
  ASSERT_TRUE(t);
  const json main = json::parse(test::read_file(test::data_path("tokenizer-vectors/gemma3-style.json")));
  const std::vector<std::string> bad = {"\xFF", "\xC3", "\xE4\xB8", "\x80\x80", "\xF0\x9F\x98", "\xED\xA0\x80", "\xC0\xAF"};
  auto byte_id = [&](unsigned char b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    for (int id = 0; id < t->vocab_size(); ++id)
      if (t->piece(id) == name) return id;
    return -1;
  };
  const auto& cases = main["cases"];
  size_t n = 0, ok = 0;
  for (size_t i = 0; i + 1 < cases.size(); ++i) {
    const std::string a = cases[i]["text"].get<std::string>(), b = cases[i + 1]["text"].get<std::string>();
    const std::string& stray = bad[i % bad.size()];
    const std::string text = a + stray + b;
    SCOPED_TRACE(json(a).dump() + " + " + json(b).dump());
    Ids want = cases[i]["ids"].get<Ids>();
    for (unsigned char c : stray) want.push_back(byte_id(c));
    const Ids after = cases[i + 1]["ids"].get<Ids>();
    want.insert(want.end(), after.begin(), after.end());
    const Ids got = enc(*t, text);
    EXPECT_EQ(got, want);
    EXPECT_EQ(t->decode(got, keep_special()),
              cases[i]["decoded"].get<std::string>() + stray + cases[i + 1]["decoded"].get<std::string>());
    ++n;
    ok += got == want;
  }
  std::printf("[ vectors  ] gemma3 invalid UTF-8 between two texts: %zu/%zu\n", ok, n);
  EXPECT_GT(n, 250u);
}

// The chat template in the folder's tokenizer_config.json (Gemma 3's own) renders byte for byte as
// transformers' apply_chat_template(tokenize=False), and the prompt encodes to its tokenize=True
// ids; kiln chat's path (ChatFormat) gives the same ids and stops at <end_of_turn>.
TEST(Gemma3Tokenizer, ChatTemplateMatchesTransformers) {
  const std::string folder = test::data_path(kFolder);
  auto t = load(tokenizer_json());
  ASSERT_TRUE(t);
  auto tpl = load_model_chat_template(folder, false);
  ASSERT_TRUE(tpl) << tpl.status().message();
  auto parsed = ChatTemplate::parse(tpl->source);
  ASSERT_TRUE(parsed) << parsed.status().message();
  auto format = ChatFormat::create(*t, *tpl);
  ASSERT_TRUE(format) << format.status().message();
  EXPECT_NE(std::find(format->end_of_turn_ids().begin(), format->end_of_turn_ids().end(), 106),
            format->end_of_turn_ids().end());
  const OJson doc = OJson::parse(test::read_file(test::data_path("tokenizer-vectors/gemma3-style-chat.json")));
  size_t rendered = 0, encoded = 0, errors = 0;
  for (const OJson& c : doc["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    ChatRequest req;
    req.messages = c["messages"];
    req.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    req.special_tokens = tpl->special_tokens;
    auto out = parsed->render(req);
    if (c.contains("error")) {
      ASSERT_FALSE(out);
      EXPECT_NE(out.status().message().find(c["error"]["message"].get<std::string>()), std::string::npos)
          << out.status().message();
      ++errors;
      continue;
    }
    ASSERT_TRUE(out) << out.status().message();
    EXPECT_EQ(out.value(), c["expected"].get<std::string>());
    rendered += out.value() == c["expected"].get<std::string>();
    const Ids want = c["ids"].get<Ids>();
    EXPECT_EQ(enc(*t, out.value()), want);
    encoded += enc(*t, out.value()) == want;
    if (req.add_generation_prompt) {
      auto ids = format->encode(c["messages"]);
      ASSERT_TRUE(ids) << ids.status().message();
      EXPECT_EQ(ids.value(), want);
    }
  }
  std::printf("[ vectors  ] gemma3 chat: %zu rendered, %zu tokenized as transformers; %zu errors as raised\n", rendered,
              encoded, errors);
  EXPECT_EQ(rendered, 10u);
  EXPECT_EQ(encoded, 10u);
  EXPECT_EQ(errors, 1u);
}

// What kiln does not read is refused by name, never encoded another way.
TEST(Gemma3Tokenizer, UnsupportedSplitsAreClearErrors) {
  struct Case {
    const char* pre_tokenizer;
    StatusCode code;
    const char* says;
  };
  for (const Case& k : {
           Case{R"({"type": "Split", "pattern": {"Regex": " +"}, "behavior": "MergedWithPrevious", "invert": false})",
                StatusCode::kUnsupported, "Split with a Regex pattern is not supported"},
           Case{R"({"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": true})",
                StatusCode::kUnsupported, "Split with invert=true is not supported"},
           Case{R"({"type": "Split", "pattern": {"String": " "}, "behavior": "Isolated", "invert": false})",
                StatusCode::kUnsupported, "Split behavior 'Isolated' is not supported"},
           Case{R"({"type": "Split", "pattern": {"String": " "}, "behavior": "Removed", "invert": false})",
                StatusCode::kUnsupported, "Split behavior 'Removed' is not supported"},
           Case{R"({"type": "Split", "pattern": {"String": " "}, "behavior": "Contiguous", "invert": false})",
                StatusCode::kUnsupported, "Split behavior 'Contiguous' is not supported"},
           Case{R"({"type": "Split", "pattern": {"String": " "}, "behavior": "Sideways", "invert": false})",
                StatusCode::kCorrupt, "split behavior 'Sideways'"},
           Case{R"({"type": "Split", "pattern": {"String": ""}, "behavior": "MergedWithPrevious", "invert": false})",
                StatusCode::kCorrupt, "Split pattern is empty"},
           Case{R"({"type": "Split", "behavior": "MergedWithPrevious"})", StatusCode::kCorrupt, "needs a 'pattern' object"},
           Case{R"({"type": "Sequence", "pretokenizers": [
                  {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": false},
                  {"type": "Digits", "individual_digits": true}]})",
                StatusCode::kUnsupported, "a Sequence of several pre-tokenizers is not supported"},
           Case{R"({"type": "Digits", "individual_digits": true})", StatusCode::kUnsupported, "pre-tokenizer 'Digits'"},
       }) {
    json j = tokenizer_json();
    j["pre_tokenizer"] = json::parse(k.pre_tokenizer);
    auto r = tokenizer_from_json(j.dump(), "gemma3.json");
    ASSERT_FALSE(r) << k.pre_tokenizer;
    EXPECT_EQ(r.status().code(), k.code) << r.status().message();
    EXPECT_NE(r.status().message().find(k.says), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("gemma3.json: pre_tokenizer"), std::string::npos) << r.status().message();
  }
  // Inside a Sequence of one, as some files write it, the Split is read.
  json j = tokenizer_json();
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array({j["pre_tokenizer"]})}};
  auto t = load(j);
  ASSERT_TRUE(t);
  EXPECT_EQ(enc(*t, "Hello  world"), enc(*load(tokenizer_json()), "Hello  world"));
}

}  // namespace
}  // namespace kiln
