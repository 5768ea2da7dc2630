// The compile cache (engine/compile_cache.h) and the self-healing .kiln (engine/open_model.h):
// a source compiled once and mapped after, a changed source compiled again, concurrent opens,
// least-recently-used pruning, --no-cache, and a .kiln of a foreign target or an older format
// version rebuilt from the source it records.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "artifact/kiln_file.h"
#include "artifact/source_section.h"
#include "compiler/kiln_writer.h"
#include "core/cpu_features.h"
#include "engine/compile_cache.h"
#include "engine/compile_file.h"
#include "engine/open_model.h"
#include "include/kiln/kiln.h"
#include "quant/overrides.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  const std::string d = test::temp_dir() + "/" + name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string stories_gguf() { return test::data_path("stories260K-gguf/stories260K.gguf"); }

// A copy of the shipped GGUF that a test may change.
std::string copy_of_gguf(const std::string& dir) {
  const std::string p = dir + "/stories.gguf";
  fs::copy_file(stories_gguf(), p, fs::copy_options::overwrite_existing);
  return p;
}

struct Lines {
  std::vector<std::string> lines;
};

OpenOptions cached(const std::string& dir, Lines* said = nullptr) {
  OpenOptions o;
  o.cache.enabled = true;
  o.cache.dir = dir;
  if (said) o.cache.notify = [said](const std::string& l) { said->lines.push_back(l); };
  return o;
}

size_t entries_in(const std::string& dir) {
  auto l = list_cache(dir);
  return l ? l->size() : 0;
}

TEST(CompileCache, SecondOpenMapsTheEntryInsteadOfCompiling) {
  const std::string dir = fresh_dir("hit");
  Lines said;
  auto a = open_model(stories_gguf(), cached(dir, &said));
  ASSERT_TRUE(a) << a.status().message();
  EXPECT_FALSE(a->cache_hit);
  EXPECT_EQ(a->kind, "gguf");
  ASSERT_FALSE(a->cache_path.empty());
  EXPECT_TRUE(fs::is_regular_file(a->cache_path));
  EXPECT_EQ(fs::path(a->cache_path).parent_path(), fs::path(dir));
  ASSERT_EQ(said.lines.size(), 1u);
  EXPECT_NE(said.lines[0].find("compiling " + stories_gguf() + " once into " + a->cache_path), std::string::npos)
      << said.lines[0];

  auto b = open_model(stories_gguf(), cached(dir, &said));
  ASSERT_TRUE(b) << b.status().message();
  EXPECT_TRUE(b->cache_hit);
  EXPECT_EQ(b->cache_path, a->cache_path);
  EXPECT_EQ(b->kind, "gguf");
  EXPECT_EQ(said.lines.size(), 1u);  // nothing compiled, nothing said
  EXPECT_EQ(entries_in(dir), 1u);
  EXPECT_EQ(b->model->config().vocab_size, a->model->config().vocab_size);

  // Another scheme is another entry.
  OpenOptions q = cached(dir, &said);
  q.quant = f32_overrides();
  auto c = open_model(stories_gguf(), q);
  ASSERT_TRUE(c) << c.status().message();
  EXPECT_FALSE(c->cache_hit);
  EXPECT_NE(c->cache_path, a->cache_path);
  EXPECT_EQ(entries_in(dir), 2u);
}

TEST(CompileCache, OffCompilesInMemory) {
  const std::string dir = fresh_dir("off");
  OpenOptions o = cached(dir);
  o.cache.enabled = false;
  auto a = open_model(stories_gguf(), o);
  ASSERT_TRUE(a) << a.status().message();
  EXPECT_TRUE(a->cache_path.empty());
  EXPECT_EQ(entries_in(dir), 0u);
}

