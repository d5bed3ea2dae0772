// File: verl/rl/trainer/config/config.cc
#include "verl/rl/trainer/config/config.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "glog/logging.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "verl/core/config_loader.h"
#include "verl/core/status.h"
#include "verl/models/megatron/megatron_options.h"
#include "verl/rl/trainer/config/config_keys.h"

namespace verl::rl {
namespace {

// `role`'s null tool/save_path <- the global profiler's; null enable/
// all_ranks and empty ranks <- `base` (the actor's, for the rollout) or
// false/empty.
void InheritProfiler(const profiler::GlobalProfilerConfig& global,
                     const profiler::ProfilerConfig* base,
                     profiler::ProfilerConfig* role) {
  if (global.has_tool()) VERL_INHERIT(*role, tool, global.tool());
  if (global.has_save_path()) {
    VERL_INHERIT(*role, save_path, global.save_path());
  }
  VERL_INHERIT(*role, enable, base != nullptr && base->enable());
  VERL_INHERIT(*role, all_ranks, base != nullptr && base->all_ranks());
  if (base != nullptr && role->ranks_size() == 0) {
    *role->mutable_ranks() = base->ranks();
  }
}

void InheritLoadContents(ckpt::CheckpointConfig* checkpoint) {
  if (checkpoint->load_contents_size() == 0) {
    *checkpoint->mutable_load_contents() = checkpoint->save_contents();
  }
}

// verl's Megatron scheduler spelling: lr_decay_style constant|cosine ->
// lr_scheduler_type, min_lr -> min_lr_ratio, while those are at their
// defaults (other styles and conflicting values are refused by validation,
// so a printed config reloaded with a changed key is never silently undone).
void ResolveMcoreSchedulerAlias(parallel::OptimConfig* optim) {
  if (optim->has_lr_decay_style() && optim->lr_scheduler_type() == "constant" &&
      (optim->lr_decay_style() == "constant" ||
       optim->lr_decay_style() == "cosine")) {
    optim->set_lr_scheduler_type(optim->lr_decay_style());
  }
  if (optim->has_min_lr() && optim->lr() > 0 && optim->min_lr_ratio() == 0) {
    optim->set_min_lr_ratio(optim->min_lr() / optim->lr());
  }
}

// Megatron module names of verl's nested model.lora.target_modules -> HF
// leaf names; other names (HF names, all-linear) pass through.
std::vector<std::string> HfLoraModules(
    const google::protobuf::RepeatedPtrField<std::string>& names) {
  static const auto* const kMap =
      new std::vector<std::pair<std::string, std::vector<std::string>>>{
          {"linear_qkv", {"q_proj", "k_proj", "v_proj"}},
          {"linear_q", {"q_proj"}},
          {"linear_k", {"k_proj"}},
          {"linear_v", {"v_proj"}},
          {"linear_proj", {"o_proj"}},
          {"linear_fc1", {"gate_proj", "up_proj"}},
          {"linear_fc1_gate", {"gate_proj"}},
          {"linear_fc1_up", {"up_proj"}},
          {"linear_fc2", {"down_proj"}},
      };
  std::vector<std::string> out;
  for (const std::string& name : names) {
    auto it =
        absl::c_find_if(*kMap, [&](const auto& e) { return e.first == name; });
    const std::vector<std::string> hf =
        it == kMap->end() ? std::vector<std::string>{name} : it->second;
    for (const std::string& h : hf) {
      if (!absl::c_linear_search(out, h)) out.push_back(h);
    }
  }
  return out;
}

// The flat LoRA keys verl's nested `lora` section sets (when the flat rank
// is 0); conflicting values are refused by CheckNestedLora.
template <typename ModelMsg>
void ResolveNestedLora(ModelMsg* m) {
  const models::LoraSection& l = m->lora();
  if (!l.has_rank() || l.rank() <= 0 || m->lora_rank() > 0) return;
  m->set_lora_rank(l.rank());
  m->set_lora_alpha(l.has_alpha() ? l.alpha() : 32.0);  // verl's default
  static const google::protobuf::RepeatedPtrField<std::string> kDefault = [] {
    google::protobuf::RepeatedPtrField<std::string> d;
    for (const char* n :
         {"linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"}) {
      *d.Add() = n;
    }
    return d;
  }();
  const std::vector<std::string> targets = HfLoraModules(
      l.target_modules_size() > 0 ? l.target_modules() : kDefault);
  m->mutable_target_modules()->Assign(targets.begin(), targets.end());
}

}  // namespace

const std::string& PpoTrainerDefaultsText() {
  static const std::string* const kText = new std::string(
#include "verl/rl/trainer/config/ppo_trainer_defaults.inc"
  );
  return *kText;
}

PpoTrainerConfig DefaultPpoTrainerConfig() {
  absl::StatusOr<PpoTrainerConfig> config = LoadPpoTrainerConfig("", {});
  VERL_CHECK_OK(config.status());
  return *std::move(config);
}

absl::StatusOr<PpoTrainerConfig> LoadPpoTrainerConfig(
    const std::string& config_file, const std::vector<std::string>& overrides) {
  return core::LoadResolvedConfig<PpoTrainerConfig>(
      {PpoTrainerDefaultsText(),
       "verl/rl/trainer/config/ppo_trainer_defaults.textproto", config_file,
       overrides},
      &ResolvePpoTrainerConfig);
}

void ResolvePpoTrainerConfig(PpoTrainerConfig* config) {
  const DataConfig& data = config->data();
  ActorRolloutRefConfig& arr = *config->mutable_actor_rollout_ref();
  const models::ModelSettings& model = arr.model();
  ActorConfig& actor = *arr.mutable_actor();
  RefConfig& ref = *arr.mutable_ref();
  infer::RolloutConfig& rollout = *arr.mutable_rollout();
  CriticConfig& critic = *config->mutable_critic();
  RewardModelConfig& rm = *config->mutable_reward_model();
  const profiler::GlobalProfilerConfig& global = config->global_profiler();

  // verl's current spelling actor.tau_pos/tau_neg wins when set.
  if (actor.has_tau_pos()) {
    actor.mutable_policy_loss()->set_tau_pos(actor.tau_pos());
  }
  if (actor.has_tau_neg()) {
    actor.mutable_policy_loss()->set_tau_neg(actor.tau_neg());
  }
  ResolveNestedLora(arr.mutable_model());
  if (model.lora().exclude_modules_size() > 0 && !model.has_exclude_modules()) {
    arr.mutable_model()->set_exclude_modules(
        absl::StrJoin(HfLoraModules(model.lora().exclude_modules()), ","));
  }
  if (model.lora().has_adapter_path() && !model.has_lora_adapter_path()) {
    arr.mutable_model()->set_lora_adapter_path(model.lora().adapter_path());
  }
  ResolveMcoreSchedulerAlias(actor.mutable_optim());
  VERL_INHERIT(actor, rollout_n, arr.rollout().n());
  VERL_INHERIT(ref, rollout_n, arr.rollout().n());
  VERL_INHERIT(actor, use_fused_kernels, model.use_fused_kernels());
  VERL_INHERIT(actor, use_remove_padding, model.use_remove_padding());
  InheritLoadContents(actor.mutable_checkpoint());
  InheritProfiler(global, nullptr, actor.mutable_profiler());

  VERL_INHERIT(ref, strategy, actor.strategy());
  VERL_INHERIT(ref, use_torch_compile, actor.use_torch_compile());
  VERL_INHERIT(ref, log_prob_use_dynamic_bsz, actor.use_dynamic_bsz());
  VERL_INHERIT(ref, log_prob_max_token_len_per_gpu,
               actor.ppo_max_token_len_per_gpu());
  VERL_INHERIT(ref, ulysses_sequence_parallel_size,
               actor.ulysses_sequence_parallel_size());
  InheritProfiler(global, nullptr, ref.mutable_profiler());

  VERL_INHERIT(rollout, prompt_length, data.max_prompt_length());
  VERL_INHERIT(rollout, response_length, data.max_response_length());
  VERL_INHERIT(rollout, log_prob_use_dynamic_bsz, actor.use_dynamic_bsz());
  VERL_INHERIT(rollout, log_prob_max_token_len_per_gpu,
               actor.ppo_max_token_len_per_gpu());
  InheritProfiler(global, &actor.profiler(), rollout.mutable_profiler());

  VERL_INHERIT(critic, rollout_n, rollout.n());
  VERL_INHERIT(critic, ppo_mini_batch_size, actor.ppo_mini_batch_size());
  VERL_INHERIT(critic, use_dynamic_bsz, actor.use_dynamic_bsz());
  VERL_INHERIT(critic, ppo_epochs, actor.ppo_epochs());
  VERL_INHERIT(critic, shuffle, actor.shuffle());
  VERL_INHERIT(critic, loss_agg_mode, actor.loss_agg_mode());
  VERL_INHERIT(critic, forward_max_token_len_per_gpu,
               critic.ppo_max_token_len_per_gpu());
  if (critic.has_ppo_micro_batch_size()) {
    VERL_INHERIT(critic, forward_micro_batch_size,
                 critic.ppo_micro_batch_size());
  }
  if (critic.has_ppo_micro_batch_size_per_gpu()) {
    VERL_INHERIT(critic, forward_micro_batch_size_per_gpu,
                 critic.ppo_micro_batch_size_per_gpu());
  }
  ResolveMcoreSchedulerAlias(critic.mutable_optim());
  CriticModelConfig& critic_model = *critic.mutable_model();
  ResolveNestedLora(&critic_model);
  VERL_INHERIT(critic_model, path, model.path());
  VERL_INHERIT(critic_model, preset, model.preset());
  VERL_INHERIT(critic_model, tokenizer_path, model.path());
  VERL_INHERIT(critic_model, trust_remote_code, model.trust_remote_code());
  if (model.has_external_lib()) {
    VERL_INHERIT(critic_model, external_lib, model.external_lib());
  }
  InheritLoadContents(critic.mutable_checkpoint());
  InheritProfiler(global, nullptr, critic.mutable_profiler());

  // verl's DAPO spelling reward_model.overlong_buffer.* wins when set.
  const OverlongBufferAlias& alias = rm.overlong_buffer();
  OverlongBufferConfig& overlong =
      *rm.mutable_reward_kwargs()->mutable_overlong_buffer_cfg();
  if (alias.has_enable()) overlong.set_enable(alias.enable());
  if (alias.has_len()) overlong.set_len(alias.len());
  if (alias.has_penalty_factor()) {
    overlong.set_penalty_factor(alias.penalty_factor());
  }
  if (alias.has_log()) overlong.set_log(alias.log());
  // verl's newer spelling reward_manager.name, while reward_manager is at
  // its default (a conflict is refused by validation).
  if (config->reward_manager().has_name() && rm.reward_manager() == "naive") {
    rm.set_reward_manager(config->reward_manager().name());
  }
  VERL_INHERIT(*rm.mutable_model(), input_tokenizer, model.path());
  VERL_INHERIT(rm, use_dynamic_bsz, critic.use_dynamic_bsz());
  VERL_INHERIT(rm, forward_max_token_len_per_gpu,
               critic.forward_max_token_len_per_gpu());
  InheritProfiler(global, nullptr, rm.mutable_profiler());

  TrainerConfig& trainer = *config->mutable_trainer();
  VERL_INHERIT(trainer, default_local_dir,
               absl::StrCat("checkpoints/", trainer.project_name(), "/",
                            trainer.experiment_name()));
}

absl::Status CheckResolved(const PpoTrainerConfig& config) {
  // Fields ResolvePpoTrainerConfig always sets.
  const ActorRolloutRefConfig& arr = config.actor_rollout_ref();
  if (arr.ref().has_strategy() && arr.rollout().has_prompt_length() &&
      config.critic().has_ppo_mini_batch_size() &&
      config.trainer().has_default_local_dir()) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      "the trainer config is not resolved: build it with LoadPpoTrainerConfig "
      "or call ResolvePpoTrainerConfig before RunPpo");
}

