// File: verl/infer/agent/tools_test.cc
//
// The built-in tools through verl's lifecycle: the code interpreter in the
// sandbox and a command tool written in shell speaking the JSON protocol.
#include "verl/infer/agent/tools.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "verl/core/test_util.h"

namespace verl::infer::agent {
namespace {

using core::testing::StatusIs;
using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;

ToolSpec Spec(const std::string& class_name, const std::string& name,
              Json config) {
  ToolSpec s;
  s.class_name = class_name;
  s.config = std::move(config);
  s.tool_schema = {{"type", "function"}, {"function", {{"name", name}}}};
  return s;
}

TEST(ToolsTest, CodeInterpreterLifecycle) {
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP();
  auto tool = MakeTool(Spec("verl.tools.sandbox_fusion_tools.SandboxFusionTool",
                            "code_interpreter",
                            {{"default_timeout", 5}, {"type", "native"}}));
  ASSERT_TRUE(tool.ok()) << tool.status();
  auto id = (*tool)->Create({});
  ASSERT_TRUE(id.ok());
  auto ok = (*tool)->Execute(*id, {{"code", "print(sum(range(10)))"}});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->text, "45\n");
  auto bad = (*tool)->Execute(*id, {{"code", "1/0"}});
  ASSERT_TRUE(bad.ok());
  EXPECT_THAT(bad->text, HasSubstr("ZeroDivisionError"));
  EXPECT_THAT(bad->text, HasSubstr("error: exit code 1"));
  auto no_code = (*tool)->Execute(*id, {{"source", "x"}});
  ASSERT_TRUE(no_code.ok());
  EXPECT_THAT(no_code->text, HasSubstr("needs a string parameter \"code\""));
  EXPECT_EQ((*tool)->CalcReward(*id), 0.0);
  (*tool)->Release(*id);
}

TEST(ToolsTest, CommandToolSpeaksJsonLines) {
  const std::string dir = core::testing::FreshTestDir("command_tool");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  const std::string script = dir + "/tool.sh";
  {
    std::ofstream f(script);
    // Answers an "execute" request, paying reward 0.5 per call.
    f << "#!/bin/sh\nread line\ncase \"$line\" in\n"
         "  *'\"op\":\"execute\"'*) echo '{\"text\": \"executed\", "
         "\"reward\": 0.5, \"metrics\": {\"calls\": 1}}' ;;\n"
         "  *) echo '{\"text\": \"unknown op\"}' ;;\nesac\n";
  }
  ASSERT_EQ(::chmod(script.c_str(), 0755), 0);
  auto tool =
      MakeTool(Spec("command", "echo", {{"command", {"/bin/sh", script}}}));
  ASSERT_TRUE(tool.ok()) << tool.status();
  auto id = (*tool)->Create({});
  ASSERT_TRUE(id.ok());
  auto r = (*tool)->Execute(*id, {{"x", 1}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->text, "executed");
  EXPECT_EQ(r->reward, 0.5);
  EXPECT_EQ(r->metrics["calls"], 1);
  ASSERT_TRUE((*tool)->Execute(*id, {{"x", 2}}).ok());
  EXPECT_EQ((*tool)->CalcReward(*id), 1.0);

  // A program that fails or answers garbage is a message to the model.
  auto failing = MakeTool(Spec("command", "f", {{"command", {"/bin/false"}}}));
  ASSERT_TRUE(failing.ok());
  auto f = (*failing)->Execute("i", {});
  ASSERT_TRUE(f.ok());
  EXPECT_THAT(f->text, HasSubstr("error: tool f: error: exit code 1"));
  auto garbage =
      MakeTool(Spec("command", "g", {{"command", {"/bin/echo", "not json"}}}));
  ASSERT_TRUE(garbage.ok());
  EXPECT_THAT((*garbage)->Execute("i", {})->text,
              HasSubstr("did not answer with a JSON object"));
}

TEST(ToolsTest, UnknownOrMisconfiguredToolsAreRefused) {
  EXPECT_THAT(MakeTool(Spec("verl.tools.search_tool.SearchTool", "s", {})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "'verl.tools.search_tool.SearchTool' is not available"));
  EXPECT_THAT(
      MakeTool(Spec("command", "c", {{"command", Json::array()}})),
      StatusIs(absl::StatusCode::kInvalidArgument, "needs config.command"));
}

}  // namespace
}  // namespace verl::infer::agent

namespace verl::infer::agent {
namespace {

TEST(CalculatorTest, EvaluatesAndRefuses) {
  struct Case {
    const char* expr;
    const char* want;  // tool text
  };
  auto tool = MakeTool(Spec("calculator", "calc", Json::object()));
  ASSERT_TRUE(tool.ok()) << tool.status();
  for (const Case& c : std::vector<Case>{
           {"12*(3+4)", "84"},
           {" -3 - -4 ", "1"},
           {"7/2", "3.5"},
           {"2*3+4*5-6/3", "24"},
           {"((((1))))", "1"},
           {"1/0", "error: division by zero at position 3"},
           {"2+", "error: expression ends early at position 2"},
           {"2+x", "error: expected a number at position 2"},
           {"(1+2", "error: missing ')' at position 4"},
           {"1 2", "error: unexpected character at position 2"},
           {"1..2", "error: expected a number at position 0"},
       }) {
    auto r = (*tool)->Execute("i", {{"expression", c.expr}});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->text, c.want) << c.expr;
  }
  auto r = (*tool)->Execute("i", {{"expr", "1"}});
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->text, HasSubstr("needs a string parameter \"expression\""));
  // Deep nesting is refused, not a stack overflow.
  EXPECT_THAT(EvaluateArithmetic(std::string(100000, '(')).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "too deeply"));
}

}  // namespace
}  // namespace verl::infer::agent
