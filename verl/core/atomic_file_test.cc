// File: verl/core/atomic_file_test.cc
#include "verl/core/atomic_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "verl/core/file_util.h"
#include "verl/core/test_util.h"

namespace verl::core {
namespace {

using testing::StatusIs;

TEST(AtomicFileWriterTest, CommitReplacesOnlyThenAndLeavesNoTemp) {
  const std::string dir = testing::FreshTestDir("atomic");
  ASSERT_TRUE(MakeDirs(dir).ok());
  const std::string path = dir + "/out.bin";
  ASSERT_TRUE(WriteFileAtomic(path, "old").ok());
  auto w = AtomicFileWriter::Create(path);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE((*w)->Resize(8).ok());
  ASSERT_TRUE((*w)->Append("ab").ok());
  ASSERT_TRUE((*w)->WriteAt(6, "yz").ok());
  EXPECT_EQ(*ReadFile(path), "old");  // untouched until Commit
  const std::string temp = (*w)->temp_path();
  ASSERT_TRUE((*w)->Commit().ok());
  EXPECT_EQ(*ReadFile(path), std::string("ab\0\0\0\0yz", 8));
  EXPECT_NE(::access(temp.c_str(), F_OK), 0);
  EXPECT_THAT((*w)->Append("x"),
              StatusIs(absl::StatusCode::kFailedPrecondition, "committed"));
}

TEST(AtomicFileWriterTest, AbandonedWriterRemovesItsTemp) {
  const std::string dir = testing::FreshTestDir("atomic_abandon");
  ASSERT_TRUE(MakeDirs(dir).ok());
  const std::string path = dir + "/out.bin";
  std::string temp;
  {
    auto w = AtomicFileWriter::Create(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append("partial").ok());
    temp = (*w)->temp_path();
    EXPECT_EQ(::access(temp.c_str(), F_OK), 0);
  }
  EXPECT_NE(::access(temp.c_str(), F_OK), 0);
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
  EXPECT_THAT(AtomicFileWriter::Create(dir + "/no/such/dir/f"),
              StatusIs(absl::StatusCode::kInternal, "cannot create"));
}

}  // namespace
}  // namespace verl::core