bool NeedCritic(const PpoTrainerConfig& config) {
  if (config.critic().has_enable()) return config.critic().enable();
  return config.algorithm().adv_estimator() == "gae";
}

bool NeedReferencePolicy(const PpoTrainerConfig& config) {
  return config.actor_rollout_ref().actor().use_kl_loss() ||
         config.algorithm().use_kl_in_reward() ||
         config.actor_rollout_ref().actor().policy_loss().loss_mode() ==
             "flowrl";
}

bool UsesAgentLoop(const PpoTrainerConfig& config) {
  const infer::RolloutConfig& rollout = config.actor_rollout_ref().rollout();
  return rollout.multi_turn().enable() ||
         rollout.agent().default_agent_loop() != "single_turn_agent" ||
         rollout.agent().has_agent_loop_config_path();
}

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Every violation found, one line each (ValidatePpoTrainerConfig reports them
// all at once).
class Problems {
 public:
  void Add(std::string line) { lines_.push_back(std::move(line)); }
  void Add(const absl::Status& s) {
    if (!s.ok()) lines_.emplace_back(s.message());
  }
  absl::Status ToStatus() const {
    if (lines_.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrJoin(lines_, "\n"));
  }

 private:
  std::vector<std::string> lines_;
};

absl::Status Invalid(absl::string_view message) {
  return absl::InvalidArgumentError(message);
}

// What a numeric key may hold.
enum class Range {
  kPositive,            // > 0
  kNonNegative,         // >= 0
  kProbability,         // [0, 1]
  kOpenProbability,     // (0, 1]
  kPositiveOrMinusOne,  // > 0, or -1 (verl's "off" / "all")
  kAtLeastMinusOne,     // >= -1
};

// Which runs a key matters to (keys of a role that is not used are not
// checked: verl's defaults leave some of them meaningless then).
enum class When { kAlways, kCritic, kRewardModel, kReference };

struct RangeRule {
  const char* key;
  Range range;
  When when = When::kAlways;
};

// Every size, count, length, rate and probability key of the tree (null keys
// are skipped; list elements are checked one by one).
constexpr RangeRule kRangeRules[] = {
    {"data.train_batch_size", Range::kPositive},
    {"data.gen_batch_size", Range::kPositive},
    {"data.val_batch_size", Range::kPositive},
    {"data.max_prompt_length", Range::kPositive},
    {"data.max_response_length", Range::kPositive},
    {"data.dataloader_num_workers", Range::kNonNegative},
    {"data.filter_overlong_prompts_workers", Range::kPositive},
    {"data.train_max_samples", Range::kPositiveOrMinusOne},
    {"data.val_max_samples", Range::kPositiveOrMinusOne},
    {"actor_rollout_ref.nccl_timeout", Range::kPositive},
    {"actor_rollout_ref.model.lora_rank", Range::kNonNegative},
    {"actor_rollout_ref.actor.ppo_mini_batch_size", Range::kPositive},
    {"actor_rollout_ref.actor.ppo_micro_batch_size", Range::kPositive},
    {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", Range::kPositive},
    {"actor_rollout_ref.actor.ppo_max_token_len_per_gpu", Range::kPositive},
    {"actor_rollout_ref.actor.clip_ratio", Range::kNonNegative},
    {"actor_rollout_ref.actor.clip_ratio_low", Range::kNonNegative},
    {"actor_rollout_ref.actor.clip_ratio_high", Range::kNonNegative},
    {"actor_rollout_ref.actor.kl_loss_coef", Range::kNonNegative},
    {"actor_rollout_ref.actor.ppo_epochs", Range::kPositive},
    {"actor_rollout_ref.actor.grad_clip", Range::kNonNegative},
    {"actor_rollout_ref.actor.ulysses_sequence_parallel_size",
     Range::kPositive},
    {"actor_rollout_ref.actor.optim.lr", Range::kNonNegative},
    {"actor_rollout_ref.actor.optim.lr_warmup_steps_ratio",
     Range::kProbability},
    {"actor_rollout_ref.actor.optim.lr_warmup_steps", Range::kAtLeastMinusOne},
    {"actor_rollout_ref.actor.optim.weight_decay", Range::kNonNegative},
    {"actor_rollout_ref.actor.optim.betas", Range::kProbability},
    {"actor_rollout_ref.actor.optim.clip_grad", Range::kNonNegative},
    {"actor_rollout_ref.actor.optim.min_lr_ratio", Range::kProbability},
    {"actor_rollout_ref.ref.log_prob_micro_batch_size", Range::kPositive,
     When::kReference},
    {"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
     Range::kPositive, When::kReference},
    {"actor_rollout_ref.ref.log_prob_max_token_len_per_gpu", Range::kPositive,
     When::kReference},
    {"actor_rollout_ref.ref.ulysses_sequence_parallel_size", Range::kPositive,
     When::kReference},
    {"actor_rollout_ref.rollout.temperature", Range::kNonNegative},
    {"actor_rollout_ref.rollout.top_k", Range::kAtLeastMinusOne},
    {"actor_rollout_ref.rollout.top_p", Range::kOpenProbability},
    {"actor_rollout_ref.rollout.n", Range::kPositive},
    {"actor_rollout_ref.rollout.repetition_penalty", Range::kPositive},
    {"actor_rollout_ref.rollout.val_kwargs.temperature", Range::kNonNegative},
    {"actor_rollout_ref.rollout.val_kwargs.top_k", Range::kAtLeastMinusOne},
    {"actor_rollout_ref.rollout.val_kwargs.top_p", Range::kOpenProbability},
    {"actor_rollout_ref.rollout.val_kwargs.n", Range::kPositive},
    {"actor_rollout_ref.rollout.prompt_length", Range::kPositive},
    {"actor_rollout_ref.rollout.response_length", Range::kPositive},
    {"actor_rollout_ref.rollout.max_model_len", Range::kPositive},
    {"actor_rollout_ref.rollout.gpu_memory_utilization",
     Range::kOpenProbability},
    {"actor_rollout_ref.rollout.tensor_model_parallel_size", Range::kPositive},
    {"actor_rollout_ref.rollout.data_parallel_size", Range::kPositive},
    {"actor_rollout_ref.rollout.expert_parallel_size", Range::kPositive},
    {"actor_rollout_ref.rollout.pipeline_model_parallel_size",
     Range::kPositive},
    {"actor_rollout_ref.rollout.max_num_batched_tokens", Range::kPositive},
    {"actor_rollout_ref.rollout.max_num_seqs", Range::kPositive},
    {"actor_rollout_ref.rollout.over_sample_rate", Range::kNonNegative},
    {"actor_rollout_ref.rollout.log_prob_micro_batch_size", Range::kPositive},
    {"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
     Range::kPositive},
    {"actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu",
     Range::kPositive},
    {"actor_rollout_ref.sft_warmup.steps", Range::kNonNegative},
    {"actor_rollout_ref.sft_warmup.batch_size", Range::kPositive},
    {"actor_rollout_ref.sft_warmup.lr", Range::kNonNegative},
    {"critic.model.lora_rank", Range::kNonNegative, When::kCritic},
    {"critic.ppo_mini_batch_size", Range::kPositive, When::kCritic},
    {"critic.ppo_micro_batch_size", Range::kPositive, When::kCritic},
    {"critic.ppo_micro_batch_size_per_gpu", Range::kPositive, When::kCritic},
    {"critic.ppo_max_token_len_per_gpu", Range::kPositive, When::kCritic},
    {"critic.forward_max_token_len_per_gpu", Range::kPositive, When::kCritic},
    {"critic.forward_micro_batch_size", Range::kPositive, When::kCritic},
    {"critic.forward_micro_batch_size_per_gpu", Range::kPositive,
     When::kCritic},
    {"critic.ppo_epochs", Range::kPositive, When::kCritic},
    {"critic.cliprange_value", Range::kNonNegative, When::kCritic},
    {"critic.grad_clip", Range::kNonNegative, When::kCritic},
    {"critic.ulysses_sequence_parallel_size", Range::kPositive, When::kCritic},
    {"critic.optim.lr", Range::kNonNegative, When::kCritic},
    {"critic.optim.lr_warmup_steps_ratio", Range::kProbability, When::kCritic},
    {"critic.optim.lr_warmup_steps", Range::kAtLeastMinusOne, When::kCritic},
    {"critic.optim.weight_decay", Range::kNonNegative, When::kCritic},
    {"critic.optim.betas", Range::kProbability, When::kCritic},
    {"critic.optim.clip_grad", Range::kNonNegative, When::kCritic},
    {"critic.optim.min_lr_ratio", Range::kProbability, When::kCritic},
    {"reward_model.micro_batch_size", Range::kPositive, When::kRewardModel},
    {"reward_model.micro_batch_size_per_gpu", Range::kPositive,
     When::kRewardModel},
    {"reward_model.max_length", Range::kPositive, When::kRewardModel},
    {"reward_model.forward_max_token_len_per_gpu", Range::kPositive,
     When::kRewardModel},
    {"reward_model.ulysses_sequence_parallel_size", Range::kPositive,
     When::kRewardModel},
    {"reward_model.reward_kwargs.overlong_buffer_cfg.len", Range::kNonNegative},
    {"reward_model.reward_kwargs.overlong_buffer_cfg.penalty_factor",
     Range::kNonNegative},
    {"reward_model.reward_kwargs.max_resp_len", Range::kPositive},
    {"algorithm.gamma", Range::kProbability},
    {"algorithm.lam", Range::kProbability},
    {"algorithm.kl_ctrl.kl_coef", Range::kNonNegative},
    {"algorithm.kl_ctrl.target_kl", Range::kNonNegative},
    {"algorithm.rollout_correction.rollout_is_threshold", Range::kPositive},
    {"trainer.total_epochs", Range::kPositive},
    {"trainer.total_training_steps", Range::kPositive},
    {"trainer.nnodes", Range::kPositive},
    {"trainer.n_gpus_per_node", Range::kPositive},
    {"trainer.save_freq", Range::kPositiveOrMinusOne},
    {"trainer.max_consecutive_nonfinite_steps", Range::kNonNegative},
    {"trainer.test_freq", Range::kPositiveOrMinusOne},
    {"trainer.log_val_generations", Range::kNonNegative},
    {"trainer.critic_warmup", Range::kNonNegative},
    {"trainer.max_actor_ckpt_to_keep", Range::kPositive},
    {"trainer.max_critic_ckpt_to_keep", Range::kPositive},
};

const char* RangeText(Range range) {
  switch (range) {
    case Range::kPositive:
      return "> 0";
    case Range::kNonNegative:
      return ">= 0";
    case Range::kProbability:
      return "in [0, 1]";
    case Range::kOpenProbability:
      return "in (0, 1]";
    case Range::kPositiveOrMinusOne:
      return "> 0 or -1";
    case Range::kAtLeastMinusOne:
      return ">= -1";
  }
  return "?";
}

bool InRange(double v, Range range) {
  switch (range) {
    case Range::kPositive:
      return v > 0;
    case Range::kNonNegative:
      return v >= 0;
    case Range::kProbability:
      return v >= 0 && v <= 1;
    case Range::kOpenProbability:
      return v > 0 && v <= 1;
    case Range::kPositiveOrMinusOne:
      return v > 0 || v == -1;
    case Range::kAtLeastMinusOne:
      return v >= -1;
  }
  return false;
}

// The numbers stored at dotted `key` (a list: every element; null: none).
std::vector<double> NumbersAt(const Message& root, absl::string_view key) {
  const Message* msg = &root;
  std::vector<std::string> parts = absl::StrSplit(key, '.');
  for (size_t i = 0; i < parts.size(); ++i) {
    const FieldDescriptor* f = msg->GetDescriptor()->FindFieldByName(parts[i]);
    CHECK(f != nullptr) << "kRangeRules: no key " << key;
    const Reflection* r = msg->GetReflection();
    if (i + 1 < parts.size()) {
      msg = &r->GetMessage(*msg, f);
      continue;
    }
    std::vector<double> out;
    const int n = f->is_repeated() ? r->FieldSize(*msg, f)
                                   : (r->HasField(*msg, f) ? 1 : 0);
    for (int j = 0; j < n; ++j) {
      const bool rep = f->is_repeated();
      switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_INT64:
          out.push_back(static_cast<double>(
              rep ? r->GetRepeatedInt64(*msg, f, j) : r->GetInt64(*msg, f)));
          break;
        case FieldDescriptor::CPPTYPE_INT32:
          out.push_back(rep ? r->GetRepeatedInt32(*msg, f, j)
                            : r->GetInt32(*msg, f));
          break;
        case FieldDescriptor::CPPTYPE_DOUBLE:
          out.push_back(rep ? r->GetRepeatedDouble(*msg, f, j)
                            : r->GetDouble(*msg, f));
          break;
        default:
          LOG(FATAL) << "kRangeRules: " << key << " is not a number";
      }
    }
    return out;
  }
  return {};
}

// Every floating-point key holding NaN or an infinity, anywhere in the tree.
void CollectNonFinite(const Message& msg, const std::string& prefix,
                      Problems* problems) {
  const google::protobuf::Descriptor* d = msg.GetDescriptor();
  const Reflection* r = msg.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const std::string key = absl::StrCat(prefix, f->name());
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (!f->is_repeated() && r->HasField(msg, f)) {
        CollectNonFinite(r->GetMessage(msg, f), key + ".", problems);
      }
      continue;
    }
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_DOUBLE) continue;
    const int n =
        f->is_repeated() ? r->FieldSize(msg, f) : (r->HasField(msg, f) ? 1 : 0);
    for (int j = 0; j < n; ++j) {
      const double v = f->is_repeated() ? r->GetRepeatedDouble(msg, f, j)
                                        : r->GetDouble(msg, f);
      if (!std::isfinite(v)) {
        problems->Add(absl::StrCat("'", key, "' (", v, ") must be finite"));
        break;
      }
    }
  }
}

