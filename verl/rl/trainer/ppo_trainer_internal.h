// File: verl/rl/trainer/ppo_trainer_internal.h
//
// The PPO trainer's controller class, private to //verl/rl/trainer:
// ppo_trainer (RunPpo in ppo_trainer.h is the API). Its methods live in
// ppo_trainer.cc (set-up, the step loop, checkpoints),
// ppo_trainer_phases.cc (one method per dataflow phase),
// ppo_trainer_rollout.cc (generation and rewards),
// ppo_trainer_validation.cc and sft_warmup.cc.
#ifndef VERL_RL_TRAINER_PPO_TRAINER_INTERNAL_H_
#define VERL_RL_TRAINER_PPO_TRAINER_INTERNAL_H_

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "verl/core/batch.h"
#include "verl/parallel/fsdp.h"
#include "verl/parallel/megatron/parallel_state.h"
#include "verl/parallel/process_group.h"
#include "verl/parallel/ulysses.h"
#include "verl/profiler/progress.h"
#include "verl/profiler/tracking.h"
#include "verl/rl/algos/kl.h"
#include "verl/rl/algos/rollout_correction.h"
#include "verl/rl/data/generation_dump.h"
#include "verl/rl/data/prompt_encoder.h"
#include "verl/rl/data/rl_dataset.h"
#include "verl/rl/rewards/reward_manager.h"
#include "verl/rl/trainer/config/config.pb.h"
#include "verl/rl/trainer/ppo_trainer.h"
#include "verl/rl/trainer/trainer_checkpoint.h"
#include "verl/rl/trainer/trainer_profiling.h"
#include "verl/rl/workers/actor.h"
#include "verl/rl/workers/critic.h"
#include "verl/rl/workers/reward_model.h"
#include "verl/rl/workers/rollout.h"

namespace verl::rl {

// timing_raw[name] += seconds of the scope, plus a timeline span and a
// memory phase of that name (verl's marked_timer; trainer_profiling.h).
using Timer = TrainerPhase;
using Timing = std::map<std::string, double>;

std::vector<std::string> ToStrings(const std::vector<nlohmann::json>& v);
// The ground truth in a row's reward_model column (null when absent).
nlohmann::json GroundTruth(const nlohmann::json& reward_model);

class PpoTrainer {
 public:
  // `config` must be resolved (ResolvePpoTrainerConfig).
  PpoTrainer(PpoTrainerConfig config,
             std::shared_ptr<parallel::Communicator> world)
      : config_(std::move(config)), world_(std::move(world)) {}

  absl::Status Init();
  absl::StatusOr<FitResult> Fit();

 private:
  const ActorConfig& actor_cfg() const {
    return config_.actor_rollout_ref().actor();
  }
  const infer::RolloutConfig& rollout_cfg() const {
    return config_.actor_rollout_ref().rollout();
  }
  int64_t n() const { return rollout_cfg().n(); }
  // Optimizer steps skipped so far for a non-finite gradient norm (actor and
  // critic); the same on every rank (the norm is global).
  int64_t SkippedOptimizerSteps();
  // The error ending a run after trainer.max_consecutive_nonfinite_steps such
  // steps: the norms, the train batch, the key.
  absl::Status NonFiniteStepsError(int64_t step, int64_t in_a_row,
                                   const MetricMap& metrics) const;

  // ---- Set-up (ppo_trainer.cc)
  absl::Status InitData();
  // actor_par_ / ref_par_ / critic_par_ from each role's
  // ulysses_sequence_parallel_size (fsdp_config's when > 1, as verl), or
  // under strategy megatron from its tensor_model_parallel_size (*_mpu_).
  absl::Status MakeRoleGroups();
  // Actor, reference and critic from the (warmed-up) policy, then the
  // rollout engine with its own copy of the weights.
  absl::Status InitRoles();
  // What a vision-language policy cannot do yet, refused with the key.
  absl::Status CheckVisionLanguageRoles();
  absl::Status InitRewards();
  absl::Status InitTracking();
  // Hybrid-engine weight sync of the actor into the rollout engine.
  absl::Status SyncRolloutWeights();
  absl::Status Log(const MetricMap& metrics, int64_t step);

  // ---- One training step: the dataflow (ppo_trainer_phases.cc)
  absl::StatusOr<MetricMap> TrainStep(const std::vector<nlohmann::json>& rows,
                                      int64_t step);
  absl::Status BalanceBatch(core::Batch& batch, MetricMap* metrics);
  // verl's on-policy shortcut for the first actor mini-batch (actor.h's
  // OnPolicyCapture): its row count when this step's old log-probs serve
  // only the update and the actor/entropy metric (ppo_epochs 1, no KL in
  // reward, rollout correction, optimal-token baseline, PF-PPO, FlowRL or
  // pipeline stages, the actor updates this step), else 0. Those rows skip
  // the old-log-prob pass; the update provides their log-probs.
  int64_t OnPolicyRows(const core::Batch& batch, int64_t step) const;
  // The old-log-prob pass over rows [skip_rows, B): old_log_probs (zeros in
  // the skipped rows until UpdateActor fills them), sum_pi_squared, the
  // pass's metrics when skip_rows is 0, else its entropy in *entropys.
  absl::Status ComputeOldLogProbs(core::Batch& batch, int64_t skip_rows,
                                  at::Tensor* entropys, MetricMap* metrics);
  absl::Status ComputeRefLogProbs(core::Batch& batch);
  absl::Status ComputeValues(core::Batch& batch);
  // KL in reward, rollout correction, the advantage estimator and PF-PPO.
  absl::Status ComputeAdvantages(core::Batch& batch, int64_t step,
                                 MetricMap* metrics);
  absl::Status UpdateCritic(const core::Batch& batch, MetricMap* metrics);
  // `on_policy_rows` > 0: the update fills those rows' old_log_probs and
  // logs actor/entropy of the old pass from them and `entropys` (the other
  // rows), as ComputeOldLogProbs would have.
  absl::Status UpdateActor(core::Batch& batch, int64_t on_policy_rows,
                           const at::Tensor& entropys, MetricMap* metrics);
  // Data, timing, throughput and MFU metrics of the step (verl's names).
  absl::Status AddStepMetrics(const core::Batch& batch, Timing& timing,
                              MetricMap* metrics);

