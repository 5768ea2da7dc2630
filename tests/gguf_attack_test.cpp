// The GGUF loader against the attack classes of llama.cpp's, Ollama's and llama-cpp-python's
// advisories (issue 36 item 6), and the classes no advisory named yet: one crafted file each,
// built here by a small writer, each refused with an error that names the field and its bound.
// The same files are the fuzz corpus's attack-*.gguf seeds (checked equal below; set
// KILN_WRITE_FUZZ_CORPUS=1 to rewrite them).
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <functional>

#include "formats/import.h"
#include "gguf_writer.h"
#include "template/chat_template.h"
#include "test_util.h"
#include "tokenizer/tokenizer_source.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::GgufBytes;
using test::GgufKeyValues;
using test::gguf_file;
using test::gguf_int;
using test::gguf_string;
using test::gguf_strings;
using test::gguf_with;

// What reads the file in the test: the model import (and `kiln run`), the vocabulary (and
// `kiln tokenize`), or the chat template (and `kiln template`).
enum class Reader { kModel, kTokenizer, kTemplate };

struct Attack {
  std::string name;      // the corpus file is fuzz/corpus/gguf/attack-<name>.gguf
  std::string advisory;  // the class it stands for
  Reader reader;
  std::function<std::string()> bytes;
  std::vector<std::string> says;  // what the error must contain
};

std::string header(uint64_t n_tensors, uint64_t n_kv) {
  GgufBytes b;
  b.bytes = "GGUF";
  b.u32(3).u64(n_tensors).u64(n_kv);
  return b.bytes;
}

// A llama header whose config is whole (4 layers of width 64) with `changes` applied.
GgufKeyValues llama_keys(const std::string& arch = "llama") {
  const std::string a = arch + ".";
  return {{"general.architecture", gguf_string(arch)},
          {a + "embedding_length", gguf_int(GgufType::kU32, 64)},
          {a + "feed_forward_length", gguf_int(GgufType::kU32, 172)},
          {a + "block_count", gguf_int(GgufType::kU32, 4)},
          {a + "attention.head_count", gguf_int(GgufType::kU32, 8)},
          {a + "vocab_size", gguf_int(GgufType::kU32, 512)}};
}

