// File: verl/rl/trainer/config/sft_config_keys.cc
//
// What the SFT trainer does with each key of SftTrainerConfig (the PPO
// side's config_keys table, for verl's sft_trainer.yaml): served, no effect
// (one notice line), or not served (refused with the reason).
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "verl/rl/trainer/config/config_keys.h"
#include "verl/rl/trainer/config/sft_config.h"

namespace verl::rl {
namespace {

constexpr KeyUse kServed = KeyUse::kServed;
constexpr KeyUse kNoEffect = KeyUse::kNoEffect;
constexpr KeyUse kNotServed = KeyUse::kNotServed;

constexpr char kPython[] = "a Python class or module; this build has no Python";
constexpr char kReplicated[] =
    "SFT keeps the weights replicated on every rank (the update equals "
    "FSDP's); a memory knob";
constexpr char kNoResume[] =
    "SFT saves HF folders only; resuming an SFT run is not built";

constexpr KeyRule kSftKeyRules[] = {
    {"data.train_batch_size", kServed, ""},
    {"data.micro_batch_size_per_gpu", kServed, ""},
    {"data.train_files", kServed, ""},
    {"data.val_files", kServed, ""},
    {"data.train_max_samples", kServed, ""},
    {"data.val_max_samples", kServed, ""},
    {"data.prompt_key", kServed, ""},
    {"data.response_key", kServed, ""},
    {"data.prompt_dict_keys", kServed, ""},
    {"data.response_dict_keys", kServed, ""},
    {"data.multiturn.enable", kServed, ""},
    {"data.multiturn.messages_key", kServed, ""},
    {"data.max_length", kServed, ""},
    {"data.truncation", kServed, ""},
    {"model.partial_pretrain", kServed, ""},
    {"model.preset", kServed, ""},
    {"model.enable_gradient_checkpointing", kServed, ""},
    {"model.lora_rank", kServed, ""},
    {"model.lora_alpha", kServed, ""},
    {"model.target_modules", kServed, ""},
    {"optim", kServed, ""},
    {"ulysses_sequence_parallel_size", kServed, ""},
    {"trainer.default_local_dir", kServed, ""},
    {"trainer.project_name", kServed, ""},
    {"trainer.experiment_name", kServed, ""},
    {"trainer.total_epochs", kServed, ""},
    {"trainer.total_training_steps", kServed, ""},
    {"trainer.logger", kServed, ""},
    {"trainer.seed", kServed, ""},
    {"trainer.save_freq", kServed, ""},
    {"trainer.test_freq", kServed, ""},
    {"trainer.nnodes", kServed, ""},
    {"trainer.n_gpus_per_node", kServed, ""},
    {"trainer.device", kServed, "cpu here; cuda with --config=cuda builds"},

    {"data.use_shm", kNoEffect, "no shared-memory copy"},
    {"model.use_shm", kNoEffect, "no shared-memory copy"},
    {"model.trust_remote_code", kNoEffect, "no remote code is run"},
    {"model.use_liger", kNoEffect, "a kernel choice; results are the same"},
    {"model.strategy", kNoEffect, kReplicated},
    {"model.fsdp_config.wrap_policy", kNoEffect, kReplicated},
    {"model.fsdp_config.cpu_offload", kNoEffect, kReplicated},
    {"model.fsdp_config.offload_params", kNoEffect, kReplicated},
    {"use_remove_padding", kNoEffect,
     "SFT always runs on packed tokens (remove padding)"},

    {"data.micro_batch_size", kNotServed,
     "deprecated global size; use data.micro_batch_size_per_gpu"},
    {"data.multiturn.tools_key", kNotServed,
     "tool schemas of multi-turn rows are not passed to the chat template"},
    {"data.multiturn.enable_thinking_key", kNotServed,
     "per-row enable_thinking is not passed to the chat template"},
    {"data.balance_dp_token", kNoEffect,
     "the loss is always normalised by the global token count (verl's "
     "balance_dp_token=true)"},
    {"data.chat_template", kNotServed,
     "the tokenizer's own chat template (tokenizer_config.json) is used"},
    {"data.apply_chat_template_kwargs", kNotServed,
     "extra chat-template arguments are not passed to the template"},
    {"data.custom_cls", kNotServed, kPython},
    {"model.external_lib", kNotServed, kPython},
    {"model.fsdp_config.model_dtype", kNotServed, "SFT trains fp32 weights"},
    {"trainer.default_hdfs_dir", kNotServed, "no HDFS here"},
    {"trainer.max_ckpt_to_keep", kNotServed, "every saved HF folder is kept"},
    {"trainer.resume_mode", kNotServed, kNoResume},
    {"trainer.resume_from_path", kNotServed, kNoResume},
    {"trainer.checkpoint", kNotServed,
     "SFT saves the HF model folder (and a LoRA adapter) only"},
};

}  // namespace

absl::Span<const KeyRule> SftKeyRules() { return kSftKeyRules; }

KeyUsage CheckSftKeyUse(const SftTrainerConfig& config) {
  static const SftTrainerConfig* const kDefaults = [] {
    absl::StatusOr<SftTrainerConfig> c = LoadSftTrainerConfig("", {});
    return new SftTrainerConfig(c.ok() ? *c : SftTrainerConfig());
  }();
  return CheckKeyUseIn(kSftKeyRules, config, *kDefaults,
                       /*unset_is_default=*/true);
}

absl::Status ValidateSftTrainerConfig(const SftTrainerConfig& config) {
  const std::vector<std::string> lines = CheckSftKeyUse(config).not_served;
  if (lines.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(lines, "\n"));
}

}  // namespace verl::rl
