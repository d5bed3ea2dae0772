#include "verl/rl/trainer/ppo_trainer.h"

#include <ATen/core/grad_mode.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "verl/core/batch.h"
#include "verl/core/status.h"
#include "verl/infer/rollout_options.h"
#include "verl/models/hf_checkpoint.h"
#include "verl/models/lora.h"
#include "verl/models/presets.h"
#include "verl/models/tokenizer.h"
#include "verl/models/tokenizer_builtin.h"
#include "verl/parallel/batch_comm.h"
#include "verl/parallel/ulysses.h"
#include "verl/profiler/progress.h"
#include "verl/profiler/tracking.h"
#include "verl/rl/workers/actor.h"
#include "verl/rl/algos/advantage.h"
#include "verl/rl/algos/agg_loss.h"
#include "verl/rl/trainer/config.h"
#include "verl/rl/workers/critic.h"
#include "verl/rl/algos/dapo.h"
#include "verl/rl/workers/fsdp_train_state.h"
#include "verl/rl/data/generation_dump.h"
#include "verl/rl/algos/kl.h"
#include "verl/rl/workers/lora_policy.h"
#include "verl/rl/trainer/metrics.h"
#include "verl/rl/workers/model_forward.h"
#include "verl/rl/algos/pf_ppo.h"
#include "verl/rl/data/prompt_encoder.h"
#include "verl/rl/rewards/reward_manager.h"
#include "verl/rl/workers/reward_model.h"
#include "verl/rl/data/rl_dataset.h"
#include "verl/rl/workers/rollout.h"
#include "verl/rl/algos/rollout_correction.h"
#include "verl/rl/data/seqlen_balancing.h"
#include "verl/rl/trainer/trainer_checkpoint.h"
#include "verl/rl/trainer/trainer_profiling.h"
#include "verl/rl/algos/value_loss.h"

namespace verl::rl {
namespace {

using core::Batch;
using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// timing_raw[name] += seconds of the scope, plus a timeline span and a
// memory phase of that name (verl's marked_timer; trainer_profiling.h).
using Timer = TrainerPhase;

std::vector<std::string> ToStrings(const std::vector<nlohmann::json>& v) {
  std::vector<std::string> out;
  for (const auto& j : v)
    out.push_back(j.is_string() ? j.get<std::string>() : j.dump());
  return out;
}

// Per-trajectory value of algorithm.filter_groups.metric: seq_reward and
// seq_final_reward sum token_level_scores (KL-in-reward is applied after the
// filter here, so both are the sequence score); any other name is a reward
// extra-info column (acc, score, ...).
absl::StatusOr<std::vector<double>> GroupFilterMetric(
    const Batch& batch, const std::string& metric) {
  std::vector<double> out;
  if (metric == "seq_reward" || metric == "seq_final_reward") {
    at::Tensor sums =
        batch.tensor("token_level_scores").sum(1).to(at::kDouble).contiguous();
    out.assign(sums.data_ptr<double>(), sums.data_ptr<double>() + sums.numel());
    return out;
  }
  if (!batch.HasNonTensor(metric)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "algorithm.filter_groups.metric: \"", metric,
        "\" is neither seq_reward, seq_final_reward nor a reward extra info"));
  }
  for (const auto& v : batch.non_tensor(metric)) {
    if (!v.is_number() && !v.is_boolean()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "algorithm.filter_groups.metric: \"", metric, "\" is not numeric"));
    }
    out.push_back(v.is_boolean() ? (v.get<bool>() ? 1.0 : 0.0)
                                 : v.get<double>());
  }
  return out;
}

// ---- Model and tokenizer ----------------------------------------------------

struct LoadedPolicy {
  models::ModelConfig config;
  std::shared_ptr<models::CausalLM> model;
  std::string hf_dir;  // source folder when loaded from HF
};

absl::StatusOr<models::Tokenizer> LoadTokenizer(
    const models::ModelSettings& m) {
  const std::string dir =
      m.has_tokenizer_path() ? m.tokenizer_path() : m.path();
  if (dir.empty()) return models::MakeBuiltinTokenizer();
  return models::Tokenizer::FromDirectory(dir);
}

void CopyParameters(const torch::nn::Module& from, torch::nn::Module& to,
                    bool skip_heads) {
  at::NoGradGuard no_grad;
  auto src = from.named_parameters();
  for (auto& item : to.named_parameters()) {
    if (skip_heads && (item.key() == "lm_head.weight" ||
                       item.key().rfind("score.", 0) == 0)) {
      continue;
    }
    const at::Tensor* s = src.find(item.key());
    if (s) item.value().copy_(*s);
  }
}

absl::StatusOr<LoadedPolicy> LoadPolicy(const models::ModelSettings& m,
                                        const models::Tokenizer& tokenizer,
                                        uint64_t seed) {
  LoadedPolicy p;
  if (!m.path().empty()) {
    VERL_ASSIGN_OR_RETURN(models::HfCheckpoint hf,
                          models::LoadHfConfigs(m.path()));
    p.config = hf.config;
    if (hf.generation) {
      for (int64_t id : hf.generation->eos_token_ids)
        p.config.eos_token_ids.push_back(id);
    }
    p.model = models::CreateModel(p.config, seed);
    std::map<std::string, at::Tensor> dst;
    for (auto& item : p.model->named_parameters())
      dst[item.key()] = item.value();
    VERL_RETURN_IF_ERROR(models::LoadHfWeightsInto(m.path(), &dst));
    p.hf_dir = m.path();
  } else {
    VERL_ASSIGN_OR_RETURN(
        p.config, models::MakePreset(m.preset(), tokenizer.vocab_size()));
    p.model = models::CreateModel(p.config, seed);
  }
  if (tokenizer.eos_token_id() >= 0)
    p.config.eos_token_ids.push_back(tokenizer.eos_token_id());
  if (tokenizer.pad_token_id() >= 0)
    p.config.pad_token_id = tokenizer.pad_token_id();
  // The model keeps its own copy of the config: rebuild with the stop ids.
  auto with_ids = models::CreateModel(p.config, seed);
  CopyParameters(*p.model, *with_ids, /*skip_heads=*/false);
  p.model = with_ids;
  return p;
}

std::shared_ptr<models::CausalLM> CloneModel(const models::CausalLM& src,
                                             bool value_head, uint64_t seed) {
  models::ModelConfig config = src.config();
  config.is_value_model = value_head;
  auto model = models::CreateModel(config, seed);
  CopyParameters(src, *model, /*skip_heads=*/value_head);
  return model;
}

// The role's trainable state: FSDP (sharded parameters, gradients and AdamW
// state) for strategy fsdp/fsdp2 on more than one rank, else replicated.
// FSDP gathers layer by layer during compute (dynamic batch sizes give
// every dp rank the same micro-batch count: MicroBatchOptions::
// same_count_group). Parameters are sharded over every rank (dp x sp).
absl::StatusOr<std::unique_ptr<TrainState>> MakeTrainState(
    models::CausalLM& model, Strategy::Value strategy,
    const parallel::FsdpConfig& fsdp, const OptimizerOptions& options,
    std::shared_ptr<parallel::Communicator> world) {
  if (world->size() > 1 &&
      (strategy == Strategy::fsdp || strategy == Strategy::fsdp2)) {
    VERL_ASSIGN_OR_RETURN(auto state,
                          FsdpTrainState::ForModule(model, fsdp, options, world,
                                                    /*per_layer=*/true));
    return std::unique_ptr<TrainState>(std::move(state));
  }
  return std::unique_ptr<TrainState>(std::make_unique<ReplicatedTrainState>(
      NamedParameters(model), options, world));
}

// ---- Sharded worker-group calls ---------------------------------------------

// Runs `fn` on this rank's chunk of `batch` and gathers the results (verl's
// DP dispatch: pad to a multiple of the group size, chunk, compute, gather,
// unpad).
absl::StatusOr<Batch> ShardedCall(
    parallel::Communicator& comm, const Batch& batch,
    const std::function<absl::StatusOr<Batch>(const Batch&)>& fn) {
  if (comm.size() == 1) return fn(batch);
  VERL_ASSIGN_OR_RETURN(auto padded, batch.PadToDivisor(comm.size()));
  VERL_ASSIGN_OR_RETURN(Batch local, parallel::LocalChunk(comm, padded.first));
  VERL_ASSIGN_OR_RETURN(Batch out, fn(local));
  VERL_ASSIGN_OR_RETURN(Batch gathered, parallel::GatherBatch(comm, out));
  return gathered.Unpad(padded.second);
}

