// File: verl/rl/rewards/agent_tools_test.cc
//
// verl's gsm8k tool and interaction: texts, step rewards and termination as
// verl's Python computes them; config files through the factories.
#include "verl/rl/rewards/agent_tools.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "verl/core/test_util.h"

namespace verl::rl {
namespace {

using core::testing::StatusIs;
using Json = nlohmann::ordered_json;

infer::agent::ToolSpec Gsm8kSpec() {
  infer::agent::ToolSpec s;
  s.class_name = "verl.tools.gsm8k_tool.Gsm8kTool";
  s.tool_schema = {{"type", "function"},
                   {"function", {{"name", "calc_gsm8k_reward"}}}};
  return s;
}

TEST(AgentToolsTest, PythonStrRepr) {
  EXPECT_EQ(PythonStrRepr("72"), "'72'");
  EXPECT_EQ(PythonStrRepr("it's"), "\"it's\"");
  EXPECT_EQ(PythonStrRepr("a'b\"c"), "'a\\'b\"c'");
  EXPECT_EQ(PythonStrRepr("x\ny\\"), "'x\\ny\\\\'");
}

TEST(AgentToolsTest, Gsm8kToolAsVerl) {
  auto tool = MakeAgentTool(Gsm8kSpec());
  ASSERT_TRUE(tool.ok()) << tool.status();
  // One instance per call, as verl's _call_tool does.
  auto id = (*tool)->Create({{"ground_truth", "72"}});
  ASSERT_TRUE(id.ok());
  auto r = (*tool)->Execute(*id, {{"answer", "72"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->text, "Current parsed answer='72' reward=1.0");
  EXPECT_EQ(r->reward, 0.0);  // improved on 0.0
  EXPECT_EQ((*tool)->CalcReward(*id), 1.0);
  // A repeated (not improved) submission is penalised.
  r = (*tool)->Execute(*id, {{"answer", "#### 72"}});
  EXPECT_EQ(r->text, "Current parsed answer='#### 72' reward=1.0");
  EXPECT_EQ(r->reward, -0.05);
  (*tool)->Release(*id);
  id = (*tool)->Create({{"ground_truth", "72"}});
  r = (*tool)->Execute(*id, {{"answer", 71}});
  EXPECT_EQ(r->text, "Current parsed answer='71' reward=0.0");
  EXPECT_EQ(r->reward, -0.05);
  EXPECT_THAT((*tool)->Execute("nope", {}).status(),
              StatusIs(absl::StatusCode::kNotFound, "no instance"));
}

TEST(AgentToolsTest, Gsm8kInteractionAsVerl) {
  infer::agent::InteractionSpec spec;
  spec.name = "gsm8k";
  spec.class_name = "verl.interactions.gsm8k_interaction.Gsm8kInteraction";
  auto inter = MakeAgentInteraction(spec);
  ASSERT_TRUE(inter.ok());
  auto id = (*inter)->Start({{"name", "gsm8k"}, {"ground_truth", "18"}});
  ASSERT_TRUE(id.ok());
  Json messages = Json::array(
      {{{"role", "user"}, {"content", "q"}},
       {{"role", "assistant"}, {"content", "I think 17.\n#### 17"}}});
  auto t = (*inter)->Respond(*id, messages);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->should_terminate);
  EXPECT_EQ(t->response,
            "Your response is incorrect! You need to reflect on your answer "
            "and try again.");
  EXPECT_EQ(*t->reward, 0.0);
  messages.push_back({{"role", "user"}, {"content", t->response}});
  messages.push_back({{"role", "assistant"}, {"content", "#### 18"}});
  t = (*inter)->Respond(*id, messages);
  EXPECT_TRUE(t->should_terminate);
  EXPECT_EQ(t->response, "Your response is correct!");
  EXPECT_EQ(*t->reward, 1.0);
  (*inter)->Finalize(*id);
  EXPECT_THAT((*inter)->Respond(*id, messages).status(),
              StatusIs(absl::StatusCode::kNotFound, "no instance"));
}

TEST(AgentToolsTest, ConfigFilesThroughTheFactories) {
  const std::string dir = ::testing::TempDir();
  {
    std::ofstream(dir + "/tools.yaml") << R"(tools:
  - class_name: "verl.tools.gsm8k_tool.Gsm8kTool"
    config: {type: native}
    tool_schema:
      type: "function"
      function:
        name: "calc_gsm8k_reward"
        parameters: {type: object, properties: {answer: {type: string}}}
  - class_name: calculator
    config: {}
    tool_schema: {type: function, function: {name: calc}}
)";
    std::ofstream(dir + "/bad_tools.yaml") << R"(tools:
  - class_name: "verl.tools.search_tool.SearchTool"
    tool_schema: {type: function, function: {name: search}}
)";
    std::ofstream(dir + "/inter.yaml")
        << "interaction:\n  - name: gsm8k\n    class_name: "
           "verl.interactions.gsm8k_interaction.Gsm8kInteraction\n";
    std::ofstream(dir + "/bad_inter.yaml")
        << "interaction:\n  - class_name: my.WeatherInteraction\n";
  }
  auto tools = LoadAgentTools(dir + "/tools.yaml");
  ASSERT_TRUE(tools.ok()) << tools.status();
  ASSERT_EQ(tools->size(), 2u);
  EXPECT_EQ((*tools)[0]->spec().name(), "calc_gsm8k_reward");
  EXPECT_THAT(LoadAgentTools(dir + "/bad_tools.yaml").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "class_name 'verl.tools.search_tool.SearchTool' is "
                       "not available"));
  auto inter = LoadAgentInteractions(dir + "/inter.yaml");
  ASSERT_TRUE(inter.ok()) << inter.status();
  EXPECT_EQ(inter->count("gsm8k"), 1u);
  EXPECT_THAT(LoadAgentInteractions(dir + "/bad_inter.yaml").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "interaction weather: class_name "
                       "'my.WeatherInteraction' is not available"));
}

}  // namespace
}  // namespace verl::rl
