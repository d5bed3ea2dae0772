#include "verl/models/jinja/value.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "verl/models/jinja/error.h"

namespace verl::models::jinja {
namespace {

using ::testing::HasSubstr;

// The message of the TemplateError `f` throws ("" if none).
template <typename F>
std::string ErrorOf(F f) {
  try {
    f();
  } catch (const TemplateError& e) {
    return e.message;
  }
  return "";
}

TEST(JinjaValueTest, StrAndReprFollowPython) {
  EXPECT_EQ(ToString(Value()), "");
  EXPECT_EQ(ToString(None()), "None");
  EXPECT_EQ(ToString(Bool(true)), "True");
  EXPECT_EQ(ToString(Int(-3)), "-3");
  EXPECT_EQ(ToString(Str("it's")), "it's");
  EXPECT_EQ(Repr(Str("it's")), "\"it's\"");
  EXPECT_EQ(Repr(Str("a'b\"c\n\x01")), "'a\\'b\"c\\n\\x01'");
  EXPECT_EQ(ToString(List({Int(1), Str("a"), None(), Bool(false)})),
            "[1, 'a', None, False]");
  EXPECT_EQ(ToString(Tuple({Int(1)})), "(1,)");
  EXPECT_EQ(ToString(Tuple({Int(1), Int(2)})), "(1, 2)");
  EXPECT_EQ(ToString(Dict({{"k", Str("v")}, {"a", List({})}})),
            "{'k': 'v', 'a': []}");
  Value ns = Dict({{"n", Int(0)}});
  ns.is_namespace = true;
  EXPECT_EQ(ToString(ns), "<Namespace {'n': 0}>");
}

TEST(JinjaValueTest, FloatReprIsShortestRoundTrip) {
  EXPECT_EQ(FloatRepr(0.1 + 0.2, false), "0.30000000000000004");
  EXPECT_EQ(FloatRepr(3.0, false), "3.0");
  EXPECT_EQ(FloatRepr(1e20, false), "1e+20");
  EXPECT_EQ(FloatRepr(1e16, false), "1e+16");
  EXPECT_EQ(FloatRepr(1e15, false), "1000000000000000.0");
  EXPECT_EQ(FloatRepr(1e-5, false), "1e-05");
  EXPECT_EQ(FloatRepr(1e-4, false), "0.0001");
  EXPECT_EQ(FloatRepr(-2.5, false), "-2.5");
  EXPECT_EQ(FloatRepr(std::nan(""), false), "nan");
  EXPECT_EQ(FloatRepr(std::nan(""), true), "NaN");
  EXPECT_EQ(FloatRepr(-std::numeric_limits<double>::infinity(), true),
            "-Infinity");
}

TEST(JinjaValueTest, ToJsonMatchesJsonDumps) {
  Value v = Dict(
      {{"b", List({Int(1), Float(2.0), Str("é\n\"q\""), None(), Bool(false)})},
       {"a", Dict({})}});
  EXPECT_EQ(ToJson(v, -1, 1),
            R"({"b": [1, 2.0, "é\n\"q\"", null, false], "a": {}})");
  EXPECT_EQ(ToJson(List({Int(1), List({})}), 2, 1), "[\n  1,\n  []\n]");
  EXPECT_EQ(ToJson(Str("\x1f"), -1, 1), "\"\\u001f\"");
  EXPECT_THAT(ErrorOf([] { ToJson(Value(), -1, 4); }),
              HasSubstr("not JSON serializable"));
}

TEST(JinjaValueTest, FromJsonKeepsKeyOrderAndTypes) {
  Value v = FromJson(nlohmann::ordered_json::parse(
      R"({"z": 1, "a": [true, 2.5, null, "s"]})"));
  ASSERT_TRUE(v.is_dict());
  EXPECT_EQ((*v.dict)[0].first, "z");
  EXPECT_EQ((*v.dict)[0].second.type, Value::Type::kInt);
  EXPECT_EQ(ToString(v), "{'z': 1, 'a': [True, 2.5, None, 's']}");
}

TEST(JinjaValueTest, TruthinessAndEquality) {
  EXPECT_FALSE(Truthy(Value()));
  EXPECT_FALSE(Truthy(Str("")));
  EXPECT_FALSE(Truthy(List({})));
  EXPECT_TRUE(Truthy(Float(0.5)));
  EXPECT_TRUE(Equal(Int(1), Bool(true)));
  EXPECT_TRUE(Equal(Int(2), Float(2.0)));
  EXPECT_FALSE(Equal(Int(1), Str("1")));
  EXPECT_TRUE(Equal(Dict({{"a", Int(1)}, {"b", Int(2)}}),
                    Dict({{"b", Int(2)}, {"a", Int(1)}})));
}