// verl's check_mutually_exclusive: exactly one of `<role>.<global>` (the
// deprecated global size) and `<role>.<global>_per_gpu` unless dynamic
// batching is on (then neither is needed).
absl::Status CheckMicroBatch(absl::string_view role, absl::string_view name,
                             bool has_global, bool has_per_gpu,
                             bool dynamic_bsz) {
  if (has_global && has_per_gpu) {
    return Invalid(absl::StrCat("remove '", role, ".", name, "': only '", role,
                                ".", name,
                                "_per_gpu' is supported (the former is "
                                "deprecated)"));
  }
  if (!has_global && !has_per_gpu && !dynamic_bsz) {
    return Invalid(absl::StrCat("set '", role, ".", name, "_per_gpu' (or '",
                                role, ".", name, "')"));
  }
  return absl::OkStatus();
}

// rollout.tensor_model_parallel_size > 1: consecutive ranks form one engine
// replica, so tp must divide the ranks; one request stream per replica
// (the agent loop drives an engine per rank).
// The model's own limits (heads, KV heads, MoE) are checked when the engine
// is built (verl/infer/tensor_parallel.h).
absl::Status CheckRolloutTensorParallel(const PpoTrainerConfig& config,
                                        int64_t n_gpus) {
  const infer::RolloutConfig& rollout = config.actor_rollout_ref().rollout();
  const int64_t tp = rollout.tensor_model_parallel_size();
  if (tp <= 1) return absl::OkStatus();
  const std::string key = absl::StrCat(
      "'actor_rollout_ref.rollout.tensor_model_parallel_size' (", tp, ")");
  if (n_gpus > 0 && n_gpus % tp != 0) {
    return Invalid(absl::StrCat(key, " must divide the ", n_gpus,
                                " ranks (trainer.nnodes x "
                                "trainer.n_gpus_per_node)"));
  }
  if (UsesAgentLoop(config)) {
    return Invalid(absl::StrCat(
        key,
        " is not available with agent-loop rollouts "
        "(actor_rollout_ref.rollout.multi_turn.enable, "
        "agent.default_agent_loop "
        "or agent.agent_loop_config_path: the agent loop drives one engine per "
        "rank)"));
  }
  return absl::OkStatus();
}