TEST(CompileCache, ChangedSourceIsCompiledAgain) {
  const std::string dir = fresh_dir("changed");
  const std::string src = copy_of_gguf(fresh_dir("changed-src"));
  auto a = open_model(src, cached(dir));
  ASSERT_TRUE(a) << a.status().message();
  EXPECT_FALSE(a->cache_hit);

  // Touched: another mtime, another entry.
  struct stat st {};
  ASSERT_EQ(::stat(src.c_str(), &st), 0);
  struct timespec later[2] = {st.st_atim, st.st_mtim};
  later[1].tv_sec += 10;
  ASSERT_EQ(::utimensat(AT_FDCWD, src.c_str(), later, 0), 0);
  auto b = open_model(src, cached(dir));
  ASSERT_TRUE(b) << b.status().message();
  EXPECT_FALSE(b->cache_hit);
  EXPECT_NE(b->cache_path, a->cache_path);

  // Other bytes under the same size and mtime (the last weight's lowest byte): the hash tells.
  {
    std::fstream f(src, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    char c = 0;
    f.read(&c, 1);
    c ^= 1;
    f.seekp(-1, std::ios::end);
    f.write(&c, 1);
  }
  ASSERT_EQ(::utimensat(AT_FDCWD, src.c_str(), later, 0), 0);
  auto c = open_model(src, cached(dir));
  ASSERT_TRUE(c) << c.status().message();
  EXPECT_FALSE(c->cache_hit);
  EXPECT_NE(c->cache_path, b->cache_path);
  auto again = open_model(src, cached(dir));
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->cache_hit);
  EXPECT_EQ(again->cache_path, c->cache_path);
}

TEST(CompileCache, DamagedEntryIsCompiledAgain) {
  const std::string dir = fresh_dir("damaged");
  auto a = open_model(stories_gguf(), cached(dir));
  ASSERT_TRUE(a) << a.status().message();
  const std::string entry = a->cache_path;
  a = Result<OpenedModel>(invalid_argument("dropped"));
  fs::resize_file(entry, fs::file_size(entry) / 2);
  auto b = open_model(stories_gguf(), cached(dir));
  ASSERT_TRUE(b) << b.status().message();
  EXPECT_FALSE(b->cache_hit);
  EXPECT_EQ(b->cache_path, entry);
}

TEST(CompileCache, ConcurrentOpensBothSucceedAndCompileOnce) {
  const std::string dir = fresh_dir("threads");
  std::atomic<int> compiles{0};
  std::atomic<int> ok{0};
  auto open_one = [&] {
    OpenOptions o = cached(dir);
    o.cache.notify = [&](const std::string&) { ++compiles; };
    if (auto m = open_model(stories_gguf(), o); m) ++ok;
  };
  std::thread t1(open_one), t2(open_one);
  t1.join();
  t2.join();
  EXPECT_EQ(ok.load(), 2);
  EXPECT_EQ(compiles.load(), 1);  // the second waited on the entry's lock and found it made
  EXPECT_EQ(entries_in(dir), 1u);
}

TEST(CompileCache, ConcurrentProcessesBothSucceed) {
  const std::string dir = fresh_dir("procs");
  const std::string out = test::temp_dir() + "/procs";
  const std::string run = "run " + test::shell_quote(stories_gguf()) + " -p Once -n 4 --temp 0 --cache-dir " +
                          test::shell_quote(dir);
  // Two processes at once through a shell: both must exit 0 with the same text.
  // Under a cross build's emulator (qemu-aarch64) the kiln binary runs through it, as run_kiln's do.
  const char* emulator = std::getenv("KILN_TEST_EMULATOR");
  const std::string kiln = (emulator && *emulator ? std::string(emulator) + " " : std::string()) + KILN_BINARY;
  const std::string cmd = "(" + kiln + " " + run + " >" + out + ".1 2>/dev/null; echo $? >" + out + ".rc1) & (" + kiln + " " +
                          run + " >" + out + ".2 2>/dev/null; echo $? >" + out + ".rc2) & wait";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_EQ(test::read_file(out + ".rc1"), "0\n");
  EXPECT_EQ(test::read_file(out + ".rc2"), "0\n");
  EXPECT_EQ(test::read_file(out + ".1"), test::read_file(out + ".2"));
  EXPECT_FALSE(test::read_file(out + ".1").empty());
  EXPECT_EQ(entries_in(dir), 1u);
}

