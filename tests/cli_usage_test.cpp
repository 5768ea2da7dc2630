// The command line a new user meets (issue 23): subcommands and help, plain range errors, exit
// statuses, llama.cpp's flags, flags a .kiln cannot use, write errors, defaults in --help.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/perf_mode.h"
#include "test_util.h"

namespace kiln {
namespace {

const std::string& model() {
  static const std::string m = test::shell_quote(test::shipped_model());
  return m;
}

// The shipped model compiled once to an f32 .kiln for this test process.
const std::string& kiln_file() {
  static const std::string path = [] {
    const std::string p = test::temp_dir() + "/usage.kiln";
    auto r = test::run_kiln("compile " + model() + " -q f32 -o " + test::shell_quote(p));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return p;
  }();
  return path;
}

void expect_usage(const std::string& args, const std::string& message) {
  auto r = test::run_kiln(args);
  EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.err;
  EXPECT_NE(r.err.find(message), std::string::npos) << args << "\n" << r.err;
  EXPECT_TRUE(r.out.empty()) << args << "\n" << r.out;
}

// ---- row 4: subcommands ----

TEST(CliUsage, UnknownSubcommandListsThem) {
  for (const std::string name : {"foo", "version"}) {
    auto r = test::run_kiln(name);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.rfind("kiln: error: unknown subcommand '" + name + "'", 0), 0u) << r.err;
    for (const char* sub : {"run", "chat", "compile", "inspect", "ppl", "bench"})
      EXPECT_NE(r.err.find(std::string("\n  ") + sub + " "), std::string::npos) << sub << "\n" << r.err;
  }
  EXPECT_NE(test::run_kiln("version").err.find("'kiln --version' prints the version"), std::string::npos);
  auto unknown_help = test::run_kiln("help foo");
  EXPECT_EQ(unknown_help.exit_code, 1);
  EXPECT_EQ(unknown_help.err.rfind("kiln: error: unknown subcommand 'foo'", 0), 0u) << unknown_help.err;
}

TEST(CliUsage, HelpAndNoArguments) {
  auto help_run = test::run_kiln("help run");
  EXPECT_EQ(help_run.exit_code, 0) << help_run.err;
  EXPECT_NE(help_run.out.find("Usage: kiln run"), std::string::npos) << help_run.out;
  EXPECT_NE(help_run.out.find("--n-predict"), std::string::npos) << help_run.out;
  EXPECT_EQ(help_run.out, test::run_kiln("run --help").out);
  for (const std::string args : {"", "help"}) {
    auto r = test::run_kiln(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("Usage: kiln"), std::string::npos) << r.out;
    for (const char* sub : {"run", "chat", "compile", "inspect", "ppl", "tokenize", "bench"})
      EXPECT_NE(r.out.find(std::string("  ") + sub + " "), std::string::npos) << sub << "\n" << r.out;
  }
}

// ---- row 5: range errors name the flag plainly ----

TEST(CliUsage, RangeErrorsNameTheFlag) {
  expect_usage("run --threads -1", "--threads must be from 0 to 256\n");
  expect_usage("run -n -1", "--n-predict must be at least 0\n");
  expect_usage("run --top-p 2", "--top-p must be from 0 to 1\n");
  expect_usage("run --min-p -0.5", "--min-p must be from 0 to 1\n");
  expect_usage("run --repeat-penalty 0", "--repeat-penalty must be greater than 0\n");
  expect_usage("run --ctx -1", "--ctx must be at least 0\n");
  expect_usage("run -n abc", "--n-predict must be a whole number, not 'abc'\n");
  expect_usage("ppl " + model() + " --file x --threads 257", "--threads must be from 0 to 256\n");
  expect_usage("compile " + model() + " -o x.kiln --max-tokens 0", "--max-tokens must be from 1 to 4096\n");
  expect_usage("bench -r 0", "--repetitions must be at least 1\n");
  expect_usage("bench --threads -1", "--threads must be from 0 to 256\n");
  expect_usage("synth --preset tiny-llama -o x --layers 0", "--layers must be at least 1\n");
  // Each one line with kiln's prefix, as every other error.
  for (const std::string args : {"run -n -5", "run --ctx -1", "run --no-such-flag", "bench -r 0"}) {
    auto e = test::run_kiln(args);
    EXPECT_EQ(e.err.rfind("kiln: error: ", 0), 0u) << args << "\n" << e.err;
    EXPECT_EQ(std::count(e.err.begin(), e.err.end(), '\n'), 1) << args << "\n" << e.err;
  }
  // No CLI11 range text with DBL_MAX in full.
  auto r = test::run_kiln("run --threads -1");
  EXPECT_EQ(r.err.find("179769313486231"), std::string::npos) << r.err;
}

// ---- row 12: 1 for usage, 2 for rejected input ----

TEST(CliUsage, ExitStatusOneForUsageTwoForInput) {
  expect_usage("run --no-such-flag", "--no-such-flag");
  expect_usage("compile " + model(), "--output is required");
  expect_usage("run " + model() + " --system hi -p x", "kiln: error: --system, --chat-template and --set need --chat\n");
  expect_usage("tokenize " + model(), "kiln: error: kiln tokenize needs exactly one of --text and --jsonl\n");
  expect_usage("ppl " + model() + " -q w5a3 --file x", "kiln: error: ");
  expect_usage("bench " + model() + " -q w5a3 -r 1", "kiln: error: ");
  auto synth = test::run_kiln("synth -o x");  // prints the presets on stdout, then the error
  EXPECT_EQ(synth.exit_code, 1);
  EXPECT_NE(synth.err.find("kiln: error: synth: --preset is required\n"), std::string::npos) << synth.err;
  // Rejected input stays 2.
  const std::string empty = test::temp_dir() + "/empty.bin";
  test::write_file(empty, "");
  auto bad = test::run_kiln("run " + test::shell_quote(empty) + " -n 1");
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_EQ(test::run_kiln("run /nonexistent/model.bin -n 1").exit_code, 2);
}

// ---- row 13: llama.cpp's habits ----

TEST(CliUsage, LlamaCppFlagAliases) {
  const std::string base = " -n 6 --temp 0 -p 'Once upon a time'";
  auto plain = test::run_kiln("run " + model() + " --ctx 64 --threads 1 --seed 5" + base);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_FALSE(plain.out.empty());
  auto aliases = test::run_kiln("run -m " + model() + " -c 64 -t 1 -s 5" + base);
  ASSERT_EQ(aliases.exit_code, 0) << aliases.err;
  EXPECT_EQ(aliases.out, plain.out);
  auto long_aliases = test::run_kiln("run --model " + model() + " --ctx-size 64 --threads 1 --seed 5" + base);
  ASSERT_EQ(long_aliases.exit_code, 0) << long_aliases.err;
  EXPECT_EQ(long_aliases.out, plain.out);
}

TEST(CliUsage, PromptFromFileAndStdin) {
  auto plain = test::run_kiln("run " + model() + " -n 6 --temp 0 -p 'Once upon a time'");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const std::string file = test::temp_dir() + "/prompt.txt";
  test::write_file(file, "Once upon a time");
  auto from_file = test::run_kiln("run " + model() + " -n 6 --temp 0 -f " + test::shell_quote(file));
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  EXPECT_EQ(from_file.out, plain.out);
  auto from_stdin = test::run_kiln_with_input("run " + model() + " -n 6 --temp 0 -p -", std::string("Once upon a time"));
  ASSERT_EQ(from_stdin.exit_code, 0) << from_stdin.err;
  EXPECT_EQ(from_stdin.out, plain.out);
  expect_usage("run " + model() + " -p x -f " + test::shell_quote(file), "give the prompt once: -p TEXT or -f FILE");
  // No -p and a pipe or file on stdin: stdin is the prompt (`echo hi | kiln run`); /dev/null,
  // which run_kiln gives otherwise, is not.
  auto piped = test::run_kiln_with_input("run " + model() + " -n 6 --temp 0", std::string("Once upon a time"));
  EXPECT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.out, plain.out);
  auto missing = test::run_kiln("run " + model() + " -f /nonexistent/prompt.txt");
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
}

