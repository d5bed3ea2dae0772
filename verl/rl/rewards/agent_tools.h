// File: verl/rl/rewards/agent_tools.h
//
// The agent loop's tools and interactions that score answers with the
// reward_score rules (they live on the rl side of the layering):
// * Gsm8kTool — verl.tools.gsm8k_tool.Gsm8kTool ("calc_gsm8k_reward"): the
//   model submits {"answer"}; the text is verl's "Current parsed answer='…'
//   reward=…", the step reward 0.0 if the answer scored better than the
//   instance's previous one, else -0.05 (flexible GSM8K rule).
// * Gsm8kInteraction — verl.interactions.gsm8k_interaction.Gsm8kInteraction:
//   "Your response is correct!" (ends the trajectory) or asks to try again
//   (strict GSM8K rule on the last assistant message).
// MakeAgentTool / MakeAgentInteraction add these to the built-in ones of
// verl/infer/agent and refuse unknown class names with the list of known.
#ifndef VERL_RL_REWARDS_AGENT_TOOLS_H_
#define VERL_RL_REWARDS_AGENT_TOOLS_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "verl/infer/agent/interaction.h"
#include "verl/infer/agent/tools.h"

namespace verl::rl {

class Gsm8kTool : public infer::agent::Tool {
 public:
  explicit Gsm8kTool(infer::agent::ToolSpec spec) : Tool(std::move(spec)) {}
  absl::StatusOr<std::string> Create(
      const nlohmann::ordered_json& create_kwargs) override;
  absl::StatusOr<infer::agent::ToolExecution> Execute(
      const std::string& instance_id,
      const nlohmann::ordered_json& parameters) override;
  double CalcReward(const std::string& instance_id) override;
  void Release(const std::string& instance_id) override;

 private:
  struct Instance {
    std::string response;
    std::string ground_truth;
    double reward = 0.0;
  };
  absl::Mutex mu_;
  std::map<std::string, Instance> instances_ ABSL_GUARDED_BY(mu_);
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
};

class Gsm8kInteraction : public infer::agent::Interaction {
 public:
  absl::StatusOr<std::string> Start(
      const nlohmann::ordered_json& kwargs) override;
  absl::StatusOr<infer::agent::InteractionTurn> Respond(
      const std::string& instance_id,
      const nlohmann::ordered_json& messages) override;
  void Finalize(const std::string& instance_id) override;

 private:
  absl::Mutex mu_;
  std::map<std::string, std::string> ground_truth_ ABSL_GUARDED_BY(mu_);
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
};

absl::StatusOr<std::unique_ptr<infer::agent::Tool>> MakeAgentTool(
    const infer::agent::ToolSpec& spec);
absl::StatusOr<std::unique_ptr<infer::agent::Interaction>> MakeAgentInteraction(
    const infer::agent::InteractionSpec& spec);

// The tools of a tool config file / the interactions of an interaction
// config file, by name.
absl::StatusOr<std::vector<std::unique_ptr<infer::agent::Tool>>> LoadAgentTools(
    const std::string& tool_config_path);
absl::StatusOr<
    std::map<std::string, std::unique_ptr<infer::agent::Interaction>>>
LoadAgentInteractions(const std::string& interaction_config_path);

// Python's repr() of a str (what verl's f"{answer=}" prints).
std::string PythonStrRepr(const std::string& s);

}  // namespace verl::rl

#endif  // VERL_RL_REWARDS_AGENT_TOOLS_H_
