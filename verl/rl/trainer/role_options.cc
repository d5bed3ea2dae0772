#include "verl/rl/trainer/role_options.h"

#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <glog/logging.h>

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "verl/core/status.h"
#include "verl/infer/agent/tool_config.h"
#include "verl/infer/rollout_options.h"
#include "verl/rl/algos/flowrl.h"
#include "verl/rl/rewards/agent_tools.h"
#include "verl/rl/trainer/config/config.h"

namespace verl::rl {

absl::StatusOr<RolloutCorrectionConfig> RolloutCorrectionFromConfig(
    const PpoTrainerConfig& config) {
  const RolloutCorrectionSettings& rc = config.algorithm().rollout_correction();
  auto value = [](const std::string& v) {
    return v == "null" || v == "None" ? std::string() : v;
  };
  RolloutCorrectionConfig out;
  out.rollout_is = value(rc.rollout_is());
  out.rollout_is_threshold = rc.rollout_is_threshold();
  out.rollout_is_batch_normalize = rc.rollout_is_batch_normalize();
  out.rollout_rs = value(rc.rollout_rs());
  out.rollout_rs_threshold = value(rc.rollout_rs_threshold());
  out.bypass_mode = rc.bypass_mode();
  out.loss_type = rc.loss_type();
  const bool wanted =
      !out.rollout_is.empty() || !out.rollout_rs.empty() || out.bypass_mode;
  if (!wanted) return out;
  if (!config.actor_rollout_ref().rollout().calculate_log_probs()) {
    return absl::InvalidArgumentError(
        "algorithm.rollout_correction needs the rollout's log-probs: set "
        "actor_rollout_ref.rollout.calculate_log_probs=true");
  }
  // Config errors (modes, thresholds) now rather than after the first
  // generation.
  at::Tensor probe = at::zeros({1, 1});
  VERL_RETURN_IF_ERROR(
      ComputeRolloutCorrection(probe, probe, at::ones({1, 1}), out).status());
  if (out.bypass_mode && out.loss_type != "ppo_clip" &&
      out.loss_type != "reinforce") {
    return absl::InvalidArgumentError(
        absl::StrCat("algorithm.rollout_correction.loss_type: unknown value '",
                     out.loss_type, "' (expected ppo_clip or reinforce)"));
  }
  return out;
}

// pp when the Megatron role runs the interleaved schedule (virtual
// pipeline stages), else 0.
int64_t InterleavedMicroBatchDivisor(
    Strategy::Value strategy,
    const parallel::megatron::MegatronConfig& megatron) {
  if (strategy != Strategy::megatron ||
      megatron.virtual_pipeline_model_parallel_size() <= 1) {
    return 0;
  }
  return megatron.pipeline_model_parallel_size();
}

absl::StatusOr<ActorOptions> ActorOptionsFromConfig(
    const PpoTrainerConfig& config, const parallel::UlyssesGroups& groups,
    uint64_t seed) {
  const ActorConfig& actor = config.actor_rollout_ref().actor();
  const infer::RolloutConfig& rollout = config.actor_rollout_ref().rollout();
  const int64_t dp = groups.dp->size();
  const int64_t global_mini = actor.ppo_mini_batch_size() * rollout.n();
  ActorOptions ao;
  // temperature 0 means greedy sampling (vLLM, verl); the log-probs of a
  // greedy rollout are those of the unscaled logits, as vLLM computes them.
  ao.temperature = rollout.temperature() > 0 ? rollout.temperature() : 1.0;
  ao.update_micro.micro_batch_size = actor.has_ppo_micro_batch_size_per_gpu()
                                         ? actor.ppo_micro_batch_size_per_gpu()
                                         : global_mini / dp;
  ao.update_micro.use_dynamic_bsz = actor.use_dynamic_bsz();
  // verl: the token budget covers the whole sp group.
  ao.update_micro.max_token_len =
      actor.ppo_max_token_len_per_gpu() * groups.sp->size();
  ao.sp_group = groups.sp;
  // use_dynamic_bsz under virtual pipeline stages: counts a multiple of pp
  // (the update: the actor's; old/ref log-probs: the actor's and the
  // reference's, which RefOptionsFromActor copies).
  ao.update_micro.num_batches_divided_by =
      InterleavedMicroBatchDivisor(actor.strategy(), actor.megatron());
  const int64_t ref_divisor =
      InterleavedMicroBatchDivisor(config.actor_rollout_ref().ref().strategy(),
                                   config.actor_rollout_ref().ref().megatron());
  ao.log_prob_micro = ao.update_micro;
  const int64_t both =
      std::lcm(std::max<int64_t>(ao.update_micro.num_batches_divided_by, 1),
               std::max<int64_t>(ref_divisor, 1));
  ao.log_prob_micro.num_batches_divided_by = both > 1 ? both : 0;
  ao.log_prob_micro.same_count_group = groups.dp.get();
  if (actor.strategy() == Strategy::megatron &&
      actor.megatron().expert_model_parallel_size() > 1) {
    // The expert all-to-alls span dp ranks: every dp rank runs the same
    // number of update micro-batches (also under use_dynamic_bsz).
    ao.update_micro.same_count_group = groups.dp.get();
  }
  if (rollout.has_log_prob_micro_batch_size_per_gpu()) {
    ao.log_prob_micro.micro_batch_size =
        rollout.log_prob_micro_batch_size_per_gpu();
  }
  ao.mini_batch_size = global_mini / dp;
  ao.ppo_epochs = actor.ppo_epochs();
  ao.loss_mode = actor.policy_loss().loss_mode();
  PolicyLossConfig& pl = ao.policy_loss;
  pl.clip_ratio = actor.clip_ratio();
  if (actor.has_clip_ratio_low()) pl.clip_ratio_low = actor.clip_ratio_low();
  if (actor.has_clip_ratio_high()) pl.clip_ratio_high = actor.clip_ratio_high();
  pl.clip_ratio_c = actor.clip_ratio_c();
  pl.loss_agg_mode = actor.loss_agg_mode();
  if (actor.has_loss_scale_factor())
    pl.agg.loss_scale_factor = actor.loss_scale_factor();
  const PolicyLossSettings& pls = actor.policy_loss();
  pl.clip_cov_ratio = pls.clip_cov_ratio();
  pl.clip_cov_lb = pls.clip_cov_lb();
  pl.clip_cov_ub = pls.clip_cov_ub();
  pl.clip_cov_seed = seed;
  pl.kl_cov_ratio = pls.kl_cov_ratio();
  pl.ppo_kl_coef = pls.ppo_kl_coef();
  pl.tau_pos = pls.tau_pos();
  pl.tau_neg = pls.tau_neg();
  ao.entropy_coeff = actor.entropy_coeff();
  ao.calculate_entropy = actor.calculate_entropy();
  ao.calculate_sum_pi_squared = actor.calculate_sum_pi_squared();
  const std::string& estimator = config.algorithm().adv_estimator();
  if ((estimator == "optimal_token_baseline" ||
       estimator == "tir_optimal_token_baseline") &&
      !ao.calculate_sum_pi_squared) {
    // verl asserts the same in compute_advantage.
    return absl::InvalidArgumentError(
        absl::StrCat("algorithm.adv_estimator=", estimator,
                     " needs the actor's sum of squared probabilities: set "
                     "actor_rollout_ref.actor.calculate_sum_pi_squared=true"));
  }
  ao.use_kl_loss = actor.use_kl_loss();
  ao.kl_loss_coef = actor.kl_loss_coef();
  ao.kl_loss_type = actor.kl_loss_type();
  if (ao.loss_mode == "flowrl") {
    // verl's recipe/flowrl: the trajectory-balance loss replaces the PPO loss.
    ao.flowrl.tb_coef = config.algorithm().tb_coef();
    ao.flowrl.variant = pls.flowrl_variant();
    ao.flowrl.tis_imp_ratio_cap = actor.tis_imp_ratio_cap();
    VERL_RETURN_IF_ERROR(ValidateFlowRlVariant(ao.flowrl.variant));
    if (groups.sp && groups.sp->size() > 1) {
      return absl::InvalidArgumentError(
          "actor_rollout_ref.actor.policy_loss.loss_mode=flowrl: "
          "ulysses_sequence_parallel_size > 1 is not supported (the log-Z "
          "head reads each prompt's hidden states whole)");
    }
    if (ao.use_kl_loss || ao.entropy_coeff != 0) {
      LOG(WARNING) << "flowrl: the loss is the trajectory-balance loss alone, "
                      "as in verl's recipe; actor.use_kl_loss only provides "
                      "the reference log-probs and entropy_coeff is not "
                      "applied";
    }
  }
  VERL_ASSIGN_OR_RETURN(RolloutCorrectionConfig rc,
                        RolloutCorrectionFromConfig(config));
  if (rc.bypass_mode) {
    // verl's apply_bypass_mode: the loss sees the rollout policy as old.
    ao.loss_mode = "bypass_mode";
    ao.policy_loss.rollout_correction = rc;
  }
  return ao;
}

ActorOptions RefOptionsFromActor(const ActorOptions& actor,
                                 const parallel::UlyssesGroups& groups) {
  ActorOptions ref = actor;
  ref.calculate_sum_pi_squared = false;  // only the old policy's is used
  ref.sp_group = groups.sp;
  ref.log_prob_micro.same_count_group = groups.dp.get();
  return ref;
}

CriticOptions CriticOptionsFromConfig(const PpoTrainerConfig& config,
                                      const parallel::UlyssesGroups& groups,
                                      const MicroBatchOptions& actor_update) {
  const CriticConfig& c = config.critic();
  const int64_t n = config.actor_rollout_ref().rollout().n();
  CriticOptions co;
  co.mini_batch_size = c.ppo_mini_batch_size() * n / groups.dp->size();
  co.update_micro.micro_batch_size = c.has_ppo_micro_batch_size_per_gpu()
                                         ? c.ppo_micro_batch_size_per_gpu()
                                         : actor_update.micro_batch_size;
  co.update_micro.use_dynamic_bsz = c.use_dynamic_bsz();
  co.update_micro.max_token_len =
      c.ppo_max_token_len_per_gpu() * groups.sp->size();
  co.sp_group = groups.sp;
  co.update_micro.num_batches_divided_by =
      InterleavedMicroBatchDivisor(c.strategy(), c.megatron());
  co.forward_micro = co.update_micro;
  co.forward_micro.same_count_group = groups.dp.get();
  if (c.strategy() == Strategy::megatron &&
      c.megatron().expert_model_parallel_size() > 1) {
    co.update_micro.same_count_group = groups.dp.get();  // as the actor's
  }
  if (c.has_forward_micro_batch_size_per_gpu()) {
    co.forward_micro.micro_batch_size = c.forward_micro_batch_size_per_gpu();
  }
  co.ppo_epochs = c.ppo_epochs();
  co.cliprange_value = c.cliprange_value();
  co.loss_agg_mode = c.loss_agg_mode();
  return co;
}

absl::StatusOr<RolloutOptions> RolloutOptionsFromConfig(
    const PpoTrainerConfig& config, int64_t pad_token_id, uint64_t seed) {
  const infer::RolloutConfig& r = config.actor_rollout_ref().rollout();
  RolloutOptions ro;
  VERL_ASSIGN_OR_RETURN(ro.train_params,
                        infer::SamplingParamsFromRolloutConfig(r, false));
  VERL_ASSIGN_OR_RETURN(ro.val_params,
                        infer::SamplingParamsFromRolloutConfig(r, true));
  ro.response_length = config.data().max_response_length();
  ro.pad_token_id = std::max<int64_t>(pad_token_id, 0);
  ro.calculate_log_probs = r.calculate_log_probs();
  ro.free_cache_engine = r.free_cache_engine();
  ro.seed = seed;
  return ro;
}

absl::StatusOr<std::shared_ptr<infer::agent::AgentLoop>> AgentLoopFromConfig(
    const PpoTrainerConfig& config, const models::Tokenizer* tokenizer) {
  const infer::RolloutConfig& r = config.actor_rollout_ref().rollout();
  const infer::MultiTurnConfig& mt = r.multi_turn();
  if (!UsesAgentLoop(config)) return std::shared_ptr<infer::agent::AgentLoop>();
  if (mt.format() != "hermes") {
    return absl::InvalidArgumentError(
        absl::StrCat("actor_rollout_ref.rollout.multi_turn.format: '",
                     mt.format(), "' is not available (hermes only)"));
  }
  infer::agent::AgentLoopOptions o;
  o.response_length = config.data().max_response_length();
  o.max_assistant_turns =
      mt.has_max_assistant_turns() ? mt.max_assistant_turns() : 0;
  o.max_user_turns = mt.has_max_user_turns() ? mt.max_user_turns() : 0;
  o.max_parallel_calls = mt.max_parallel_calls();
  o.max_tool_response_length = mt.max_tool_response_length();
  absl::StatusOr<infer::agent::TruncateSide> side =
      infer::agent::ParseTruncateSide(mt.tool_response_truncate_side());
  if (!side.ok()) {
    return Annotate(side.status(),
                    "actor_rollout_ref.rollout.multi_turn."
                    "tool_response_truncate_side");
  }
  o.truncate_side = *side;
  o.default_agent_loop = r.agent().default_agent_loop();
  o.num_workers = static_cast<int>(r.agent().num_workers());
  if (r.agent().has_agent_loop_config_path()) {
    absl::StatusOr<std::map<std::string, std::string>> loops =
        infer::agent::LoadAgentLoopConfig(r.agent().agent_loop_config_path());
    if (!loops.ok()) {
      return Annotate(loops.status(),
                      "actor_rollout_ref.rollout.agent.agent_loop_config_path");
    }
    o.agent_loops = *std::move(loops);
  }
  std::vector<std::unique_ptr<infer::agent::Tool>> tools;
  if (mt.has_tool_config_path()) {
    VERL_ASSIGN_OR_RETURN(tools, LoadAgentTools(mt.tool_config_path()));
  }
  std::map<std::string, std::unique_ptr<infer::agent::Interaction>>
      interactions;
  if (mt.has_interaction_config_path()) {
    VERL_ASSIGN_OR_RETURN(interactions,
                          LoadAgentInteractions(mt.interaction_config_path()));
  }
  VERL_ASSIGN_OR_RETURN(
      std::unique_ptr<infer::agent::AgentLoop> loop,
      infer::agent::AgentLoop::Create(std::move(o), tokenizer, std::move(tools),
                                      std::move(interactions)));
  return std::shared_ptr<infer::agent::AgentLoop>(std::move(loop));
}

absl::StatusOr<infer::EngineOptions> EngineOptionsFromConfig(
    const PpoTrainerConfig& config, uint64_t seed) {
  const infer::RolloutConfig& r = config.actor_rollout_ref().rollout();
  VERL_ASSIGN_OR_RETURN(infer::EngineOptions eo,
                        infer::EngineOptionsFromRolloutConfig(r));
  if (!r.has_max_model_len()) {
    eo.max_model_len =
        config.data().max_prompt_length() + config.data().max_response_length();
  }
  if (!r.has_dtype()) eo.dtype.clear();
  if (!r.engine_kwargs().vllm().count("seed")) eo.seed = seed;
  return eo;
}

RewardManagerConfig RewardManagerConfigFromConfig(
    const PpoTrainerConfig& config, const std::string& eos_text) {
  RewardManagerConfig rm;
  rm.name = config.reward_model().reward_manager();
  const RewardKwargs& rk = config.reward_model().reward_kwargs();
  rm.overlong_buffer_enable = rk.overlong_buffer_cfg().enable();
  rm.overlong_buffer_len = rk.overlong_buffer_cfg().len();
  rm.overlong_penalty_factor = rk.overlong_buffer_cfg().penalty_factor();
  rm.overlong_log = rk.overlong_buffer_cfg().log();
  rm.max_resp_len = rk.has_max_resp_len() ? rk.max_resp_len()
                                          : config.data().max_response_length();
  rm.eos_text = eos_text;
  // Not Python: custom_reward_function.path is a command reading and
  // writing JSON lines (docs/training.md); it scores whole batches.
  if (config.custom_reward_function().has_path() && rm.name == "naive") {
    rm.name = "batch";
  }
  return rm;
}

MicroBatchOptions RewardModelMicroFromConfig(const PpoTrainerConfig& config,
                                             int64_t dp) {
  const RewardModelConfig& rmc = config.reward_model();
  const int64_t n = config.actor_rollout_ref().rollout().n();
  MicroBatchOptions micro;
  micro.micro_batch_size =
      rmc.has_micro_batch_size_per_gpu() ? rmc.micro_batch_size_per_gpu()
      : rmc.has_micro_batch_size()
          ? std::max<int64_t>(rmc.micro_batch_size() / dp, 1)
          : std::max<int64_t>(config.data().train_batch_size() * n / dp, 1);
  micro.use_dynamic_bsz = rmc.use_dynamic_bsz();
  micro.max_token_len = rmc.forward_max_token_len_per_gpu();
  return micro;
}

}  // namespace verl::rl
