// File: verl/infer/agent/tool_config_test.cc
//
// verl's own tool config files parse to their JSON meaning; malformed ones
// give one line naming the tool and key.
#include "verl/infer/agent/tool_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "verl/core/test_util.h"

namespace verl::infer::agent {
namespace {

using core::testing::StatusIs;
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

// examples/sglang_multiturn/config/tool_config/*.yaml of verl, two tools.
constexpr char kVerlConfig[] = R"(tools:
  - class_name: "verl.tools.gsm8k_tool.Gsm8kTool"
    config: 
      type: native
    tool_schema:
      type: "function"
      function:
        name: "calc_gsm8k_reward"
        description: "A tool for calculating the reward of gsm8k."
        parameters:
          type: "object"
          properties:
            answer:
              type: "string"
              description: "The model's answer, must be a digits"
          required: ["answer"]
  - class_name: "verl.tools.sandbox_fusion_tools.SandboxFusionTool"
    config: 
      sandbox_fusion_url: "https://example/run_code"
      num_workers: 10
      enable_global_rate_limit: true
      default_timeout: 30
      memory_limit_mb: 1024.5
      quoted_number: "10"
      nothing: ~
      type: native

    tool_schema:
      type: "function"
      function:
        name: "code_interpreter"
        description: "A tool for executing code."
        parameters:
          type: "object"
          properties:
            code:
              type: "string"
          required: ["code"]
)";

TEST(ToolConfigTest, VerlFilesParseToTheirMeaning) {
  auto tools = ParseToolConfig(kVerlConfig, "tools.yaml");
  ASSERT_TRUE(tools.ok()) << tools.status();
  ASSERT_EQ(tools->size(), 2u);
  EXPECT_EQ((*tools)[0].class_name, "verl.tools.gsm8k_tool.Gsm8kTool");
  EXPECT_EQ((*tools)[0].name(), "calc_gsm8k_reward");
  EXPECT_EQ((*tools)[0].config, nlohmann::ordered_json({{"type", "native"}}));
  EXPECT_EQ((*tools)[0].tool_schema["function"]["parameters"]["required"],
            nlohmann::ordered_json({"answer"}));
  const auto& c = (*tools)[1].config;
  EXPECT_EQ(c["num_workers"], 10);
  EXPECT_EQ(c["enable_global_rate_limit"], true);
  EXPECT_EQ(c["memory_limit_mb"], 1024.5);
  EXPECT_EQ(c["quoted_number"], "10");  // quoted stays a string
  EXPECT_TRUE(c["nothing"].is_null());
  EXPECT_EQ((*tools)[1].name(), "code_interpreter");
  // Key order is the file's (the schema goes to the model as written).
  EXPECT_EQ((*tools)[1].tool_schema["function"].begin().key(), "name");
}

TEST(ToolConfigTest, MalformedConfigsNameTheToolAndKey) {
  const std::string schema =
      "    tool_schema: {type: function, function: {name: f}}\n";
  struct Case {
    std::string yaml;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"tools: [\n  - {class_name: x", "tools.yaml: line"},  // YAML syntax
      {"- a\n- b\n", "expected a mapping with a \"tools\" list"},
      {"tools: {a: 1}\n", "\"tools\" list"},
      {"tools:\n  - 7\n", "tools[0]: expected a mapping"},
      {"tools:\n  - config: {}\n" + schema, "tools[0]: class_name"},
      {"tools:\n  - class_name: x\n", "tools[0]: tool_schema (a mapping)"},
      {"tools:\n  - class_name: x\n    tool_schema: {type: api}\n",
       "tool_schema.type must be \"function\""},
      {"tools:\n  - class_name: x\n    tool_schema: {type: function, "
       "function: {description: d}}\n",
       "tool_schema.function.name"},
      {"tools:\n  - class_name: x\n    config: [1]\n" + schema,
       "config must be a mapping"},
      {"tools:\n  - class_name: x\n" + schema + "  - class_name: y\n" + schema,
       "tools[1]: tool name 'f' appears twice"},
      {"tools:\n  - class_name: x\n    tool_schema: {type: function, "
       "function: {name: f, parameters: {type: array}}}\n",
       "parameters must be an object schema"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ParseToolConfig(c.yaml, "tools.yaml"),
                StatusIs(kInvalid, c.message))
        << c.yaml;
  }
  EXPECT_THAT(LoadToolConfig("/no/such/tools.yaml"),
              StatusIs(absl::StatusCode::kNotFound, "no such file"));
}

// verl's agent_loop_config_path files: names bound to its built-in classes.
TEST(AgentLoopConfigTest, VerlEntriesNameBuiltInLoops) {
  auto loops = ParseAgentLoopConfig(
      "- name: calc_agent\n"
      "  _target_: verl.experimental.agent_loop.tool_agent_loop.ToolAgentLoop\n"
      "- name: plain\n"
      "  _target_: verl.experimental.agent_loop.single_turn_agent_loop."
      "SingleTurnAgentLoop\n",
      "loops.yaml");
  ASSERT_TRUE(loops.ok()) << loops.status();
  EXPECT_EQ(*loops,
            (std::map<std::string, std::string>{
                {"calc_agent", "tool_agent"}, {"plain", "single_turn_agent"}}));
  EXPECT_TRUE(ParseAgentLoopConfig("[]", "loops.yaml")->empty());
}

TEST(AgentLoopConfigTest, MalformedOrCustomLoopsAreRefused) {
  const std::string tool =
      "  _target_: verl.experimental.agent_loop.ToolAgentLoop\n";
  struct Case {
    std::string yaml;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"- {name: a", "loops.yaml: line"},
      {"name: a\n", "expected a list of agent loops"},
      {"- 3\n", "loops.yaml: [0]: expected a mapping"},
      {"- _target_: verl.x.ToolAgentLoop\n", "[0]: name (a string)"},
      {"- name: a\n", "[0]: 'a': _target_ (a string) is required"},
      {"- name: a\n  _target_: my_pkg.loops.ReactAgentLoop\n",
       "'a': _target_ my_pkg.loops.ReactAgentLoop is a Python class"},
      {"- name: a\n  _target_: mypkg.ToolAgentLoop\n", "is a Python class"},
      {"- name: a\n" + tool + "  max_turns: 3\n",
       "'a': max_turns: built-in loops take their settings"},
      {"- name: a\n" + tool + "- name: a\n" + tool, "[1]: 'a' appears twice"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ParseAgentLoopConfig(c.yaml, "loops.yaml"),
                StatusIs(kInvalid, c.message))
        << c.yaml;
  }
  EXPECT_THAT(LoadAgentLoopConfig("/no/such/loops.yaml"),
              StatusIs(absl::StatusCode::kNotFound, "no such file"));
}

}  // namespace
}  // namespace verl::infer::agent
