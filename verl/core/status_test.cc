#include "verl/core/status.h"

#include "gtest/gtest.h"
#include "verl/core/test_util.h"

namespace verl {
namespace {

using ::verl::core::testing::StatusIs;

absl::StatusOr<int> Half(int x) {
  if (x % 2) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  VERL_ASSIGN_OR_RETURN(int h, Half(x));
  VERL_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

absl::Status CheckEven(int x) {
  VERL_RETURN_IF_ERROR(Half(x).status());
  return absl::OkStatus();
}

TEST(StatusTest, MacrosPropagate) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_THAT(CheckEven(3),
              StatusIs(absl::StatusCode::kInvalidArgument, "odd"));
}

TEST(StatusTest, AnnotatePrefixesMessage) {
  absl::Status s = Annotate(absl::NotFoundError("no file"), "config.json");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "config.json: no file");
  EXPECT_TRUE(Annotate(absl::OkStatus(), "x").ok());
}

}  // namespace
}  // namespace verl
