#include "verl/models/jinja/builtins.h"

#include <cstdlib>
#include <ctime>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/models/jinja/error.h"
#include "verl/models/jinja/registry.h"
#include "verl/models/jinja/value.h"

namespace verl::models::jinja {
namespace {

using ::testing::HasSubstr;

CallContext Ctx() {
  CallContext c;
  c.registry = &DefaultRegistry();
  c.line = 9;
  return c;
}

Args Pos(ValueList pos) {
  Args a;
  a.pos = std::move(pos);
  return a;
}

Args Kw(std::string name, Value v) {
  Args a;
  a.kw.emplace_back(std::move(name), std::move(v));
  return a;
}

std::string Filter(const std::string& name, const Value& v,
                   const Args& a = {}) {
  return ToString(DefaultRegistry().ApplyFilter(name, v, a, Ctx()));
}

bool Passes(const std::string& name, const Value& v, const Args& a = {}) {
  return DefaultRegistry().RunTest(name, v, a, Ctx());
}

std::string Method(const std::string& s, const std::string& name,
                   const Args& a = {}) {
  return ToString(DefaultRegistry().CallStringMethod(Str(s), name, a, Ctx()));
}

template <typename F>
std::string ErrorOf(F f) {
  try {
    f();
  } catch (const TemplateError& e) {
    return "line " + std::to_string(e.line) + ": " + e.message;
  }
  return "";
}

const Value kPeople = List({Dict({{"name", Str("b")}, {"age", Int(30)}}),
                            Dict({{"name", Str("a")}, {"age", Int(20)}})});

TEST(JinjaBuiltinsTest, Filters) {
  EXPECT_EQ(Filter("length", Str("日本")), "2");
  EXPECT_EQ(Filter("count", List({Int(1)})), "1");
  EXPECT_EQ(Filter("length", Value()), "0");
  EXPECT_EQ(
      Filter("tojson", Dict({{"k", List({Int(1)})}}), Kw("indent", Int(1))),
      "{\n \"k\": [\n  1\n ]\n}");
  EXPECT_EQ(Filter("trim", Str("\u3000 x \n")), "x");
  EXPECT_EQ(Filter("trim", Str("--x-"), Pos({Str("-")})), "x");
  EXPECT_EQ(Filter("upper", Str("aé")), "Aé");
  EXPECT_EQ(Filter("title", Str("hello wORLD-x")), "Hello World-X");
  EXPECT_EQ(Filter("capitalize", Str("hELLO")), "Hello");
  EXPECT_EQ(Filter("replace", Str("aaa"), Pos({Str("a"), Str("b"), Int(2)})),
            "bba");
  EXPECT_EQ(Filter("default", Value(), Pos({Str("d")})), "d");
  EXPECT_EQ(Filter("d", Str(""), Pos({Str("d")})), "");
  EXPECT_EQ(Filter("default", Str(""), Pos({Str("d"), Bool(true)})), "d");
  EXPECT_EQ(Filter("join", List({Int(1), Str("a")}), Pos({Str(", ")})), "1, a");
  EXPECT_EQ(Filter("join", kPeople, Pos({Str("/"), Str("name")})), "b/a");
  EXPECT_EQ(Filter("first", List({Int(4), Int(5)})), "4");
  EXPECT_EQ(Filter("last", Str("xyz")), "z");
  EXPECT_EQ(Filter("list", Str("ab")), "['a', 'b']");
  EXPECT_EQ(Filter("reverse", Str("日本")), "本日");
  EXPECT_EQ(Filter("items", Dict({{"a", Int(1)}})), "[('a', 1)]");
  EXPECT_EQ(Filter("int", Str("42")), "42");
  EXPECT_EQ(Filter("int", Str("4x"), Pos({Int(-1)})), "-1");
  EXPECT_EQ(Filter("int", Float(-2.7)), "-2");
  EXPECT_EQ(Filter("float", Str("2.5")), "2.5");
  EXPECT_EQ(Filter("abs", Int(-3)), "3");
  EXPECT_EQ(Filter("unique", List({Int(1), Float(1.0), Int(2)})), "[1, 2]");
  EXPECT_EQ(
      Filter("sort", List({Int(3), Int(1), Int(2)}), Kw("reverse", Bool(true))),
      "[3, 2, 1]");
  const Value by_age = DefaultRegistry().ApplyFilter(
      "sort", kPeople, Kw("attribute", Str("age")), Ctx());
  EXPECT_EQ(Filter("map", by_age, Kw("attribute", Str("name"))), "['a', 'b']");
  EXPECT_EQ(Filter("indent", Str("a\n\nb"), Pos({Int(2)})), "a\n\n  b");
  EXPECT_EQ(
      Filter("indent", Str("a\n\nb"), Pos({Str(">"), Bool(true), Bool(true)})),
      ">a\n>\n>b");
}

TEST(JinjaBuiltinsTest, FiltersApplyOtherBuiltinsThroughTheRegistry) {
  const Value nums = List({Int(1), Int(2), Int(3), Int(4)});
  EXPECT_EQ(Filter("select", nums, Pos({Str("odd")})), "[1, 3]");
  EXPECT_EQ(Filter("reject", nums, Pos({Str("divisibleby"), Int(2)})),
            "[1, 3]");
  EXPECT_EQ(Filter("selectattr", kPeople, Pos({Str("age"), Str(">"), Int(25)})),
            "[{'name': 'b', 'age': 30}]");
  EXPECT_EQ(Filter("rejectattr", kPeople, Pos({Str("age")})), "[]");
  EXPECT_EQ(Filter("map", List({Str("a"), Str("b")}), Pos({Str("upper")})),
            "['A', 'B']");
  EXPECT_EQ(ErrorOf([&] { Filter("select", nums, Pos({Str("frob")})); }),
            "line 9: unknown test 'frob'");
  EXPECT_EQ(ErrorOf([] { Filter("frob", Value()); }),
            "line 9: unknown filter 'frob'");
  EXPECT_EQ(ErrorOf([] { Filter("length", Int(3)); }),
            "line 9: object of type 'int' has no len()");
}

TEST(JinjaBuiltinsTest, Tests) {
  EXPECT_TRUE(Passes("defined", Int(0)));
  EXPECT_TRUE(Passes("undefined", Value()));
  EXPECT_TRUE(Passes("none", None()));
  EXPECT_TRUE(Passes("boolean", Bool(false)));
  EXPECT_TRUE(Passes("false", Bool(false)));
  EXPECT_FALSE(Passes("true", Int(1)));
  EXPECT_TRUE(Passes("integer", Int(1)));
  EXPECT_FALSE(Passes("integer", Float(1)));
  EXPECT_TRUE(Passes("number", Bool(true)));
  EXPECT_TRUE(Passes("string", Str("")));
  EXPECT_TRUE(Passes("mapping", Dict({})));
  EXPECT_TRUE(Passes("iterable", Str("")));
  EXPECT_FALSE(Passes("sequence", Int(1)));
  EXPECT_TRUE(Passes("callable", Function("range")));
  EXPECT_TRUE(Passes("even", Int(-2)));
  EXPECT_TRUE(Passes("divisibleby", Int(9), Pos({Int(3)})));
  EXPECT_FALSE(Passes("divisibleby", Int(9), Pos({Int(0)})));
  EXPECT_TRUE(Passes("equalto", Int(1), Pos({Float(1)})));
  EXPECT_TRUE(Passes("!=", Int(1), Pos({Int(2)})));
  EXPECT_TRUE(Passes("lessthan", Int(1), Pos({Int(2)})));
  EXPECT_TRUE(Passes(">=", Str("b"), Pos({Str("a")})));
  EXPECT_TRUE(Passes("in", Str("a"), Pos({List({Str("a")})})));
  EXPECT_TRUE(Passes("lower", Str("abc1")));
  EXPECT_FALSE(Passes("upper", Str("aBC")));
  EXPECT_EQ(ErrorOf([] { Passes("eq", Int(1)); }),
            "line 9: test 'eq' needs an argument");
  EXPECT_EQ(ErrorOf([] { Passes("odd", Str("x")); }),
            "line 9: odd test needs an int");
}

TEST(JinjaBuiltinsTest, StringMethodsFollowPython) {
  EXPECT_EQ(Method("<a>x</a>", "startswith", Pos({Str("<a>")})), "True");
  EXPECT_EQ(Method("x.py", "endswith", Pos({Tuple({Str(".c"), Str(".py")})})),
            "True");
  EXPECT_EQ(Method("\n x \t", "strip"), "x");
  EXPECT_EQ(Method("\n x \t", "lstrip"), "x \t");
  EXPECT_EQ(Method("xxaxx", "rstrip", Pos({Str("x")})), "xxa");
  EXPECT_EQ(Method(" a  b c ", "split"), "['a', 'b', 'c']");
  EXPECT_EQ(Method(" a  b c ", "split", Pos({None(), Int(1)})), "['a', 'b c']");
  EXPECT_EQ(Method("a,b,,c", "split", Pos({Str(",")})), "['a', 'b', '', 'c']");
  EXPECT_EQ(Method("a,b,c", "split", Kw("maxsplit", Int(1))), "['a,b,c']");
  EXPECT_EQ(Method("日本語", "find", Pos({Str("語")})), "2");
  EXPECT_EQ(Method("abc", "find", Pos({Str("z")})), "-1");
  EXPECT_EQ(Method("aaaa", "count", Pos({Str("aa")})), "2");
  EXPECT_EQ(Method("-", "join", Pos({List({Int(1), Int(2)})})), "1-2");
  EXPECT_EQ(Method("ab", "upper"), "AB");
  EXPECT_EQ(ErrorOf([] { Method("a", "frob"); }),
            "line 9: 'str' object has no method 'frob'");
  EXPECT_EQ(ErrorOf([] { Method("a", "replace", Pos({Int(1)})); }),
            "line 9: replace() needs a string argument 'old'");
}

TEST(JinjaBuiltinsTest, DictMethods) {
  const Value d = Dict({{"a", Int(1)}, {"b", Int(2)}});
  const auto call = [&](const char* name, const Args& a) {
    const MethodFn* m = DefaultRegistry().FindDictMethod(name);
    EXPECT_NE(m, nullptr) << name;
    return ToString((*m)(d, a, Ctx()));
  };
  EXPECT_EQ(call("items", {}), "[('a', 1), ('b', 2)]");
  EXPECT_EQ(call("keys", {}), "['a', 'b']");
  EXPECT_EQ(call("values", {}), "[1, 2]");
  EXPECT_EQ(call("get", Pos({Str("b")})), "2");
  EXPECT_EQ(call("get", Pos({Str("z")})), "None");
  EXPECT_EQ(call("get", Pos({Str("z"), Int(0)})), "0");
  EXPECT_EQ(DefaultRegistry().FindDictMethod("pop"), nullptr);
}

TEST(JinjaBuiltinsTest, GlobalFunctions) {
  const Registry& r = DefaultRegistry();
  EXPECT_EQ(ToString(r.CallFunction("range", Pos({Int(3)}), Ctx())),
            "[0, 1, 2]");
  EXPECT_EQ(
      ToString(r.CallFunction("range", Pos({Int(5), Int(0), Int(-2)}), Ctx())),
      "[5, 3, 1]");
  Args ns_args = Pos({Dict({{"a", Int(1)}})});
  ns_args.kw.emplace_back("b", Int(2));
  Value ns = r.CallFunction("namespace", ns_args, Ctx());
  EXPECT_TRUE(ns.is_namespace);
  EXPECT_EQ(ToString(ns), "<Namespace {'a': 1, 'b': 2}>");
  EXPECT_FALSE(r.CallFunction("dict", Kw("x", Int(1)), Ctx()).is_namespace);
  EXPECT_EQ(ErrorOf([&] {
              r.CallFunction("raise_exception", Pos({Str("bad role")}), Ctx());
            }),
            "line 9: raise_exception: bad role");
  EXPECT_EQ(ErrorOf([&] { r.CallFunction("range", Pos({}), Ctx()); }),
            "line 9: range() takes 1 to 3 arguments");
  EXPECT_EQ(ErrorOf([&] { r.CallFunction("frob", Pos({}), Ctx()); }),
            "line 9: unknown function 'frob'");
  EXPECT_TRUE(r.HasFunction("strftime_now"));
  EXPECT_FALSE(r.HasFunction("messages"));

  setenv("TZ", "UTC", 1);
  tzset();
  CallContext c = Ctx();
  c.now_unix_seconds = 1721995200;
  EXPECT_EQ(ToString(r.CallFunction("strftime_now", Pos({Str("%d %b %Y")}), c)),
            "26 Jul 2024");
}

TEST(JinjaBuiltinsTest, RegistriesCanBeExtended) {
  Registry r = DefaultRegistry();  // A copy: the default stays unchanged.
  r.AddFilter("shout", [](const Value& v, const Args&, const CallContext&) {
    return Str(ToString(v) + "!");
  });
  CallContext c = Ctx();
  c.registry = &r;
  // `map` finds the new filter through the context's registry.
  EXPECT_EQ(
      ToString(r.ApplyFilter("map", List({Str("a")}), Pos({Str("shout")}), c)),
      "['a!']");
  EXPECT_EQ(ErrorOf([] { Filter("shout", Str("a")); }),
            "line 9: unknown filter 'shout'");
}

}  // namespace
}  // namespace verl::models::jinja
