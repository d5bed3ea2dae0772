#include "verl/core/file_util.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/core/test_util.h"

namespace verl::core {
namespace {

using ::verl::core::testing::StatusIs;

std::string TempDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t ? t : "/tmp";
}

TEST(FileUtilTest, AtomicWriteAndRead) {
  const std::string path = TempDir() + "/a.txt";
  ASSERT_TRUE(WriteFileAtomic(path, "hello").ok());
  ASSERT_TRUE(WriteFileAtomic(path, "world").ok());
  auto text = ReadFile(path);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "world");
  // No temporary sibling is left behind.
  EXPECT_NE(access((path + ".tmp." + std::to_string(getpid())).c_str(), F_OK),
            0);
}

TEST(FileUtilTest, MissingFileIsNotFound) {
  auto text = ReadFile(TempDir() + "/does_not_exist");
  EXPECT_EQ(text.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(text.status().message().find("does_not_exist"), std::string::npos);
}

TEST(FileUtilTest, WriteIntoMissingDirFails) {
  EXPECT_THAT(WriteFileAtomic(TempDir() + "/no/such/dir/x", "1"),
              StatusIs(absl::StatusCode::kInternal, "cannot create"));
}

TEST(FileUtilTest, MakeDirsNested) {
  const std::string dir = TempDir() + "/x/y/z";
  ASSERT_TRUE(MakeDirs(dir).ok());
  ASSERT_TRUE(MakeDirs(dir).ok());  // idempotent
  struct stat st;
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  ASSERT_TRUE(WriteFileAtomic(dir + "/f", "1").ok());
  // A file, not a directory.
  EXPECT_THAT(MakeDirs(dir + "/f"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "exists and is not a directory"));
}

TEST(FileUtilTest, JsonlRoundTripAndErrors) {
  const std::string path = TempDir() + "/rows.jsonl";
  std::vector<nlohmann::json> rows = {{{"a", 1}}, {{"b", "x"}}};
  ASSERT_TRUE(WriteJsonlAtomic(path, rows).ok());
  auto back = ReadJsonl(path);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, rows);

  std::ofstream(TempDir() + "/bad.jsonl") << "{\"a\": 1}\n\n{bad\n";
  auto bad = ReadJsonl(TempDir() + "/bad.jsonl");
  EXPECT_THAT(bad, StatusIs(absl::StatusCode::kInvalidArgument, "bad.jsonl:3"));

  std::ofstream(TempDir() + "/bad.json") << "{\"a\": ";
  auto bad_json = ReadJsonFile(TempDir() + "/bad.json");
  EXPECT_THAT(bad_json,
              StatusIs(absl::StatusCode::kInvalidArgument, "bad.json: "));
}

TEST(FileUtilTest, RemoveDeadTempDirsKeepsLiveAndForeignEntries) {
  const std::string dir = TempDir() + "/stale";
  ASSERT_TRUE(MakeDirs(dir).ok());
  // A pid that is gone: a reaped child.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  const std::string mine = ProcessTempName(".x.tmp-");
  const std::string host = mine.substr(0, mine.rfind('-') + 1);
  const std::string dead = absl::StrCat(host, child);
  const std::string legacy_dead = absl::StrCat(".x.tmp-", child);
  for (const std::string& name :
       {dead, legacy_dead, mine, std::string(".x.tmp-notapid"),
        absl::StrCat(".x.tmp-otherhost-", child), std::string("user_data")}) {
    ASSERT_TRUE(MakeDirs(dir + "/" + name).ok());
    ASSERT_TRUE(WriteFileAtomic(dir + "/" + name + "/f", "1").ok());
  }
  EXPECT_EQ(RemoveDeadTempDirs(dir, ".x.tmp-"), 2);
  EXPECT_FALSE(std::filesystem::exists(dir + "/" + dead));
  EXPECT_FALSE(std::filesystem::exists(dir + "/" + legacy_dead));
  for (const std::string& kept :
       {mine, std::string(".x.tmp-notapid"),
        absl::StrCat(".x.tmp-otherhost-", child), std::string("user_data")}) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + kept + "/f")) << kept;
  }
  EXPECT_EQ(RemoveDeadTempDirs(dir + "/missing", ".x.tmp-"), 0);
}

}  // namespace
}  // namespace verl::core