// This rank's rows for an update: the global batch is cut into mini-batches
// first, then each mini-batch is split over ranks, so mini-batch i holds the
// same trajectories for any number of ranks.
absl::StatusOr<Batch> UpdateShard(const parallel::Communicator& comm,
                                  const Batch& batch, int64_t global_mini) {
  const int64_t dp = comm.size();
  if (global_mini % dp != 0 || batch.size() % global_mini != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mini-batch of ", global_mini, " trajectories does not split over ", dp,
        " ranks / a batch of ", batch.size()));
  }
  std::vector<Batch> parts;
  for (int64_t start = 0; start < batch.size(); start += global_mini) {
    VERL_ASSIGN_OR_RETURN(Batch mini, batch.Slice(start, start + global_mini));
    VERL_ASSIGN_OR_RETURN(auto chunks, mini.Chunk(dp));
    parts.push_back(chunks[comm.rank()]);
  }
  return Batch::Concat(parts);
}

// ---- The trainer ------------------------------------------------------------

class PpoTrainer {
 public:
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

  absl::Status SftWarmup(models::CausalLM& model,
                         const MicroBatchOptions& micro);
  // Hybrid-engine weight sync of the actor into the rollout engine.
  absl::Status SyncRolloutWeights();
  absl::StatusOr<Batch> GenerateSequences(const Batch& prompts, int64_t step,
                                          bool validate);
  absl::StatusOr<std::vector<RewardRequest>> RewardRequests(
      const Batch& batch) const;
  // Training reward of trajectories: rm_scores from the reward model (run
  // over the ranks like the critic) when enabled, else the rule reward.
  absl::StatusOr<RewardOutput> ComputeReward(const Batch& batch);
  // algorithm.rollout_correction (decoupled mode) on the driver, after the
  // reward: IS weights, rejection-sampled response_mask, rollout_corr/*.
  absl::Status ApplyRolloutCorrection(Batch& batch, MetricMap* metrics);
  // Reads algorithm.rollout_correction into rollout_corr_; bypass mode
  // switches the actor's loss to bypass_mode (verl's apply_bypass_mode).
  absl::Status ConfigureRolloutCorrection(ActorOptions* ao);
  // actor_par_ / ref_par_ / critic_par_ from each role's
  // ulysses_sequence_parallel_size (fsdp_config's when > 1, as verl).
  absl::Status MakeRoleGroups();
  // Validation at `step`; dumps to trainer.validation_data_dir when set.
  absl::StatusOr<MetricMap> Validate(int64_t step);
  // Decoded prompts/responses, ground truths and scores of `gen` for
  // trainer.rollout_data_dir / validation_data_dir.
  GenerationRecords Records(const Batch& gen, const at::Tensor& seq_scores,
                            const std::vector<std::string>& extra_keys) const;
  absl::StatusOr<Batch> GenerateScored(const std::vector<nlohmann::json>& rows,
                                       int64_t step,
                                       std::map<std::string, double>* timing);
  absl::StatusOr<Batch> GenerateBatch(const std::vector<nlohmann::json>& rows,
                                      int64_t step,
                                      std::map<std::string, double>* timing,
                                      MetricMap* metrics);
  absl::StatusOr<MetricMap> TrainStep(const std::vector<nlohmann::json>& rows,
                                      int64_t step);
  absl::Status Log(const MetricMap& metrics, int64_t step);

  PpoTrainerConfig config_;
  std::shared_ptr<parallel::Communicator> world_;
  uint64_t seed_ = 1;
  std::unique_ptr<models::Tokenizer> tokenizer_;
  std::unique_ptr<PromptEncoder> encoder_;
  std::unique_ptr<RLDataset> train_set_, val_set_;
  std::unique_ptr<DataLoader> train_loader_;
  std::unique_ptr<Actor> actor_, ref_;
  // Ulysses sequence parallelism per role: the dp group the role's batch is
  // sharded over (ranks of one sp group get the same rows) and the sp group.
  parallel::UlyssesGroups actor_par_, ref_par_, critic_par_;
  // The reference policy's FSDP shards (strategy fsdp on > 1 rank).
  std::shared_ptr<parallel::FsdpModule> ref_sharding_;
  std::unique_ptr<Critic> critic_;
  std::unique_ptr<Rollout> rollout_;
  std::unique_ptr<RewardManager> reward_, val_reward_;
  // reward_model.enable: the model-based reward (rm_scores), which replaces
  // the rule reward as verl's reward managers do when rm_scores exist.
  std::unique_ptr<RewardModel> reward_model_;
  // algorithm.rollout_correction; bypass: old_log_prob := rollout log-probs.
  RolloutCorrectionConfig rollout_corr_;
  bool bypass_mode_ = false;
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

  // Checkpoints (trainer_checkpoint.h): save_freq, resume_mode, retention.
  std::vector<CheckpointRole> CheckpointRoles();
  absl::Status SaveCheckpoint(int64_t step);
  absl::StatusOr<int64_t> ResumeCheckpoint();  // the step resumed from
  std::unique_ptr<TrainerCheckpointer> checkpointer_;
};