// `<role>.strategy=megatron`: the role's megatron.* keys must map to what
// is built (MegatronSettingsFromConfig names the key otherwise), tp must
// divide the ranks, and Ulysses is replaced by Megatron's own sequence
// parallelism.
absl::Status CheckMegatron(absl::string_view role, Strategy::Value strategy,
                           const parallel::megatron::MegatronConfig& megatron,
                           int64_t ulysses_sp, int64_t n_gpus) {
  if (strategy != Strategy::megatron) return absl::OkStatus();
  const std::string prefix = absl::StrCat(role, ".megatron");
  absl::Status settings =
      models::MegatronSettingsFromConfig(megatron, prefix).status();
  if (!settings.ok()) return Invalid(settings.message());
  // The forward-only reference has parameters to offload but no gradients
  // or optimizer state.
  if (role == "actor_rollout_ref.ref") {
    const std::pair<const char*, bool> offload[] = {
        {"grad_offload", megatron.grad_offload()},
        {"optimizer_offload", megatron.optimizer_offload()}};
    for (const auto& [key, on] : offload) {
      if (!on) continue;
      return Invalid(absl::StrCat(
          prefix, ".", key,
          "=true: the forward-only reference has no gradients or optimizer "
          "state (param_offload is served)"));
    }
  }
  const int64_t tp = megatron.tensor_model_parallel_size();
  if (n_gpus > 0 && n_gpus % tp != 0) {
    return Invalid(absl::StrCat(
        "'", prefix, ".tensor_model_parallel_size' (", tp, ") must divide the ",
        n_gpus, " ranks (trainer.nnodes x trainer.n_gpus_per_node)"));
  }
  const int64_t cp = megatron.context_parallel_size();
  if (n_gpus > 0 && n_gpus % (tp * cp) != 0) {
    return Invalid(absl::StrCat(
        "'", prefix, ".context_parallel_size' (", cp,
        ") x tensor_model_parallel_size (", tp, ") must divide the ", n_gpus,
        " ranks (trainer.nnodes x trainer.n_gpus_per_node)"));
  }
  const int64_t pp = megatron.pipeline_model_parallel_size();
  if (n_gpus > 0 && n_gpus % (tp * cp * pp) != 0) {
    return Invalid(absl::StrCat(
        "'", prefix, ".pipeline_model_parallel_size' (", pp,
        ") x context_parallel_size (", cp, ") x tensor_model_parallel_size (",
        tp, ") must divide the ", n_gpus,
        " ranks (trainer.nnodes x trainer.n_gpus_per_node)"));
  }
  if (ulysses_sp > 1) {
    return Invalid(
        absl::StrCat("'", role, ".ulysses_sequence_parallel_size=", ulysses_sp,
                     "' with strategy=megatron: use '", prefix,
                     ".sequence_parallel' (Megatron's sequence parallelism)"));
  }
  return absl::OkStatus();
}