TEST(CompileCache, CliSaysOneLineOnceAndTheTextIsTheInMemoryOnes) {
  const std::string dir = fresh_dir("cli");
  const std::string run = "run " + test::shell_quote(stories_gguf()) + " -p Once -n 16 --temp 0 --cache-dir " +
                          test::shell_quote(dir);
  auto first = test::run_kiln(run);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.err.find("kiln: compiling "), std::string::npos) << first.err;
  EXPECT_EQ(first.err.find("on every start"), std::string::npos) << first.err;
  auto second = test::run_kiln(run);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.err.find("compiling"), std::string::npos) << second.err;
  EXPECT_EQ(second.out, first.out);
  auto off = test::run_kiln(run + " --no-cache");
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_NE(off.err.find("compiled in memory"), std::string::npos) << off.err;
  EXPECT_EQ(off.out, first.out);
  EXPECT_EQ(entries_in(dir), 1u);

  auto list = test::run_kiln("cache list --cache-dir " + test::shell_quote(dir));
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("stories260K.gguf-"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("1 entries"), std::string::npos) << list.out;
  auto clear = test::run_kiln("cache clear --cache-dir " + test::shell_quote(dir));
  ASSERT_EQ(clear.exit_code, 0) << clear.err;
  EXPECT_EQ(entries_in(dir), 0u);
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(CompileCache, EnvironmentNamesTheFolder) {
  const std::string dir = fresh_dir("env");
  const std::string src = copy_of_gguf(fresh_dir("env-src"));  // a source no other test opened
  auto r = test::run_kiln("run " + test::shell_quote(src) + " -p Once -n 2 --temp 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The tests' own KILN_CACHE_DIR (test_util.cpp): never the user's cache.
  const char* env = std::getenv("KILN_CACHE_DIR");
  ASSERT_NE(env, nullptr);
  EXPECT_EQ(default_cache_dir(), env);
  EXPECT_NE(r.err.find(std::string("once into ") + env), std::string::npos) << r.err;
  EXPECT_EQ(entries_in(dir), 0u);
}

void make_entry(const std::string& dir, const std::string& hex, uint64_t bytes, int64_t age_s) {
  const std::string p = dir + "/m.gguf-" + hex + ".kiln";
  test::write_file(p, std::string(bytes, 'x'));
  struct timespec t[2];
  t[0].tv_sec = t[1].tv_sec = 1700000000 - age_s;
  t[0].tv_nsec = t[1].tv_nsec = 0;
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), t, 0), 0);
}

TEST(CompileCache, PruneRemovesTheLeastRecentlyUsed) {
  const std::string dir = fresh_dir("prune");
  make_entry(dir, "000000000000000a", 1000, 30);  // oldest
  make_entry(dir, "000000000000000b", 1000, 20);
  make_entry(dir, "000000000000000c", 1000, 10);  // newest
  test::write_file(dir + "/notes.txt", "not an entry");
  auto l = list_cache(dir);
  ASSERT_TRUE(l);
  ASSERT_EQ(l->size(), 3u);
  EXPECT_NE((*l)[0].path.find("000c"), std::string::npos);  // most recent first
  auto removed = prune_cache(dir, 2500);
  ASSERT_TRUE(removed);
  ASSERT_EQ(removed->size(), 1u);
  EXPECT_NE((*removed)[0].path.find("000a"), std::string::npos);
  // `keep` stays even when it is the oldest.
  removed = prune_cache(dir, 1000, dir + "/m.gguf-000000000000000b.kiln");
  ASSERT_TRUE(removed);
  ASSERT_EQ(removed->size(), 1u);
  EXPECT_NE((*removed)[0].path.find("000c"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir + "/notes.txt"));
  // The CLI.
  make_entry(dir, "000000000000000d", 3000, 40);
  auto r = test::run_kiln("cache prune --max-size 2K --cache-dir " + test::shell_quote(dir));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("000d"), std::string::npos) << r.out;
  EXPECT_EQ(entries_in(dir), 1u);
  EXPECT_NE(test::run_kiln("cache prune --max-size lots --cache-dir " + test::shell_quote(dir)).exit_code, 0);
}