absl::Status PpoTrainer::Init() {
  const DataConfig& data = config_.data();
  const auto& model_settings = config_.actor_rollout_ref().model();
  seed_ = data.has_seed() ? data.seed() : 1;
  at::manual_seed(seed_);
  // First, so memory recording (torch_memory) sees the models being built.
  profiler_ = std::make_unique<TrainerProfiler>(config_, world_->global_rank(),
                                                world_->size());

  VERL_ASSIGN_OR_RETURN(models::Tokenizer tok, LoadTokenizer(model_settings));
  tokenizer_ = std::make_unique<models::Tokenizer>(std::move(tok));
  PromptEncoderOptions enc;
  enc.prompt_key = data.prompt_key();
  enc.max_prompt_length = data.max_prompt_length();
  enc.truncation = TruncationMode::Value_Name(data.truncation());
  encoder_ = std::make_unique<PromptEncoder>(tokenizer_.get(), enc);

  // Datasets.
  auto load =
      [&](const google::protobuf::RepeatedPtrField<std::string>& files,
          int64_t max_samples) -> absl::StatusOr<std::unique_ptr<RLDataset>> {
    RLDatasetOptions o;
    o.files.assign(files.begin(), files.end());
    o.prompt_key = data.prompt_key();
    o.max_samples = max_samples;
    o.shuffle = data.shuffle();
    o.seed = seed_;
    o.filter_overlong_prompts = data.filter_overlong_prompts();
    o.max_prompt_length = data.max_prompt_length();
    o.prompt_length = [this](const nlohmann::json& row) -> int64_t {
      auto ids = encoder_->EncodeRow(row);
      return ids.ok() ? static_cast<int64_t>(ids->size()) : INT64_MAX;
    };
    VERL_ASSIGN_OR_RETURN(RLDataset ds, RLDataset::Load(o));
    return std::make_unique<RLDataset>(std::move(ds));
  };
  VERL_ASSIGN_OR_RETURN(train_set_,
                        load(data.train_files(), data.train_max_samples()));
  if (data.val_files_size() > 0) {
    VERL_ASSIGN_OR_RETURN(val_set_,
                          load(data.val_files(), data.val_max_samples()));
  }
  const int64_t gen_batch = data.has_gen_batch_size() ? data.gen_batch_size()
                                                      : data.train_batch_size();
  train_loader_ = std::make_unique<DataLoader>(train_set_.get(), gen_batch,
                                               data.shuffle(), seed_,
                                               /*drop_last=*/true);
  if (train_loader_->num_batches() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.train_batch_size=", gen_batch, " exceeds the ",
                     train_set_->size(), " training rows"));
  }
  total_steps_ =
      train_loader_->num_batches() * config_.trainer().total_epochs();
  if (config_.trainer().has_total_training_steps()) {
    total_steps_ = config_.trainer().total_training_steps();
  }

  // Roles. Allocations count as parameters unless a scope says otherwise
  // (the update loop's activations/gradients/optimizer state, the KV cache).
  profiler::MemoryCategoryScope parameters(
      profiler::MemoryCategory::kParameters);
  VERL_ASSIGN_OR_RETURN(LoadedPolicy policy,
                        LoadPolicy(model_settings, *tokenizer_, seed_));
  policy.model->enable_gradient_checkpointing(
      model_settings.enable_gradient_checkpointing());
  VERL_RETURN_IF_ERROR(MakeRoleGroups());
  const int64_t dp = actor_par_.dp->size();
  const int64_t global_mini = actor_cfg().ppo_mini_batch_size() * n();
  ActorOptions ao;
  ao.temperature = rollout_cfg().temperature();
  ao.update_micro.micro_batch_size =
      actor_cfg().has_ppo_micro_batch_size_per_gpu()
          ? actor_cfg().ppo_micro_batch_size_per_gpu()
          : global_mini / dp;
  ao.update_micro.use_dynamic_bsz = actor_cfg().use_dynamic_bsz();
  // verl: the token budget covers the whole sp group.
  ao.update_micro.max_token_len =
      actor_cfg().ppo_max_token_len_per_gpu() * actor_par_.sp->size();
  ao.sp_group = actor_par_.sp;
  ao.log_prob_micro = ao.update_micro;
  ao.log_prob_micro.same_count_group = actor_par_.dp.get();
  if (rollout_cfg().has_log_prob_micro_batch_size_per_gpu()) {
    ao.log_prob_micro.micro_batch_size =
        rollout_cfg().log_prob_micro_batch_size_per_gpu();
  }
  ao.mini_batch_size = global_mini / dp;
  ao.ppo_epochs = actor_cfg().ppo_epochs();
  ao.loss_mode = actor_cfg().policy_loss().loss_mode();
  PolicyLossConfig& pl = ao.policy_loss;
  pl.clip_ratio = actor_cfg().clip_ratio();
  if (actor_cfg().has_clip_ratio_low())
    pl.clip_ratio_low = actor_cfg().clip_ratio_low();
  if (actor_cfg().has_clip_ratio_high())
    pl.clip_ratio_high = actor_cfg().clip_ratio_high();
  pl.clip_ratio_c = actor_cfg().clip_ratio_c();
  pl.loss_agg_mode = actor_cfg().loss_agg_mode();
  if (actor_cfg().has_loss_scale_factor())
    pl.agg.loss_scale_factor = actor_cfg().loss_scale_factor();
  pl.clip_cov_ratio = actor_cfg().policy_loss().clip_cov_ratio();
  pl.clip_cov_lb = actor_cfg().policy_loss().clip_cov_lb();
  pl.clip_cov_ub = actor_cfg().policy_loss().clip_cov_ub();
  pl.clip_cov_seed = seed_;
  pl.kl_cov_ratio = actor_cfg().policy_loss().kl_cov_ratio();
  pl.ppo_kl_coef = actor_cfg().policy_loss().ppo_kl_coef();
  pl.tau_pos = actor_cfg().policy_loss().tau_pos();
  pl.tau_neg = actor_cfg().policy_loss().tau_neg();
  ao.entropy_coeff = actor_cfg().entropy_coeff();
  ao.calculate_entropy = actor_cfg().calculate_entropy();
  ao.use_kl_loss = actor_cfg().use_kl_loss();
  ao.kl_loss_coef = actor_cfg().kl_loss_coef();
  ao.kl_loss_type = actor_cfg().kl_loss_type();
  VERL_RETURN_IF_ERROR(ConfigureRolloutCorrection(&ao));

  // The warm start is part of initialisation: the reference policy, critic
  // backbone and rollout engine all start from the warmed-up weights.
  VERL_RETURN_IF_ERROR(SftWarmup(*policy.model, ao.update_micro));
  // LoRA goes on the warmed-up weights: they are the base (and reference).
  lora_ = model_settings.lora_rank() > 0;
  if (lora_) {
    if (model_settings.has_lora_adapter_path()) {
      VERL_RETURN_IF_ERROR(
          models::LoadLoraAdapter(*policy.model,
                                  model_settings.lora_adapter_path())
              .status());
    } else {
      VERL_RETURN_IF_ERROR(models::ApplyLora(
          *policy.model, LoraConfigFromSettings(model_settings), seed_));
    }
  }
  if (NeedReferencePolicy(config_)) {
    ActorOptions ref_options = ao;
    ref_options.sp_group = ref_par_.sp;
    ref_options.log_prob_micro.same_count_group = ref_par_.dp.get();
    if (lora_) {
      // verl's ref_in_actor: the actor's own model with adapters disabled.
      ref_options.disable_lora = true;
      ref_ = std::make_unique<Actor>(policy.model, nullptr, ref_options,
                                     ref_par_.dp);
    } else {
      auto ref_model = CloneModel(*policy.model, false, seed_);
      // verl wraps the reference with FSDP: sharded, forward-only.
      const RefConfig& rc = config_.actor_rollout_ref().ref();
      const Strategy::Value rs =
          rc.has_strategy() ? rc.strategy() : actor_cfg().strategy();
      if (world_->size() > 1 &&
          (rs == Strategy::fsdp || rs == Strategy::fsdp2)) {
        VERL_ASSIGN_OR_RETURN(
            ref_sharding_,
            ShardForInference(*ref_model,
                              rc.has_fsdp_config() ? rc.fsdp_config()
                                                   : actor_cfg().fsdp_config(),
                              world_));
      }
      ref_ =
          std::make_unique<Actor>(ref_model, nullptr, ref_options, ref_par_.dp);
    }
  }
  if (NeedCritic(config_)) {
    const CriticConfig& c = config_.critic();
    VERL_ASSIGN_OR_RETURN(
        OptimizerOptions copt,
        OptimizerOptionsFromConfig(c.optim(), c.grad_clip(), total_steps_));
    auto critic_model =
        CloneModel(*policy.model, /*value_head=*/true, seed_ + 1);
    critic_model->enable_gradient_checkpointing(
        c.model().enable_gradient_checkpointing());
    CriticOptions co;
    const int64_t critic_mini =
        (c.has_ppo_mini_batch_size() ? c.ppo_mini_batch_size()
                                     : actor_cfg().ppo_mini_batch_size()) *
        n();
    co.mini_batch_size = critic_mini / critic_par_.dp->size();
    co.update_micro.micro_batch_size = c.has_ppo_micro_batch_size_per_gpu()
                                           ? c.ppo_micro_batch_size_per_gpu()
                                           : ao.update_micro.micro_batch_size;
    co.update_micro.use_dynamic_bsz = c.has_use_dynamic_bsz()
                                          ? c.use_dynamic_bsz()
                                          : actor_cfg().use_dynamic_bsz();
    co.update_micro.max_token_len =
        c.ppo_max_token_len_per_gpu() * critic_par_.sp->size();
    co.sp_group = critic_par_.sp;
    co.forward_micro = co.update_micro;
    co.forward_micro.same_count_group = critic_par_.dp.get();
    if (c.has_forward_micro_batch_size_per_gpu()) {
      co.forward_micro.micro_batch_size = c.forward_micro_batch_size_per_gpu();
    }
    co.ppo_epochs =
        c.has_ppo_epochs() ? c.ppo_epochs() : actor_cfg().ppo_epochs();
    co.cliprange_value = c.cliprange_value();
    co.loss_agg_mode =
        c.has_loss_agg_mode() ? c.loss_agg_mode() : actor_cfg().loss_agg_mode();
    VERL_ASSIGN_OR_RETURN(
        auto critic_state,
        MakeTrainState(*critic_model, c.strategy(), c.model().fsdp_config(),
                       copt, world_));
    critic_ = std::make_unique<Critic>(critic_model, std::move(critic_state),
                                       co, critic_par_.dp);
  }
  VERL_ASSIGN_OR_RETURN(
      OptimizerOptions aopt,
      OptimizerOptionsFromConfig(actor_cfg().optim(), actor_cfg().grad_clip(),
                                 total_steps_));
  // The engine's copy first: under FSDP the policy's own tensors are sharded.
  auto engine_model = CloneModel(*policy.model, false, seed_);
  std::unique_ptr<TrainState> actor_state;
  if (lora_) {
    // Only the adapters train; they are small, so every rank keeps them all
    // (the frozen base is replicated too).
    actor_state = std::make_unique<ReplicatedTrainState>(
        TrainableParameters(*policy.model), aopt, world_);
  } else {
    VERL_ASSIGN_OR_RETURN(
        actor_state, MakeTrainState(*policy.model, actor_cfg().strategy(),
                                    actor_cfg().fsdp_config(), aopt, world_));
  }
  actor_ = std::make_unique<Actor>(policy.model, std::move(actor_state), ao,
                                   actor_par_.dp);

  // Rollout engine with its own copy of the weights (synced after updates).
  const infer::RolloutConfig& r = rollout_cfg();
  // verl's rollout keys (engine options, sampling, dtype, repetition penalty)
  // through the engine's own mapping; the context defaults to prompt +
  // response length.
  RolloutOptions ro;
  VERL_ASSIGN_OR_RETURN(ro.train_params,
                        infer::SamplingParamsFromRolloutConfig(r, false));
  VERL_ASSIGN_OR_RETURN(ro.val_params,
                        infer::SamplingParamsFromRolloutConfig(r, true));
  ro.response_length = data.max_response_length();
  ro.pad_token_id = std::max(tokenizer_->pad_token_id(), 0);
  ro.calculate_log_probs = r.calculate_log_probs();
  ro.free_cache_engine = r.free_cache_engine();
  ro.seed = seed_;
  VERL_ASSIGN_OR_RETURN(infer::EngineOptions eo,
                        infer::EngineOptionsFromRolloutConfig(r));
  if (!r.has_max_model_len()) {
    eo.max_model_len = data.max_prompt_length() + data.max_response_length();
  }
  // Unset rollout.dtype keeps the training model's dtype (fp32 on CPU, the
  // fast path there) rather than verl's bfloat16 default; see docs/config.md.
  if (!r.has_dtype()) eo.dtype.clear();
  if (!r.engine_kwargs().vllm().count("seed")) eo.seed = seed_;
  VERL_ASSIGN_OR_RETURN(rollout_,
                        Rollout::Create(std::move(engine_model), eo, ro));

  // Rewards.
  RewardManagerConfig rm;
  rm.name = config_.reward_model().reward_manager();
  const RewardKwargs& rk = config_.reward_model().reward_kwargs();
  rm.overlong_buffer_enable = rk.overlong_buffer_cfg().enable();
  rm.overlong_buffer_len = rk.overlong_buffer_cfg().len();
  rm.overlong_penalty_factor = rk.overlong_buffer_cfg().penalty_factor();
  rm.overlong_log = rk.overlong_buffer_cfg().log();
  rm.max_resp_len =
      rk.has_max_resp_len() ? rk.max_resp_len() : data.max_response_length();
  rm.eos_text = tokenizer_->eos_token();
  BatchComputeScoreFn batch_fn;
  if (config_.custom_reward_function().has_path()) {
    // Not Python: `path` is a command reading/writing JSON lines (see docs).
    batch_fn =
        ExternalCommandScoreFn(config_.custom_reward_function().path(), 300.0);
    if (rm.name == "naive") rm.name = "batch";
  }
  VERL_ASSIGN_OR_RETURN(reward_,
                        RewardManager::Create(rm, DefaultScoreFn(), batch_fn));
  RewardManagerConfig val_rm = rm;
  val_rm.overlong_buffer_enable = false;
  VERL_ASSIGN_OR_RETURN(
      val_reward_, RewardManager::Create(val_rm, DefaultScoreFn(), batch_fn));
  const RewardModelConfig& rmc = config_.reward_model();
  if (rmc.enable()) {
    MicroBatchOptions micro;
    micro.micro_batch_size =
        rmc.has_micro_batch_size_per_gpu() ? rmc.micro_batch_size_per_gpu()
        : rmc.has_micro_batch_size()
            ? std::max<int64_t>(rmc.micro_batch_size() / dp, 1)
            : std::max<int64_t>(data.train_batch_size() * n() / dp, 1);
    micro.use_dynamic_bsz = rmc.use_dynamic_bsz();
    micro.max_token_len = rmc.forward_max_token_len_per_gpu();
    VERL_ASSIGN_OR_RETURN(
        reward_model_,
        RewardModel::Load(rmc.model().path(), tokenizer_->vocab_size(), micro));
  }
  const AlgorithmConfig& alg = config_.algorithm();
  VERL_ASSIGN_OR_RETURN(
      kl_ctrl_,
      MakeKlController(KlControllerType::Value_Name(alg.kl_ctrl().type()),
                       alg.kl_ctrl().kl_coef(), alg.kl_ctrl().target_kl(),
                       alg.kl_ctrl().horizon()));
  VERL_RETURN_IF_ERROR(GetAdvantageEstimator(alg.adv_estimator()).status());
  if (alg.use_pf_ppo()) {
    VERL_RETURN_IF_ERROR(PfPpoWeights(at::zeros({1}),
                                      alg.pf_ppo().reweight_method(),
                                      alg.pf_ppo().weight_pow())
                             .status());
    if (alg.adv_estimator() != "gae") {
      LOG(WARNING) << "algorithm.use_pf_ppo has no effect with adv_estimator="
                   << alg.adv_estimator() << " (verl applies it to gae only)";
    }
  }

  if (world_->rank() == 0) {
    profiler::TrackingOptions t;
    t.project_name = config_.trainer().project_name();
    t.experiment_name = config_.trainer().experiment_name();
    t.backends.assign(config_.trainer().logger().begin(),
                      config_.trainer().logger().end());
    t.total_steps = total_steps_;
    VERL_ASSIGN_OR_RETURN(tracker_, profiler::Tracker::Create(t));
    for (const auto& name : t.backends) {
      if (name == "console") progress_out_ = stderr;
    }
    rollout_->set_progress([this](int64_t finished, int64_t, int64_t tokens) {
      if (gen_bar_) gen_bar_->Update(finished, tokens);
    });
  }
  return absl::OkStatus();
}