TEST(JinjaValueTest, ArithmeticFollowsPython) {
  EXPECT_EQ(ToString(BinaryOp("//", Int(-7), Int(2), 1)), "-4");
  EXPECT_EQ(ToString(BinaryOp("%", Int(-7), Int(3), 1)), "2");
  EXPECT_EQ(ToString(BinaryOp("%", Float(-7), Float(3), 1)), "2.0");
  EXPECT_EQ(ToString(BinaryOp("/", Int(7), Int(2), 1)), "3.5");
  EXPECT_EQ(ToString(BinaryOp("**", Int(2), Int(10), 1)), "1024");
  EXPECT_EQ(ToString(BinaryOp("+", Bool(true), Int(1), 1)), "2");
  EXPECT_EQ(ToString(BinaryOp("*", Str("ab"), Int(2), 1)), "abab");
  EXPECT_EQ(ToString(BinaryOp("~", Int(1), Str("x"), 1)), "1x");
  EXPECT_EQ(ToString(BinaryOp("+", List({Int(1)}), List({Int(2)}), 1)),
            "[1, 2]");
  EXPECT_THAT(ErrorOf([] { BinaryOp("+", Str("a"), Int(1), 3); }),
              HasSubstr("unsupported operand type(s) for +: 'str' and 'int'"));
  EXPECT_THAT(ErrorOf([] { BinaryOp("/", Int(1), Int(0), 3); }),
              HasSubstr("division by zero"));
  EXPECT_THAT(ErrorOf([] { BinaryOp("<", Int(1), Str("a"), 3); }),
              HasSubstr("'<' not supported between 'int' and 'str'"));
}

TEST(JinjaValueTest, ContainsAndComparisons) {
  EXPECT_TRUE(Contains(Str("hello"), Str("ell"), 1));
  EXPECT_TRUE(Contains(List({Int(1), Float(2)}), Int(2), 1));
  EXPECT_TRUE(Contains(Dict({{"k", None()}}), Str("k"), 1));
  EXPECT_FALSE(Contains(Value(), Str("k"), 1));
  EXPECT_THAT(ErrorOf([] { Contains(Int(3), Int(1), 1); }),
              HasSubstr("argument of type 'int' is not iterable"));
  EXPECT_LT(Compare(Str("a"), Str("b"), 1, "<"), 0);
  EXPECT_GT(Compare(Float(2.5), Int(2), 1, ">"), 0);
}

TEST(JinjaValueTest, SubscriptsAndSlicesUseCodePoints) {
  Value s = Str("日本語");
  EXPECT_EQ(ToString(GetItem(s, Int(1), 1)), "本");
  EXPECT_EQ(ToString(GetItem(s, Int(-1), 1)), "語");
  EXPECT_TRUE(GetItem(s, Int(3), 1).undefined());
  EXPECT_EQ(ToString(Slice(s, Int(-2), Value(), Value(), 1)), "本語");
  Value l = List({Int(0), Int(1), Int(2), Int(3)});
  EXPECT_EQ(ToString(Slice(l, Value(), Value(), Int(-1), 1)), "[3, 2, 1, 0]");
  EXPECT_EQ(ToString(Slice(l, Int(1), Int(-1), None(), 1)), "[1, 2]");
  EXPECT_EQ(ToString(Slice(l, Int(3), Int(0), Int(-2), 1)), "[3, 1]");
  EXPECT_EQ(ToString(GetItem(Dict({{"1", Str("one")}}), Int(1), 1)), "one");
  EXPECT_THAT(ErrorOf([&] { Slice(l, Value(), Value(), Int(0), 1); }),
              HasSubstr("slice step cannot be zero"));
  EXPECT_THAT(ErrorOf([&] { GetItem(l, Str("x"), 1); }),
              HasSubstr("indices must be integers, not str"));
  EXPECT_EQ(Iterate(s, 1).size(), 3u);
  EXPECT_EQ(ToString(List(Iterate(Dict({{"a", Int(1)}}), 1))), "['a']");
  EXPECT_THAT(ErrorOf([] { Iterate(Int(1), 5); }),
              HasSubstr("'int' object is not iterable"));
}

}  // namespace
}  // namespace verl::models::jinja
