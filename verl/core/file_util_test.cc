#include "verl/core/file_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"

namespace verl::core {
namespace {

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
  EXPECT_FALSE(WriteFileAtomic(TempDir() + "/no/such/dir/x", "1").ok());
}

TEST(FileUtilTest, MakeDirsNested) {
  const std::string dir = TempDir() + "/x/y/z";
  ASSERT_TRUE(MakeDirs(dir).ok());
  ASSERT_TRUE(MakeDirs(dir).ok());  // idempotent
  struct stat st;
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  ASSERT_TRUE(WriteFileAtomic(dir + "/f", "1").ok());
  EXPECT_FALSE(MakeDirs(dir + "/f").ok());  // a file, not a directory
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
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad.jsonl:3"), std::string::npos)
      << bad.status();

  std::ofstream(TempDir() + "/bad.json") << "{\"a\": ";
  auto bad_json = ReadJsonFile(TempDir() + "/bad.json");
  ASSERT_FALSE(bad_json.ok());
  EXPECT_NE(bad_json.status().message().find("bad.json"), std::string::npos);
}

}  // namespace
}  // namespace verl::core