  // ---- Generation and rewards (ppo_trainer_rollout.cc)
  absl::StatusOr<core::Batch> GenerateSequences(const core::Batch& prompts,
                                                int64_t step, bool validate);
  absl::StatusOr<std::vector<RewardRequest>> RewardRequests(
      const core::Batch& batch) const;
  // Training reward of trajectories: rm_scores from the reward model (run
  // over the ranks like the critic) when enabled, else the rule reward.
  absl::StatusOr<RewardOutput> ComputeReward(const core::Batch& batch);
  // algorithm.rollout_correction (decoupled mode) on the driver, after the
  // reward: IS weights, rejection-sampled response_mask, rollout_corr/*.
  absl::Status ApplyRolloutCorrection(core::Batch& batch, MetricMap* metrics);
  // gen → (gen_max) → reward for one set of prompt rows.
  absl::StatusOr<core::Batch> GenerateScored(
      const std::vector<nlohmann::json>& rows, int64_t step, Timing* timing);
  // The step's batch; with algorithm.filter_groups, DAPO's dynamic sampling.
  absl::StatusOr<core::Batch> GenerateBatch(
      const std::vector<nlohmann::json>& rows, int64_t step, Timing* timing,
      MetricMap* metrics);

  // ---- Validation and dumps (ppo_trainer_validation.cc)
  // Validation at `step`; dumps to trainer.validation_data_dir when set.
  absl::StatusOr<MetricMap> Validate(int64_t step);
  // Decoded prompts/responses, ground truths and scores of `gen` for
  // trainer.rollout_data_dir / validation_data_dir.
  absl::StatusOr<GenerationRecords> Records(
      const core::Batch& gen, const at::Tensor& seq_scores,
      const std::vector<std::string>& extra_keys) const;

  // ---- Supervised warm start (sft_warmup.cc)
  absl::Status SftWarmup(models::CausalLM& model,
                         const MicroBatchOptions& micro);

  // ---- Checkpoints (ppo_trainer.cc; trainer_checkpoint.h): save_freq,
  // resume_mode, retention.
  std::vector<CheckpointRole> CheckpointRoles();
  absl::Status SaveCheckpoint(int64_t step);
  absl::StatusOr<int64_t> ResumeCheckpoint();  // the step resumed from

  PpoTrainerConfig config_;
  std::shared_ptr<parallel::Communicator> world_;
  uint64_t seed_ = 1;
  std::unique_ptr<models::Tokenizer> tokenizer_;
  std::unique_ptr<PromptEncoder> encoder_;
  std::unique_ptr<RLDataset> train_set_, val_set_;
  // actor_rollout_ref.sft_warmup.train_files when set (else the warm start
  // reads train_set_).
  std::unique_ptr<RLDataset> sft_set_;
  std::unique_ptr<DataLoader> train_loader_;
  std::unique_ptr<Actor> actor_, ref_;
  // Ulysses sequence parallelism per role: the dp group the role's batch is
  // sharded over (ranks of one sp group get the same rows) and the sp group.
  parallel::UlyssesGroups actor_par_, ref_par_, critic_par_;
  // strategy: megatron per role: Megatron's dp x tp groups (the role's
  // *_par_.dp is their dp group); null for other strategies.
  std::shared_ptr<parallel::megatron::ParallelState> actor_mpu_, ref_mpu_,
      critic_mpu_;
  // The reference policy's FSDP shards (strategy fsdp on > 1 rank).
  std::shared_ptr<parallel::FsdpModule> ref_sharding_;
  std::unique_ptr<Critic> critic_;
  std::unique_ptr<Rollout> rollout_;
  // Rollout tensor parallelism (rollout.tensor_model_parallel_size): sp is
  // this rank's engine replica (consecutive ranks, verl's layout), dp the
  // ranks holding the same shard in every replica (each replica serves its
  // dp share of the prompts; results are gathered over dp).
  parallel::UlyssesGroups rollout_par_;
  std::unique_ptr<RewardManager> reward_, val_reward_;
  // reward_model.enable: the model-based reward (rm_scores), which replaces
  // the rule reward as verl's reward managers do when rm_scores exist.
  std::unique_ptr<RewardModel> reward_model_;
  // algorithm.rollout_correction; bypass: old_log_prob := rollout log-probs.
  RolloutCorrectionConfig rollout_corr_;
  // actor_rollout_ref.model.lora_rank > 0: adapters on the actor, the
  // reference is the same model with adapters off, the engine gets merged
  // weights.
  bool lora_ = false;
  std::unique_ptr<KlController> kl_ctrl_;
  std::unique_ptr<profiler::Tracker> tracker_;
  std::unique_ptr<TrainerProfiler> profiler_;
  // Rank 0 with the console logger: progress lines for gen and validation.
  std::FILE* progress_out_ = nullptr;
  std::unique_ptr<profiler::ProgressBar> gen_bar_;
  int64_t total_steps_ = 0;
  int64_t uid_counter_ = 0;
  std::vector<std::string> reward_extra_keys_;  // last reward's extra infos
  std::unique_ptr<TrainerCheckpointer> checkpointer_;
};

}  // namespace verl::rl

#endif  // VERL_RL_TRAINER_PPO_TRAINER_INTERNAL_H_