TEST(CliUsage, SeedMinusOneIsRandom) {
  auto r = test::run_kiln("run " + model() + " -n 2 --seed -1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("seed 18446744073709551615"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("kiln: seed "), std::string::npos) << r.err;
  expect_usage("run --seed -2", "--seed must be -1 (random) or a number from 0, not '-2'\n");
}

TEST(CliUsage, LlamaCppOnlyFlagsGetAHint) {
  expect_usage("run " + model() + " -ngl 99 -p hi", "kiln: error: kiln runs on the CPU; -ngl has no meaning here\n");
  expect_usage("run " + model() + " --n-gpu-layers=99", "kiln: error: kiln runs on the CPU; --n-gpu-layers has no meaning here\n");
  expect_usage("bench " + model() + " -fa 1", "kiln: error: kiln runs on the CPU; -fa has no meaning here\n");
  expect_usage("run " + model() + " -i", "kiln: error: -i: for a conversation use `kiln chat`\n");
  expect_usage("run " + model() + " --interactive", "kiln: error: --interactive: for a conversation use `kiln chat`\n");
  expect_usage("run " + model() + " -ctk q8_0", "kiln: error: -ctk: kiln's KV cache type is --kv-type f32|f16\n");
  expect_usage("run " + model() + " --mlock", "kiln: error: --mlock is a llama.cpp flag kiln does not have");
  // A flag kiln has keeps its meaning (bench -p).
  EXPECT_EQ(test::run_kiln("bench " + model() + " -p 4 -n 2 -r 1 --bw-mib 8 --bw-passes 1 -q f32").exit_code, 0);
}

// ---- row 8: flags a .kiln cannot use ----

TEST(CliUsage, FlagsAKilnFileFixes) {
  const std::string k = test::shell_quote(kiln_file());
  const std::string fixes = ": --tokenizer does not apply to a .kiln file, which already fixes its tokenizer";
  expect_usage("run " + k + " --tokenizer /nonexistent -n 1", kiln_file() + fixes);
  expect_usage("chat " + k + " --tokenizer /nonexistent", kiln_file() + fixes);
  expect_usage("ppl " + k + " -q w8a16 --file README.md",
               kiln_file() + ": -q does not apply to a .kiln file, which already fixes its quantization");
  expect_usage("bench " + k + " -q w4a8 -r 1",
               kiln_file() + ": -q does not apply to a .kiln file, which already fixes its quantization");
  expect_usage("bench " + k + " --group 64 -r 1",
               kiln_file() + ": --group does not apply to a .kiln file, which already fixes its quantization");
  // Without them a .kiln runs, and a source model takes them.
  auto plain = test::run_kiln("run " + k + " -n 1");
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  const std::string text =
      test::shell_quote((std::filesystem::path(test::shipped_model()).parent_path() / "README.md").string());
  auto src = test::run_kiln("ppl " + model() + " -q w8a16 --ctx 64 --file " + text);
  EXPECT_EQ(src.exit_code, 0) << src.err;
}

// ---- row 9: a write error is an error ----

TEST(CliUsage, FullDiskIsAnError) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const std::string tok = test::shell_quote((std::filesystem::path(test::shipped_model()).parent_path() / "tok512.bin").string());
  const std::string err = test::temp_dir() + "/full.err";
  const char* emulator = std::getenv("KILN_TEST_EMULATOR");
  for (const std::string& args : std::vector<std::string>{"run " + model() + " -n 8 --seed 1", "inspect --json " + test::shell_quote(kiln_file()),
                                 "tokenize " + tok + " --text hi"}) {
    // run_kiln sends stdout to a file; here it goes to /dev/full.
    const std::string cmd = (emulator && *emulator ? std::string(emulator) + " " : std::string()) + KILN_BINARY + " " +
                            args + " >/dev/full 2>" + err + " </dev/null";
    const int status = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(status)) << args;
    EXPECT_EQ(WEXITSTATUS(status), 2) << args << "\n" << test::read_file(err);
    EXPECT_NE(test::read_file(err).find("kiln: error: writing the output to stdout failed"), std::string::npos)
        << args << "\n" << test::read_file(err);
  }
}

