// File: verl/infer/agent/tool_config.h
//
// verl's tool config file (rollout.multi_turn.tool_config_path): YAML with
//   tools:
//     - class_name: "verl.tools.gsm8k_tool.Gsm8kTool"
//       config: {type: native, ...}          # the tool's own settings
//       tool_schema: {type: function, function: {name, description,
//                     parameters: {type: object, properties, required}}}
// parsed with yaml-cpp into JSON values (YAML 1.2 core-schema scalars:
// quoted scalars stay strings). Errors are one line naming the file, the
// tool's index and the key.
#ifndef VERL_INFER_AGENT_TOOL_CONFIG_H_
#define VERL_INFER_AGENT_TOOL_CONFIG_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace verl::infer::agent {

struct ToolSpec {
  std::string class_name;
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  // The OpenAI function schema ({"type": "function", "function": {...}}).
  nlohmann::ordered_json tool_schema;
  std::string name() const { return tool_schema["function"]["name"]; }
};

// `source` names the text in errors (usually the file path).
absl::StatusOr<std::vector<ToolSpec>> ParseToolConfig(
    const std::string& yaml_text, const std::string& source);
absl::StatusOr<std::vector<ToolSpec>> LoadToolConfig(const std::string& path);

// verl's agent loop registry (rollout.agent.agent_loop_config_path): a YAML
// list of {name, _target_}. verl instantiates `_target_` with hydra; here the
// targets are verl's two built-in loop classes (SingleTurnAgentLoop,
// ToolAgentLoop under verl.*), so each entry names an alias of
// "single_turn_agent" or "tool_agent". Any other class, or constructor
// arguments beside name/_target_, are refused naming the file and entry.
// Returns name -> built-in loop.
absl::StatusOr<std::map<std::string, std::string>> ParseAgentLoopConfig(
    const std::string& yaml_text, const std::string& source);
absl::StatusOr<std::map<std::string, std::string>> LoadAgentLoopConfig(
    const std::string& path);

// A YAML document as JSON (for tool and interaction configs).
absl::StatusOr<nlohmann::ordered_json> YamlToJson(const std::string& yaml_text,
                                                  const std::string& source);

}  // namespace verl::infer::agent

#endif  // VERL_INFER_AGENT_TOOL_CONFIG_H_