// The ranks a role's batch is split over: Megatron's dp (world / (tp * cp);
// the tp and cp ranks share rows), else the Ulysses dp (world / sp).
int64_t DataParallelRanks(Strategy::Value strategy,
                          const parallel::megatron::MegatronConfig& megatron,
                          int64_t sp, int64_t n_gpus) {
  if (strategy == Strategy::megatron) {
    const int64_t model_ranks =
        std::max<int64_t>(megatron.tensor_model_parallel_size(), 1) *
        std::max<int64_t>(megatron.context_parallel_size(), 1) *
        std::max<int64_t>(megatron.pipeline_model_parallel_size(), 1);
    return std::max<int64_t>(n_gpus / model_ranks, 1);
  }
  return n_gpus / sp;
}

// What the actor's Megatron path does not have (one line per key).
void CheckMegatronActor(const PpoTrainerConfig& config, Problems& problems) {
  const ActorConfig& actor = config.actor_rollout_ref().actor();
  if (actor.strategy() != Strategy::megatron) return;
  const char* what =
      "' is not available with "
      "actor_rollout_ref.actor.strategy=megatron";
  if (config.actor_rollout_ref().model().lora_rank() > 0) {
    problems.Add(absl::StrCat("'actor_rollout_ref.model.lora_rank=",
                              config.actor_rollout_ref().model().lora_rank(),
                              what, " (LoRA)"));
  }
  if (actor.calculate_sum_pi_squared()) {
    problems.Add(absl::StrCat(
        "'actor_rollout_ref.actor.calculate_sum_pi_squared=true", what));
  }
  if (actor.policy_loss().loss_mode() == "flowrl" &&
      actor.megatron().pipeline_model_parallel_size() > 1) {
    problems.Add(absl::StrCat(
        "'actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=",
        actor.megatron().pipeline_model_parallel_size(),
        "' with policy_loss.loss_mode=flowrl: the log-Z head needs the "
        "final hidden states on every stage (not built)"));
  }
}

