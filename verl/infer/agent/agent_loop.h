// File: verl/infer/agent/agent_loop.h
//
// verl's agent loop (verl/experimental/agent_loop): every sample of a batch is
// a trajectory driven by its agent —
// * "single_turn_agent": chat-templated prompt, one generation;
// * "tool_agent": PENDING → GENERATING → (PROCESSING_TOOLS | INTERACTING) →
//   … → TERMINATED, verl's ToolAgentLoop state machine.
// Token in, token out: the model's sampled ids are appended verbatim (never
// re-tokenised), tool and user turns are chat-templated with the system
// prompt prefix removed (verl's initialize_system_prompt) and appended with
// response_mask 0 and log-prob 0. All trajectories share one generator (the
// continuous-batching engine batches turns of different trajectories); tool
// calls and interaction turns run on a thread pool, so a trajectory waiting
// for a tool does not hold back the others.
#ifndef VERL_INFER_AGENT_AGENT_LOOP_H_
#define VERL_INFER_AGENT_AGENT_LOOP_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "verl/infer/agent/interaction.h"
#include "verl/infer/agent/tool_call.h"
#include "verl/infer/agent/tools.h"
#include "verl/infer/engine.h"
#include "verl/infer/sampling_params.h"
#include "verl/models/tokenizer/chat_template.h"
#include "verl/models/tokenizer/tokenizer.h"

namespace verl::infer::agent {

// One generated turn (verl's TokenOutput).
struct TurnOutput {
  std::vector<int64_t> token_ids;
  std::vector<float> logprobs;
  int64_t num_preempted = 0;
  // Set when the turn could not be generated (e.g. a remote server failed);
  // the trajectory then ends with this error.
  absl::Status error;
};

// Token-in/token-out generation with many turns in flight. Submit queues a
// turn (params.n must be 1); Poll advances generation and returns the turns
// that finished, by ticket. Used from one thread.
class TurnGenerator {
 public:
  virtual ~TurnGenerator() = default;
  virtual absl::StatusOr<int64_t> Submit(std::vector<int64_t> context_ids,
                                         const SamplingParams& params) = 0;
  virtual std::vector<std::pair<int64_t, TurnOutput>> Poll() = 0;
};

// The in-process engine as a TurnGenerator: one engine step per Poll.
class EngineTurnGenerator : public TurnGenerator {
 public:
  explicit EngineTurnGenerator(LLMEngine* engine) : engine_(engine) {}
  absl::StatusOr<int64_t> Submit(std::vector<int64_t> context_ids,
                                 const SamplingParams& params) override;
  std::vector<std::pair<int64_t, TurnOutput>> Poll() override;

 private:
  LLMEngine* engine_;
};

// rollout.multi_turn.* and rollout.agent.* as the loop uses them.
struct AgentLoopOptions {
  int64_t response_length = 512;
  int64_t max_assistant_turns = 0;  // 0: no limit (verl's null)
  int64_t max_user_turns = 0;       // 0: no limit
  int64_t max_parallel_calls = 1;
  int64_t max_tool_response_length = 256;
  TruncateSide truncate_side = TruncateSide::kMiddle;
  std::string default_agent_loop = "single_turn_agent";
  // Registered loop names -> built-in loop ("single_turn_agent" or
  // "tool_agent"), from rollout.agent.agent_loop_config_path; the two
  // built-in names are always registered unless the file redefines them.
  std::map<std::string, std::string> agent_loops;
  int num_workers = 8;  // threads for tool calls and interaction turns
  // JSON object text of extra chat-template variables, may be empty.
  std::string apply_chat_template_kwargs;
};

// One trajectory's inputs (a dataset row's raw_prompt and extras).
struct AgentSample {
  std::string agent_name;  // "" → options.default_agent_loop
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  // {tool_name: {"create_kwargs": {...}}} (verl's tools_kwargs).
  nlohmann::ordered_json tools_kwargs = nlohmann::ordered_json::object();
  // extra_info.interaction_kwargs; "name" picks the interaction.
  nlohmann::ordered_json interaction_kwargs = nlohmann::ordered_json::object();
  SamplingParams params;  // n must be 1
};

// Per-tool call statistics of one trajectory.
struct ToolCallStats {
  int64_t calls = 0;
  int64_t failures = 0;  // malformed call, unknown tool, tool error
  double seconds = 0;
};

// verl's AgentLoopOutput. response_ids/mask/logprobs have equal length ≤
// response_length; logprobs are 0 on tool/user tokens.
struct AgentOutput {
  std::vector<int64_t> prompt_ids;
  std::vector<int64_t> response_ids;
  std::vector<int64_t> response_mask;
  std::vector<float> response_logprobs;
  int64_t num_turns = 0;  // user + assistant turns + 1
  std::vector<double> turn_scores;
  std::vector<double> tool_rewards;
  double generate_s = 0;  // agent_loop/generate_sequences
  double tool_calls_s = 0;
  int64_t num_preempted = 0;
  std::map<std::string, ToolCallStats> tool_stats;  // by tool name
  int64_t malformed_calls = 0;  // blocks that were not a valid call
};

class AgentLoop {
 public:
  // `tokenizer` must outlive the loop. Tool names must be unique.
  static absl::StatusOr<std::unique_ptr<AgentLoop>> Create(
      AgentLoopOptions options, const models::Tokenizer* tokenizer,
      std::vector<std::unique_ptr<Tool>> tools,
      std::map<std::string, std::unique_ptr<Interaction>> interactions);
  ~AgentLoop();

