// The PPO trainer's set-up, step loop and checkpoints; the step's phases,
// generation, validation and the SFT warm start are in the sibling
// ppo_trainer_*.cc files (ppo_trainer_internal.h lists them).
#include "verl/rl/trainer/ppo_trainer.h"

#include <ATen/ops/zeros.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "verl/core/status.h"
#include "verl/models/lora.h"
#include "verl/models/megatron/megatron_weights.h"
#include "verl/models/vlm/qwen2_vl.h"
#include "verl/models/vlm/vlm_checkpoint.h"
#include "verl/models/vlm/vlm_config.h"
#include "verl/rl/algos/advantage.h"
#include "verl/rl/algos/pf_ppo.h"
#include "verl/rl/trainer/config/config.h"
#include "verl/rl/trainer/policy_loader.h"
#include "verl/rl/trainer/ppo_trainer_internal.h"
#include "verl/rl/trainer/role_options.h"
#include "verl/rl/workers/fsdp_train_state.h"
#include "verl/rl/workers/lora_policy.h"
#include "verl/rl/workers/megatron_train_state.h"

namespace verl::rl {

std::vector<std::string> ToStrings(const std::vector<nlohmann::json>& v) {
  std::vector<std::string> out;
  for (const auto& j : v)
    out.push_back(j.is_string() ? j.get<std::string>() : j.dump());
  return out;
}

nlohmann::json GroundTruth(const nlohmann::json& reward_model) {
  return reward_model.is_object() && reward_model.contains("ground_truth")
             ? reward_model["ground_truth"]
             : nlohmann::json();
}

absl::Status PpoTrainer::Init() {
  const DataConfig& data = config_.data();
  seed_ = data.has_seed() ? data.seed() : 1;
  at::manual_seed(seed_);
  // First, so memory recording (torch_memory) sees the models being built.
  profiler_ = std::make_unique<TrainerProfiler>(config_, world_->global_rank(),
                                                world_->size());
  VERL_RETURN_IF_ERROR(InitData());
  VERL_RETURN_IF_ERROR(InitRoles());
  VERL_RETURN_IF_ERROR(InitRewards());
  return InitTracking();
}

absl::Status PpoTrainer::InitData() {
  const DataConfig& data = config_.data();
  VERL_ASSIGN_OR_RETURN(models::Tokenizer tok,
                        LoadTokenizer(config_.actor_rollout_ref().model()));
  tokenizer_ = std::make_unique<models::Tokenizer>(std::move(tok));
  PromptEncoderOptions enc;
  enc.prompt_key = data.prompt_key();
  enc.image_key = data.image_key();
  // Vision-language policies: rows with images are processed (else refused).
  VERL_ASSIGN_OR_RETURN(
      enc.image_processor,
      LoadImageProcessor(config_.actor_rollout_ref().model()));
  enc.max_prompt_length = data.max_prompt_length();
  enc.truncation = TruncationMode::Value_Name(data.truncation());
  enc.return_raw_chat = data.return_raw_chat() || UsesAgentLoop(config_);
  encoder_ = std::make_unique<PromptEncoder>(tokenizer_.get(), enc);

  auto load =
      [&](const google::protobuf::RepeatedPtrField<std::string>& files,
          int64_t max_samples) -> absl::StatusOr<std::unique_ptr<RLDataset>> {
    RLDatasetOptions o;
    o.files.assign(files.begin(), files.end());
    o.prompt_key = data.prompt_key();
    o.image_key = data.image_key();
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
  const SftWarmupConfig& warmup = config_.actor_rollout_ref().sft_warmup();
  if (warmup.steps() > 0 && warmup.train_files_size() > 0) {
    VERL_ASSIGN_OR_RETURN(sft_set_, load(warmup.train_files(), -1));
  }
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
  return absl::OkStatus();
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
  VERL_ASSIGN_OR_RETURN(rollout_par_,
                        groups(rollout_cfg().tensor_model_parallel_size(),
                               parallel::FsdpConfig()));
  // Megatron roles: pp x dp x cp x tp groups, one layout per (tp, pp, cp,
  // ep, etp, vpp); the tp, cp and pp ranks of a dp group take the same rows.
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>,
           std::shared_ptr<parallel::megatron::ParallelState>>
      mpus;
  auto megatron = [&](Strategy::Value strategy,
                      const parallel::megatron::MegatronConfig& m,
                      parallel::UlyssesGroups* par,
                      std::shared_ptr<parallel::megatron::ParallelState>* mpu)
      -> absl::Status {
    if (strategy != Strategy::megatron) return absl::OkStatus();
    const int64_t tp = m.tensor_model_parallel_size();
    const int64_t cp = m.context_parallel_size();
    const int64_t pp = m.pipeline_model_parallel_size();
    const int64_t ep = m.expert_model_parallel_size();
    const int64_t etp = m.has_expert_tensor_parallel_size()
                            ? m.expert_tensor_parallel_size()
                            : 0;
    // Virtual pipeline stages (the interleaved schedule; null or 1: none).
    const int64_t vpp = m.virtual_pipeline_model_parallel_size() > 1
                            ? m.virtual_pipeline_model_parallel_size()
                            : 0;
    const auto key = std::make_tuple(tp, pp, cp, ep, etp, vpp);
    auto it = mpus.find(key);
    if (it == mpus.end()) {
      parallel::megatron::ModelParallelSizes sizes;
      sizes.tp = static_cast<int>(tp);
      sizes.cp = static_cast<int>(cp);
      sizes.pp = static_cast<int>(pp);
      sizes.ep = static_cast<int>(ep);
      sizes.etp = static_cast<int>(etp);
      sizes.vpp = static_cast<int>(vpp);
      std::string name = absl::StrCat("mpu_tp", tp);
      if (cp > 1) absl::StrAppend(&name, "_cp", cp);
      if (pp > 1) absl::StrAppend(&name, "_pp", pp);
      if (vpp > 1) absl::StrAppend(&name, "_vpp", vpp);
      if (ep > 1 || etp > 0) absl::StrAppend(&name, "_ep", ep, "_etp", etp);
      VERL_ASSIGN_OR_RETURN(
          auto built,
          parallel::megatron::ParallelState::Initialize(world_, sizes, name));
      it = mpus.emplace(key, std::move(built)).first;
    }
    *mpu = it->second;
    *par = {(*mpu)->dp(), parallel::SingleProcessCommunicator()};
    return absl::OkStatus();
  };
  VERL_RETURN_IF_ERROR(
      megatron(a.strategy(), a.megatron(), &actor_par_, &actor_mpu_));
  if (NeedReferencePolicy(config_) &&
      config_.actor_rollout_ref().model().lora_rank() == 0) {
    VERL_RETURN_IF_ERROR(
        megatron(r.strategy(), r.megatron(), &ref_par_, &ref_mpu_));
  }
  if (NeedCritic(config_)) {
    VERL_RETURN_IF_ERROR(
        megatron(c.strategy(), c.megatron(), &critic_par_, &critic_mpu_));
  }
  return absl::OkStatus();
}

absl::Status PpoTrainer::InitRoles() {
  const auto& model_settings = config_.actor_rollout_ref().model();
  // Allocations count as parameters unless a scope says otherwise (the
  // update loop's activations/gradients/optimizer state, the KV cache).
  profiler::MemoryCategoryScope parameters(
      profiler::MemoryCategory::kParameters);
  VERL_ASSIGN_OR_RETURN(LoadedPolicy policy,
                        LoadPolicy(model_settings, *tokenizer_, seed_));
  policy.model->enable_gradient_checkpointing(
      model_settings.enable_gradient_checkpointing());
  VERL_RETURN_IF_ERROR(MakeRoleGroups());
  if (policy.vlm) VERL_RETURN_IF_ERROR(CheckVisionLanguageRoles());
  if (actor_cfg().freeze_vision_tower()) {
    auto* vlm = dynamic_cast<models::vlm::Qwen2VLForConditionalGeneration*>(
        policy.model.get());
    if (vlm == nullptr) {
      return absl::InvalidArgumentError(
          "actor_rollout_ref.actor.freeze_vision_tower=true needs a "
          "vision-language model (model.path with a vision_config, or "
          "model.preset=tiny-qwen2.5-vl)");
    }
    // verl's visual.requires_grad_(False): no gradient, no AdamW step (the
    // warm start included), so the tower keeps its weights.
    vlm->FreezeVisionTower();
  }
  VERL_ASSIGN_OR_RETURN(rollout_corr_, RolloutCorrectionFromConfig(config_));
  VERL_ASSIGN_OR_RETURN(ActorOptions ao,
                        ActorOptionsFromConfig(config_, actor_par_, seed_));

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
    if (actor_cfg().freeze_vision_tower()) {
      // verl freezes `visual` on the PEFT model: the tower's adapters too.
      static_cast<models::vlm::Qwen2VLForConditionalGeneration&>(*policy.model)
          .FreezeVisionTower();
    }
  }
  if (NeedReferencePolicy(config_)) {
    ActorOptions ref_options = RefOptionsFromActor(ao, ref_par_);
    if (lora_) {
      // verl's ref_in_actor: the actor's own model with adapters disabled.
      ref_options.disable_lora = true;
      ref_ = std::make_unique<Actor>(policy.model, nullptr, ref_options,
                                     ref_par_.dp);
    } else if (ref_mpu_) {
      // Megatron: the forward runs on the tp shards; the policy's CausalLM
      // only describes the model.
      VERL_ASSIGN_OR_RETURN(
          ref_options.megatron,
          MakeMegatronModel(*policy.model,
                            config_.actor_rollout_ref().ref().megatron(),
                            "actor_rollout_ref.ref.megatron", ref_mpu_));
      // param_offload: the parameters rest in host memory between passes.
      if (config_.actor_rollout_ref().ref().megatron().param_offload()) {
        MoveModuleParameters(*ref_options.megatron,
                             parallel::MemoryLocation::kHost, c10::kCPU);
      }
      ref_ = std::make_unique<Actor>(policy.model, nullptr, ref_options,
                                     ref_par_.dp);
    } else {
      auto ref_model = CloneModel(*policy.model, false, seed_);
      // verl wraps the reference with FSDP: sharded, forward-only.
      const RefConfig& rc = config_.actor_rollout_ref().ref();
      if (world_->size() > 1 && (rc.strategy() == Strategy::fsdp ||
                                 rc.strategy() == Strategy::fsdp2)) {
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
    CriticOptions co =
        CriticOptionsFromConfig(config_, critic_par_, ao.update_micro);
    std::unique_ptr<TrainState> critic_state;
    if (critic_mpu_) {
      VERL_ASSIGN_OR_RETURN(
          critic_state,
          MakeMegatronTrainState(*critic_model, c.megatron(), "critic.megatron",
                                 copt, critic_mpu_, &co.megatron));
    } else {
      VERL_ASSIGN_OR_RETURN(
          critic_state, MakeTrainState(*critic_model, c.strategy(),
                                       c.model().fsdp_config(), copt, world_));
    }
    critic_ = std::make_unique<Critic>(critic_model, std::move(critic_state),
                                       std::move(co), critic_par_.dp);
  }
  VERL_ASSIGN_OR_RETURN(
      OptimizerOptions aopt,
      OptimizerOptionsFromConfig(actor_cfg().optim(), actor_cfg().grad_clip(),
                                 total_steps_));
  // The rollout engine with its own copy of the weights (synced after
  // updates). Its copy is taken first: under FSDP the policy's own tensors
  // are sharded. Under rollout tensor parallelism the engine is built here
  // and cuts its shard straight from the policy (no whole copy).
  auto make_rollout =
      [&](std::shared_ptr<models::CausalLM> engine_model) -> absl::Status {
    VERL_ASSIGN_OR_RETURN(
        RolloutOptions ro,
        RolloutOptionsFromConfig(config_, tokenizer_->pad_token_id(), seed_));
    VERL_ASSIGN_OR_RETURN(ro.agent_loop,
                          AgentLoopFromConfig(config_, tokenizer_.get()));
    VERL_ASSIGN_OR_RETURN(infer::EngineOptions eo,
                          EngineOptionsFromConfig(config_, seed_));
    eo.tp_group = rollout_par_.sp;
    VERL_ASSIGN_OR_RETURN(rollout_,
                          Rollout::Create(std::move(engine_model), eo, ro));
    if (eo.tp_group->size() > 1) {
      LOG(INFO) << "rollout: " << rollout_par_.dp->size()
                << " engine replica(s) of tensor_model_parallel_size "
                << eo.tp_group->size() << "; this rank's KV cache "
                << rollout_->engine().kv_cache_bytes() << " bytes in "
                << rollout_->engine().num_kv_blocks() << " blocks";
    }
    return absl::OkStatus();
  };
  std::shared_ptr<models::CausalLM> engine_model;
  if (rollout_par_.sp->size() > 1) {
    VERL_RETURN_IF_ERROR(make_rollout(policy.model));
  } else {
    engine_model = CloneModel(*policy.model, false, seed_);
  }
  std::unique_ptr<TrainState> actor_state;
  if (lora_) {
    // Only the adapters train; they are small, so every rank keeps them all
    // (the frozen base is replicated too).
    actor_state = std::make_unique<ReplicatedTrainState>(
        TrainableParameters(*policy.model), aopt, world_);
  } else if (actor_mpu_) {
    VERL_ASSIGN_OR_RETURN(
        actor_state,
        MakeMegatronTrainState(*policy.model, actor_cfg().megatron(),
                               "actor_rollout_ref.actor.megatron", aopt,
                               actor_mpu_, &ao.megatron));
  } else {
    VERL_ASSIGN_OR_RETURN(
        actor_state, MakeTrainState(*policy.model, actor_cfg().strategy(),
                                    actor_cfg().fsdp_config(), aopt, world_));
  }
  ao.flowrl_log_z_optim = aopt;  // FlowRL's log-Z head: the actor's AdamW
  ao.flowrl_log_z_seed = seed_ + 7;
  actor_ = std::make_unique<Actor>(policy.model, std::move(actor_state), ao,
                                   actor_par_.dp);
  if (engine_model != nullptr) {
    VERL_RETURN_IF_ERROR(make_rollout(std::move(engine_model)));
  }
  return absl::OkStatus();
}

absl::Status PpoTrainer::CheckVisionLanguageRoles() {
  auto refuse = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(
        what,
        " is not available with a vision-language model (Qwen2.5-VL "
        "trains with strategy fsdp/fsdp2 on one or more processes; "
        "docs/vlm.md)"));
  };
  const auto& arr = config_.actor_rollout_ref();
  if (actor_cfg().strategy() == Strategy::megatron)
    return refuse("actor_rollout_ref.actor.strategy=megatron");
  if (NeedReferencePolicy(config_) &&
      arr.ref().strategy() == Strategy::megatron) {
    return refuse("actor_rollout_ref.ref.strategy=megatron");
  }
  // More than one process: the tower is one FSDP unit next to the
  // embeddings (verl/rl/workers/fsdp_train_state.cc) and the rows with
  // their images are dispatched over the ranks.
  if (actor_par_.sp->size() > 1 || ref_par_.sp->size() > 1) {
    return refuse(
        "ulysses_sequence_parallel_size > 1 (image tokens are not split "
        "over the sequence-parallel ranks yet)");
  }
  if (rollout_par_.sp->size() > 1) {
    return refuse(
        "actor_rollout_ref.rollout.tensor_model_parallel_size > 1 (the "
        "tensor-parallel engine does not shard the vision tower)");
  }
  if (NeedCritic(config_) && config_.critic().strategy() == Strategy::megatron)
    return refuse("critic.strategy=megatron");
  if (NeedCritic(config_) && critic_par_.sp->size() > 1)
    return refuse("critic.ulysses_sequence_parallel_size > 1");
  if (config_.reward_model().enable()) return refuse("reward_model.enable");
  if (actor_cfg().policy_loss().loss_mode() == "flowrl")
    return refuse("actor_rollout_ref.actor.policy_loss.loss_mode=flowrl");
  return absl::OkStatus();
}

absl::Status PpoTrainer::InitRewards() {
  RewardManagerConfig rm =
      RewardManagerConfigFromConfig(config_, tokenizer_->eos_token());
  BatchComputeScoreFn batch_fn;
  if (config_.custom_reward_function().has_path()) {
    batch_fn =
        ExternalCommandScoreFn(config_.custom_reward_function().path(), 300.0);
  }
  VERL_ASSIGN_OR_RETURN(reward_,
                        RewardManager::Create(rm, DefaultScoreFn(), batch_fn));
  RewardManagerConfig val_rm = rm;
  val_rm.overlong_buffer_enable = false;
  VERL_ASSIGN_OR_RETURN(
      val_reward_, RewardManager::Create(val_rm, DefaultScoreFn(), batch_fn));
  const RewardModelConfig& rmc = config_.reward_model();
  if (rmc.enable()) {
    VERL_ASSIGN_OR_RETURN(
        reward_model_,
        RewardModel::Load(
            rmc.model().path(), tokenizer_->vocab_size(),
            RewardModelMicroFromConfig(config_, actor_par_.dp->size())));
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
  return absl::OkStatus();
}

absl::Status PpoTrainer::InitTracking() {
  if (world_->rank() != 0) return absl::OkStatus();
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
  if (auto* mg = dynamic_cast<MegatronTrainState*>(actor_->train_state())) {
    // Megatron: the tp shards gathered into HF tensors one layer at a time.
    const int64_t layers = mg->model().config().num_hidden_layers;
    for (int64_t l = models::kMegatronRootStage; l < layers; ++l) {
      std::map<std::string, at::Tensor> hf =
          GatherHfTensorsAllStages(mg->model(), l);
      VERL_RETURN_IF_ERROR(rollout_->engine().UpdateWeights(
          parallel::NamedTensors(hf.begin(), hf.end())));
    }
    return absl::OkStatus();
  }
  if (auto* fsdp = dynamic_cast<FsdpTrainState*>(actor_->train_state())) {
    return fsdp->fsdp().ForEachGatheredUnit(
        [&](const std::string&, const parallel::NamedTensors& params) {
          return rollout_->engine().UpdateWeights(params);
        });
  }
  return rollout_->SyncWeights(actor_->model());
}

absl::Status PpoTrainer::Log(const MetricMap& metrics, int64_t step) {
  if (!tracker_) return absl::OkStatus();
  return tracker_->Log(metrics, step);
}

int64_t PpoTrainer::SkippedOptimizerSteps() {
  int64_t skipped = actor_->train_state()->skipped_steps();
  if (critic_) skipped += critic_->train_state()->skipped_steps();
  return skipped;
}

absl::Status PpoTrainer::NonFiniteStepsError(int64_t step, int64_t in_a_row,
                                             const MetricMap& metrics) const {
  std::string norms;
  for (const char* key : {"actor/grad_norm", "critic/grad_norm"}) {
    if (auto it = metrics.find(key); it != metrics.end()) {
      absl::StrAppend(&norms, norms.empty() ? "" : " ", key, " ", it->second,
                      ";");
    }
  }
  const DataLoaderState& data = train_loader_->state();
  return absl::FailedPreconditionError(absl::StrCat(
      "trainer: ", in_a_row, " steps in a row, up to step ", step,
      ", had a gradient norm that was not finite (", norms,
      " their optimizer steps were skipped); stopping (train batch ",
      data.batches_in_epoch - 1, " of epoch ", data.epoch,
      "). Check the reward and the learning rate, or set "
      "trainer.max_consecutive_nonfinite_steps (0: never stop, as verl)"));
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
  int64_t nonfinite_in_a_row = 0;  // steps whose optimizer step was skipped
  while (global_steps <= total_steps_) {
    auto rows = train_loader_->Next();
    if (!rows) continue;  // epoch boundary
    Timing timing;        // start/stop_profile, testing
    {
      Timer t(&timing, "start_profile");
      VERL_RETURN_IF_ERROR(profiler_->StartStep(global_steps));
    }
    const int64_t skipped_before = SkippedOptimizerSteps();
    VERL_ASSIGN_OR_RETURN(MetricMap metrics, TrainStep(*rows, global_steps));
    nonfinite_in_a_row =
        SkippedOptimizerSteps() > skipped_before ? nonfinite_in_a_row + 1 : 0;
    if (tr.max_consecutive_nonfinite_steps() > 0 &&
        nonfinite_in_a_row >= tr.max_consecutive_nonfinite_steps()) {
      // The failing step's metrics are logged; no validation or checkpoint.
      metrics["training/global_step"] = global_steps;
      VERL_RETURN_IF_ERROR(Log(metrics, global_steps));
      return NonFiniteStepsError(global_steps, nonfinite_in_a_row, metrics);
    }
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

namespace {

// A vision-language role's huggingface/config.json is HF's
// Qwen2_5_VLForConditionalGeneration config, vision_config included.
void SetVisionLanguageHfConfig(const models::CausalLM& model,
                               CheckpointRole* role) {
  const auto* vlm =
      dynamic_cast<const models::vlm::Qwen2VLForConditionalGeneration*>(&model);
  if (vlm == nullptr) return;
  absl::StatusOr<nlohmann::json> hf =
      models::vlm::VlmConfigToHfJson(vlm->vlm_config());
  LOG_IF(WARNING, !hf.ok())
      << role->name << ": no config.json in checkpoints: " << hf.status();
  role->hf_config = hf.ok() ? *hf : nlohmann::json();
}

}  // namespace

std::vector<CheckpointRole> PpoTrainer::CheckpointRoles() {
  std::vector<CheckpointRole> roles = {
      MakeCheckpointRole("actor", actor_->train_state(),
                         actor_->model().config(), actor_cfg().checkpoint())};
  SetVisionLanguageHfConfig(actor_->model(), &roles[0]);
  if (lora_) {
    for (auto& [name, t] : models::LoraNamedParameters(actor_->model())) {
      roles[0].lora_adapter[name] = t.detach();
    }
    roles[0].lora_alpha = config_.actor_rollout_ref().model().lora_alpha();
  }
  if (TrainState* log_z = actor_->log_z_train_state()) {
    // FlowRL's log-Z head (parameters, AdamW state, schedule) beside the
    // actor, with the actor's contents; it has no HF form.
    CheckpointRole head;
    head.name = "actor_log_z";
    head.state = log_z;
    head.save_contents = roles[0].save_contents;
    head.save_contents.erase("hf_model");
    head.load_contents = roles[0].load_contents;
    roles.push_back(std::move(head));
  }
  if (critic_) {
    roles.push_back(MakeCheckpointRole("critic", critic_->train_state(),
                                       critic_->model().config(),
                                       config_.critic().checkpoint()));
    SetVisionLanguageHfConfig(critic_->model(), &roles.back());
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
  if (const auto& processor = encoder_->options().image_processor) {
    // A vision-language policy's huggingface/ holds its processor as well.
    options.write_processing_files = [this, processor](const std::string& dir) {
      return models::vlm::SaveVlmProcessingFiles(dir, *processor,
                                                 tokenizer_.get());
    };
  }
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

absl::StatusOr<FitResult> RunPpo(
    const PpoTrainerConfig& config,
    std::shared_ptr<parallel::Communicator> world) {
  VERL_RETURN_IF_ERROR(CheckResolved(config));
  PpoTrainer trainer(
      config, world ? std::move(world) : parallel::SingleProcessCommunicator());
  VERL_RETURN_IF_ERROR(trainer.Init());
  return trainer.Fit();
}

}  // namespace verl::rl