// verl's nested `<prefix>.lora.*` against the flat keys it is served as
// (ResolveNestedLora copied them when the flat rank was 0).
template <typename ModelMsg>
void CheckNestedLora(absl::string_view prefix, const ModelMsg& m,
                     Problems& problems) {
  const models::LoraSection& l = m.lora();
  if (l.has_type() && l.type() != "lora" && l.type() != "canonical_lora") {
    problems.Add(absl::StrCat(
        "'", prefix, ".lora.type=", l.type(),
        "' is not available here: adapters are LoRA on the HF modules "
        "(lora | canonical_lora)"));
  }
  if (!l.has_rank() || l.rank() <= 0) return;
  if (m.lora_rank() != l.rank()) {
    problems.Add(absl::StrCat("'", prefix, ".lora.rank' (", l.rank(),
                              ") conflicts with '", prefix, ".lora_rank' (",
                              m.lora_rank(), "): set one of them"));
  }
  if (l.has_alpha() && m.lora_alpha() != l.alpha()) {
    problems.Add(absl::StrCat("'", prefix, ".lora.alpha' (", l.alpha(),
                              ") conflicts with '", prefix, ".lora_alpha' (",
                              m.lora_alpha(), "): set one of them"));
  }
  if (l.target_modules_size() > 0) {
    const std::vector<std::string> want = HfLoraModules(l.target_modules());
    if (!std::equal(want.begin(), want.end(), m.target_modules().begin(),
                    m.target_modules().end())) {
      problems.Add(absl::StrCat(
          "'", prefix, ".lora.target_modules' ([",
          absl::StrJoin(l.target_modules(), ", "), "] = [",
          absl::StrJoin(want, ", "), "]) conflicts with '", prefix,
          ".target_modules' ([", absl::StrJoin(m.target_modules(), ", "),
          "]): set one of them"));
    }
  }
}

// The critic has no flat exclude_modules / lora_adapter_path.
void CheckCriticNestedLora(const CriticModelConfig& m, Problems& problems) {
  CheckNestedLora("critic.model", m, problems);
  if (m.lora().exclude_modules_size() > 0) {
    problems.Add(
        "'critic.model.lora.exclude_modules' is not available here: the "
        "critic's adapters follow critic.model.target_modules");
  }
  if (m.lora().has_adapter_path()) {
    problems.Add(
        "'critic.model.lora.adapter_path' is not available here: the "
        "critic's adapters start fresh");
  }
}

// verl's Megatron scheduler keys served as aliases
// (ResolveMcoreSchedulerAlias).
void CheckMcoreScheduler(absl::string_view prefix,
                         const parallel::OptimConfig& optim,
                         Problems& problems) {
  if (optim.has_min_lr() && optim.lr() > 0 &&
      std::abs(optim.min_lr_ratio() - optim.min_lr() / optim.lr()) >
          1e-9 * std::max(1.0, optim.min_lr_ratio())) {
    problems.Add(absl::StrCat("'", prefix, ".optim.min_lr' (", optim.min_lr(),
                              ") conflicts with '", prefix,
                              ".optim.min_lr_ratio' (", optim.min_lr_ratio(),
                              ") x lr: set one of them"));
  }
  if (!optim.has_lr_decay_style()) return;
  const std::string& style = optim.lr_decay_style();
  if (style != "constant" && style != "cosine") {
    problems.Add(
        absl::StrCat("'", prefix, ".optim.lr_decay_style=", style,
                     "' is not available here: constant and cosine are built "
                     "(linear, inverse_square_root and WSD are not)"));
  } else if (optim.lr_scheduler_type() != style) {
    problems.Add(absl::StrCat("'", prefix, ".optim.lr_decay_style' (", style,
                              ") conflicts with '", prefix,
                              ".optim.lr_scheduler_type' (",
                              optim.lr_scheduler_type(), "): set one of them"));
  } else if (optim.has_warmup_style() && optim.warmup_style() != style) {
    problems.Add(absl::StrCat("'", prefix, ".optim.lr_decay_style' (", style,
                              ") conflicts with '", prefix,
                              ".optim.warmup_style' (", optim.warmup_style(),
                              "): set one of them"));
  }
}