const std::vector<Attack>& attacks() {
  static const std::vector<Attack> all = {
      {"string-length", "CVE-2024-21802/-21836: a string length that overflows the reader's arithmetic", Reader::kModel,
       [] {
         GgufBytes b{header(0, 1)};
         b.u64(UINT64_MAX).bytes += "general.architecture";
         return b.bytes;
       },
       {"metadata key length 18446744073709551615 is over the limit of 1073741824 bytes"}},
      {"value-string-length", "CVE-2024-21802: a string value longer than the file", Reader::kModel,
       [] {
         GgufBytes b{header(0, 1)};
         b.str("general.name").u32(static_cast<uint32_t>(GgufType::kString)).u64(1000).bytes += "abcd";
         return b.bytes;
       },
       {"key 'general.name'", "string value length 1000 runs past the end of the file (4 bytes left)"}},
      {"n-dims", "CVE-2024-21825: a tensor's n_dims beyond its ne[] array", Reader::kModel,
       [] {
         GgufBytes b{header(1, 0)};
         b.str("token_embd.weight").u32(UINT32_MAX).u64(64).u64(512).u32(0).u64(0);
         return b.bytes;
       },
       {"tensor 'token_embd.weight': 4294967295 dimensions (1 to 4 allowed)"}},
      {"n-tensors", "CVE-2024-23605: a tensor count that overflows the size of the info array", Reader::kModel,
       [] { return header(1ull << 62, 0) + std::string(64, '\0'); },
       {"tensor count 4611686018427387904 exceeds the file (64 bytes left hold at most 2 tensor infos of 24 bytes)"}},
      {"n-kv", "CVE-2024-23496: a key-value count that overflows the size of the key-value array", Reader::kModel,
       [] { return header(0, UINT64_MAX) + std::string(24, '\0'); },
       {"metadata count 18446744073709551615 exceeds the file (24 bytes left hold at most 2 key-values of 12 bytes)"}},
      {"partial-string-array",
       "CVE-2024-32878: a string array cut short after its first element (llama.cpp then freed "
       "uninitialised pointers)",
       Reader::kTokenizer,
       [] {
         GgufBytes b{header(0, 2)};
         b.str("tokenizer.ggml.model").value(gguf_string("llama"));
         b.str("tokenizer.ggml.tokens").u32(static_cast<uint32_t>(GgufType::kArray));
         b.u32(static_cast<uint32_t>(GgufType::kString)).u64(3).str("<unk>").u64(100).bytes += "<s>";
         return b.bytes;
       },
       {"key 'tokenizer.ggml.tokens'", "array string length 100 runs past the end of the file (3 bytes left)"}},
      {"token-piece-length",
       "CVE-2025-49847: a token piece whose length does not fit the int the piece is copied by", Reader::kTokenizer,
       [] {
         GgufBytes b{header(0, 2)};
         b.str("tokenizer.ggml.model").value(gguf_string("llama"));
         b.str("tokenizer.ggml.tokens").u32(static_cast<uint32_t>(GgufType::kArray));
         b.u32(static_cast<uint32_t>(GgufType::kString)).u64(2).str("<unk>").u64(0x80000000ull).bytes += "abcdefgh";
         return b.bytes;
       },
       {"key 'tokenizer.ggml.tokens'", "array string length 2147483648 is over the limit of 1073741824 bytes"}},
      {"token-id-sign", "CVE-2025-52566: a token id that is negative as int32 and huge as uint32", Reader::kTokenizer,
       [] {
         return gguf_file(gguf_with(test::gguf_tiny_vocab(), "tokenizer.ggml.eos_token_id",
                                    gguf_int(GgufType::kU32, 0xFFFFFFFEll)));
       },
       {"'tokenizer.ggml.eos_token_id' is 4294967294, outside the vocabulary of 264"}},
      {"token-id-negative", "CVE-2025-52566: a negative token id", Reader::kTokenizer,
       [] {
         return gguf_file(gguf_with(test::gguf_tiny_vocab(), "tokenizer.ggml.bos_token_id", gguf_int(GgufType::kI32, -2)));
       },
       {"'tokenizer.ggml.bos_token_id' is -2, outside the vocabulary of 264"}},
      {"size-overflow", "CVE-2025-53630: a shape whose element count overflows 64 bits", Reader::kModel,
       [] {
         return gguf_file(llama_keys(), {{"token_embd.weight", {1ull << 40, 1ull << 40, 1ull << 40, 1ull << 40}, 0, ""}});
       },
       {"tensor 'token_embd.weight': shape [1099511627776, 1099511627776, 1099511627776, 1099511627776] is too large: "
        "its size in bytes overflows 64 bits"}},
      {"byte-size-overflow", "CVE-2025-53630: a shape whose element count fits but whose byte size overflows",
       Reader::kModel,
       [] { return gguf_file(llama_keys(), {{"token_embd.weight", {1ull << 40, 1ull << 22}, 0, ""}}); },
       {"tensor 'token_embd.weight': shape [4194304, 1099511627776] is too large: its size in bytes overflows 64 bits"}},
      {"inflated-dims", "Ollama: tensor dimensions inflated past the data (an out-of-bounds read)", Reader::kModel,
       [] { return gguf_file(llama_keys(), {{"token_embd.weight", {64, 512}, 0, std::string(1024, '\0')}}); },
       {"tensor 'token_embd.weight': bytes [0, +131072) run past the end of the data (1024 bytes)"}},
      {"block-count", "unreported: block_count above the layer limit (per-layer lists sized by it)", Reader::kModel,
       [] { return gguf_file(gguf_with(llama_keys("gemma3"), "gemma3.block_count", gguf_int(GgufType::kI32, INT_MAX))); },
       {"gemma3.block_count is 2147483647, must be in [1, 4096]"}},
      {"alignment", "unreported: general.alignment so large that aligning an offset overflows", Reader::kModel,
       [] { return gguf_file(gguf_with(llama_keys(), "general.alignment", gguf_int(GgufType::kU64, 1ll << 62))); },
       {"general.alignment 4611686018427387904 must be a power of two up to 1 MiB (1048576)"}},
      {"alignment-not-power", "unreported: general.alignment that is not a power of two", Reader::kModel,
       [] { return gguf_file(gguf_with(llama_keys(), "general.alignment", gguf_int(GgufType::kU32, 0xFFFFFFFFll))); },
       {"general.alignment 4294967295 must be a power of two up to 1 MiB (1048576)"}},
      {"metadata-array", "unreported: a metadata array sized to exhaust memory when widened", Reader::kModel,
       [] {
         GgufBytes b{header(0, 1)};
         b.str("general.tags").u32(static_cast<uint32_t>(GgufType::kArray));
         b.u32(static_cast<uint32_t>(GgufType::kU8)).u64((1ull << 24) + 1).bytes += std::string(64, '\0');
         return b.bytes;
       },
       {"key 'general.tags'", "array of 16777217 elements is over the limit of 16777216 elements"}},
      {"template-escape",
       "CVE-2024-34359 (llama-cpp-python): a chat template that reaches Python's classes to run code",
       Reader::kTemplate,
       [] {
         return gguf_file(gguf_with(test::gguf_tiny_vocab(), "tokenizer.chat_template",
                                    gguf_string("{{ ''.__class__.__mro__[1].__subclasses__() }}")));
       },
       {"chat template: line 1, column 16: access to attribute '__class__' of 'str' object is unsafe"}},
  };
  return all;
}

