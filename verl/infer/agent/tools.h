// File: verl/infer/agent/tools.h
//
// Tools with verl's lifecycle (verl/tools/base_tool.py): Create an instance
// per trajectory → Execute(parameters) per call (a response for the model, a
// step reward, metrics) → CalcReward → Release. Built in here:
// * CodeInterpreterTool — "code_interpreter": Python in the local sandbox
//   (sandbox.h); verl's SandboxFusionTool class name maps to it (the remote
//   sandbox-fusion service is replaced by the local one; its URL is ignored
//   with a notice).
// * CalculatorTool — class_name "calculator": {"expression": "12*(3+4)"} →
//   the value (integers exactly; + - * / and parentheses), or an error line.
// * CommandTool — class_name "command", config {"command": [argv...],
//   "timeout_s"}: any program speaking one JSON line in, one JSON line out
//   ({"op": "execute", "instance_id", "parameters"} → {"text", "reward",
//   "metrics"}), so tools can be written in any language.
#ifndef VERL_INFER_AGENT_TOOLS_H_
#define VERL_INFER_AGENT_TOOLS_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "verl/infer/agent/sandbox.h"
#include "verl/infer/agent/tool_config.h"

namespace verl::infer::agent {

struct ToolExecution {
  std::string text;  // what goes back to the model
  double reward = 0.0;
  nlohmann::ordered_json metrics = nlohmann::ordered_json::object();
};

// Thread-safe: the agent loop runs calls of different trajectories at once.
class Tool {
 public:
  explicit Tool(ToolSpec spec) : spec_(std::move(spec)) {}
  virtual ~Tool() = default;
  const ToolSpec& spec() const { return spec_; }

  // Returns the instance id.
  virtual absl::StatusOr<std::string> Create(
      const nlohmann::ordered_json& create_kwargs);
  // Bad parameters or a failing program are a response to the model (the
  // trajectory goes on); errors only for a broken tool set-up.
  virtual absl::StatusOr<ToolExecution> Execute(
      const std::string& instance_id,
      const nlohmann::ordered_json& parameters) = 0;
  // Sum of the instance's step rewards.
  virtual double CalcReward(const std::string& instance_id);
  virtual void Release(const std::string& instance_id);

 protected:
  void AddReward(const std::string& instance_id, double reward);

 private:
  ToolSpec spec_;
  absl::Mutex mu_;
  std::map<std::string, double> rewards_ ABSL_GUARDED_BY(mu_);
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
};

class CodeInterpreterTool : public Tool {
 public:
  CodeInterpreterTool(ToolSpec spec, SandboxLimits limits)
      : Tool(std::move(spec)), limits_(limits) {}
  absl::StatusOr<ToolExecution> Execute(
      const std::string& instance_id,
      const nlohmann::ordered_json& parameters) override;

 private:
  SandboxLimits limits_;
};

class CalculatorTool : public Tool {
 public:
  explicit CalculatorTool(ToolSpec spec) : Tool(std::move(spec)) {}
  absl::StatusOr<ToolExecution> Execute(
      const std::string& instance_id,
      const nlohmann::ordered_json& parameters) override;
};

// The value of an arithmetic expression (numbers, + - * /, unary minus,
// parentheses); an error names the position. Exact for integers.
absl::StatusOr<double> EvaluateArithmetic(const std::string& expression);

class CommandTool : public Tool {
 public:
  CommandTool(ToolSpec spec, std::vector<std::string> argv,
              SandboxLimits limits)
      : Tool(std::move(spec)), argv_(std::move(argv)), limits_(limits) {}
  absl::StatusOr<ToolExecution> Execute(
      const std::string& instance_id,
      const nlohmann::ordered_json& parameters) override;

 private:
  std::vector<std::string> argv_;
  SandboxLimits limits_;
};

// The tool for a config entry; unknown class names are an error listing the
// known ones.
absl::StatusOr<std::unique_ptr<Tool>> MakeTool(const ToolSpec& spec);

}  // namespace verl::infer::agent

#endif  // VERL_INFER_AGENT_TOOLS_H_