// Under FSDP the actor's parameters are sharded: stream them unit by unit
// (at most one extra unit gathered at a time).
absl::Status PpoTrainer::SyncRolloutWeights() {
  if (lora_) {
    // The engine holds the base architecture: send W + (alpha/r)·B·A.
    return ForEachMergedLoraWeight(
        actor_->model(), [&](const std::string& name, const at::Tensor& w) {
          return rollout_->engine().UpdateWeights({{name, w}});
        });
  }
  if (auto* fsdp = dynamic_cast<FsdpTrainState*>(actor_->train_state())) {
    return fsdp->fsdp().ForEachGatheredUnit(
        [&](const std::string&, const parallel::NamedTensors& params) {
          return rollout_->engine().UpdateWeights(params);
        });
  }
  return rollout_->SyncWeights(actor_->model());
}

absl::Status PpoTrainer::MakeRoleGroups() {
  std::map<int64_t, parallel::UlyssesGroups> by_size;  // one mesh per size
  auto groups = [&](int64_t sp, const parallel::FsdpConfig& fsdp)
      -> absl::StatusOr<parallel::UlyssesGroups> {
    if (fsdp.ulysses_sequence_parallel_size() > 1)
      sp = fsdp.ulysses_sequence_parallel_size();
    sp = std::max<int64_t>(sp, 1);
    auto it = by_size.find(sp);
    if (it != by_size.end()) return it->second;
    VERL_ASSIGN_OR_RETURN(parallel::UlyssesGroups g,
                          parallel::MakeUlyssesGroups(world_, sp));
    by_size[sp] = g;
    return g;
  };
  const ActorConfig& a = actor_cfg();
  VERL_ASSIGN_OR_RETURN(
      actor_par_, groups(a.ulysses_sequence_parallel_size(), a.fsdp_config()));
  const RefConfig& r = config_.actor_rollout_ref().ref();
  VERL_ASSIGN_OR_RETURN(ref_par_,
                        groups(r.ulysses_sequence_parallel_size() > 0
                                   ? r.ulysses_sequence_parallel_size()
                                   : a.ulysses_sequence_parallel_size(),
                               r.fsdp_config()));
  const CriticConfig& c = config_.critic();
  VERL_ASSIGN_OR_RETURN(critic_par_, groups(c.ulysses_sequence_parallel_size(),
                                            c.model().fsdp_config()));
  return absl::OkStatus();
}