absl::Status CheckLossAggMode(absl::string_view key, const std::string& mode) {
  for (const char* valid : {"token-mean", "seq-mean-token-sum",
                            "seq-mean-token-mean", "seq-mean-token-sum-norm"}) {
    if (mode == valid) return absl::OkStatus();
  }
  return Invalid(
      absl::StrCat("bad value '", mode, "' for config key '", key,
                   "': expected one of: token-mean, seq-mean-token-sum, "
                   "seq-mean-token-mean, seq-mean-token-sum-norm"));
}

// Mini-batch `mini` prompts (x n trajectories) over the data-parallel ranks
// and into micro-batches of `micro_per_gpu` (when set), as verl's workers
// normalise them. Non-positive sizes are reported by the range checks.
absl::Status CheckMiniBatch(absl::string_view role, int64_t train_batch_size,
                            int64_t mini, int64_t n, int64_t dp, bool has_micro,
                            int64_t micro_per_gpu) {
  if (mini <= 0 || n <= 0 || dp <= 0 || train_batch_size <= 0) {
    return absl::OkStatus();
  }
  if (train_batch_size < mini) {
    return Invalid(absl::StrCat("'data.train_batch_size' (", train_batch_size,
                                ") must be >= '", role,
                                ".ppo_mini_batch_size' (", mini, ")"));
  }
  if ((mini * n) % dp != 0) {
    return Invalid(absl::StrCat(
        "'", role, ".ppo_mini_batch_size' x rollout.n (", mini * n,
        ") must be divisible by the ", dp, " data-parallel ranks"));
  }
  if (has_micro && micro_per_gpu > 0 &&
      ((mini * n) / dp) % micro_per_gpu != 0) {
    return Invalid(
        absl::StrCat("the per-rank mini-batch (", (mini * n) / dp, " = ", role,
                     ".ppo_mini_batch_size x rollout.n / ", dp,
                     " ranks) must be divisible by '", role,
                     ".ppo_micro_batch_size_per_gpu' (", micro_per_gpu, ")"));
  }
  return absl::OkStatus();
}

// `<role>.ulysses_sequence_parallel_size` must divide the ranks.
absl::Status CheckSequenceParallel(absl::string_view key, int64_t sp,
                                   int64_t n_gpus) {
  if (sp <= 0 || n_gpus <= 0 || n_gpus % sp == 0) return absl::OkStatus();
  return Invalid(absl::StrCat("'", key, "' (", sp, ") must divide the ", n_gpus,
                              " ranks"));
}

}  // namespace

