#include "tools/size_list.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace verl::tools {
namespace {

TEST(SizeListTest, PositiveIntegersInOrder) {
  std::vector<int> sizes = {9};
  std::string bad;
  ASSERT_TRUE(ParseSizeList("1,2,4", &sizes, &bad));
  EXPECT_EQ(sizes, (std::vector<int>{1, 2, 4}));
  ASSERT_TRUE(ParseSizeList(" 8", &sizes, &bad));
  EXPECT_EQ(sizes, (std::vector<int>{8}));
}

TEST(SizeListTest, NamesTheFirstBadItem) {
  std::vector<int> sizes;
  std::string bad;
  EXPECT_FALSE(ParseSizeList("1,0,x", &sizes, &bad));
  EXPECT_EQ(bad, "0");
  EXPECT_FALSE(ParseSizeList("2,x", &sizes, &bad));
  EXPECT_EQ(bad, "x");
  EXPECT_FALSE(ParseSizeList("2,,3", &sizes, &bad));
  EXPECT_EQ(bad, "");
  EXPECT_FALSE(ParseSizeList("-1", &sizes, &bad));
  EXPECT_EQ(bad, "-1");
}

}  // namespace
}  // namespace verl::tools