TEST(CompileCache, ACompileKeepsTheFolderInItsBound) {
  const std::string dir = fresh_dir("bound");
  make_entry(dir, "00000000000000aa", 4096, 30);
  OpenOptions o = cached(dir);
  o.cache.max_bytes = 4096;  // less than the new entry with the old one
  auto a = open_model(stories_gguf(), o);
  ASSERT_TRUE(a) << a.status().message();
  EXPECT_FALSE(fs::exists(dir + "/m.gguf-00000000000000aa.kiln"));
  EXPECT_TRUE(fs::exists(a->cache_path));  // the new entry is kept even over the bound
}

TEST(CompileCache, ByteSizes) {
  EXPECT_EQ(*parse_byte_size("1024"), 1024u);
  EXPECT_EQ(*parse_byte_size("2K"), 2048u);
  EXPECT_EQ(*parse_byte_size("500M"), 500ull << 20);
  EXPECT_EQ(*parse_byte_size("8G"), 8ull << 30);
  EXPECT_EQ(*parse_byte_size("8GiB"), 8ull << 30);
  EXPECT_EQ(*parse_byte_size("1tb"), 1ull << 40);
  EXPECT_FALSE(parse_byte_size(""));
  EXPECT_FALSE(parse_byte_size("G"));
  EXPECT_FALSE(parse_byte_size("8X"));
  EXPECT_FALSE(parse_byte_size("99999999999T"));
}

TEST(CompileCache, OverridesKeyTellsSchemesApart) {
  auto a = overrides_from_flags("w4a16");
  auto b = overrides_from_flags("w4a16", 64);
  auto c = overrides_from_flags("w8a16");
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(overrides_key(*a), overrides_key(*overrides_from_flags("w4a16")));
  EXPECT_NE(overrides_key(*a), overrides_key(*b));
  EXPECT_NE(overrides_key(*a), overrides_key(*c));
  auto r = parse_overrides(R"({"default": "w4a16", "rules": [{"op": "attention", "scheme": "f16"}]})", "x");
  ASSERT_TRUE(r);
  EXPECT_NE(overrides_key(*r), overrides_key(*a));
}

TEST(CompileCache, SourceIdentitySeesFolderFiles) {
  const std::string dir = fresh_dir("folder-id");
  test::write_file(dir + "/a", "one");
  auto x = source_identity(dir);
  ASSERT_TRUE(x);
  test::write_file(dir + "/b", "two");
  auto y = source_identity(dir);
  ASSERT_TRUE(y);
  EXPECT_NE(x->hash, y->hash);
  EXPECT_EQ(y->size, 6u);
  EXPECT_FALSE(source_identity(dir + "/missing"));
}

TEST(CompileCache, CApiLoadsThroughTheCacheUnlessAskedNot) {
  const std::string dir = fresh_dir("capi");
  kiln_runtime* rt = nullptr;
  ASSERT_EQ(kiln_runtime_create(nullptr, &rt), KILN_OK) << kiln_last_error();
  kiln_model_params p = kiln_model_default_params();
  EXPECT_EQ(p.no_cache, 0);
  p.cache_dir = dir.c_str();
  for (int i = 0; i < 2; ++i) {
    kiln_model* m = nullptr;
    ASSERT_EQ(kiln_model_load(rt, stories_gguf().c_str(), &p, &m), KILN_OK) << kiln_last_error();
    kiln_model_free(m);
    EXPECT_EQ(entries_in(dir), 1u);
  }
  const std::string off = fresh_dir("capi-off");
  p.cache_dir = off.c_str();
  p.no_cache = 1;
  kiln_model* m = nullptr;
  ASSERT_EQ(kiln_model_load(rt, stories_gguf().c_str(), &p, &m), KILN_OK) << kiln_last_error();
  kiln_model_free(m);
  EXPECT_EQ(entries_in(off), 0u);
  kiln_runtime_free(rt);
}