  // Runs every sample to the end; one result per sample, in order. An error
  // concerns that sample only (bad agent name, unknown interaction, prompt
  // the chat template rejects, the generator refusing the prompt).
  std::vector<absl::StatusOr<AgentOutput>> Run(
      const std::vector<AgentSample>& samples, TurnGenerator& generator);

  // Token ids of non-model messages (tool answers, a user turn) as the loop
  // appends them: chat-templated with add_generation_prompt, the system
  // prompt prefix removed. Also what a multi-turn warm start trains around.
  absl::StatusOr<std::vector<int64_t>> EnvironmentTurnIds(
      const nlohmann::ordered_json& messages) const;

  // A reference trajectory (messages after the prompt) laid out as a rollout
  // of this loop would be: assistant content tokenised + EOS (mask 1), runs
  // of other messages as EnvironmentTurnIds (mask 0). What a multi-turn
  // supervised warm start trains on.
  struct LaidOut {
    std::vector<int64_t> ids;
    std::vector<int64_t> mask;
  };
  absl::StatusOr<LaidOut> LayOutTrajectory(
      const nlohmann::ordered_json& messages) const;

  // The tools' OpenAI schemas (what the chat template's `tools` receives).
  const nlohmann::ordered_json& tool_schemas() const { return tool_schemas_; }
  // verl's initialize_system_prompt: the template's prefix that the
  // per-turn templating of tool/user messages drops.
  const std::vector<int64_t>& system_prompt_ids() const {
    return system_prompt_ids_;
  }

 private:
  struct Trajectory;
  class Pool;

  AgentLoop(AgentLoopOptions options, const models::Tokenizer* tokenizer,
            std::vector<std::unique_ptr<Tool>> tools,
            std::map<std::string, std::unique_ptr<Interaction>> interactions);
  // Chat template of `messages` with add_generation_prompt, tokenised.
  absl::StatusOr<std::vector<int64_t>> Template(
      const nlohmann::ordered_json& messages, bool with_tools) const;
  absl::Status Start(Trajectory& t);
  // After a generated turn: the next state's work (tool calls, interaction)
  // goes to the pool, or the trajectory ends.
  void AfterGeneration(Trajectory& t, TurnOutput turn);
  // Runs on the pool: the turn's tool calls, then the templated tool
  // messages.
  void ProcessTools(Trajectory& t);
  void Interact(Trajectory& t);
  // Appends templated non-model messages; false if the budget ends the
  // trajectory.
  bool AppendEnvironmentTurn(Trajectory& t,
                             const nlohmann::ordered_json& messages,
                             bool stop_when_over_budget);
  struct ToolAnswer {
    std::string text;  // truncated
    double reward = 0;
    bool failed = true;
    double seconds = 0;
  };
  // verl's _call_tool: create → execute → release; errors become the text.
  ToolAnswer CallTool(const nlohmann::ordered_json& tools_kwargs,
                      const FunctionCall& call);

  AgentLoopOptions options_;
  const models::Tokenizer* tokenizer_;
  models::ChatFormatter formatter_;
  std::map<std::string, std::unique_ptr<Tool>> tools_;
  std::map<std::string, std::unique_ptr<Interaction>> interactions_;
  nlohmann::ordered_json tool_schemas_ = nlohmann::ordered_json::array();
  std::vector<int64_t> system_prompt_ids_;
  std::unique_ptr<Pool> pool_;
};

}  // namespace verl::infer::agent

#endif  // VERL_INFER_AGENT_AGENT_LOOP_H_