void PrintTo(const Attack& a, std::ostream* os) { *os << a.name; }

std::string corpus_path(const Attack& a) { return test::data_path("../../fuzz/corpus/gguf/attack-" + a.name + ".gguf"); }

class GgufAttack : public ::testing::TestWithParam<Attack> {};

TEST_P(GgufAttack, RefusedWithANamedError) {
  const Attack& a = GetParam();
  SCOPED_TRACE(a.advisory);
  const std::string path = test::temp_dir() + "/attack-" + a.name + ".gguf";
  test::write_file(path, a.bytes());
  const std::string file = fs::path(path).filename().string();
  std::string message;
  test::CommandResult cli;
  const std::string q = test::shell_quote(path);
  switch (a.reader) {
    case Reader::kModel: {
      auto m = import_model(path);
      ASSERT_FALSE(m) << "accepted";
      message = m.status().message();
      cli = test::run_kiln("run " + q + " -n 1");
      break;
    }
    case Reader::kTokenizer: {
      auto t = load_tokenizer(path);
      ASSERT_FALSE(t) << "accepted";
      message = t.status().message();
      cli = test::run_kiln("tokenize " + q + " --text hi");
      break;
    }
    case Reader::kTemplate: {
      auto chat = load_model_chat_template(path, false);
      ASSERT_TRUE(chat) << chat.status().message();
      auto tpl = ChatTemplate::parse(chat->source);
      ASSERT_TRUE(tpl) << tpl.status().message();
      ChatRequest req;
      req.messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
      auto text = tpl->render(req);
      ASSERT_FALSE(text) << "rendered: " << *text;
      message = text.status().message();
      test::write_file(path + ".json", R"([{"role": "user", "content": "hi"}])");
      cli = test::run_kiln("template " + q + " --messages " + test::shell_quote(path + ".json"));
      break;
    }
  }
  if (a.reader != Reader::kTemplate) EXPECT_NE(message.find(file), std::string::npos) << message;
  for (const std::string& s : a.says) {
    EXPECT_NE(message.find(s), std::string::npos) << "the library's message does not say '" << s << "': " << message;
    EXPECT_NE(cli.err.find(s), std::string::npos) << "the CLI's message does not say '" << s << "': " << cli.err;
  }
  EXPECT_EQ(cli.exit_code, 2) << cli.err;
  EXPECT_EQ(std::count(cli.err.begin(), cli.err.end(), '\n'), 1) << cli.err;
}

TEST_P(GgufAttack, IsInTheFuzzCorpus) {
  const Attack& a = GetParam();
  if (std::getenv("KILN_WRITE_FUZZ_CORPUS")) test::write_file(corpus_path(a), a.bytes());
  ASSERT_TRUE(fs::exists(corpus_path(a))) << corpus_path(a) << " is missing: run with KILN_WRITE_FUZZ_CORPUS=1";
  EXPECT_TRUE(test::read_file(corpus_path(a)) == a.bytes()) << corpus_path(a) << " differs from the crafted file";
}