// ---- the self-healing .kiln ----

// A .kiln of `src` (w4a16) for `target`, with its source record.
std::string compile_for(const std::string& src, const std::string& target, const std::string& out) {
  CompileRequest rq;
  rq.model = src;
  rq.output = out;
  rq.target = target;
  rq.conformance = false;
  auto s = compile_to_file(rq);
  EXPECT_TRUE(s) << s.status().message();
  return out;
}

// A target this machine cannot run, "" when it can run them all.
std::string foreign_target() {
  for (const CpuTarget& t : kCpuTargets) {
    auto r = resolve_target(t.name);
    if (r && (r->cpu_features & ~(host_cpu_features() | kCpuBestTable)) != 0) return t.name;
  }
  return "";
}

// Rewrites the format version of a .kiln and its header checksum.
void set_format_version(const std::string& path, uint32_t version) {
  std::string b = test::read_file(path);
  std::memcpy(b.data() + 8, &version, 4);
  uint32_t n = 0;
  std::memcpy(&n, b.data() + 216, 4);
  const size_t table_end = kKilnHeaderSize + size_t{n} * kKilnSectionEntrySize;
  const uint64_t sum = kiln_checksum({reinterpret_cast<const uint8_t*>(b.data()), table_end});
  std::memcpy(b.data() + table_end, &sum, 8);
  test::write_file(path, b);
}

TEST(SelfHeal, TheFileRecordsItsSource) {
  const std::string d = fresh_dir("record");
  const std::string src = copy_of_gguf(d);
  const std::string k = compile_for(src, "auto", d + "/m.kiln");
  auto f = open_kiln(k);
  ASSERT_TRUE(f) << f.status().message();
  ASSERT_TRUE((*f)->has_section(KilnSection::kSource));
  auto r = decode_source_section((*f)->section(KilnSection::kSource), k);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->path, fs::absolute(src).lexically_normal().string());
  EXPECT_EQ(r->size, fs::file_size(src));
  EXPECT_EQ(r->hash, source_identity(src)->hash);
  EXPECT_FALSE(r->calibrated);
  EXPECT_EQ(decode_source_section({reinterpret_cast<const uint8_t*>(encode_source_section(*r).data()),
                                   encode_source_section(*r).size()}, "x")->path, r->path);
  EXPECT_FALSE(decode_source_section({reinterpret_cast<const uint8_t*>("{}"), 2}, "x"));
}

TEST(SelfHeal, ForeignTargetIsRebuiltFromItsSource) {
  const std::string target = foreign_target();
  if (target.empty()) GTEST_SKIP() << "this machine runs every target";
  const std::string d = fresh_dir("foreign");
  const std::string src = copy_of_gguf(d);
  const std::string k = compile_for(src, target, d + "/foreign.kiln");
  // As it was: refused.
  OpenOptions plain;
  auto refused = open_kiln(k, {.host_cpu_features = host_cpu_features() | kCpuBestTable});
  ASSERT_FALSE(refused);
  const std::string cache = fresh_dir("foreign-cache");
  Lines said;
  auto m = open_model(k, cached(cache, &said));
  ASSERT_TRUE(m) << m.status().message();
  EXPECT_EQ(m->kind, "kiln");
  EXPECT_FALSE(m->cache_hit);
  ASSERT_EQ(said.lines.size(), 1u);
  EXPECT_NE(said.lines[0].find("lacks"), std::string::npos) << said.lines[0];
  EXPECT_NE(said.lines[0].find("rebuilding it from its source " + fs::absolute(src).lexically_normal().string()),
            std::string::npos) << said.lines[0];
  auto again = open_model(k, cached(cache, &said));
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_TRUE(again->cache_hit);
  EXPECT_EQ(said.lines.size(), 1u);
  // Without the cache: rebuilt in memory.
  auto mem = open_model(k, plain);
  ASSERT_TRUE(mem) << mem.status().message();
  EXPECT_TRUE(mem->cache_path.empty());
  // The CLI: one line, then the text.
  auto r = test::run_kiln("run " + test::shell_quote(k) + " -p Once -n 4 --temp 0 --cache-dir " + test::shell_quote(cache));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(r.out.empty());

  // The source changed: the message says so and the command that fixes it.
  {
    std::ofstream f(src, std::ios::app | std::ios::binary);
    f << "x";
  }
  auto changed = open_model(k, cached(fresh_dir("foreign-cache2")));
  ASSERT_FALSE(changed);
  EXPECT_NE(changed.status().message().find("has changed since"), std::string::npos) << changed.status().message();
  EXPECT_NE(changed.status().message().find("kiln compile " + fs::absolute(src).lexically_normal().string() + " -o " + k),
            std::string::npos) << changed.status().message();
  // The source gone.
  fs::remove(src);
  auto missing = open_model(k, cached(fresh_dir("foreign-cache3")));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find("is missing"), std::string::npos) << missing.status().message();
  EXPECT_NE(missing.status().message().find("kiln compile "), std::string::npos) << missing.status().message();
}