absl::Status ValidatePpoTrainerConfig(const PpoTrainerConfig& config) {
  Problems problems;
  for (const RangeRule& rule : kRangeRules) {
    if ((rule.when == When::kCritic && !NeedCritic(config)) ||
        (rule.when == When::kRewardModel && !config.reward_model().enable()) ||
        (rule.when == When::kReference && !NeedReferencePolicy(config))) {
      continue;
    }
    for (double v : NumbersAt(config, rule.key)) {
      if (std::isnan(v) || InRange(v, rule.range)) continue;
      problems.Add(absl::StrCat("'", rule.key, "' (", v, ") must be ",
                                RangeText(rule.range)));
      break;
    }
  }
  CollectNonFinite(config, "", &problems);

  const ActorRolloutRefConfig& arr = config.actor_rollout_ref();
  const ActorConfig& actor = arr.actor();
  const RefConfig& ref = arr.ref();
  const infer::RolloutConfig& rollout = arr.rollout();
  const CriticConfig& critic = config.critic();
  const TrainerConfig& trainer = config.trainer();
  const int64_t n_gpus = trainer.nnodes() * trainer.n_gpus_per_node();
  const int64_t n = rollout.n();
  const int64_t train_batch_size = config.data().train_batch_size();
  if (n_gpus > 0 && n > 0 && train_batch_size > 0 &&
      (train_batch_size * n) % n_gpus != 0) {
    problems.Add(absl::StrCat(
        "'data.train_batch_size' x 'actor_rollout_ref.rollout.n' (",
        train_batch_size * n, ") must be divisible by the ", n_gpus,
        " ranks (trainer.nnodes x trainer.n_gpus_per_node)"));
  }
  if (absl::c_find_if(kRolloutNames, [&](const char* name) {
        return rollout.name() == name;
      }) == std::end(kRolloutNames)) {
    problems.Add(absl::StrCat(
        "bad value '", rollout.name(),
        "' for config key 'actor_rollout_ref.rollout.name': expected one of: ",
        absl::StrJoin(kRolloutNames, ", "),
        " (vllm and sglang name the built-in engine)"));
  }
  if (rollout.mode() != "async") {
    problems.Add(absl::StrCat("bad value '", rollout.mode(),
                              "' for config key 'actor_rollout_ref.rollout."
                              "mode': only async is supported"));
  }

  problems.Add(CheckRolloutTensorParallel(config, n_gpus));
  problems.Add(CheckMegatron("actor_rollout_ref.actor", actor.strategy(),
                             actor.megatron(),
                             actor.ulysses_sequence_parallel_size(), n_gpus));
  CheckMegatronActor(config, problems);
  if (NeedReferencePolicy(config)) {
    problems.Add(CheckMegatron("actor_rollout_ref.ref", ref.strategy(),
                               ref.megatron(),
                               ref.ulysses_sequence_parallel_size(), n_gpus));
  }
  if (NeedCritic(config)) {
    problems.Add(CheckMegatron("critic", critic.strategy(), critic.megatron(),
                               critic.ulysses_sequence_parallel_size(),
                               n_gpus));
  }
  problems.Add(CheckMicroBatch(
      "actor_rollout_ref.actor", "ppo_micro_batch_size",
      actor.has_ppo_micro_batch_size(),
      actor.has_ppo_micro_batch_size_per_gpu(), actor.use_dynamic_bsz()));
  problems.Add(CheckMicroBatch("actor_rollout_ref.rollout",
                               "log_prob_micro_batch_size",
                               rollout.has_log_prob_micro_batch_size(),
                               rollout.has_log_prob_micro_batch_size_per_gpu(),
                               rollout.log_prob_use_dynamic_bsz()));
  if (NeedReferencePolicy(config)) {
    problems.Add(CheckMicroBatch("actor_rollout_ref.ref",
                                 "log_prob_micro_batch_size",
                                 ref.has_log_prob_micro_batch_size(),
                                 ref.has_log_prob_micro_batch_size_per_gpu(),
                                 ref.log_prob_use_dynamic_bsz()));
  }
  const int64_t actor_sp = actor.ulysses_sequence_parallel_size();
  problems.Add(CheckSequenceParallel(
      "actor_rollout_ref.actor.ulysses_sequence_parallel_size", actor_sp,
      n_gpus));
  if (!actor.use_dynamic_bsz() && actor_sp > 0) {
    problems.Add(CheckMiniBatch(
        "actor_rollout_ref.actor", train_batch_size,
        actor.ppo_mini_batch_size(), n,
        DataParallelRanks(actor.strategy(), actor.megatron(), actor_sp, n_gpus),
        actor.has_ppo_micro_batch_size_per_gpu(),
        actor.ppo_micro_batch_size_per_gpu()));
  }
  problems.Add(CheckLossAggMode("actor_rollout_ref.actor.loss_agg_mode",
                                actor.loss_agg_mode()));
  if (!(actor.clip_ratio_c() > 1.0)) {
    problems.Add(absl::StrCat("'actor_rollout_ref.actor.clip_ratio_c' (",
                              actor.clip_ratio_c(),
                              ") must be > 1 (dual-clip lower bound)"));
  }
  if ((actor_sp > 1 || ref.ulysses_sequence_parallel_size() > 1) &&
      !actor.use_remove_padding()) {
    problems.Add(
        "sequence parallelism (ulysses_sequence_parallel_size > 1) needs "
        "'actor_rollout_ref.model.use_remove_padding=true'");
  }
  if (NeedCritic(config)) {
    problems.Add(CheckMicroBatch(
        "critic", "ppo_micro_batch_size", critic.has_ppo_micro_batch_size(),
        critic.has_ppo_micro_batch_size_per_gpu(), critic.use_dynamic_bsz()));
    const int64_t critic_sp = critic.ulysses_sequence_parallel_size();
    problems.Add(CheckSequenceParallel("critic.ulysses_sequence_parallel_size",
                                       critic_sp, n_gpus));
    if (!critic.use_dynamic_bsz() && critic_sp > 0) {
      problems.Add(CheckMiniBatch(
          "critic", train_batch_size, critic.ppo_mini_batch_size(), n,
          DataParallelRanks(critic.strategy(), critic.megatron(), critic_sp,
                            n_gpus),
          critic.has_ppo_micro_batch_size_per_gpu(),
          critic.ppo_micro_batch_size_per_gpu()));
    }
    problems.Add(
        CheckLossAggMode("critic.loss_agg_mode", critic.loss_agg_mode()));
  }
  const RewardModelConfig& rm = config.reward_model();
  if (rm.enable()) {
    problems.Add(CheckMicroBatch(
        "reward_model", "micro_batch_size", rm.has_micro_batch_size(),
        rm.has_micro_batch_size_per_gpu(), rm.use_dynamic_bsz()));
  }
  const infer::SamplingConfig& val = rollout.val_kwargs();
  if (val.do_sample() && !(val.temperature() > 0)) {
    problems.Add(
        "'actor_rollout_ref.rollout.val_kwargs.temperature' must be > 0 when "
        "val_kwargs.do_sample is true");
  }
  // Keys verl interpolates that this trainer reads from their source only.
  if (rollout.prompt_length() != config.data().max_prompt_length()) {
    problems.Add(absl::StrCat(
        "'actor_rollout_ref.rollout.prompt_length' (", rollout.prompt_length(),
        ") must equal 'data.max_prompt_length' (",
        config.data().max_prompt_length(), "): prompts are cut by the latter"));
  }
  for (const auto& [key, value] :
       {std::pair<const char*, int64_t>{"critic.rollout_n", critic.rollout_n()},
        {"actor_rollout_ref.actor.rollout_n", actor.rollout_n()},
        {"actor_rollout_ref.ref.rollout_n", ref.rollout_n()}}) {
    if (value != n) {
      problems.Add(absl::StrCat("'", key, "' (", value,
                                ") must equal 'actor_rollout_ref.rollout.n' (",
                                n, ")"));
    }
  }
  CheckNestedLora("actor_rollout_ref.model", config.actor_rollout_ref().model(),
                  problems);
  CheckCriticNestedLora(critic.model(), problems);
  CheckMcoreScheduler("actor_rollout_ref.actor", actor.optim(), problems);
  CheckMcoreScheduler("critic", critic.optim(), problems);
  if (config.reward_manager().has_name() &&
      config.reward_manager().name() !=
          config.reward_model().reward_manager()) {
    problems.Add(absl::StrCat(
        "'reward_manager.name' (", config.reward_manager().name(),
        ") conflicts with 'reward_model.reward_manager' (",
        config.reward_model().reward_manager(), "): set one of them"));
  }
  // Keys whose feature is not available here (config_keys.h).
  for (std::string& line : CheckKeyUse(config).not_served) {
    problems.Add(std::move(line));
  }
  const KlControlConfig& kl_ctrl = config.algorithm().kl_ctrl();
  if (kl_ctrl.type() == KlControllerType::adaptive && kl_ctrl.horizon() <= 0) {
    problems.Add(absl::StrCat("'algorithm.kl_ctrl.horizon' (",
                              kl_ctrl.horizon(),
                              ") must be > 0 for the adaptive controller"));
  }
  return problems.ToStatus();
}

std::vector<std::string> PpoTrainerConfigNotices(
    const PpoTrainerConfig& config) {
  std::vector<std::string> notices;
  const std::string& name = config.actor_rollout_ref().rollout().name();
  if (name == "vllm" || name == "sglang") {
    notices.push_back(absl::StrCat(
        "actor_rollout_ref.rollout.name=", name,
        ": served by the built-in engine (verl/infer: paged KV cache, "
        "continuous batching, prefix caching)"));
  }
  const std::vector<std::string> inert = CheckKeyUse(config).no_effect;
  if (!inert.empty()) {
    notices.push_back(absl::StrCat(
        "accepted with no effect here: ", absl::StrJoin(inert, ", "),
        " (GPU-engine and memory knobs; docs/config.md lists why)"));
  }
  return notices;
}

}  // namespace verl::rl
