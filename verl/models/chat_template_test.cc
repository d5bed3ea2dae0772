#include "verl/models/chat_template.h"

#include <cstdlib>
#include <ctime>
#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "verl/core/file_util.h"

namespace verl::models {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;

constexpr char kTestdata[] = "verl/models/testdata/";

std::string Render(const std::string& source, const std::string& context) {
  auto t = ChatTemplate::Parse(source);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return "<parse error>";
  auto out = t->Render(context);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : "<render error>";
}

TEST(ChatTemplateTest, TextExpressionsAndWhitespaceControl) {
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

TEST(ChatTemplateTest, PythonValueFormatting) {
  EXPECT_EQ(Render("{{ [1, 'a', none, true, 2.5] }}", "{}"),
            "[1, 'a', None, True, 2.5]");
  EXPECT_EQ(Render("{{ {'k': \"it's\"} }}", "{}"), "{'k': \"it's\"}");
  EXPECT_EQ(Render("{{ 1e20 }} {{ 0.1 + 0.2 }} {{ 3.0 }} {{ 1e-5 }}", "{}"),
            "1e+20 0.30000000000000004 3.0 1e-05");
  EXPECT_EQ(Render("{{ x }}", R"({"x": 0.5})"), "0.5");
  EXPECT_EQ(Render("{{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }}", "{}"), "-4 2 3.5");
}

TEST(ChatTemplateTest, ToJsonMatchesPythonJsonDumps) {
  const std::string ctx =
      R"({"t": {"b": [1, 2.0, "é\n\"q\"", null, false], "a": {}}})";
  EXPECT_EQ(Render("{{ t | tojson }}", ctx),
            R"({"b": [1, 2.0, "é\n\"q\"", null, false], "a": {}})");
  EXPECT_EQ(Render("{{ t.b[:2] | tojson(indent=2) }}", ctx),
            "[\n  1,\n  2.0\n]");
}

TEST(ChatTemplateTest, NamespaceLoopsAndScoping) {
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

TEST(ChatTemplateTest, StringMethodsUseCodePoints) {
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

TEST(ChatTemplateTest, RaiseExceptionAndRuntimeErrorsNameTheLine) {
  auto t = ChatTemplate::Parse("ok\n{{ raise_exception('bad role') }}");
  ASSERT_TRUE(t.ok());
  auto out = t->Render("{}");
  EXPECT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("line 2"));
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("bad role"));

  auto t2 = ChatTemplate::Parse("{{ 'a' + 1 }}");
  ASSERT_TRUE(t2.ok());
  EXPECT_THAT(std::string(t2->Render("{}").status().message()),
              HasSubstr("unsupported operand"));
  EXPECT_FALSE(t2->Render("not json").ok());
}

TEST(ChatTemplateTest, StrftimeNowUsesTheGivenClock) {
  setenv("TZ", "UTC", 1);
  tzset();
  auto t = ChatTemplate::Parse("{{ strftime_now('%d %b %Y') }}");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t->Render("{}", 1721995200), "26 Jul 2024");
}

struct SyntaxCase {
  const char* source;
  const char* message;
};

TEST(ChatTemplateTest, SyntaxErrorsAreClear) {
  const SyntaxCase cases[] = {
      {"{% if x %}no end", "missing '{% endif %}'"},
      {"{% for x in %}{% endfor %}", "line 1: unexpected end of tag"},
      {"a\n{{ x ", "line 2: unclosed '{{'"},
      {"{% endfor %}", "unknown or unexpected statement 'endfor'"},
      {"{% frobnicate %}", "unknown or unexpected statement 'frobnicate'"},
      {"{{ 'abc }}", "unclosed '{{'"},
      {"{{ x y }}", "unexpected 'y'"},
      {"{{ (1 }}", "expected ')'"},
      {"{{ x | }}", "expected a name"},
      {"{{ a $ b }}", "unexpected character '$'"},
      {"{% for x y %}{% endfor %}", "expected 'in'"},
      {"line1\nline2\n{% if %}{% endif %}", "line 3"},
  };
  for (const SyntaxCase& c : cases) {
    auto t = ChatTemplate::Parse(c.source);
    ASSERT_FALSE(t.ok()) << c.source;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(t.status().message()), HasSubstr(c.message))
        << c.source;
    EXPECT_THAT(std::string(t.status().message()), HasSubstr("chat template"));
  }
}

TEST(ChatTemplateTest, UnknownFilterIsARenderError) {
  auto t = ChatTemplate::Parse("{{ x | frob }}");
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(std::string(t->Render("{}").status().message()),
              HasSubstr("unknown filter 'frob'"));
}