INSTANTIATE_TEST_SUITE_P(Classes, GgufAttack, ::testing::ValuesIn(attacks()),
                         [](const ::testing::TestParamInfo<Attack>& i) {
                           std::string n = i.param.name;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// The writer's tiny vocabulary itself loads: the crafted tokenizer files above fail by their one
// change, not by the rest.
TEST(GgufAttackBase, TinyVocabularyAndModelHeaderAreWhole) {
  const std::string path = test::temp_dir() + "/tiny-vocab.gguf";
  test::write_file(path, gguf_file(test::gguf_tiny_vocab()));
  auto t = load_tokenizer(path);
  ASSERT_TRUE(t) << t.status().message();
  EXPECT_EQ((*t)->vocab_size(), 264);
  auto ids = (*t)->encode("ab a", {});
  ASSERT_TRUE(ids) << ids.status().message();
  EXPECT_EQ((*t)->decode(*ids, {}), "ab a");
  // The llama header without tensors fails at its first missing tensor, past every bound above.
  test::write_file(path, gguf_file(llama_keys()));
  auto m = import_model(path);
  ASSERT_FALSE(m);
  EXPECT_NE(m.status().message().find("missing tensor"), std::string::npos) << m.status().message();
}

// CVE-2025-49847's other half: a long piece (past int16, as any length under the 1 GiB string
// limit) decodes whole, and kiln_detokenize's lengths are size_t throughout.
TEST(GgufAttackBase, LongTokenPieceDecodesWhole) {
  GgufKeyValues kv = test::gguf_tiny_vocab();
  const std::string long_piece(70000, 'x');
  for (auto& [k, v] : kv)
    if (k == "tokenizer.ggml.tokens") std::get<GgufArray>(v.v).strings.back() = long_piece;
  const std::string path = test::temp_dir() + "/long-piece.gguf";
  test::write_file(path, gguf_file(kv));
  auto t = load_tokenizer(path);
  ASSERT_TRUE(t) << t.status().message();
  EXPECT_EQ((*t)->decode({263}, {}), long_piece);
}

// CVE-2024-34359's class against the Jinja engine: no attribute reaches an object's class,
// globals or subclasses (Jinja2's sandbox: such an attribute is undefined, and using it is an
// error naming it), and loops, recursion and output are bounded.
TEST(GgufAttackBase, ChatTemplateSandboxAndLimits) {
  // Lower limits than the defaults (20M steps, 64 MiB of output), so that this stays quick under emulation.
  auto render = [](const std::string& src) -> Result<std::string> {
    KILN_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::parse(src));
    ChatRequest req;
    req.messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
    req.limits.max_steps = 200000;
    req.limits.max_output_bytes = 1 << 20;
    return t.render(req);
  };
  for (const char* src : {"{{ ''.__class__ }}", "{{ messages.__class__ }}", "{{ ''['__class__'] }}",
                          "{{ '' | attr('__class__') }}", "{{ raise_exception.__globals__ }}", "{{ 'x'.format.__globals__ }}",
                          "{{ messages[0].__getitem__ }}", "{{ namespace.__init__ }}", "{{ config }}{{ request }}"}) {
    auto r = render(src);
    ASSERT_TRUE(r) << src << ": " << r.status().message();
    EXPECT_EQ(*r, "") << src;
  }
  struct Refused {
    const char* src;
    const char* says;
  };
  for (const Refused& c : std::vector<Refused>{
           {"{{ ''.__class__.__mro__ }}", "access to attribute '__class__' of 'str' object is unsafe"},
           {"{{ cycler.__init__.__globals__.os }}", "access to attribute '__init__' of 'builtin_function_or_method' object is unsafe"},
           {"{{ joiner.__init__.__globals__ }}", "access to attribute '__init__' of 'builtin_function_or_method' object is unsafe"},
           {"{{ messages.pop() }}", "access to attribute 'pop' of 'list' object is unsafe"},
           {"{{ self.__init__ }}", "'self' is undefined"},
           {"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            "the template ran too long (more than 200000 steps)"},
           {"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "macro calls nest deeper than 40"},
           {"{{ 'a' * 2000000 }}", "a repeated sequence would be larger than the output limit"},
           {"{% set x = 'aaaaaaaaaa' %}{% for i in range(1000) %}{{ x * 1000 }}{% endfor %}",
            "the rendered text is larger than the output limit (1048576 bytes)"},
           {"{{ range(1000000) | list }}", "The sandbox blocks ranges larger than MAX_RANGE (100000)"},
       }) {
    auto r = render(c.src);
    ASSERT_FALSE(r) << c.src << " rendered";
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << c.src << ": " << r.status().message();
  }
}

}  // namespace
}  // namespace kiln