absl::Status PpoTrainer::ConfigureRolloutCorrection(ActorOptions* ao) {
  const RolloutCorrectionSettings& rc =
      config_.algorithm().rollout_correction();
  auto value = [](const std::string& v) {
    return v == "null" || v == "None" ? std::string() : v;
  };
  rollout_corr_.rollout_is = value(rc.rollout_is());
  rollout_corr_.rollout_is_threshold = rc.rollout_is_threshold();
  rollout_corr_.rollout_is_batch_normalize = rc.rollout_is_batch_normalize();
  rollout_corr_.rollout_rs = value(rc.rollout_rs());
  rollout_corr_.rollout_rs_threshold = value(rc.rollout_rs_threshold());
  rollout_corr_.bypass_mode = rc.bypass_mode();
  rollout_corr_.loss_type = rc.loss_type();
  bypass_mode_ = rc.bypass_mode();
  const bool wanted = !rollout_corr_.rollout_is.empty() ||
                      !rollout_corr_.rollout_rs.empty() || bypass_mode_;
  if (wanted && !rollout_cfg().calculate_log_probs()) {
    return absl::InvalidArgumentError(
        "algorithm.rollout_correction needs the rollout's log-probs: set "
        "actor_rollout_ref.rollout.calculate_log_probs=true");
  }
  // Config errors (modes, thresholds) now rather than after the first
  // generation.
  if (wanted) {
    at::Tensor probe = at::zeros({1, 1});
    VERL_RETURN_IF_ERROR(
        ComputeRolloutCorrection(probe, probe, at::ones({1, 1}), rollout_corr_)
            .status());
  }
  if (bypass_mode_) {
    if (rollout_corr_.loss_type != "ppo_clip" &&
        rollout_corr_.loss_type != "reinforce") {
      return absl::InvalidArgumentError(absl::StrCat(
          "algorithm.rollout_correction.loss_type: unknown value '",
          rollout_corr_.loss_type, "' (expected ppo_clip or reinforce)"));
    }
    ao->loss_mode = "bypass_mode";
    ao->policy_loss.rollout_correction = rollout_corr_;
  }
  return absl::OkStatus();
}

absl::StatusOr<RewardOutput> PpoTrainer::ComputeReward(const Batch& batch) {
  if (!reward_model_) {
    VERL_ASSIGN_OR_RETURN(auto requests, RewardRequests(batch));
    return reward_->Score(requests, batch.tensor("responses").size(1));
  }
  VERL_ASSIGN_OR_RETURN(
      Batch rm,
      ShardedCall(*world_, batch,
                  [&](const Batch& local) -> absl::StatusOr<Batch> {
                    VERL_ASSIGN_OR_RETURN(at::Tensor scores,
                                          reward_model_->ComputeRmScore(local));
                    return Batch::FromColumns({{"rm_scores", scores}});
                  }));
  // verl's reward managers return rm_scores as they are when present.
  RewardOutput out;
  out.reward_tensor = rm.tensor("rm_scores");
  return out;
}

absl::Status PpoTrainer::ApplyRolloutCorrection(Batch& batch,
                                                MetricMap* metrics) {
  if (bypass_mode_ || !batch.HasTensor("rollout_log_probs"))
    return absl::OkStatus();
  VERL_ASSIGN_OR_RETURN(
      RolloutCorrectionOutput c,
      ComputeRolloutCorrection(batch.tensor("old_log_probs"),
                               batch.tensor("rollout_log_probs"),
                               batch.tensor("response_mask"), rollout_corr_));
  if (c.rollout_is_weights.defined()) {
    VERL_RETURN_IF_ERROR(
        batch.SetTensor("rollout_is_weights", c.rollout_is_weights));
  }
  VERL_RETURN_IF_ERROR(batch.SetTensor("response_mask", c.response_mask));
  for (const auto& [k, v] : c.metrics) (*metrics)[k] = v;
  return absl::OkStatus();
}

absl::Status PpoTrainer::Log(const MetricMap& metrics, int64_t step) {
  if (!tracker_) return absl::OkStatus();
  return tracker_->Log(metrics, step);
}

// Supervised warm start on the rows' reference answers: maximise the
// log-likelihood of answer + EOS after the templated prompt.
absl::Status PpoTrainer::SftWarmup(models::CausalLM& model,
                                   const MicroBatchOptions& micro) {
  const SftWarmupConfig& w = config_.actor_rollout_ref().sft_warmup();
  if (w.steps() <= 0) return absl::OkStatus();
  const int64_t P = config_.data().max_prompt_length();
  const int64_t R = config_.data().max_response_length();
  OptimizerOptions o;
  o.lr = w.lr();
  o.weight_decay = 0;
  // Replicated, not data-parallel: every rank trains on the whole batch, so
  // the warm-started weights (and the whole run) do not depend on the number
  // of processes; 300 steps amplify the last-bit differences of a dp split.
  const std::shared_ptr<parallel::Communicator> self =
      parallel::SingleProcessCommunicator();
  ReplicatedTrainState state(model.parameters(), o, self);
  DataLoader loader(train_set_.get(), w.batch_size(), /*shuffle=*/true,
                    seed_ + 17, true);
  model.train();
  for (int64_t step = 0; step < w.steps(); ++step) {
    auto rows = loader.Next();
    if (!rows) rows = loader.Next();
    std::vector<std::string> uids(rows->size(), "");
    VERL_ASSIGN_OR_RETURN(Batch prompts, encoder_->Encode(*rows, uids));
    const int64_t B = rows->size();
    at::Tensor responses = torch::full(
        {B, R}, std::max(tokenizer_->pad_token_id(), 0), torch::kLong);
    at::Tensor rmask = torch::zeros({B, R}, torch::kLong);
    for (int64_t b = 0; b < B; ++b) {
      VERL_ASSIGN_OR_RETURN(nlohmann::json answer,
                            GetDotted((*rows)[b], w.response_key()));
      std::vector<int> ids = tokenizer_->Encode(answer.get<std::string>());
      ids.push_back(tokenizer_->eos_token_id());
      const int64_t len = std::min<int64_t>(ids.size(), R);
      for (int64_t k = 0; k < len; ++k) responses[b][k] = ids[k];
      rmask[b].narrow(0, 0, len).fill_(1);
    }
    at::Tensor pmask = prompts.tensor("attention_mask");
    at::Tensor mask = torch::cat({pmask, rmask}, 1);
    at::Tensor pos = (mask.cumsum(1) - 1).clamp_min(0);
    VERL_ASSIGN_OR_RETURN(
        Batch batch,
        Batch::FromColumns(
            {{"input_ids",
              torch::cat({prompts.tensor("input_ids"), responses}, 1)},
             {"attention_mask", mask},
             {"position_ids", pos},
             {"responses", responses},
             {"response_mask", rmask.to(torch::kFloat)}}));
    const Batch& local = batch;
    PpoUpdateOptions u;
    u.mini_batch_size = local.size();
    u.micro = micro;
    auto micro_fn =
        [&](const Batch& mb,
            const AggOptions& agg) -> absl::StatusOr<MicroBatchResult> {
      ResponseForward f = ForwardResponses(
          model, mb.tensor("input_ids"), mb.tensor("attention_mask"),
          mb.tensor("position_ids"), R, 1.0, false);
      VERL_ASSIGN_OR_RETURN(
          at::Tensor loss,
          AggLoss(-f.log_probs, mb.tensor("response_mask"), kTokenMean, agg));
      MicroBatchResult r;
      r.loss = loss;
      r.keep_alive = f.attention;
      r.summed["sft/loss"] = loss.item<double>() / agg.dp_size;
      return r;
    };
    VERL_ASSIGN_OR_RETURN(MetricMap m,
                          RunPpoUpdate(local, u, *self, state, micro_fn));
    if (world_->rank() == 0 && (step % 10 == 0 || step + 1 == w.steps())) {
      LOG(INFO) << "sft warmup step " << step + 1 << "/" << w.steps()
                << " loss " << m["sft/loss"];
    }
  }
  (void)P;
  return absl::OkStatus();
}

absl::StatusOr<Batch> PpoTrainer::GenerateSequences(const Batch& prompts,
                                                    int64_t step,
                                                    bool validate) {
  // Each rank generates its chunk of prompts; seeds use global row indices.
  if (progress_out_ != nullptr && !validate) {
    const int64_t ranks = world_->size();
    const int64_t local = (prompts.size() + ranks - 1) / ranks;
    gen_bar_ = std::make_unique<profiler::ProgressBar>("gen", local, "prompts",
                                                       progress_out_);
  }
  if (world_->size() == 1) {
    auto out = rollout_->Generate(prompts, 0, step, validate);
    gen_bar_.reset();
    return out;
  }
  VERL_ASSIGN_OR_RETURN(auto padded, prompts.PadToDivisor(world_->size()));
  const int64_t per_rank = padded.first.size() / world_->size();
  VERL_ASSIGN_OR_RETURN(Batch local,
                        parallel::LocalChunk(*world_, padded.first));
  VERL_ASSIGN_OR_RETURN(
      Batch out,
      rollout_->Generate(local, per_rank * world_->rank(), step, validate));
  gen_bar_.reset();
  VERL_ASSIGN_OR_RETURN(Batch all, parallel::GatherBatch(*world_, out));
  const int64_t samples = validate ? rollout_->options().val_params.n : n();
  return all.Unpad(padded.second * samples);
}

