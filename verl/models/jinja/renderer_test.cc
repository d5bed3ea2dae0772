#include "verl/models/jinja/renderer.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/models/jinja/ast.h"
#include "verl/models/jinja/error.h"
#include "verl/models/jinja/parser.h"
#include "verl/models/jinja/registry.h"
#include "verl/models/jinja/value.h"

namespace verl::models::jinja {
namespace {

using ::testing::HasSubstr;

// The renderer needs no built-ins: these tests give it a registry with two
// entries of their own.
Registry TestRegistry() {
  Registry r;
  r.AddFilter("twice", [](const Value& v, const Args& a, const CallContext&) {
    return Str(ToString(v) + ToString(v));
  });
  r.AddTest("small", [](const Value& v, const Args&, const CallContext&) {
    return v.type == Value::Type::kInt && v.i < 10;
  });
  r.AddFunction("ns", [](const Args& a, const CallContext&) {
    Value d = Dict(a.kw);
    d.is_namespace = true;
    return d;
  });
  r.AddStringMethod("len",
                    [](const Value& self, const Args&, const CallContext&) {
                      return Int(self.s.size());
                    });
  r.AddDictMethod("size",
                  [](const Value& self, const Args&, const CallContext&) {
                    return Int(self.dict->size());
                  });
  return r;
}

std::string Render(const std::string& source, ValueDict context = {}) {
  static const Registry* registry = new Registry(TestRegistry());
  Body body = ParseTemplate(source);
  return jinja::Render(body, context, *registry, std::nullopt);
}

std::string RenderError(const std::string& source, ValueDict context = {}) {
  try {
    Render(source, std::move(context));
  } catch (const TemplateError& e) {
    return "line " + std::to_string(e.line) + ": " + e.message;
  }
  return "";
}

const ValueDict kXs = {{"xs", List({Int(1), Int(2), Int(3)})}};

TEST(JinjaRendererTest, OutputsAndConditionals) {
  EXPECT_EQ(Render("a {{ x }} b", {{"x", Int(1)}}), "a 1 b");
  EXPECT_EQ(Render("{{ missing }}|{{ missing.attr }}|{{ missing[0] }}"), "||");
  EXPECT_EQ(Render("{% if 0 %}a{% elif '' %}b{% else %}c{% endif %}"), "c");
  EXPECT_EQ(Render("{{ 'y' if x else 'n' }}{{ 'z' if not x }}"), "nz");
  EXPECT_EQ(Render("{{ x or 'd' }} {{ x and 'never' }}", {{"x", Str("")}}),
            "d ");
  EXPECT_EQ(Render("{{ {'a': 1, 'a': 2} }} {{ (1,) }}"), "{'a': 2} (1,)");
}

TEST(JinjaRendererTest, LoopsAndLoopVariables) {
  EXPECT_EQ(Render("{% for x in xs %}{{ loop.index }}/{{ loop.revindex0 }}"
                   "{{ ',' if not loop.last }}{% endfor %}",
                   kXs),
            "1/2,2/1,3/0");
  EXPECT_EQ(Render("{% for x in xs %}{{ loop.previtem }}<{{ x }}>"
                   "{{ loop.nextitem }};{% endfor %}",
                   kXs),
            "<1>2;1<2>3;2<3>;");
  EXPECT_EQ(Render("{% for x in xs if x != 2 %}{{ x }}{{ loop.length }}"
                   "{% endfor %}",
                   kXs),
            "1232");
  EXPECT_EQ(Render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(Render("{% for x in xs %}{% if x == 2 %}{% continue %}{% endif %}"
                   "{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %}",
                   kXs),
            "1");
  EXPECT_EQ(Render("{% for k, v in [('a', 1), ('b', 2)] %}{{ k }}{{ v }}"
                   "{% endfor %}"),
            "a1b2");
  EXPECT_EQ(Render("{% for c in 'ab' %}[{{ c }}]{% endfor %}"), "[a][b]");
  EXPECT_EQ(RenderError("{% for x in 3 %}{% endfor %}"),
            "line 1: 'int' object is not iterable");
  EXPECT_EQ(RenderError("{% for a, b in [1] %}{% endfor %}"),
            "line 1: cannot unpack int into 2 names");
}

TEST(JinjaRendererTest, ScopingNamespacesAndBlockSet) {
  EXPECT_EQ(Render("{% set ns = ns(n=0) %}{% set outer = 'o' %}"
                   "{% for x in xs %}{% set outer = 'inner' %}"
                   "{% set ns.n = ns.n + x %}{% set ns.m = x %}{% endfor %}"
                   "{{ ns.n }} {{ ns.m }} {{ outer }}",
                   kXs),
            "6 3 o");
  EXPECT_EQ(Render("{% set a, b = 1, 2 %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(Render("{% set t %}x{{ 1 + 1 }}{% endset %}[{{ t }}]"), "[x2]");
  EXPECT_EQ(RenderError("{% set d = 1 %}\n{% set d.x = 2 %}"),
            "line 2: cannot assign attribute on non-namespace object 'd'");
}

TEST(JinjaRendererTest, Macros) {
  EXPECT_EQ(Render("{% macro m(p, q='d') %}<{{ p }}{{ q }}{{ g }}>"
                   "{% endmacro %}{% set local = 1 %}"
                   "{{ m(1) }}{{ m(2, 'x') }}{{ m(q=3, p=4) }}",
                   {{"g", Str("G")}}),
            "<1dG><2xG><43G>");
  // A macro sees the globals and its parameters, not the caller's locals.
  EXPECT_EQ(
      Render("{% macro m() %}{{ local }}{% endmacro %}"
             "{% for x in [1] %}{% set local = 5 %}{{ m() }}{% endfor %}"),
      "");
}

TEST(JinjaRendererTest, BuiltinsComeFromTheRegistry) {
  EXPECT_EQ(Render("{{ 'ab' | twice }}"), "abab");
  EXPECT_EQ(Render("{{ 3 is small }} {{ 30 is not small }}"), "True True");
  EXPECT_EQ(Render("{{ 'abc'.len() }} {{ {'a': 1}.size() }}"), "3 1");
  // `defined` is the renderer's own: it does not evaluate to an error.
  EXPECT_EQ(Render("{{ x is defined }} {{ x is undefined }}"), "False True");
  EXPECT_EQ(RenderError("{{ 1 | length }}"), "line 1: unknown filter 'length'");
  EXPECT_EQ(RenderError("\n{{ 1 is odd }}"), "line 2: unknown test 'odd'");
  EXPECT_EQ(RenderError("{{ range(3) }}"),
            "line 1: 'undefined' object is not callable ('range')");
  EXPECT_EQ(RenderError("{{ 'a'.upper() }}"),
            "line 1: 'str' object has no method 'upper'");
  EXPECT_EQ(RenderError("{{ [1].append(2) }}"),
            "line 1: 'list' object has no method 'append'");
}

TEST(JinjaRendererTest, RuntimeErrorsNameTheLine) {
  EXPECT_EQ(RenderError("ok\n\n{{ 'a' + 1 }}"),
            "line 3: unsupported operand type(s) for +: 'str' and 'int'");
  EXPECT_EQ(RenderError("{{ -'a' }}"),
            "line 1: bad operand type for unary -: 'str'");
  EXPECT_EQ(RenderError("{{ [1][::'a'] }}"),
            "line 1: slice indices must be integers");
  EXPECT_EQ(RenderError("{{ 3[1:] }}"), "line 1: 'int' cannot be sliced");
}

}  // namespace
}  // namespace verl::models::jinja
