// File: verl/rl/workers/rollout.h
//
// The rollout role over the LLMEngine (verl's vLLM/SGLang rollout in hybrid
// engine mode). Takes this rank's prompts (left-padded input_ids,
// attention_mask, position_ids [B, P]) and returns B·n trajectories in
// verl's layout, ordered like gen_batch.repeat(n, interleave=True):
//   prompts [B·n, P], responses [B·n, R] (right-padded with pad_token_id),
//   input_ids = [prompts | responses], attention_mask, position_ids
//   (response positions continue from the prompt), response_mask (up to and
//   including the first EOS), rollout_log_probs [B·n, R] when
//   calculate_log_probs. Prompts with a multi_modal_inputs column (a
//   vision-language policy) send each row's images with its request.
// Sampling seeds derive from (seed, global step, the prompt's global index),
// never from the rank, so results do not depend on the number of processes.
#ifndef VERL_RL_WORKERS_ROLLOUT_H_
#define VERL_RL_WORKERS_ROLLOUT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "verl/core/batch.h"
#include "verl/infer/agent/agent_loop.h"
#include "verl/infer/engine.h"
#include "verl/infer/sampling_params.h"
#include "verl/models/decoder.h"

namespace verl::rl {

struct RolloutOptions {
  infer::SamplingParams
      train_params;                  // n, temperature, top_k, top_p, do_sample
  infer::SamplingParams val_params;  // rollout.val_kwargs
  int64_t response_length = 512;
  int64_t pad_token_id = 0;
  bool calculate_log_probs = false;
  bool free_cache_engine = true;  // Sleep() after generation
  uint64_t seed = 0;
  // Multi-turn rollouts (rollout.multi_turn.enable): every trajectory runs
  // through verl's agent loop over the engine; null: one engine request per
  // prompt. Needs the prompts' raw_prompt column (data.return_raw_chat).
  std::shared_ptr<infer::agent::AgentLoop> agent_loop;
};

struct RolloutStats {
  double generate_s = 0;
  int64_t generated_tokens = 0;
  int64_t preemptions = 0;
  double prefix_cache_hit_rate = 0;
  // Agent-loop rollouts: verl's timing keys agent_loop/{generate_sequences,
  // tool_calls,num_preempted}/{min,max,mean} and tool_calls/<tool>/{count,
  // failures,latency_s} over this call's trajectories.
  std::map<std::string, double> agent_metrics;
};

class Rollout {
 public:
  // `engine_model` is the engine's own copy of the policy (weights arrive via
  // SyncWeights).
  static absl::StatusOr<std::unique_ptr<Rollout>> Create(
      std::shared_ptr<models::CausalLM> engine_model,
      const infer::EngineOptions& engine, RolloutOptions options);

  // `first_global_index` is the global row index of this rank's first prompt;
  // `validate` picks val_kwargs; `step` enters the seed.
  absl::StatusOr<core::Batch> Generate(const core::Batch& prompts,
                                       int64_t first_global_index, int64_t step,
                                       bool validate);

  // Hybrid-engine weight sync: copies the trainer's parameters by HF name,
  // one tensor at a time, into the engine (and drops stale prefix-cache KV).
  absl::Status SyncWeights(const models::CausalLM& trainer_model);

  // Called after every engine step of Generate with the prompts finished so
  // far, the prompts of the call and the tokens decoded so far (progress).
  using ProgressFn = std::function<void(int64_t finished, int64_t total,
                                        int64_t decoded_tokens)>;
  void set_progress(ProgressFn fn) { progress_ = std::move(fn); }

  const RolloutStats& last_stats() const { return stats_; }
  infer::LLMEngine& engine() { return *engine_; }
  const RolloutOptions& options() const { return options_; }

 private:
  // Generate through options_.agent_loop (rollout_agent.cc).
  absl::StatusOr<core::Batch> GenerateWithAgentLoop(const core::Batch& prompts,
                                                    int64_t first_global_index,
                                                    int64_t step,
                                                    bool validate);

  // stats_'s engine figures for a call that started at `t0`, when the
  // engine's stats were `before`, and generated `generated` tokens.
  void RecordEngineStats(std::chrono::steady_clock::time_point t0,
                         const infer::EngineStats& before, int64_t generated);

  Rollout(std::unique_ptr<infer::LLMEngine> engine, RolloutOptions options)
      : engine_(std::move(engine)), options_(std::move(options)) {}

  std::unique_ptr<infer::LLMEngine> engine_;
  RolloutOptions options_;
  RolloutStats stats_;
  ProgressFn progress_;
};

// verl's trajectory columns from prompts [N, P] (left-padded, mask) and
// responses [N, R] (right-padded; attention = real tokens, response_mask =
// trained tokens): prompts, responses, input_ids, attention_mask,
// position_ids (responses continue from the prompt's last position),
// response_mask, and rollout_log_probs when defined.
std::map<std::string, at::Tensor> TrajectoryTensors(
    const at::Tensor& prompt_ids, const at::Tensor& prompt_mask,
    const at::Tensor& responses, const at::Tensor& response_attention,
    const at::Tensor& response_mask, const at::Tensor& rollout_log_probs);

// Seed of the request for global prompt `index` at `step` (splitmix-style).
uint64_t RolloutSeed(uint64_t seed, int64_t step, int64_t index);

}  // namespace verl::rl

#endif  // VERL_RL_WORKERS_ROLLOUT_H_