TEST(SelfHeal, OlderFormatVersionIsRebuiltFromItsSource) {
  const std::string d = fresh_dir("older");
  const std::string src = copy_of_gguf(d);
  const std::string k = compile_for(src, "auto", d + "/old.kiln");
  set_format_version(k, kKilnFormatVersion - 1);
  auto refused = open_kiln(k);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.status().message().find("format version"), std::string::npos);
  const std::string cache = fresh_dir("older-cache");
  Lines said;
  auto m = open_model(k, cached(cache, &said));
  ASSERT_TRUE(m) << m.status().message();
  ASSERT_EQ(said.lines.size(), 1u);
  EXPECT_NE(said.lines[0].find("format version " + std::to_string(kKilnFormatVersion - 1)), std::string::npos)
      << said.lines[0];
  EXPECT_FALSE(m->cache_path.empty());
  // The rebuilt file is this version's and runs the same program as a fresh compile.
  auto rebuilt = open_kiln(m->cache_path);
  ASSERT_TRUE(rebuilt) << rebuilt.status().message();
  EXPECT_EQ((*rebuilt)->format_version(), kKilnFormatVersion);
  const std::string fresh = compile_for(src, "auto", d + "/fresh.kiln");
  auto f = open_kiln(fresh);
  ASSERT_TRUE(f);
  EXPECT_EQ((*rebuilt)->tensors().size(), (*f)->tensors().size());
  for (size_t i = 0; i < (*f)->tensors().size(); ++i) {
    const auto& a = (*rebuilt)->tensors()[i];
    const auto& b = (*f)->tensors()[i];
    ASSERT_EQ(a.name, b.name);
    EXPECT_TRUE(a.bytes.size() == b.bytes.size() && std::memcmp(a.bytes.data(), b.bytes.data(), a.bytes.size()) == 0)
        << a.name;
  }
}

TEST(SelfHeal, AFileWithoutARecordSaysHowToRecompile) {
  const std::string d = fresh_dir("norecord");
  auto imp = import_model(stories_gguf());
  ASSERT_TRUE(imp);
  CompileOptions co;
  co.quant = f32_overrides();
  CompileReport rep;
  auto img = compile_model(*imp, co, &rep);
  ASSERT_TRUE(img);
  auto t = resolve_target("auto");
  ASSERT_TRUE(t);
  const std::string k = d + "/norecord.kiln";
  ASSERT_TRUE(write_kiln(*img, *t, rep, k));
  set_format_version(k, kKilnFormatVersion - 1);
  auto m = open_model(k, cached(fresh_dir("norecord-cache")));
  ASSERT_FALSE(m);
  EXPECT_NE(m.status().message().find("recompile it with `kiln compile`"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("records no source"), std::string::npos) << m.status().message();
}

}  // namespace
}  // namespace kiln
