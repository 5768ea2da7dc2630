// kiln_model_load_fd (issue 36 item 4): a .kiln stored uncompressed inside a zip (as in an APK)
// is mapped in place from the zip's descriptor at a 16 KB-aligned offset and gives the plain
// file's text; at any other offset it is refused with a message saying why and what to do.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <string>

#include "capi_test_util.h"
#include "engine/compile_file.h"
#include "test_util.h"

namespace kiln {
namespace {

using test::capi::Runtime;

uint32_t crc32(const std::string& data) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : data) c = table[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

struct StoredZip {
  std::string bytes;
  uint64_t data_offset = 0;  // where the entry's bytes start
};

// A zip of one entry stored (method 0, as `zip -0` and an APK's noCompress write it) after a
// stored entry of `lead` bytes, its data moved to a multiple of `align` by padding the local
// header's extra field (as zipalign does); align 1: no padding.
StoredZip stored_zip(const std::string& name, const std::string& data, size_t lead, uint64_t align) {
  std::string out;
  auto u16 = [&](uint16_t v) { out.append(reinterpret_cast<const char*>(&v), 2); };
  auto u32 = [&](uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); };
  struct Entry {
    std::string name, data;
    uint32_t offset = 0;
  };
  std::vector<Entry> entries = {{"lead.txt", std::string(lead, 'x')}, {name, data}};
  StoredZip z;
  for (Entry& e : entries) {
    e.offset = static_cast<uint32_t>(out.size());
    const uint64_t header_end = out.size() + 30 + e.name.size();
    const uint64_t pad = (&e == &entries.back()) ? (align - header_end % align) % align : 0;
    u32(0x04034b50);
    u16(10), u16(0), u16(0), u16(0), u16(0x21);  // version, flags, stored, time, date
    u32(crc32(e.data)), u32(static_cast<uint32_t>(e.data.size())), u32(static_cast<uint32_t>(e.data.size()));
    u16(static_cast<uint16_t>(e.name.size())), u16(static_cast<uint16_t>(pad));
    out += e.name;
    out.append(pad, '\0');
    if (&e == &entries.back()) z.data_offset = out.size();
    out += e.data;
  }
  const auto cd_start = static_cast<uint32_t>(out.size());
  for (const Entry& e : entries) {
    u32(0x02014b50);
    u16(20), u16(10), u16(0), u16(0), u16(0), u16(0x21);
    u32(crc32(e.data)), u32(static_cast<uint32_t>(e.data.size())), u32(static_cast<uint32_t>(e.data.size()));
    u16(static_cast<uint16_t>(e.name.size())), u16(0), u16(0), u16(0), u16(0);
    u32(0), u32(e.offset);
    out += e.name;
  }
  const auto cd_size = static_cast<uint32_t>(out.size() - cd_start);
  u32(0x06054b50);
  u16(0), u16(0), u16(static_cast<uint16_t>(entries.size())), u16(static_cast<uint16_t>(entries.size()));
  u32(cd_size), u32(cd_start), u16(0);
  z.bytes = std::move(out);
  return z;
}

const std::string& shipped_kiln() {
  static const std::string path = [] {
    const std::string p = test::temp_dir() + "/stories260K-fd.kiln";
    CompileRequest req;
    req.model = test::shipped_model();
    req.output = p;
    req.scheme = "w8a16";
    auto r = compile_to_file(req);
    EXPECT_TRUE(r) << r.status().message();
    return p;
  }();
  return path;
}

std::string greedy_text(kiln_model* m) {
  kiln_session* s = test::capi::session(m);
  const std::string text = test::capi::generate(s, "Once upon a time", 24);
  kiln_session_free(s);
  return text;
}

TEST(LoadFd, AlignedEntryInsideAZipMapsInPlaceAndGivesThePlainFilesText) {
  Runtime rt;
  kiln_model* plain = test::capi::load(rt.rt, shipped_kiln());
  ASSERT_NE(plain, nullptr);
  const std::string want = greedy_text(plain);
  kiln_model_free(plain);
  ASSERT_FALSE(want.empty());

  const StoredZip z = stored_zip("assets/model.kiln", test::read_file(shipped_kiln()), 1000, 16384);
  ASSERT_EQ(z.data_offset % 16384, 0u);
  ASSERT_GT(z.data_offset, 0u);
  const std::string zip = test::temp_dir() + "/aligned.zip";
  test::write_file(zip, z.bytes);
  // The zip is one unzip(1) reads, its entry stored byte for byte.
  if (system("command -v unzip >/dev/null 2>&1") == 0) {
    auto r = system(("unzip -tqq " + test::shell_quote(zip) + " >/dev/null").c_str());
    EXPECT_EQ(r, 0) << "unzip -t refused " << zip;
  }
  const int fd = ::open(zip.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  kiln_model* m = nullptr;
  const uint64_t length = test::read_file(shipped_kiln()).size();
  ASSERT_EQ(kiln_model_load_fd(rt.rt, fd, z.data_offset, length, nullptr, &m), KILN_OK) << kiln_last_error();
  // kiln does not close the caller's descriptor, and does not need it once the load returned.
  EXPECT_EQ(fcntl(fd, F_GETFD), FD_CLOEXEC);
  ::close(fd);
  kiln_model_info info{};
  info.size = sizeof info;
  ASSERT_EQ(kiln_model_info_get(m, &info), KILN_OK);
  EXPECT_STREQ(info.kind, "kiln");
  EXPECT_EQ(info.file_bytes, length);
  EXPECT_EQ(greedy_text(m), want);
  kiln_model_free(m);
}

TEST(LoadFd, UnalignedOffsetIsRefusedWithWhatToDo) {
  Runtime rt;
  const StoredZip z = stored_zip("assets/model.kiln", test::read_file(shipped_kiln()), 1000, 1);  // as zip -0 leaves it
  ASSERT_NE(z.data_offset % 16384, 0u);
  const std::string zip = test::temp_dir() + "/unaligned.zip";
  test::write_file(zip, z.bytes);
  const int fd = ::open(zip.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  kiln_model* m = nullptr;
  EXPECT_EQ(kiln_model_load_fd(rt.rt, fd, z.data_offset, 0, nullptr, &m), KILN_E_INVALID_ARGUMENT);
  EXPECT_EQ(m, nullptr);
  const std::string err = kiln_last_error();
  const std::string where = "fd " + std::to_string(fd) + " [" + std::to_string(z.data_offset) + ", +";
  EXPECT_EQ(err.rfind(where, 0), 0u) << err;
  EXPECT_NE(err.find("offset " + std::to_string(z.data_offset) + " is not a multiple of 16384: a .kiln maps in place "
                     "only from a 16 KB-aligned offset; store it uncompressed and 16 KB-aligned"),
            std::string::npos)
      << err;
  ::close(fd);
}

TEST(LoadFd, BadArgumentsAreNamed) {
  Runtime rt;
  kiln_model* m = nullptr;
  EXPECT_EQ(kiln_model_load_fd(rt.rt, -1, 0, 0, nullptr, &m), KILN_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("fd -1 [0, +0]: the file descriptor is negative"), std::string::npos)
      << kiln_last_error();
  const int fd = ::open(shipped_kiln().c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const uint64_t size = test::read_file(shipped_kiln()).size();
  // Past the end of the file.
  EXPECT_NE(kiln_model_load_fd(rt.rt, fd, 0, size + 1, nullptr, &m), KILN_OK);
  EXPECT_NE(std::string(kiln_last_error()).find("run past the end of the file (" + std::to_string(size) + " bytes)"),
            std::string::npos)
      << kiln_last_error();
  // A range shorter than the .kiln: its header names the size it should have.
  EXPECT_EQ(kiln_model_load_fd(rt.rt, fd, 0, size - 16384, nullptr, &m), KILN_E_FORMAT);
  EXPECT_NE(std::string(kiln_last_error()).find("truncated"), std::string::npos) << kiln_last_error();
  // Not a .kiln.
  kiln_model_params p = kiln_model_default_params();
  p.scheme = "f32";
  EXPECT_EQ(kiln_model_load_fd(rt.rt, fd, 0, 0, &p, &m), KILN_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("scheme and tokenizer_path must be NULL"), std::string::npos);
  // The whole file at offset 0 is a plain load.
  ASSERT_EQ(kiln_model_load_fd(rt.rt, fd, 0, 0, nullptr, &m), KILN_OK) << kiln_last_error();
  ::close(fd);
  kiln_model_free(m);
  const int src = ::open(test::shipped_model().c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_EQ(kiln_model_load_fd(rt.rt, src, 0, 0, nullptr, &m), KILN_E_FORMAT);
  EXPECT_NE(std::string(kiln_last_error()).find("not a .kiln file"), std::string::npos) << kiln_last_error();
  ::close(src);
}

}  // namespace
}  // namespace kiln
