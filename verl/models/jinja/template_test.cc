#include "verl/models/jinja/template.h"

#include <cstdlib>
#include <ctime>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/core/test_util.h"
#include "verl/models/jinja/builtins.h"
#include "verl/models/jinja/registry.h"
#include "verl/models/jinja/value.h"

namespace verl::models::jinja {
namespace {

using ::verl::core::testing::StatusIs;

using ::testing::HasSubstr;

std::string Render(const std::string& source, const std::string& context) {
  auto t = Template::Parse(source);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return "<parse error>";
  auto out = t->Render(context);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : "<render error>";
}

TEST(JinjaTemplateTest, TextExpressionsAndWhitespaceControl) {
  EXPECT_EQ(Render("a {{ x }} b", R"({"x": 1})"), "a 1 b");
  EXPECT_EQ(Render("a  {{- x -}}  b", R"({"x": "X"})"), "aXb");
  // trim_blocks drops the newline after a block tag; lstrip_blocks drops
  // the indentation before it. Expression tags keep both.
  EXPECT_EQ(Render("  {% if true %}\n  yes\n  {% endif %}\nend", "{}"),
            "  yes\nend");
  EXPECT_EQ(Render("  {{ 'v' }}\nend", "{}"), "  v\nend");
  EXPECT_EQ(Render("x {% if true %}y{% endif %}", "{}"), "x y");
  EXPECT_EQ(Render("a{# comment #}\nb", "{}"), "ab");
  // A single trailing newline of the template is dropped, as Jinja does.
  EXPECT_EQ(Render("line\n", "{}"), "line");
}

TEST(JinjaTemplateTest, PythonValueFormatting) {
  EXPECT_EQ(Render("{{ [1, 'a', none, true, 2.5] }}", "{}"),
            "[1, 'a', None, True, 2.5]");
  EXPECT_EQ(Render("{{ {'k': \"it's\"} }}", "{}"), "{'k': \"it's\"}");
  EXPECT_EQ(Render("{{ 1e20 }} {{ 0.1 + 0.2 }} {{ 3.0 }} {{ 1e-5 }}", "{}"),
            "1e+20 0.30000000000000004 3.0 1e-05");
  EXPECT_EQ(Render("{{ x }}", R"({"x": 0.5})"), "0.5");
  EXPECT_EQ(Render("{{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }}", "{}"), "-4 2 3.5");
}

TEST(JinjaTemplateTest, ToJsonMatchesPythonJsonDumps) {
  const std::string ctx =
      R"({"t": {"b": [1, 2.0, "é\n\"q\"", null, false], "a": {}}})";
  EXPECT_EQ(Render("{{ t | tojson }}", ctx),
            R"({"b": [1, 2.0, "é\n\"q\"", null, false], "a": {}})");
  EXPECT_EQ(Render("{{ t.b[:2] | tojson(indent=2) }}", ctx),
            "[\n  1,\n  2.0\n]");
}

TEST(JinjaTemplateTest, NamespaceLoopsAndScoping) {
  const std::string src =
      "{% set ns = namespace(n=0) %}{% set outer = 'o' %}"
      "{% for x in xs %}{% set outer = 'inner' %}{% set ns.n = ns.n + x %}"
      "{{ loop.index0 }}{{ '|' if not loop.last }}{% endfor %} "
      "{{ ns.n }} {{ outer }}";
  EXPECT_EQ(Render(src, R"({"xs": [1, 2, 3]})"), "0|1|2 6 o");
  EXPECT_EQ(Render("{% for m in ms[::-1] %}{{ m }}{% endfor %}",
                   R"({"ms": ["a", "b", "c"]})"),
            "cba");
}

TEST(JinjaTemplateTest, StringMethodsUseCodePoints) {
  EXPECT_EQ(
      Render("{{ s|length }} {{ s[1] }} {{ s[-2:] }}", R"({"s": "日本語"})"),
      "3 本 本語");
  EXPECT_EQ(Render("{{ s.split('</think>')[-1].lstrip('\\n') }}",
                   R"({"s": "<think>r</think>\n\nanswer"})"),
            "answer");
  EXPECT_EQ(Render("{{ s.startswith('<a>') and s.endswith('</a>') }}",
                   R"({"s": "<a>x</a>"})"),
            "True");
}

TEST(JinjaTemplateTest, ErrorsNameTheTemplateAndLine) {
  auto t = Template::Parse("ok\n{{ raise_exception('bad role') }}", "my tmpl");
  ASSERT_TRUE(t.ok());
  auto out = t->Render("{}");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(),
            "my tmpl line 2: raise_exception: bad role");

  auto t2 = Template::Parse("{{ 'a' + 1 }}");
  ASSERT_TRUE(t2.ok());
  EXPECT_THAT(std::string(t2->Render("{}").status().message()),
              HasSubstr("template line 1: unsupported operand"));
  EXPECT_EQ(t2->Render("not json").status().message(),
            "template context is not valid JSON");
  EXPECT_EQ(t2->Render("[1]").status().message(),
            "template context must be a JSON object");

  auto bad = Template::Parse("a\n{{ x ", "chat template");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "chat template line 2: unclosed '{{'");

  EXPECT_EQ(Template().Render("{}").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(JinjaTemplateTest, StrftimeNowUsesTheGivenClock) {
  setenv("TZ", "UTC", 1);
  tzset();
  auto t = Template::Parse("{{ strftime_now('%d %b %Y') }}");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t->Render("{}", 1721995200), "26 Jul 2024");
}

TEST(JinjaTemplateTest, UnknownFilterIsARenderError) {
  auto t = Template::Parse("{{ x | frob }}");
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(std::string(t->Render("{}").status().message()),
              HasSubstr("unknown filter 'frob'"));
}

TEST(JinjaTemplateTest, RendersWithACustomRegistry) {
  Registry registry = DefaultRegistry();
  registry.AddFilter("bracket",
                     [](const Value& v, const Args&, const CallContext&) {
                       return Str("[" + ToString(v) + "]");
                     });
  auto t = Template::Parse("{{ xs | map('bracket') | join }}");
  ASSERT_TRUE(t.ok());
  auto out = t->Render({{"xs", List({Int(1), Str("a")})}}, registry);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "[1][a]");
  EXPECT_THAT(
      t->Render(R"({"xs": [1]})"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "template line 1: unknown filter 'bracket'"));  // Default: no
                                                               // `bracket`.
}

TEST(JinjaTemplateTest, CopiesShareTheParsedTemplate) {
  auto t = Template::Parse("{{ n * 2 }}");
  ASSERT_TRUE(t.ok());
  Template copy = *t;
  EXPECT_EQ(*copy.Render(R"({"n": 21})"), "42");
  EXPECT_EQ(*t->Render(R"({"n": 1})"), "2");
}

}  // namespace
}  // namespace verl::models::jinja
