// Files are written to a temporary name and renamed; a signal or a killed run leaves none behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "core/temp_file.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

size_t temp_files_beside(const std::string& target) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(fs::path(target).parent_path()))
    if (e.path().filename().string().rfind(fs::path(target).filename().string() + ".tmp.", 0) == 0) ++n;
  return n;
}

TEST(TempFile, ASignalRemovesTheTemporaryFileAndStillEndsTheProcess) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    const std::string target = test::temp_dir() + "/out" + std::to_string(sig) + ".kiln";
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      remove_temp_files_on_signals();
      TempFile f;
      const uint8_t bytes[4] = {1, 2, 3, 4};
      if (!f.create(target) || !f.write(bytes, 4)) _exit(3);
      raise(sig);
      _exit(4);  // not reached: the signal ends the process
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
    EXPECT_EQ(WTERMSIG(status), sig);
    EXPECT_EQ(temp_files_beside(target), 0u) << "signal " << sig;
    EXPECT_FALSE(fs::exists(target));
  }
}

TEST(TempFile, StaleFilesOfDeadProcessesAreRemovedOthersKept) {
  const std::string target = test::temp_dir() + "/stale.kiln";
  // A pid far above any pid_max: no such process.
  test::write_file(target + ".tmp.2147483000.0", "half a file");
  test::write_file(target + ".tmp." + std::to_string(getppid()) + ".0", "a running writer's");
  test::write_file(target + ".tmp.notapid", "someone else's");
  const auto removed = remove_stale_temp_files(target);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0], target + ".tmp.2147483000.0");
  EXPECT_TRUE(fs::exists(target + ".tmp." + std::to_string(getppid()) + ".0"));
  EXPECT_TRUE(fs::exists(target + ".tmp.notapid"));
}

TEST(TempFile, CommitAndDiscardLeaveNoSlotBehind) {
  // More files one after another than the handler has slots: each releases its slot.
  for (int i = 0; i < 100; ++i) {
    const std::string target = test::temp_dir() + "/many.bin";
    const uint8_t b = static_cast<uint8_t>(i);
    ASSERT_TRUE(write_file_atomically(target, std::span<const uint8_t>(&b, 1)));
    TempFile dropped;
    ASSERT_TRUE(dropped.create(target));
  }
  EXPECT_EQ(temp_files_beside(test::temp_dir() + "/many.bin"), 0u);
  EXPECT_EQ(test::read_file(test::temp_dir() + "/many.bin"), std::string(1, static_cast<char>(99)));
}

// A rename replaces whatever is at the target, so only a regular file (or none) may be one: run as
// root, `kiln compile -o /dev/null` once replaced the system's /dev/null with a file. create()
// refuses before anything is written (these tests never commit onto such a path).
TEST(TempFile, RefusesEverythingButARegularFile) {
  const std::string dir = test::temp_dir() + "/not_regular";
  fs::create_directories(dir);
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  struct Case {
    std::string path, kind;
  };
  for (const Case& c : {Case{"/dev/null", "a character device"}, Case{fifo, "a FIFO"}, Case{dir, "a directory"}}) {
    TempFile f;
    Status st = f.create(c.path);
    ASSERT_FALSE(st) << c.path;
    EXPECT_EQ(st.message(), c.path + " is " + c.kind +
                                ", not a regular file: kiln writes a file by renaming a finished copy onto it, "
                                "which would replace it; give the path of a file");
    EXPECT_FALSE(write_file_atomically(c.path, {})) << c.path;
  }
  struct stat st;
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(temp_files_beside(fifo), 0u);
}

// A symbolic link is written through: the file it names gets the bytes, the link stays a link.
TEST(TempFile, WritesThroughASymbolicLink) {
  const std::string real = test::temp_dir() + "/real.bin", link = test::temp_dir() + "/link.bin";
  test::write_file(real, "old");
  fs::remove(link);
  fs::create_symlink(real, link);
  const std::string text = "new";
  ASSERT_TRUE(write_file_atomically(link, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), 3)));
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(test::read_file(real), "new");
}

}  // namespace
}  // namespace kiln
