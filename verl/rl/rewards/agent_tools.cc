// File: verl/rl/rewards/agent_tools.cc
#include "verl/rl/rewards/agent_tools.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "verl/rl/rewards/reward_score/gsm8k.h"

namespace verl::rl {

using infer::agent::InteractionTurn;
using infer::agent::ToolExecution;
using Json = nlohmann::ordered_json;

std::string PythonStrRepr(const std::string& s) {
  // Python picks double quotes only when the text has ' and no ".
  const bool dq = absl::StrContains(s, "'") && !absl::StrContains(s, "\"");
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == q) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += absl::StrCat("\\x", absl::Hex(c, absl::kZeroPad2));
    } else {
      out += static_cast<char>(c);
    }
  }
  out += q;
  return out;
}

namespace {

// Python's repr of a float score (0.0, 1.0, 0.5, ...).
std::string PythonFloatRepr(double v) {
  std::string s = absl::StrCat(v);
  if (s.find_first_of(".eE") == std::string::npos &&
      s.find("inf") == std::string::npos &&
      s.find("nan") == std::string::npos) {
    s += ".0";
  }
  return s;
}

std::string JsonText(const Json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

}  // namespace

absl::StatusOr<std::string> Gsm8kTool::Create(const Json& create_kwargs) {
  absl::MutexLock lock(&mu_);
  const std::string id = absl::StrCat(spec().name(), "-", next_id_++);
  Instance& inst = instances_[id];
  if (create_kwargs.is_object() && create_kwargs.contains("ground_truth")) {
    inst.ground_truth = JsonText(create_kwargs["ground_truth"]);
  }
  return id;
}

absl::StatusOr<ToolExecution> Gsm8kTool::Execute(const std::string& instance_id,
                                                 const Json& parameters) {
  std::string answer;
  if (parameters.is_object() && parameters.contains("answer")) {
    answer = JsonText(parameters["answer"]);
  }
  absl::MutexLock lock(&mu_);
  auto it = instances_.find(instance_id);
  if (it == instances_.end()) {
    return absl::NotFoundError(
        absl::StrCat("gsm8k tool: no instance ", instance_id));
  }
  Instance& inst = it->second;
  inst.response = absl::StartsWith(answer, "#### ")
                      ? answer
                      : absl::StrCat("#### ", answer);
  const double reward =
      reward::Gsm8kComputeScore(inst.response, inst.ground_truth,
                                reward::Gsm8kMethod::kFlexible, 0.0, 1.0);
  ToolExecution out;
  out.reward = reward > inst.reward ? 0.0 : -0.05;
  inst.reward = reward;
  out.text = absl::StrCat("Current parsed answer=", PythonStrRepr(answer),
                          " reward=", PythonFloatRepr(reward));
  return out;
}

double Gsm8kTool::CalcReward(const std::string& instance_id) {
  absl::MutexLock lock(&mu_);
  auto it = instances_.find(instance_id);
  if (it == instances_.end()) return 0.0;
  return reward::Gsm8kComputeScore(it->second.response, it->second.ground_truth,
                                   reward::Gsm8kMethod::kFlexible, 0.0, 1.0);
}

void Gsm8kTool::Release(const std::string& instance_id) {
  absl::MutexLock lock(&mu_);
  instances_.erase(instance_id);
}

absl::StatusOr<std::string> Gsm8kInteraction::Start(const Json& kwargs) {
  absl::MutexLock lock(&mu_);
  const std::string id = absl::StrCat("gsm8k-", next_id_++);
  ground_truth_[id] = kwargs.is_object() && kwargs.contains("ground_truth")
                          ? JsonText(kwargs["ground_truth"])
                          : std::string();
  return id;
}

absl::StatusOr<InteractionTurn> Gsm8kInteraction::Respond(
    const std::string& instance_id, const Json& messages) {
  std::string content;
  for (auto it = messages.rbegin(); it != messages.rend(); ++it) {
    if (it->is_object() && it->value("role", "") == "assistant") {
      content = JsonText((*it)["content"]);
      break;
    }
  }
  std::string truth;
  {
    absl::MutexLock lock(&mu_);
    auto it = ground_truth_.find(instance_id);
    if (it == ground_truth_.end()) {
      return absl::NotFoundError(
          absl::StrCat("gsm8k interaction: no instance ", instance_id));
    }
    truth = it->second;
  }
  InteractionTurn turn;
  const double reward = reward::Gsm8kComputeScore(
      content, truth, reward::Gsm8kMethod::kStrict, 0.0, 1.0);
  turn.reward = reward;
  turn.should_terminate = reward == 1.0;
  turn.response = turn.should_terminate
                      ? "Your response is correct!"
                      : "Your response is incorrect! You need to reflect on "
                        "your answer and try again.";
  return turn;
}

void Gsm8kInteraction::Finalize(const std::string& instance_id) {
  absl::MutexLock lock(&mu_);
  ground_truth_.erase(instance_id);
}

absl::StatusOr<std::unique_ptr<infer::agent::Tool>> MakeAgentTool(
    const infer::agent::ToolSpec& spec) {
  if (spec.class_name == "verl.tools.gsm8k_tool.Gsm8kTool" ||
      spec.class_name == "gsm8k") {
    return std::unique_ptr<infer::agent::Tool>(new Gsm8kTool(spec));
  }
  absl::StatusOr<std::unique_ptr<infer::agent::Tool>> tool =
      infer::agent::MakeTool(spec);
  if (!tool.ok() && absl::StrContains(tool.status().message(), "built in:")) {
    return absl::InvalidArgumentError(
        absl::StrCat(tool.status().message(),
                     "; on the rl side also verl.tools.gsm8k_tool.Gsm8kTool"));
  }
  return tool;
}

absl::StatusOr<std::unique_ptr<infer::agent::Interaction>> MakeAgentInteraction(
    const infer::agent::InteractionSpec& spec) {
  if (spec.class_name ==
          "verl.interactions.gsm8k_interaction.Gsm8kInteraction" ||
      spec.class_name == "gsm8k") {
    return std::unique_ptr<infer::agent::Interaction>(new Gsm8kInteraction());
  }
  return absl::InvalidArgumentError(
      absl::StrCat("interaction ", spec.name, ": class_name '", spec.class_name,
                   "' is not available (built in: "
                   "verl.interactions.gsm8k_interaction.Gsm8kInteraction)"));
}

absl::StatusOr<std::vector<std::unique_ptr<infer::agent::Tool>>> LoadAgentTools(
    const std::string& tool_config_path) {
  absl::StatusOr<std::vector<infer::agent::ToolSpec>> specs =
      infer::agent::LoadToolConfig(tool_config_path);
  if (!specs.ok()) return specs.status();
  std::vector<std::unique_ptr<infer::agent::Tool>> tools;
  for (const infer::agent::ToolSpec& spec : *specs) {
    absl::StatusOr<std::unique_ptr<infer::agent::Tool>> tool =
        MakeAgentTool(spec);
    if (!tool.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(tool_config_path, ": ", tool.status().message()));
    }
    tools.push_back(*std::move(tool));
  }
  return tools;
}

absl::StatusOr<
    std::map<std::string, std::unique_ptr<infer::agent::Interaction>>>
LoadAgentInteractions(const std::string& interaction_config_path) {
  absl::StatusOr<std::vector<infer::agent::InteractionSpec>> specs =
      infer::agent::LoadInteractionConfig(interaction_config_path);
  if (!specs.ok()) return specs.status();
  std::map<std::string, std::unique_ptr<infer::agent::Interaction>> out;
  for (const infer::agent::InteractionSpec& spec : *specs) {
    absl::StatusOr<std::unique_ptr<infer::agent::Interaction>> i =
        MakeAgentInteraction(spec);
    if (!i.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(interaction_config_path, ": ", i.status().message()));
    }
    out[spec.name] = *std::move(i);
  }
  return out;
}

}  // namespace verl::rl
