// File: verl/infer/agent/interaction.h
//
// Interactions (verl/interactions): a simulated user that answers after each
// assistant turn of a tool_agent trajectory that made no tool call — e.g.
// verl's gsm8k interaction gives feedback until the answer is right. Config
// (rollout.multi_turn.interaction_config_path) is verl's YAML:
//   interaction:
//     - name: gsm8k              # optional: else the class name, lower-cased,
//       class_name: "verl.interactions.gsm8k_interaction.Gsm8kInteraction"
//       config: {}               #   without an "Interaction" suffix
// A sample picks one by extra_info.interaction_kwargs.name.
#ifndef VERL_INFER_AGENT_INTERACTION_H_
#define VERL_INFER_AGENT_INTERACTION_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace verl::infer::agent {

struct InteractionTurn {
  bool should_terminate = false;
  std::string response;  // the user message
  std::optional<double> reward;
  nlohmann::ordered_json metrics = nlohmann::ordered_json::object();
};

// verl's BaseInteraction. Implementations must be thread-safe (trajectories
// interact concurrently).
class Interaction {
 public:
  virtual ~Interaction() = default;
  // `kwargs` is the sample's interaction_kwargs; returns the instance id.
  virtual absl::StatusOr<std::string> Start(
      const nlohmann::ordered_json& kwargs) = 0;
  // `messages` is the conversation so far (the last assistant message's
  // content is the decoded turn).
  virtual absl::StatusOr<InteractionTurn> Respond(
      const std::string& instance_id,
      const nlohmann::ordered_json& messages) = 0;
  virtual void Finalize(const std::string& instance_id) = 0;
};

struct InteractionSpec {
  std::string name;
  std::string class_name;
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
};

// Errors name `source`, the entry's index and the key; duplicate names are
// refused as verl does.
absl::StatusOr<std::vector<InteractionSpec>> ParseInteractionConfig(
    const std::string& yaml_text, const std::string& source);
absl::StatusOr<std::vector<InteractionSpec>> LoadInteractionConfig(
    const std::string& path);

}  // namespace verl::infer::agent

#endif  // VERL_INFER_AGENT_INTERACTION_H_