// ---- row 20: compile ----

TEST(CliUsage, CompileNamesAMissingFolderAndAnHonestSize) {
  const std::string missing = test::temp_dir() + "/no/such/folder";
  auto r = test::run_kiln("compile " + model() + " -o " + test::shell_quote(missing + "/out.kiln"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err, "kiln: error: the folder " + missing + " of the output does not exist\n");
  auto f32 = test::run_kiln("compile " + model() + " -q f32 -o " + test::shell_quote(test::temp_dir() + "/f32.kiln"));
  ASSERT_EQ(f32.exit_code, 0) << f32.err;
  EXPECT_NE(f32.err.find("MiB (about the same size), 260032 parameters"), std::string::npos) << f32.err;
  EXPECT_EQ(f32.err.find("smaller"), std::string::npos) << f32.err;
  auto w4 = test::run_kiln("compile " + model() + " -q w4a16 -o " + test::shell_quote(test::temp_dir() + "/w4.kiln"));
  ASSERT_EQ(w4.exit_code, 0) << w4.err;
  EXPECT_NE(w4.err.find("x smaller), 260032 parameters"), std::string::npos) << w4.err;
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Every --help shows the defaults (issue 23 row 15).
TEST(CliUsage, HelpShowsTheDefaults) {
  auto run = test::run_kiln("run --help");
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_NE(run.out.find("--n-predict INT:>=0=256"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("--temp FLOAT:>=0=0.8"), std::string::npos) << run.out;  // its range, then its default
  EXPECT_NE(run.out.find("--kv-type TEXT:{f32,f16}=f32"), std::string::npos) << run.out;
  auto compile = test::run_kiln("compile --help");
  // -q has no fixed default (a quantized GGUF keeps its own), so its help says both.
  EXPECT_NE(compile.out.find("default scheme (w4a16; a quantized GGUF keeps its own)"), std::string::npos) << compile.out;
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// ppl -q compiles a source model by the rule compile and bench use (issue 23 row 6): a 4-bit
// tensor whose width the group does not divide (stories260K's 172-wide down projection) is
// stored at 8 bits instead of failing.
TEST(CliUsage, PplTakesTheCompileRuleForFourBitSchemes) {
  const std::string text = test::temp_dir() + "/ppl.txt";
  test::write_file(text, "Once upon a time, there was a little girl named Lily. She loved to play outside.\n");
  auto r = test::run_kiln("ppl " + test::shell_quote(test::shipped_model()) + " -q w4a16 --file " + test::shell_quote(text));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("perplexity"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// inspect counts each weight's bytes once (issue 23 row 11): the shipped model's classifier is its
// embedding, read by two nodes and stored once; the total fits the file's weights section.
TEST(CliUsage, InspectCountsEachWeightOnce) {
  const std::string out = test::temp_dir() + "/inspect-once.kiln";
  ASSERT_EQ(test::run_kiln("compile " + test::shell_quote(test::shipped_model()) + " -q f32 -o " + test::shell_quote(out)).exit_code, 0);
  auto r = test::run_kiln("inspect --json " + test::shell_quote(out));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  uint64_t backends = 0, section = 0;
  for (const auto& [name, b] : j["backends"].items()) backends += b["weight_bytes"].get<uint64_t>();
  for (const auto& s : j["sections"])
    if (s["kind"] == "weights") section = s["bytes"].get<uint64_t>();
  ASSERT_GT(section, 0u);
  EXPECT_LE(backends, section);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// One --ctx rule for run, chat and ppl (issue 23 row 10): a context the model cannot hold is
// refused with the flag named (exit 2, as golden_test's CliSampling has it for run), never cut
// to fit; a ppl window of one token is a usage error naming --ctx, not the text's fault.
TEST(CliUsage, CtxBeyondTheModelIsRefusedByEveryCommand) {
  const std::string model = test::shell_quote(test::shipped_model());
  const std::string text = test::temp_dir() + "/ctx.txt";
  test::write_file(text, "Once upon a time, there was a little girl named Lily.\n");
  const std::string too_long = "stories260K.bin: --ctx 100000 exceeds the model's maximum context of 512 tokens";
  for (const std::string& args :
       std::vector<std::string>{"run " + model + " -n 2 --ctx 100000", "ppl " + model + " --ctx 100000 --file " + text,
                                  "chat " + model + " --ctx 100000 --chat-template " + test::data_path("chat-templates/phi-3.5/template.jinja")}) {
    auto r = test::run_kiln_with_input(args, "");
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(too_long), std::string::npos) << args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << args << "\n" << r.out;
  }
  auto one = test::run_kiln("ppl " + model + " --ctx 1 --file " + text);
  EXPECT_EQ(one.exit_code, 1) << one.err;
  EXPECT_NE(one.err.find("--ctx 1 is too short: perplexity needs a window of at least 2 tokens"), std::string::npos)
      << one.err;
  auto fits = test::run_kiln("ppl " + model + " --ctx 512 --file " + text);
  EXPECT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_NE(fits.out.find("(context 512)"), std::string::npos) << fits.out;
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Scheme aliases a llama.cpp or QNN user types (issue 23 row 14): q4_0 is w4a16 g32 (GGML's
// Q4_0 block byte for byte), q4_1 its asymmetric form, fp16 is f16; the compiled files are the
// same bytes. "int8" alone names no layout and gets a hint; run -q compiles in that scheme.
TEST(CliUsage, SchemeAliasesCompileTheSameFile) {
  const std::string model = test::shell_quote(test::shipped_model());
  auto bytes_of = [&](const std::string& flags, const std::string& name) {
    const std::string out = test::temp_dir() + "/alias-" + name + ".kiln";
    auto r = test::run_kiln("compile " + model + " " + flags + " -o " + test::shell_quote(out));
    EXPECT_EQ(r.exit_code, 0) << flags << "\n" << r.err;
    return test::read_file(out);
  };
  EXPECT_EQ(bytes_of("-q q4_0", "q4_0"), bytes_of("-q w4a16 --group 32", "w4a16"));
  EXPECT_EQ(bytes_of("-q Q4_1", "q4_1"), bytes_of("-q w4a16 --asym", "w4a16-asym"));
  EXPECT_EQ(bytes_of("-q fp16", "fp16"), bytes_of("-q f16", "f16"));
  EXPECT_EQ(bytes_of("-q q8_0", "q8_0"), bytes_of("-q w8a16 --group 32", "w8a16-g32"));
  EXPECT_EQ(bytes_of("-q q8_0", "q8_0"), bytes_of("-q 'w8a16 g32'", "w8a16-g32-name"));
  EXPECT_NE(bytes_of("-q w8a16", "w8a16"), bytes_of("-q w8a16 --group 32", "w8a16-g32"));  // per row by default

  auto int8 = test::run_kiln("compile " + model + " -q int8 -o " + test::shell_quote(test::temp_dir() + "/int8.kiln"));
  EXPECT_NE(int8.err.find("scheme 'int8' does not say the activations' width: w8a16 keeps 16-bit activations"),
            std::string::npos)
      << int8.err;
  EXPECT_NE(int8.exit_code, 0);
  auto group = test::run_kiln("run " + model + " -q q4_0 --group 64 -n 1");
  EXPECT_EQ(group.exit_code, 1) << group.err;
  EXPECT_NE(group.err.find("scheme 'q4_0' is w4a16 with groups of 32; for groups of 64 use -q w4a16 --group 64"),
            std::string::npos)
      << group.err;
  expect_usage("run " + model + " -q w5a3 -n 1",
               "unknown scheme 'w5a3' (known: f32, f16, bf16, w8a16, w6a16, w5a16, w4a16, w8a8, "
               "w4a8; aliases: fp32, fp16, bfloat16, q4_0, q4_1, q4_k, q5_0, q5_1, q5_k, q6_k, q8_0, iq4_xs)");
  expect_usage("run " + test::shell_quote(kiln_file()) + " -q w8a16 -n 1",
               kiln_file() + ": -q does not apply to a .kiln file, which already fixes its quantization");

  // run -q compiles in memory in that scheme: the same sampled text as the compiled file, and
  // not f32's (greedy text of this trained model agrees for dozens of tokens; sampled at
  // temperature 1 with one seed, the 4-bit probabilities take another path).
  const std::string q4 = test::temp_dir() + "/alias-q4_0.kiln";
  const std::string gen = " -n 100 --temp 1 --seed 3 -p 'Once upon a time'";
  auto from_file = test::run_kiln("run " + test::shell_quote(q4) + gen);
  auto in_memory = test::run_kiln("run " + model + " -q q4_0" + gen);
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  ASSERT_EQ(in_memory.exit_code, 0) << in_memory.err;
  EXPECT_EQ(from_file.out, in_memory.out);
  auto f32 = test::run_kiln("run " + model + gen);
  EXPECT_NE(f32.out, in_memory.out) << "4-bit and f32 weights sampled the same 100 tokens; -q had no effect?";
}

// run on a GGUF or HF source with --no-cache says on stderr that it compiles in memory, at which
// scheme, and suggests kiln compile (issue 23 row 16); without it, the first start says it
// compiles into the cache (issue 36), a later one says nothing.
TEST(CliUsage, RunOnASourceSaysHowItRuns) {
  const std::string gguf = test::shell_quote(test::data_path("stories260K-gguf/stories260K.gguf"));
  auto c = test::run_kiln("run " + gguf + " -n 2 --temp 0");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.err.find("kiln: compiling "), std::string::npos) << c.err;
  EXPECT_NE(c.err.find(" once into "), std::string::npos) << c.err;
  auto c2 = test::run_kiln("run " + gguf + " -n 2 --temp 0");
  EXPECT_EQ(c2.err.find("compiling"), std::string::npos) << c2.err;
  auto r = test::run_kiln("run " + gguf + " -n 2 --temp 0 --no-cache");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(" is a gguf source, compiled in memory (f32, its own precision) on every start; `kiln compile "),
            std::string::npos)
      << r.err;
  auto q = test::run_kiln("run " + gguf + " -q w8a16 -n 2 --temp 0 --no-cache");
  EXPECT_NE(q.err.find("compiled in memory (w8a16) on every start"), std::string::npos) << q.err;
  auto k = test::run_kiln("run " + test::shell_quote(kiln_file()) + " -n 2 --temp 0");
  EXPECT_EQ(k.err.find("compiled in memory"), std::string::npos) << k.err;
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// One thread default for every command (issue 23 row 15), the C API's: --perf balanced's
// choice (the fastest cores, at most 4), printed on stderr with the statistics; --threads
// fixes the count. Before, run used 1 thread and bench every CPU.
TEST(CliUsage, OneThreadDefaultForEveryCommand) {
  const std::string expected = plan_threads(PerfMode::kBalanced, 0).summary;  // "2 threads (balanced)" here
  const std::string model = test::shell_quote(test::shipped_model());
  const std::string text = test::temp_dir() + "/threads.txt";
  test::write_file(text, "Once upon a time, there was a little girl named Lily.\n");
  for (const std::string& args : std::vector<std::string>{"run " + model + " -n 2 --seed 1",
                                                          "ppl " + model + " --file " + text,
                                                          "bench " + model + " -p 4 -n 2 -r 1 --bw-mib 8 --bw-passes 1 -q f32"}) {
    auto r = test::run_kiln(args);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << args << "\n" << r.err;
  }
  auto one = test::run_kiln("run " + model + " -n 2 --seed 1 -t 1");
  EXPECT_NE(one.err.find("kiln: seed 1, 1 thread (balanced)"), std::string::npos) << one.err;
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// inspect on a source model describes it (issue 23 row 19): format, shapes, tensors as stored,
// the way to a .kiln; not "bad magic". A file that is no model is still named as such.
TEST(CliUsage, InspectDescribesASourceModel) {
  const std::string gguf = test::data_path("stories260K-gguf/stories260K.gguf");
  auto r = test::run_kiln("inspect " + test::shell_quote(gguf));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(": a GGUF model, a source model (not compiled), 1185376 bytes in 1 file(s)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("model: llama, 5 layers, dim 64, 8 heads (4 kv, head_dim 8), ffn 172, vocab 512"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("`kiln compile " + gguf + " -o model.kiln`"), std::string::npos) << r.out;
  auto j = test::run_kiln("inspect --json " + test::shell_quote(test::data_path("stories260K-hf")));
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["source"]["format"], "hf");
  // Every tensor stored as F32: bytes are 4 per parameter, and the list adds up to the total.
  uint64_t sum = 0;
  for (const auto& t : doc["tensors"]) sum += t["bytes"].get<uint64_t>();
  EXPECT_EQ(sum, doc["sizes"]["tensor_bytes"].get<uint64_t>());
  EXPECT_EQ(doc["sizes"]["by_type"]["F32"].get<uint64_t>(), sum);
  EXPECT_EQ(doc["sizes"]["parameters"].get<uint64_t>() * 4, sum);
  const std::string notes = test::temp_dir() + "/notes.txt";
  test::write_file(notes, "# some notes\n");
  auto text = test::run_kiln("inspect " + test::shell_quote(notes));
  EXPECT_EQ(text.exit_code, 2);
  EXPECT_NE(text.err.find("not a model file"), std::string::npos) << text.err;
  auto verify = test::run_kiln("inspect --verify " + test::shell_quote(gguf));
  EXPECT_EQ(verify.exit_code, 1);
  EXPECT_NE(verify.err.find("--verify checks a .kiln's checksums"), std::string::npos) << verify.err;
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Every path kiln writes (a .kiln, a profile's trace and report) is a regular file or nothing
// yet: a FIFO, a folder or a device is one line and exit 2, and stays what it was.
TEST(CliUsage, WritesOnlyRegularFiles) {
  const std::string dir = test::temp_dir() + "/cli_not_regular";
  std::filesystem::create_directories(dir);
  const std::string fifo = dir + "/out.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string model = test::shell_quote(test::shipped_model());
  for (const std::string& args : {"compile " + model + " -o " + fifo, "compile " + model + " -o " + dir,
                                  "profile " + model + " -p 4 -n 2 --level detailed --no-ceilings --trace " + fifo,
                                  "profile " + model + " -p 4 -n 2 --level detailed --no-ceilings --report " + dir}) {
    auto r = test::run_kiln(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(", not a regular file: kiln writes a file by renaming a finished copy onto it"), std::string::npos)
        << args << "\n" << r.err;
  }
  struct stat st;
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Every numeric flag of every subcommand, read from its own --help (so that a new flag is
// covered the day it is added), refuses a value far out of any range with exit 1 and one line
// naming it: none of kiln's numbers can be -99999 (a seed of -1 means random; -99999 is no seed).
TEST(CliUsage, EveryNumericFlagChecksItsRange) {
  const std::regex subcommand_line(R"(^  ([a-z][a-z-]*) +\S)");
  const std::regex numeric_option(R"(^  (?:-[A-Za-z],)?(--[a-z][a-z0-9-]*)(?:,[-a-z0-9,]+)? (INT|UINT|FLOAT|DOUBLE|INT64|UINT64)\b)");
  auto top = test::run_kiln("help");
  ASSERT_EQ(top.exit_code, 0);
  std::vector<std::string> subs;
  std::istringstream lines(top.out);
  bool in_list = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("Subcommands:", 0) == 0 || line.rfind("subcommands:", 0) == 0) in_list = true;
    std::smatch m;
    if (in_list && std::regex_search(line, m, subcommand_line)) subs.push_back(m[1]);
  }
  ASSERT_GE(subs.size(), 10u) << top.out;
  int checked = 0;
  for (const std::string& sub : subs) {
    auto help = test::run_kiln(sub + " --help");
    ASSERT_EQ(help.exit_code, 0) << sub;
    std::istringstream hl(help.out);
    for (std::string line; std::getline(hl, line);) {
      std::smatch m;
      if (!std::regex_search(line, m, numeric_option)) continue;
      const std::string flag = m[1];
      auto r = test::run_kiln_within(sub + " " + flag + "=-99999", 20);
      EXPECT_EQ(r.exit_code, 1) << "kiln " << sub << " " << flag << "=-99999\n" << r.err;
      EXPECT_EQ(r.err.rfind("kiln: error: " + flag, 0), 0u) << "kiln " << sub << " " << flag << "=-99999\n" << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "kiln " << sub << " " << flag << "\n" << r.err;
      ++checked;
    }
  }
  EXPECT_GE(checked, 40);
  std::printf("numeric flags checked: %d over %zu subcommands\n", checked, subs.size());
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// -q on a GGUF whose weights are quantized already rounds them a second time: said on stderr
// (issue 38 item 10); without -q, nothing is said.
TEST(CliUsage, RequantizingAQuantizedSourceIsSaid) {
  const std::string gguf = test::shell_quote(test::data_path("hf-tiny/minicpm-wide/model-q4_k_m.gguf"));
  auto again = test::run_kiln("run " + gguf + " -q w4a16 -p a -n 1 --temp 0");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("kiln: note: " + test::data_path("hf-tiny/minicpm-wide/model-q4_k_m.gguf") +
                           " stores its weights quantized already (Q4_K, Q6_K); the scheme asked for rounds them again"),
            std::string::npos)
      << again.err;
  auto own = test::run_kiln("run " + gguf + " -p a -n 1 --temp 0");
  ASSERT_EQ(own.exit_code, 0) << own.err;
  EXPECT_EQ(own.err.find("kiln: note:"), std::string::npos) << own.err;
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// A flag several subcommands share reads alike in each one's --help (issue 38 item 9): one
// --group text, one -t default (--perf picks, as the C API), --seed's default shown as -1
// (random), --perf's four modes as the README lists them; ppl takes --group as run and bench do.
TEST(CliUsage, SharedFlagsReadAlikeInEveryHelp) {
  const std::regex group_line(R"(--group INT:?[^ ]*=32 +(.*))");
  const std::regex threads_line(R"(-t,--threads INT:0\.\.256=0 +(.*))");
  std::string group_help, threads_help;
  for (const char* sub : {"run", "chat", "bench", "ppl", "profile", "compare", "compile"}) {
    auto h = test::run_kiln(std::string(sub) + " --help");
    ASSERT_EQ(h.exit_code, 0) << sub;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(h.out, m, group_line)) << sub << "\n" << h.out;
    if (group_help.empty()) group_help = m[1];
    EXPECT_EQ(m[1], group_help) << sub;
    if (std::string(sub) == "compile") continue;  // compile runs nothing
    ASSERT_TRUE(std::regex_search(h.out, m, threads_line)) << sub << "\n" << h.out;
    if (threads_help.empty()) threads_help = m[1];
    EXPECT_EQ(m[1], threads_help) << sub;
    EXPECT_NE(h.out.find("--perf TEXT:{burst,balanced,sustained,power_saver}"), std::string::npos) << sub;
  }
  EXPECT_NE(threads_help.find("0: as --perf picks"), std::string::npos) << threads_help;
  EXPECT_NE(test::run_kiln("run --help").out.find("-s,--seed INT=-1 "), std::string::npos);
  const std::string text = test::temp_dir() + "/shared_flags.txt";
  test::write_file(text, "Once upon a time, there was a little girl named Lily.\n");
  auto ppl = test::run_kiln("ppl " + model() + " -q w4a16 --group 64 -f " + test::shell_quote(text));
  EXPECT_EQ(ppl.exit_code, 0) << ppl.err;
  EXPECT_EQ(test::run_kiln("ppl " + model() + " -q w4a16 --group 48 -f " + test::shell_quote(text)).exit_code, 1);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// kiln profile keeps a source model's own precision, as run, bench and ppl do (it compiled the
// f32 stories260K at w4a16), and -q still picks another (issue 38 item 9).
TEST(CliUsage, ProfileKeepsASourcesOwnPrecision) {
  const std::string trace = test::temp_dir() + "/own_precision.json";
  auto own = test::run_kiln("profile " + model() + " -p 4 -n 2 --no-ceilings --trace " + test::shell_quote(trace));
  ASSERT_EQ(own.exit_code, 0) << own.err;
  const std::string t = test::read_file(trace);
  EXPECT_NE(t.find("matmul_add f32"), std::string::npos);
  EXPECT_EQ(t.find("w4a16"), std::string::npos);
  auto asked = test::run_kiln("profile " + model() + " -q w4a16 -p 4 -n 2 --no-ceilings --trace " + test::shell_quote(trace));
  ASSERT_EQ(asked.exit_code, 0) << asked.err;
  EXPECT_NE(test::read_file(trace).find("w4a16"), std::string::npos);
}

}  // namespace
}  // namespace kiln