// Goldens rendered by Python's jinja2 configured like transformers
// (testdata/gen_chat_goldens.py) for Qwen2.5, Llama 3 and a feature sampler.
TEST(ChatTemplateTest, MatchesJinja2Goldens) {
  setenv("TZ", "UTC", 1);
  tzset();
  auto goldens =
      core::ReadJsonFile(std::string(kTestdata) + "chat_goldens.json");
  ASSERT_TRUE(goldens.ok()) << goldens.status();
  // Ordered JSON: tojson must print tool schemas in their given key order.
  auto cases_text = core::ReadFile(std::string(kTestdata) + "chat_cases.json");
  ASSERT_TRUE(cases_text.ok()) << cases_text.status();
  auto cases_json = std::make_optional(Json::parse(*cases_text));
  const int64_t now = (*goldens)["now_unix"].get<int64_t>();
  const std::map<std::string, std::map<std::string, std::string>> special = {
      {"qwen2_5_chat_template.jinja",
       {{"eos_token", "<|im_end|>"}, {"pad_token", "<|endoftext|>"}}},
      {"llama3_chat_template.jinja",
       {{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"}}},
  };
  int checked = 0;
  for (const auto& golden : (*goldens)["renders"]) {
    const std::string name = golden["template"];
    auto source = core::ReadFile(std::string(kTestdata) + name);
    ASSERT_TRUE(source.ok()) << source.status();
    auto tmpl = ChatTemplate::Parse(*source);
    ASSERT_TRUE(tmpl.ok()) << name << ": " << tmpl.status();
    absl::StatusOr<std::string> out;
    if (name == "jinja_features.jinja") {
      const auto& cases = (*cases_json)["cases"];
      Json ctx = {{"messages", cases[2]["messages"]},
                  {"tools", cases[5]["tools"]}};
      out = tmpl->Render(ctx.dump(), now);
    } else {
      const std::string case_name = golden["case"];
      Json c;
      for (const auto& cs : (*cases_json)["cases"])
        if (cs["name"] == case_name) c = cs;
      ChatRequest req;
      req.messages_json = c["messages"].dump();
      if (c.contains("tools")) req.tools_json = c["tools"].dump();
      req.add_generation_prompt = c["add_generation_prompt"].get<bool>();
      if (c.contains("kwargs")) req.kwargs_json = c["kwargs"].dump();
      req.now_unix_seconds = now;
      out = ApplyChatTemplate(*tmpl, req, special.at(name));
    }
    const std::string label = name + " / " + golden["case"].get<std::string>();
    if (golden.contains("error")) {
      ASSERT_FALSE(out.ok()) << label;
      EXPECT_THAT(std::string(out.status().message()),
                  HasSubstr(golden["error"].get<std::string>()))
          << label;
    } else {
      ASSERT_TRUE(out.ok()) << label << ": " << out.status();
      EXPECT_EQ(*out, golden["output"].get<std::string>()) << label;
    }
    ++checked;
  }
  EXPECT_GE(checked, 17);
}

// Parsers of outside input must never crash: random edits of a real
// template either parse and render or fail with a status.
TEST(ChatTemplateTest, RandomlyMutatedTemplatesNeverCrash) {
  auto source =
      core::ReadFile(std::string(kTestdata) + "qwen2_5_chat_template.jinja");
  ASSERT_TRUE(source.ok());
  const std::string ctx =
      R"({"messages": [{"role": "system", "content": "s"}, {"role": "user",)"
      R"( "content": "u"}, {"role": "assistant", "content": "a", "tool_calls":)"
      R"( [{"function": {"name": "f", "arguments": {"x": 1}}}]}, {"role":)"
      R"( "tool", "content": "r"}], "tools": [{"name": "f"}],)"
      R"( "add_generation_prompt": true})";
  std::mt19937 rng(7);
  int parsed = 0, rendered = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string s = *source;
    for (int edit = 0; edit < 3; ++edit) {
      size_t pos = rng() % s.size();
      switch (rng() % 3) {
        case 0:
          s.erase(pos, 1 + rng() % 8);
          break;
        case 1:
          s.insert(pos, s.substr(rng() % s.size(), 1 + rng() % 8));
          break;
        default:
          s[pos] = "{}%#-|()[]'\". \n"[rng() % 15];
      }
    }
    auto t = ChatTemplate::Parse(s);
    if (!t.ok()) continue;
    ++parsed;
    rendered += t->Render(ctx).ok();
  }
  EXPECT_GT(parsed, 0);
  EXPECT_GT(rendered, 0);
}

}  // namespace
}  // namespace verl::models
