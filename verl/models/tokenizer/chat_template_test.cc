#include "verl/models/tokenizer/chat_template.h"

#include <cstdlib>
#include <ctime>
#include <map>
#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "verl/core/file_util.h"
#include "verl/core/test_util.h"

namespace verl::models {
namespace {

using ::verl::core::testing::StatusIs;

using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;

constexpr char kTestdata[] = "verl/models/tokenizer/testdata/";

// The engine itself is tested in //verl/models/jinja; these tests cover the
// chat layer: error prefix, request -> context, template selection, goldens.

TEST(ChatTemplateTest, ErrorsSayChatTemplateAndTheLine) {
  auto bad = ChatTemplate::Parse("line1\nline2\n{% if %}{% endif %}");
  ASSERT_THAT(bad, StatusIs(absl::StatusCode::kInvalidArgument,
                            "chat template line 3: unexpected end of tag"));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "chat template line 3: unexpected end of tag");

  auto t = ChatTemplate::Parse("ok\n{{ raise_exception('bad role') }}");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->Render("{}").status().message(),
            "chat template line 2: raise_exception: bad role");
  EXPECT_EQ(t->Render("not json").status().message(),
            "chat template context is not valid JSON");
  EXPECT_EQ(ChatTemplate().Render("{}").status().message(),
            "ChatTemplate was not parsed");
}

TEST(ChatTemplateTest, RequestBecomesTheTemplateVariables) {
  auto t = ChatTemplate::Parse(
      "{{ messages | length }}|{{ tools }}|{{ documents }}|"
      "{{ add_generation_prompt }}|{{ bos_token }}|{{ eos_token }}|{{ extra "
      "}}");
  ASSERT_TRUE(t.ok());
  ChatRequest req;
  req.messages_json = R"([{"role": "user", "content": "x"}])";
  req.add_generation_prompt = true;
  req.kwargs_json = R"({"extra": 7, "eos_token": "E2"})";
  auto out =
      ApplyChatTemplate(*t, req, {{"bos_token", "B"}, {"eos_token", "E"}});
  ASSERT_TRUE(out.ok()) << out.status();
  // kwargs override the special tokens, like transformers.
  EXPECT_EQ(*out, "1|None|None|True|B|E2|7");
  req.tools_json = R"([{"name": "f"}])";
  EXPECT_EQ(*ApplyChatTemplate(*t, req, {}),
            "1|[{'name': 'f'}]|None|True||E2|7");

  req.messages_json = "{}";
  EXPECT_EQ(ApplyChatTemplate(*t, req, {}).status().message(),
            "apply_chat_template: messages must be a JSON array");
  req.messages_json = "[]";
  req.tools_json = "nope";
  EXPECT_EQ(ApplyChatTemplate(*t, req, {}).status().message(),
            "apply_chat_template: tools must be a JSON array");
  req.tools_json = "";
  req.kwargs_json = "[]";
  EXPECT_EQ(ApplyChatTemplate(*t, req, {}).status().message(),
            "apply_chat_template: kwargs must be a JSON object");
}

TEST(ChatFormatterTest, PicksTemplatesByNameAndPassesSpecialTokens) {
  ChatFormatter f({{"default", "D{{ eos_token }}{{ pad_token is defined }}"},
                   {"tool_use", "T"},
                   {"broken", "{% if %}"}},
                  {{"eos_token", "<e>"}, {"pad_token", ""}}, "tok.json");
  EXPECT_FALSE(f.empty());
  ChatRequest req;
  // Empty special tokens are left out (undefined in the template).
  EXPECT_EQ(*f.Apply(req), "D<e>False");
  req.tools_json = "[]";
  EXPECT_EQ(*f.Apply(req), "T");
  EXPECT_EQ(*f.Apply(req, "default"), "D<e>False");
  auto missing = f.Apply(req, "nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "tok.json: no chat template \"nope\" (have: broken, default, "
            "tool_use)");
  auto broken = f.Apply(req, "broken");
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(broken.status().message()),
              HasSubstr("tok.json chat template \"broken\""));
  EXPECT_THAT(std::string(broken.status().message()),
              HasSubstr("chat template line 1: unexpected end of tag"));
  // Copies share the compiled templates.
  ChatFormatter copy = f;
  EXPECT_EQ(*copy.Apply(ChatRequest()), "D<e>False");

  ChatFormatter none({}, {}, "x");
  EXPECT_TRUE(none.empty());
  EXPECT_THAT(std::string(none.Apply(ChatRequest()).status().message()),
              HasSubstr("(have: none)"));
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
      ASSERT_THAT(
          out,
          StatusIs(absl::StatusCode::kInvalidArgument,
                   "chat template line 75: raise_exception: This model only"))
          << label;
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
