#include "verl/core/registry.h"

#include "gtest/gtest.h"

namespace verl::core {
namespace {

TEST(RegistryTest, BuiltinsRegisterAndErrors) {
  Registry<int> reg("thing.kind", {{"b", 2}, {"a", 1}});
  EXPECT_EQ(*reg.Get("a"), 1);
  EXPECT_TRUE(reg.Register("c", 3).ok());
  EXPECT_EQ(*reg.Get("c"), 3);
  EXPECT_EQ(reg.Names(), (std::vector<std::string>{"a", "b", "c"}));
  absl::Status dup = reg.Register("a", 9);
  EXPECT_EQ(dup.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(*reg.Get("a"), 1);
  auto missing = reg.Get("zzz");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "thing.kind: unknown 'zzz' (known: a, b, c)");
}

}  // namespace
}  // namespace verl::core