absl::StatusOr<std::vector<RewardRequest>> PpoTrainer::RewardRequests(
    const Batch& batch) const {
  const at::Tensor& responses = batch.tensor("responses");
  const at::Tensor& mask = batch.tensor("response_mask");
  std::vector<RewardRequest> out;
  for (int64_t i = 0; i < batch.size(); ++i) {
    RewardRequest r;
    r.valid_response_length = static_cast<int64_t>(mask[i].sum().item<float>());
    r.sample.solution = tokenizer_->Decode(MaskedIds(responses, mask, i),
                                           /*skip_special=*/true);
    r.sample.data_source = batch.non_tensor(config_.data().reward_fn_key())[i];
    const auto& rm = batch.non_tensor("reward_model")[i];
    r.sample.ground_truth = rm.is_object() && rm.contains("ground_truth")
                                ? rm["ground_truth"]
                                : nlohmann::json();
    r.sample.extra_info = batch.non_tensor("extra_info")[i];
    out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<MetricMap> PpoTrainer::Validate(int64_t step) {
  if (!val_set_) return MetricMap{};
  const int64_t val_bs =
      config_.data().has_val_batch_size() ? config_.data().val_batch_size() : 0;
  DataLoader loader(val_set_.get(), val_bs, config_.data().validation_shuffle(),
                    seed_, false);
  ValidationSamples samples;
  const std::string& dump_dir = config_.trainer().validation_data_dir();
  const bool dump = !dump_dir.empty() && world_->rank() == 0;
  GenerationRecords dumped;
  std::vector<std::string> extra_keys;
  int64_t index = 0, tokens = 0;
  std::optional<profiler::ProgressBar> bar;
  if (progress_out_ != nullptr) {
    bar.emplace("validation", val_set_->size(), "prompts", progress_out_);
  }
  while (auto rows = loader.Next()) {
    std::vector<std::string> uids;
    for (size_t i = 0; i < rows->size(); ++i)
      uids.push_back(absl::StrCat("val", index++));
    VERL_ASSIGN_OR_RETURN(Batch prompts, encoder_->Encode(*rows, uids));
    VERL_ASSIGN_OR_RETURN(
        Batch gen, GenerateSequences(prompts, /*step=*/0, /*validate=*/true));
    const int64_t vn = rollout_->options().val_params.n;
    VERL_ASSIGN_OR_RETURN(Batch meta,
                          prompts.Select(std::vector<std::string>{}));
    VERL_ASSIGN_OR_RETURN(Batch repeated, meta.Repeat(vn, true));
    VERL_RETURN_IF_ERROR(gen.Union(repeated));
    VERL_ASSIGN_OR_RETURN(auto requests, RewardRequests(gen));
    VERL_ASSIGN_OR_RETURN(
        RewardOutput scores,
        val_reward_->Score(requests, gen.tensor("responses").size(1)));
    at::Tensor totals = scores.reward_tensor.sum(1);
    if (dump) {
      for (const auto& [k, v] : scores.extra_numeric) {
        VERL_RETURN_IF_ERROR(gen.SetNonTensor(
            k, std::vector<nlohmann::json>(v.begin(), v.end())));
        extra_keys.push_back(k);
      }
      GenerationRecords part = Records(gen, totals, extra_keys);
      AppendRecords(part, &dumped);
      extra_keys.clear();
    }
    for (int64_t i = 0; i < gen.size(); ++i) {
      samples.data_sources.push_back(requests[i].sample.data_source);
      samples.uids.push_back(gen.non_tensor("uid")[i]);
      samples.numeric["reward"].push_back(totals[i].item<double>());
    }
    for (const auto& [k, v] : scores.extra_numeric) {
      for (double x : v) samples.numeric[k].push_back(x);
    }
    if (scores.extra_text.count("pred")) {
      for (const auto& p : scores.extra_text.at("pred"))
        samples.preds.push_back(p);
    }
    tokens +=
        static_cast<int64_t>(gen.tensor("response_mask").sum().item<double>());
    if (bar) bar->Update(index, tokens);
  }
  if (bar) bar->Finish();
  if (dump) VERL_RETURN_IF_ERROR(DumpGenerations(dump_dir, step, dumped));
  return ComputeValidationMetrics(samples);
}

GenerationRecords PpoTrainer::Records(
    const Batch& gen, const at::Tensor& seq_scores,
    const std::vector<std::string>& extra_keys) const {
  GenerationRecords r;
  const at::Tensor& prompts = gen.tensor("prompts");
  const at::Tensor prompt_mask =
      gen.tensor("attention_mask").narrow(1, 0, prompts.size(1));
  const at::Tensor& responses = gen.tensor("responses");
  const at::Tensor& response_mask = gen.tensor("response_mask");
  const at::Tensor scores = seq_scores.to(at::kDouble).contiguous();
  for (int64_t i = 0; i < gen.size(); ++i) {
    r.inputs.push_back(tokenizer_->Decode(MaskedIds(prompts, prompt_mask, i),
                                          /*skip_special=*/true));
    r.outputs.push_back(tokenizer_->Decode(
        MaskedIds(responses, response_mask, i), /*skip_special=*/true));
    const auto& rm = gen.non_tensor("reward_model")[i];
    r.gts.push_back(rm.is_object() && rm.contains("ground_truth")
                        ? rm["ground_truth"]
                        : nlohmann::json());
    r.scores.push_back(scores.data_ptr<double>()[i]);
  }
  for (const std::string& key : extra_keys) {
    if (gen.HasNonTensor(key)) r.extra[key] = gen.non_tensor(key);
  }
  return r;
}

// gen → (gen_max) → reward for one set of prompt rows: the trajectories with
// their non-tensor columns (repeated n times, interleaved) and
// token_level_scores plus the reward extra infos.
absl::StatusOr<Batch> PpoTrainer::GenerateScored(
    const std::vector<nlohmann::json>& rows, int64_t step,
    std::map<std::string, double>* timing_out) {
  std::map<std::string, double>& timing = *timing_out;
  const AlgorithmConfig& alg = config_.algorithm();
  Batch batch;
  std::vector<std::string> uids;
  for (size_t i = 0; i < rows.size(); ++i)
    uids.push_back(absl::StrCat("uid", uid_counter_++));
  VERL_ASSIGN_OR_RETURN(Batch prompts, encoder_->Encode(rows, uids));
  prompts.meta_info()["temperature"] = rollout_cfg().temperature();
  prompts.meta_info()["global_steps"] = step;
  Batch gen;
  {
    Timer t(&timing, "gen");
    VERL_ASSIGN_OR_RETURN(gen, GenerateSequences(prompts, step, false));
  }
  if (alg.adv_estimator() == "remax") {
    Timer t(&timing, "gen_max");
    VERL_ASSIGN_OR_RETURN(Batch greedy, GenerateSequences(prompts, step, true));
    VERL_ASSIGN_OR_RETURN(Batch meta,
                          prompts.Select(std::vector<std::string>{}));
    VERL_RETURN_IF_ERROR(greedy.Union(meta));
    VERL_ASSIGN_OR_RETURN(RewardOutput base, ComputeReward(greedy));
    VERL_ASSIGN_OR_RETURN(
        Batch base_batch,
        Batch::FromColumns({{"reward_baselines", base.reward_tensor.sum(1)}}));
    VERL_ASSIGN_OR_RETURN(Batch rep, base_batch.Repeat(n(), true));
    VERL_RETURN_IF_ERROR(gen.Union(rep));
  }
  // Non-tensor columns follow the trajectories (repeat interleave).
  VERL_ASSIGN_OR_RETURN(Batch meta, prompts.Select(std::vector<std::string>{}));
  VERL_ASSIGN_OR_RETURN(Batch repeated, meta.Repeat(n(), true));
  VERL_RETURN_IF_ERROR(gen.Union(repeated));
  batch = std::move(gen);

  {
    Timer t(&timing, "reward");
    VERL_ASSIGN_OR_RETURN(RewardOutput scores, ComputeReward(batch));
    if (reward_model_) {
      VERL_RETURN_IF_ERROR(batch.SetTensor("rm_scores", scores.reward_tensor));
    }
    VERL_RETURN_IF_ERROR(
        batch.SetTensor("token_level_scores", scores.reward_tensor));
    reward_extra_keys_.clear();
    for (const auto& [k, v] : scores.extra_numeric) {
      std::vector<nlohmann::json> col(v.begin(), v.end());
      VERL_RETURN_IF_ERROR(batch.SetNonTensor(k, col));
      reward_extra_keys_.push_back(k);
    }
  }
  return batch;
}

// The training batch of one step. With algorithm.filter_groups.enable, DAPO's
// dynamic sampling: prompt groups whose metric is constant are dropped and
// more prompts are drawn from the loader until train_batch_size groups are
// kept (truncated to exactly that many); metric train/num_gen_batches.
absl::StatusOr<Batch> PpoTrainer::GenerateBatch(
    const std::vector<nlohmann::json>& rows, int64_t step,
    std::map<std::string, double>* timing, MetricMap* metrics) {
  const FilterGroupsConfig& fg = config_.algorithm().filter_groups();
  if (!fg.enable()) return GenerateScored(rows, step, timing);
  const int64_t want = config_.data().train_batch_size();
  std::vector<Batch> kept;
  int64_t kept_prompts = 0, rounds = 0;
  std::vector<nlohmann::json> current = rows;
  while (true) {
    ++rounds;
    VERL_ASSIGN_OR_RETURN(Batch b, GenerateScored(current, step, timing));
    VERL_ASSIGN_OR_RETURN(std::vector<double> metric,
                          GroupFilterMetric(b, fg.metric()));
    GroupFilterResult f =
        FilterGroupsByStd(ToStrings(b.non_tensor("uid")), metric);
    VERL_ASSIGN_OR_RETURN(Batch k, b.Index(f.kept_rows));
    if (k.size() > 0) kept.push_back(std::move(k));
    kept_prompts += static_cast<int64_t>(f.kept_uids.size());
    VERL_ASSIGN_OR_RETURN(
        bool more, DynamicSamplingNeedsMoreRounds(kept_prompts, want, rounds,
                                                  fg.max_num_gen_batches()));
    if (!more) break;
    auto next = train_loader_->Next();
    if (!next) next = train_loader_->Next();  // epoch boundary
    if (!next) return absl::InternalError("filter_groups: loader is empty");
    current = std::move(*next);
  }
  (*metrics)["train/num_gen_batches"] = static_cast<double>(rounds);
  VERL_ASSIGN_OR_RETURN(Batch all, Batch::Concat(kept));
  return all.Slice(0, want * n());
}

absl::StatusOr<MetricMap> PpoTrainer::TrainStep(
    const std::vector<nlohmann::json>& rows, int64_t step) {
  std::map<std::string, double> timing;
  MetricMap metrics;
  const AlgorithmConfig& alg = config_.algorithm();
  Batch batch;
  {
    Timer step_timer(&timing, "step");
    VERL_ASSIGN_OR_RETURN(batch, GenerateBatch(rows, step, &timing, &metrics));
    if (config_.trainer().balance_batch()) {
      at::Tensor lens =
          batch.tensor("attention_mask").sum(1).to(torch::kLong).contiguous();
      std::vector<int64_t> seqlens(lens.data_ptr<int64_t>(),
                                   lens.data_ptr<int64_t>() + lens.numel());
      // Balanced per actor mini-batch, so the rows of each mini-batch (and
      // the run's metrics) do not depend on the number of processes.
      const int64_t mini_rows = actor_cfg().ppo_mini_batch_size() * n();
      VERL_ASSIGN_OR_RETURN(
          BalancedOrder order,
          BalanceBatch(seqlens, actor_par_.dp->size(),
                       batch.size() % mini_rows == 0 ? mini_rows : 0));
      VERL_RETURN_IF_ERROR(
          batch.Reorder(torch::tensor(order.order, torch::kLong)));
      metrics.insert(order.metrics.begin(), order.metrics.end());
    }
    if (bypass_mode_) {
      // verl's apply_bypass_mode: the rollout policy is the old policy.
      VERL_RETURN_IF_ERROR(
          batch.SetTensor("old_log_probs", batch.tensor("rollout_log_probs")));
    } else {
      Timer t(&timing, "old_log_prob");
      const bool with_entropy = true;
      VERL_ASSIGN_OR_RETURN(
          Batch lp,
          ShardedCall(*actor_par_.dp, batch,
                      [&](const Batch& local) -> absl::StatusOr<Batch> {
                        VERL_ASSIGN_OR_RETURN(
                            LogProbResult r,
                            actor_->ComputeLogProb(local, with_entropy));
                        return Batch::FromColumns(
                            {{"old_log_probs", r.log_probs},
                             {"entropys", r.entropy}});
                      }));
      VERL_ASSIGN_OR_RETURN(at::Tensor ent,
                            ComputeEntropyLoss(lp.tensor("entropys"),
                                               batch.tensor("response_mask"),
                                               actor_cfg().loss_agg_mode()));
      metrics["actor/entropy"] = ent.item<double>();
      VERL_RETURN_IF_ERROR(
          batch.SetTensor("old_log_probs", lp.tensor("old_log_probs")));
      if (batch.HasTensor("rollout_log_probs")) {
        VERL_ASSIGN_OR_RETURN(
            MetricMap diff,
            ComputeRolloutProbsDiffMetrics(batch.tensor("old_log_probs"),
                                           batch.tensor("rollout_log_probs"),
                                           batch.tensor("response_mask")));
        metrics.insert(diff.begin(), diff.end());
      }
    }
    if (ref_) {
      Timer t(&timing, "ref");
      VERL_ASSIGN_OR_RETURN(
          Batch lp,
          ShardedCall(
              *ref_par_.dp, batch,
              [&](const Batch& local) -> absl::StatusOr<Batch> {
                VERL_ASSIGN_OR_RETURN(LogProbResult r,
                                      ref_->ComputeLogProb(local, false));
                return Batch::FromColumns({{"ref_log_prob", r.log_probs}});
              }));
      VERL_RETURN_IF_ERROR(
          batch.SetTensor("ref_log_prob", lp.tensor("ref_log_prob")));
    }
    if (critic_) {
      Timer t(&timing, "values");
      VERL_ASSIGN_OR_RETURN(
          Batch v,
          ShardedCall(*critic_par_.dp, batch,
                      [&](const Batch& local) -> absl::StatusOr<Batch> {
                        VERL_ASSIGN_OR_RETURN(at::Tensor values,
                                              critic_->ComputeValues(local));
                        return Batch::FromColumns({{"values", values}});
                      }));
      VERL_RETURN_IF_ERROR(batch.SetTensor("values", v.tensor("values")));
    }
    {
      Timer t(&timing, "adv");
      at::Tensor mask = batch.tensor("response_mask");
      at::Tensor rewards = batch.tensor("token_level_scores");
      if (alg.use_kl_in_reward()) {
        VERL_ASSIGN_OR_RETURN(
            KlInRewardResult kl,
            ApplyKlPenalty(rewards, batch.tensor("old_log_probs"),
                           batch.tensor("ref_log_prob"), mask, *kl_ctrl_,
                           alg.kl_penalty()));
        rewards = kl.token_level_rewards;
        metrics.insert(kl.metrics.begin(), kl.metrics.end());
      }
      VERL_RETURN_IF_ERROR(batch.SetTensor("token_level_rewards", rewards));
      VERL_RETURN_IF_ERROR(ApplyRolloutCorrection(batch, &metrics));
      mask = batch.tensor("response_mask");  // after rejection sampling
      AdvantageInputs in;
      in.token_level_rewards = rewards;
      in.response_mask = mask;
      in.index = ToStrings(batch.non_tensor("uid"));
      if (batch.HasTensor("values")) in.values = batch.tensor("values");
      if (batch.HasTensor("reward_baselines"))
        in.reward_baselines = batch.tensor("reward_baselines");
      in.old_log_prob = batch.tensor("old_log_probs");
      AdvantageConfig ac;
      ac.gamma = alg.gamma();
      ac.lam = alg.lam();
      ac.norm_adv_by_std_in_grpo = alg.norm_adv_by_std_in_grpo();
      VERL_ASSIGN_OR_RETURN(AdvantageOutput adv,
                            ComputeAdvantage(alg.adv_estimator(), in, ac));
      VERL_RETURN_IF_ERROR(batch.SetTensor("advantages", adv.advantages));
      VERL_RETURN_IF_ERROR(batch.SetTensor("returns", adv.returns));
      if (alg.use_pf_ppo() && alg.adv_estimator() == "gae") {
        // PF-PPO: resample the batch with replacement, weighted by score.
        VERL_ASSIGN_OR_RETURN(
            at::Tensor w,
            PfPpoWeights(batch.tensor("token_level_scores").sum(-1),
                         alg.pf_ppo().reweight_method(),
                         alg.pf_ppo().weight_pow()));
        VERL_ASSIGN_OR_RETURN(batch,
                              batch.Index(PfPpoResampleIndices(
                                  w, RolloutSeed(seed_, step, /*index=*/-1))));
      }
    }
    if (critic_) {
      Timer t(&timing, "update_critic");
      const int64_t mini = critic_->train_state() ? 0 : 0;
      (void)mini;
      const int64_t global_mini = (config_.critic().has_ppo_mini_batch_size()
                                       ? config_.critic().ppo_mini_batch_size()
                                       : actor_cfg().ppo_mini_batch_size()) *
                                  n();
      VERL_ASSIGN_OR_RETURN(Batch local,
                            UpdateShard(*critic_par_.dp, batch, global_mini));
      VERL_ASSIGN_OR_RETURN(MetricMap m, critic_->UpdateCritic(local));
      m["critic/lr"] = critic_->train_state()->StepSchedule();
      metrics.insert(m.begin(), m.end());
    }
    if (config_.trainer().critic_warmup() <= step) {
      {
        Timer t(&timing, "update_actor");
        VERL_ASSIGN_OR_RETURN(
            Batch local, UpdateShard(*actor_par_.dp, batch,
                                     actor_cfg().ppo_mini_batch_size() * n()));
        VERL_ASSIGN_OR_RETURN(MetricMap m, actor_->UpdatePolicy(local));
        m["actor/lr"] = actor_->train_state()->StepSchedule();
        // verl's metrics.update: the update's rollout_corr/* (current
        // policy vs rollout) replace the driver's.
        for (const auto& [k, v] : m) metrics[k] = v;
      }
      Timer t(&timing, "update_weights");
      VERL_RETURN_IF_ERROR(SyncRolloutWeights());
    }
    const std::string& dump_dir = config_.trainer().rollout_data_dir();
    if (!dump_dir.empty() && world_->rank() == 0) {
      Timer t(&timing, "dump_rollout_generations");
      VERL_RETURN_IF_ERROR(DumpGenerations(
          dump_dir, step,
          Records(batch, batch.tensor("token_level_scores").sum(1),
                  reward_extra_keys_)));
    }
  }
  // Data, timing and throughput metrics (verl's names).
  DataMetricsInputs dm;
  dm.token_level_scores = batch.tensor("token_level_scores");
  dm.token_level_rewards = batch.tensor("token_level_rewards");
  dm.advantages = batch.tensor("advantages");
  dm.returns = batch.tensor("returns");
  if (batch.HasTensor("values")) dm.values = batch.tensor("values");
  dm.attention_mask = batch.tensor("attention_mask");
  dm.response_mask = batch.tensor("response_mask");
  VERL_ASSIGN_OR_RETURN(MetricMap data_metrics,
                        ComputeDataMetrics(dm, critic_ != nullptr));
  metrics.insert(data_metrics.begin(), data_metrics.end());
  const int64_t response_tokens =
      static_cast<int64_t>(batch.tensor("response_mask").sum().item<double>());
  const int64_t total_tokens =
      static_cast<int64_t>(batch.tensor("attention_mask").sum().item<double>());
  MetricMap tm = ComputeTimingMetrics(timing, total_tokens - response_tokens,
                                      response_tokens);
  metrics.insert(tm.begin(), tm.end());
  MetricMap thr =
      ComputeThroughputMetrics(total_tokens, timing["step"], world_->size());
  metrics.insert(thr.begin(), thr.end());
  MetricMap perf = profiler_->PerfMetrics(
      actor_->model().config(), batch.tensor("attention_mask"), timing);
  metrics.insert(perf.begin(), perf.end());
  return metrics;
}

absl::StatusOr<FitResult> PpoTrainer::Fit() {
  FitResult result;
  VERL_ASSIGN_OR_RETURN(const int64_t resumed_step, ResumeCheckpoint());
  VERL_RETURN_IF_ERROR(SyncRolloutWeights());
  int64_t global_steps = resumed_step;
  const TrainerConfig& tr = config_.trainer();
  if (val_set_ && tr.val_before_train()) {
    VERL_ASSIGN_OR_RETURN(result.first_validation, Validate(global_steps));
    VERL_RETURN_IF_ERROR(Log(result.first_validation, global_steps));
    if (tr.val_only()) return result;
  }
  global_steps = resumed_step + 1;
  while (global_steps <= total_steps_) {
    auto rows = train_loader_->Next();
    if (!rows) continue;                   // epoch boundary
    std::map<std::string, double> timing;  // start/stop_profile, testing
    {
      Timer t(&timing, "start_profile");
      VERL_RETURN_IF_ERROR(profiler_->StartStep(global_steps));
    }
    VERL_ASSIGN_OR_RETURN(MetricMap metrics, TrainStep(*rows, global_steps));
    const bool last = global_steps >= total_steps_;
    if (val_set_ && tr.test_freq() > 0 &&
        (last || global_steps % tr.test_freq() == 0)) {
      MetricMap val;
      {
        Timer t(&timing, "testing");
        VERL_ASSIGN_OR_RETURN(val, Validate(global_steps));
      }
      metrics.insert(val.begin(), val.end());
      result.last_validation = val;
    }
    if (checkpointer_->ShouldSave(global_steps, last)) {
      Timer t(&timing, "save_checkpoint");
      VERL_RETURN_IF_ERROR(SaveCheckpoint(global_steps));
    }
    {
      Timer t(&timing, "stop_profile");
      VERL_RETURN_IF_ERROR(profiler_->StopStep(global_steps));
    }
    for (const auto& [k, v] : timing) metrics["timing_s/" + k] = v;
    metrics["training/global_step"] = global_steps;
    metrics["training/epoch"] = train_loader_->state().epoch;
    VERL_RETURN_IF_ERROR(Log(metrics, global_steps));
    result.last_step_metrics = metrics;
    result.steps = global_steps;
    ++global_steps;
    // verl names the actor's post-update snapshot after the next step.
    VERL_RETURN_IF_ERROR(profiler_->AfterStep(global_steps));
  }
  return result;
}

// ---- Checkpoints
// -------------------------------------------------------------

std::vector<CheckpointRole> PpoTrainer::CheckpointRoles() {
  std::vector<CheckpointRole> roles = {
      MakeCheckpointRole("actor", actor_->train_state(),
                         actor_->model().config(), actor_cfg().checkpoint())};
  if (lora_) {
    for (auto& [name, t] : models::LoraNamedParameters(actor_->model())) {
      roles[0].lora_adapter[name] = t.detach();
    }
    roles[0].lora_alpha = config_.actor_rollout_ref().model().lora_alpha();
  }
  if (critic_) {
    roles.push_back(MakeCheckpointRole("critic", critic_->train_state(),
                                       critic_->model().config(),
                                       config_.critic().checkpoint()));
  }
  return roles;
}

absl::Status PpoTrainer::SaveCheckpoint(int64_t step) {
  TrainerProgress progress;
  progress.dataloader = train_loader_->state();
  progress.trainer = {{"uid_counter", uid_counter_},
                      {"kl_coef", kl_ctrl_->value()}};
  return checkpointer_->Save(step, CheckpointRoles(), progress);
}

absl::StatusOr<int64_t> PpoTrainer::ResumeCheckpoint() {
  TrainerCheckpointOptions options =
      TrainerCheckpointOptionsFromConfig(config_.trainer());
  options.tokenizer = tokenizer_.get();
  checkpointer_ = std::make_unique<TrainerCheckpointer>(options, world_);
  TrainerProgress progress;
  progress.dataloader = train_loader_->state();
  VERL_ASSIGN_OR_RETURN(int64_t step,
                        checkpointer_->Resume(CheckpointRoles(), &progress));
  if (step == 0) return step;
  train_loader_->set_state(progress.dataloader);
  uid_counter_ = progress.trainer.value("uid_counter", uid_counter_);
  kl_ctrl_->set_value(progress.trainer.value("kl_coef", kl_ctrl_->value()));
  return step;
}

}  // namespace

absl::StatusOr<FitResult> RunPpo(
    const PpoTrainerConfig& config,
    std::shared_ptr<parallel::Communicator> world) {
  PpoTrainer trainer(
      config, world ? std::move(world) : parallel::SingleProcessCommunicator());
  VERL_RETURN_IF_ERROR(trainer.Init());
  return trainer.Fit();
}

}  // namespace verl::rl
