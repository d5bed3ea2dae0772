// File: verl/rl/trainer/config/config_keys.cc
#include "verl/rl/trainer/config/config_keys.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "verl/core/config_loader.h"
#include "verl/rl/trainer/config/config.h"

namespace verl::rl {
namespace {

constexpr KeyUse kServed = KeyUse::kServed;
constexpr KeyUse kNoEffect = KeyUse::kNoEffect;
constexpr KeyUse kNotServed = KeyUse::kNotServed;

constexpr char kVlm[] =
    "vision-language inputs beyond the images of data.image_key (videos, "
    "per-prompt limits, processor options) are not built";
constexpr char kPython[] =
    "a Python class or module; this build has no Python (built-in datasets, "
    "models and reward managers only)";
constexpr char kMultiTurn[] =
    "tool schemas in single-turn prompts are not available (multi-turn "
    "rollouts read rollout.multi_turn.tool_config_path)";
constexpr char kLegacyMultiTurn[] =
    "a key of the legacy SGLang multi-turn rollout; verl's agent loop does "
    "not read it either";
constexpr char kEngineKnob[] =
    "a vLLM/SGLang engine knob with no counterpart in the built-in engine "
    "(weights are shared in process, no CUDA graphs, no sleep mode)";
constexpr char kMemoryKnob[] =
    "a memory/speed knob of verl's PyTorch engine; results are the same here";
constexpr char kNoRay[] = "no Ray here: one process per rank";
constexpr char kOneMegatron[] =
    "selects among Megatron implementations; there is one here";
constexpr char kMtp[] =
    "multi-token prediction (MTP heads, speculative decoding) is not "
    "available";
constexpr char kMtpOption[] =
    "an MTP option, read with mtp.enable only (MTP is not available)";
constexpr char kRouterReplay[] = "MoE routing replay (R2/R3) is not available";
constexpr char kMcoreScheduler[] =
    "of Megatron's scheduler, only lr_decay_style constant|cosine, min_lr and "
    "lr_warmup_steps(_ratio) are built (decay runs over total_training_steps, "
    "warmup from 0)";
constexpr char kNestedLora[] =
    "served as the flat lora_rank/lora_alpha/target_modules/exclude_modules/"
    "lora_adapter_path (conflicts refused)";
constexpr char kLoadWeight[] =
    "weights always load from model.path (or the preset)";

// Patterns: dotted segments; a pattern matches a key that starts with its
// segments; a leading "**." matches at any depth. The most specific pattern
// wins (see FindKeyRule).
constexpr KeyRule kKeyRules[] = {
    // ---- read by the trainer (verl/rl/trainer, workers, infer, ...) ----
    {"data.train_files", kServed, ""},
    {"data.val_files", kServed, ""},
    {"data.prompt_key", kServed, ""},
    {"data.reward_fn_key", kServed, ""},
    {"data.max_prompt_length", kServed, ""},
    {"data.max_response_length", kServed, ""},
    {"data.train_batch_size", kServed, ""},
    {"data.gen_batch_size", kServed, ""},
    {"data.val_batch_size", kServed, ""},
    {"data.shuffle", kServed, ""},
    {"data.seed", kServed, ""},
    {"data.validation_shuffle", kServed, ""},
    {"data.filter_overlong_prompts", kServed, ""},
    {"data.truncation", kServed, ""},
    {"data.train_max_samples", kServed, ""},
    {"data.val_max_samples", kServed, ""},
    {"actor_rollout_ref.model.path", kServed, ""},
    {"actor_rollout_ref.model.tokenizer_path", kServed, ""},
    {"actor_rollout_ref.model.enable_gradient_checkpointing", kServed, ""},
    {"actor_rollout_ref.model.use_remove_padding", kServed, ""},
    {"actor_rollout_ref.model.lora_rank", kServed, ""},
    {"actor_rollout_ref.model.lora_alpha", kServed, ""},
    {"actor_rollout_ref.model.target_modules", kServed, ""},
    {"actor_rollout_ref.model.exclude_modules", kServed, ""},
    {"actor_rollout_ref.model.lora_adapter_path", kServed, ""},
    {"actor_rollout_ref.model.use_fused_kernels", kServed, ""},
    {"actor_rollout_ref.model.tiled_mlp.enabled", kServed, ""},
    {"actor_rollout_ref.model.preset", kServed, ""},
    {"actor_rollout_ref.actor.strategy", kServed, ""},
    {"actor_rollout_ref.actor.ppo_mini_batch_size", kServed, ""},
    {"actor_rollout_ref.actor.ppo_micro_batch_size", kServed, ""},
    {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", kServed, ""},
    {"actor_rollout_ref.actor.use_dynamic_bsz", kServed, ""},
    {"actor_rollout_ref.actor.ppo_max_token_len_per_gpu", kServed, ""},
    {"actor_rollout_ref.actor.clip_ratio", kServed, ""},
    {"actor_rollout_ref.actor.clip_ratio_low", kServed, ""},
    {"actor_rollout_ref.actor.clip_ratio_high", kServed, ""},
    {"actor_rollout_ref.actor.clip_ratio_c", kServed, ""},
    {"actor_rollout_ref.actor.policy_loss", kServed, ""},
    {"actor_rollout_ref.actor.loss_agg_mode", kServed, ""},
    {"actor_rollout_ref.actor.loss_scale_factor", kServed, ""},
    {"actor_rollout_ref.actor.entropy_coeff", kServed, ""},
    {"actor_rollout_ref.actor.calculate_entropy", kServed, ""},
    {"actor_rollout_ref.actor.calculate_sum_pi_squared", kServed, ""},
    {"actor_rollout_ref.actor.use_kl_loss", kServed, ""},
    {"actor_rollout_ref.actor.kl_loss_coef", kServed, ""},
    {"actor_rollout_ref.actor.kl_loss_type", kServed, ""},
    {"actor_rollout_ref.actor.ppo_epochs", kServed, ""},
    {"actor_rollout_ref.actor.shuffle", kServed, ""},
    {"actor_rollout_ref.actor.grad_clip", kServed, ""},
    {"actor_rollout_ref.actor.ulysses_sequence_parallel_size", kServed, ""},
    {"actor_rollout_ref.actor.use_fused_kernels", kServed, ""},
    {"actor_rollout_ref.actor.use_remove_padding", kServed, ""},
    {"actor_rollout_ref.actor.checkpoint.save_contents", kServed, ""},
    {"actor_rollout_ref.actor.checkpoint.load_contents", kServed, ""},
    {"actor_rollout_ref.actor.optim.lr", kServed, ""},
    {"actor_rollout_ref.actor.optim.lr_warmup_steps", kServed, ""},
    {"actor_rollout_ref.actor.optim.lr_warmup_steps_ratio", kServed, ""},
    {"actor_rollout_ref.actor.optim.total_training_steps", kServed, ""},
    {"actor_rollout_ref.actor.optim.weight_decay", kServed, ""},
    {"actor_rollout_ref.actor.optim.betas", kServed, ""},
    {"actor_rollout_ref.actor.optim.clip_grad", kServed, ""},
    {"actor_rollout_ref.actor.optim.min_lr_ratio", kServed, ""},
    {"actor_rollout_ref.actor.optim.num_cycles", kServed, ""},
    {"actor_rollout_ref.actor.optim.lr_scheduler_type", kServed, ""},
    {"actor_rollout_ref.actor.optim.warmup_style", kServed, ""},
    {"actor_rollout_ref.actor.optim.optimizer", kServed, ""},
    {"actor_rollout_ref.ref.strategy", kServed, ""},
    {"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", kServed, ""},
    {"actor_rollout_ref.ref.log_prob_use_dynamic_bsz", kServed, ""},
    {"actor_rollout_ref.ref.ulysses_sequence_parallel_size", kServed, ""},
    {"actor_rollout_ref.rollout.name", kServed, ""},
    {"actor_rollout_ref.rollout.mode", kServed, ""},
    {"actor_rollout_ref.rollout.temperature", kServed, ""},
    {"actor_rollout_ref.rollout.top_k", kServed, ""},
    {"actor_rollout_ref.rollout.top_p", kServed, ""},
    {"actor_rollout_ref.rollout.do_sample", kServed, ""},
    {"actor_rollout_ref.rollout.n", kServed, ""},
    {"actor_rollout_ref.rollout.repetition_penalty", kServed, ""},
    {"actor_rollout_ref.rollout.ignore_eos", kServed, ""},
    {"actor_rollout_ref.rollout.calculate_log_probs", kServed, ""},
    {"actor_rollout_ref.rollout.val_kwargs", kServed, ""},
    {"actor_rollout_ref.rollout.response_length", kServed, ""},
    {"actor_rollout_ref.rollout.max_model_len", kServed, ""},
    {"actor_rollout_ref.rollout.dtype", kServed, ""},
    {"actor_rollout_ref.rollout.gpu_memory_utilization", kServed, ""},
    {"actor_rollout_ref.rollout.free_cache_engine", kServed, ""},
    {"actor_rollout_ref.rollout.max_num_batched_tokens", kServed, ""},
    {"actor_rollout_ref.rollout.max_num_seqs", kServed, ""},
    {"actor_rollout_ref.rollout.enable_chunked_prefill", kServed, ""},
    {"actor_rollout_ref.rollout.enable_prefix_caching", kServed, ""},
    {"actor_rollout_ref.rollout.scheduling_policy", kServed, ""},
    {"actor_rollout_ref.rollout.engine_kwargs.vllm", kServed, ""},
    {"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", kServed,
     ""},
    {"actor_rollout_ref.rollout.log_prob_use_dynamic_bsz", kServed, ""},
    {"actor_rollout_ref.nccl_timeout", kServed, ""},
    {"actor_rollout_ref.sft_warmup", kServed, ""},
    {"critic.strategy", kServed, ""},
    {"critic.enable", kServed, ""},
    {"critic.optim.lr", kServed, ""},
    {"critic.optim.lr_warmup_steps", kServed, ""},
    {"critic.optim.lr_warmup_steps_ratio", kServed, ""},
    {"critic.optim.total_training_steps", kServed, ""},
    {"critic.optim.weight_decay", kServed, ""},
    {"critic.optim.betas", kServed, ""},
    {"critic.optim.clip_grad", kServed, ""},
    {"critic.optim.min_lr_ratio", kServed, ""},
    {"critic.optim.num_cycles", kServed, ""},
    {"critic.optim.lr_scheduler_type", kServed, ""},
    {"critic.optim.warmup_style", kServed, ""},
    {"critic.optim.optimizer", kServed, ""},
    {"critic.model.path", kServed, ""},
    {"critic.model.preset", kServed, ""},
    {"critic.model.tokenizer_path", kServed, ""},
    {"critic.model.enable_gradient_checkpointing", kServed, ""},
    {"critic.model.use_remove_padding", kServed, ""},
    {"critic.model.lora_rank", kServed, ""},
    {"critic.model.lora_alpha", kServed, ""},
    {"critic.model.target_modules", kServed, ""},
    {"critic.model.tiled_mlp.enabled", kServed, ""},
    {"critic.ppo_mini_batch_size", kServed, ""},
    {"critic.ppo_micro_batch_size", kServed, ""},
    {"critic.ppo_micro_batch_size_per_gpu", kServed, ""},
    {"critic.use_dynamic_bsz", kServed, ""},
    {"critic.ppo_max_token_len_per_gpu", kServed, ""},
    {"critic.forward_max_token_len_per_gpu", kServed, ""},
    {"critic.forward_micro_batch_size_per_gpu", kServed, ""},
    {"critic.ppo_epochs", kServed, ""},
    {"critic.shuffle", kServed, ""},
    {"critic.loss_agg_mode", kServed, ""},
    {"critic.cliprange_value", kServed, ""},
    {"critic.grad_clip", kServed, ""},
    {"critic.ulysses_sequence_parallel_size", kServed, ""},
    {"critic.checkpoint.save_contents", kServed, ""},
    {"critic.checkpoint.load_contents", kServed, ""},
    {"reward_model.enable", kServed, ""},
    {"reward_model.strategy", kServed, ""},
    {"reward_model.model.path", kServed, ""},
    {"reward_model.model.use_remove_padding", kServed, ""},
    {"reward_model.model.use_fused_kernels", kServed, ""},
    {"reward_model.micro_batch_size", kServed, ""},
    {"reward_model.micro_batch_size_per_gpu", kServed, ""},
    {"reward_model.max_length", kServed, ""},
    {"reward_model.use_dynamic_bsz", kServed, ""},
    {"reward_model.forward_max_token_len_per_gpu", kServed, ""},
    {"reward_model.reward_manager", kServed, ""},
    {"reward_model.reward_kwargs", kServed, ""},
    {"reward_model.ulysses_sequence_parallel_size", kServed, ""},
    {"custom_reward_function", kServed, ""},
    {"algorithm", kServed, ""},
    {"trainer.balance_batch", kServed, ""},
    {"trainer.total_epochs", kServed, ""},
    {"trainer.total_training_steps", kServed, ""},
    {"trainer.project_name", kServed, ""},
    {"trainer.experiment_name", kServed, ""},
    {"trainer.logger", kServed, ""},
    {"trainer.rollout_data_dir", kServed, ""},
    {"trainer.validation_data_dir", kServed, ""},
    {"trainer.nnodes", kServed, ""},
    {"trainer.n_gpus_per_node", kServed, ""},
    {"trainer.save_freq", kServed, ""},
    {"trainer.resume_mode", kServed, ""},
    {"trainer.resume_from_path", kServed, ""},
    {"trainer.val_before_train", kServed, ""},
    {"trainer.val_only", kServed, ""},
    {"trainer.test_freq", kServed, ""},
    {"trainer.critic_warmup", kServed, ""},
    {"trainer.default_local_dir", kServed, ""},
    {"trainer.max_actor_ckpt_to_keep", kServed, ""},
    {"trainer.max_critic_ckpt_to_keep", kServed, ""},
    {"trainer.device", kServed, ""},
    {"trainer.remove_previous_ckpt_in_save", kServed, ""},
    {"trainer.max_consecutive_nonfinite_steps", kServed, ""},
    {"**.fsdp_config.dtype", kServed, ""},
    {"**.fsdp_config.forward_prefetch", kServed, ""},
    {"**.fsdp_config.fsdp_size", kServed, ""},
    {"**.fsdp_config.optimizer_offload", kServed, ""},
    {"**.fsdp_config.param_offload", kServed, ""},
    {"**.fsdp_config.reshard_after_forward", kServed, ""},
    {"**.fsdp_config.strategy", kServed, ""},
    {"**.fsdp_config.ulysses_sequence_parallel_size", kServed, ""},
    {"**.profiler.all_ranks", kServed, ""},
    {"**.profiler.enable", kServed, ""},
    {"**.profiler.ranks", kServed, ""},
    {"**.profiler.save_path", kServed, ""},
    {"**.profiler.tool", kServed, ""},
    {"**.profiler.tool_config.torch_memory", kServed, ""},
    {"global_profiler.tool", kServed, ""},
    {"global_profiler.steps", kServed, ""},
    {"global_profiler.profile_continuous_steps", kServed, ""},
    {"global_profiler.save_path", kServed, ""},
    {"global_profiler.peak_flops", kServed, ""},
    {"global_profiler.measure_peak_flops", kServed, ""},
    {"global_profiler.global_tool_config.torch_memory.trace_alloc_max_entries",
     kServed, ""},
    {"global_profiler.global_tool_config.torch_memory.stack_depth", kServed,
     ""},
    // strategy: megatron (docs/megatron.md).
    {"**.megatron.tensor_model_parallel_size", kServed, ""},
    {"**.megatron.context_parallel_size", kServed, ""},
    {"**.megatron.expert_model_parallel_size", kServed,
     "MoE models; must divide num_experts"},
    {"**.megatron.expert_tensor_parallel_size", kServed,
     "MoE experts' ffn split over etp (null = tp); must divide "
     "moe_intermediate_size"},
    {"**.megatron.virtual_pipeline_model_parallel_size", kServed,
     "the interleaved 1F1B schedule; layers split evenly over pp x vpp, "
     "micro-batches a multiple of pp"},
    {"**.megatron.pipeline_model_parallel_size", kServed,
     "1F1B; interleaved with virtual_pipeline_model_parallel_size"},
    {"**.megatron.override_transformer_config.num_layers_in_first_pipeline_"
     "stage",
     kServed, ""},
    {"**.megatron.override_transformer_config.num_layers_in_last_pipeline_"
     "stage",
     kServed, ""},
    {"**.megatron.sequence_parallel", kServed, ""},
    {"**.megatron.use_distributed_optimizer", kServed,
     "optimizer state over dp; MoE experts' over the expert-data-parallel "
     "group"},
    {"**.megatron.dtype", kServed,
     "float32 or bfloat16 (fp32 gradients and master weights); float16 is "
     "refused (no loss scaling)"},
    {"**.megatron.param_offload", kServed,
     "actor, critic and ref: host memory between passes"},
    {"**.megatron.grad_offload", kServed,
     "actor and critic; refused for the ref (no gradients)"},
    {"**.megatron.optimizer_offload", kServed,
     "actor and critic (on the device for the step only); refused for the "
     "ref"},
    {"**.megatron.make_vocab_size_divisible_by", kServed, ""},
    {"**.megatron.override_transformer_config.recompute_granularity", kServed,
     ""},
    {"**.megatron.override_transformer_config.recompute_method", kServed, ""},
    {"**.megatron.override_transformer_config.recompute_num_layers", kServed,
     ""},
    {"**.megatron.override_transformer_config.recompute_modules", kServed,
     "core_attn, mlp; the others are refused"},
    {"**.megatron.override_transformer_config.moe_expert_capacity_factor",
     kServed, "MoE models: capacity-based token dropping"},
    {"**.megatron.override_transformer_config.moe_token_drop_policy", kServed,
     "probs | position"},
    {"**.megatron.override_transformer_config.moe_pad_expert_input_to_"
     "capacity",
     kServed, "false only; true is refused (drop-and-pad not built)"},
    {"**.megatron.override_transformer_config.moe_router_enable_expert_bias",
     kServed,
     "sigmoid-router MoE models (DeepSeek-V3); null: on for them, as verl"},
    {"**.megatron.override_transformer_config.moe_router_load_balancing_type",
     kServed,
     "none | aux_loss | seq_aux_loss (null: none, as verl for RL); sinkhorn "
     "refused"},
    {"**.megatron.override_transformer_config.moe_aux_loss_coeff", kServed,
     "null: router_aux_loss_coef (Qwen-MoE) / 0.001 (DeepSeek-V3)"},
    {"**.megatron.override_transformer_config.moe_z_loss_coeff", kServed, ""},
    {"**.megatron.override_transformer_config.moe_router_bias_update_rate",
     kServed, ""},
    // Aliases copied into the key they spell (ResolvePpoTrainerConfig).
    {"**.optim.lr_decay_style", kServed,
     "constant|cosine: copied into optim.lr_scheduler_type"},
    {"**.optim.min_lr", kServed, "copied into optim.min_lr_ratio as min_lr/lr"},
    {"reward_manager.name", kServed, "copied into reward_model.reward_manager"},
    {"**.lora.rank", kServed, kNestedLora},
    {"**.lora.alpha", kServed, kNestedLora},
    {"**.lora.target_modules", kServed, kNestedLora},
    {"**.lora.exclude_modules", kServed, kNestedLora},
    {"**.lora.adapter_path", kServed, kNestedLora},
    {"**.lora.type", kServed, "lora | canonical_lora; others are refused"},
    {"actor_rollout_ref.model.override_config", kServed,
     "applied to the HF config before the model is built (docs/config.md)"},
    {"critic.model.override_config", kNotServed,
     "the critic is built from the actor's model: "
     "actor_rollout_ref.model.override_config applies to both"},
    {"reward_model.model.override_config", kNotServed,
     "the reward model's HF config is used as saved"},
    // Checked equal to the key they follow (ValidatePpoTrainerConfig).
    {"actor_rollout_ref.actor.rollout_n", kServed,
     "must equal actor_rollout_ref.rollout.n"},
    {"actor_rollout_ref.ref.rollout_n", kServed,
     "must equal actor_rollout_ref.rollout.n"},
    {"actor_rollout_ref.rollout.prompt_length", kServed,
     "must equal data.max_prompt_length"},
    {"critic.rollout_n", kServed, "must equal actor_rollout_ref.rollout.n"},

    // ---- accepted, no effect here (one notice line lists them) ----
    {"data.tokenizer", kNoEffect, "the actor model's tokenizer encodes data"},
    {"data.use_shm", kNoEffect, "no shared-memory copy needed"},
    {"data.return_raw_input_ids", kNoEffect, "verl dataset output shaping"},
    {"data.return_raw_chat", kServed, ""},
    {"data.return_full_prompt", kNoEffect, "verl dataset output shaping"},
    {"data.dataloader_num_workers", kNoEffect, "data loads in process"},
    {"data.filter_overlong_prompts_workers", kNoEffect,
     "data loads in process"},
    {"data.trust_remote_code", kNoEffect, "no remote code is run here"},
    {"actor_rollout_ref.hybrid_engine", kNoEffect,
     "actor and rollout always share weights in one process"},
    {"actor_rollout_ref.model.use_shm", kNoEffect, "no shared-memory copy"},
    {"actor_rollout_ref.model.trust_remote_code", kNoEffect,
     "no remote code: the HF decoder family is built in"},
    {"actor_rollout_ref.model.enable_activation_offload", kNoEffect,
     kMemoryKnob},
    {"actor_rollout_ref.model.use_liger", kNoEffect, kMemoryKnob},
    {"actor_rollout_ref.model.fused_kernel_options", kNoEffect, kMemoryKnob},
    {"actor_rollout_ref.model.tiled_mlp.num_shards", kNoEffect, kMemoryKnob},
    {"actor_rollout_ref.actor.use_torch_compile", kNoEffect,
     "no torch.compile in C++"},
    {"actor_rollout_ref.ref.use_torch_compile", kNoEffect,
     "no torch.compile in C++"},
    {"actor_rollout_ref.actor.data_loader_seed", kNoEffect,
     "mini-batch shuffling is seeded by the trainer's seed"},
    {"actor_rollout_ref.actor.entropy_from_logits_with_chunking", kNoEffect,
     kMemoryKnob},
    {"actor_rollout_ref.actor.entropy_checkpointing", kNoEffect, kMemoryKnob},
    {"actor_rollout_ref.ref.entropy_from_logits_with_chunking", kNoEffect,
     kMemoryKnob},
    {"actor_rollout_ref.ref.entropy_checkpointing", kNoEffect, kMemoryKnob},
    {"actor_rollout_ref.ref.log_prob_micro_batch_size", kNoEffect,
     "deprecated global size; the reference uses "
     "log_prob_micro_batch_size_per_gpu or the actor's batching"},
    {"actor_rollout_ref.ref.log_prob_max_token_len_per_gpu", kNoEffect,
     "the reference uses the actor's ppo_max_token_len_per_gpu"},
    {"actor_rollout_ref.rollout.log_prob_micro_batch_size", kNoEffect,
     "deprecated global size; use log_prob_micro_batch_size_per_gpu"},
    {"actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu", kNoEffect,
     "log-prob recomputation uses the actor's ppo_max_token_len_per_gpu"},
    {"**.checkpoint.async_save", kNoEffect, "checkpoints are saved in line"},
    {"**.fsdp_config.use_torch_compile", kNoEffect, "no torch.compile in C++"},
    {"**.fsdp_config.wrap_policy", kNoEffect,
     "each decoder layer is one FSDP unit"},
    {"**.fsdp_config.offload_policy", kNoEffect,
     "FSDP2 CPU-offload policy; param_offload/optimizer_offload are served"},
    {"**.fsdp_config.use_orig_params", kNoEffect,
     "FSDP1 option; sharding here is FSDP2-style"},
    {"**.fsdp_config.entropy_from_logits_with_chunking", kNoEffect,
     kMemoryKnob},
    {"**.fsdp_config.entropy_checkpointing", kNoEffect, kMemoryKnob},
    {"**.fsdp_config.forward_only", kNoEffect, "set per role by the trainer"},
    {"**.profiler.tool_config.nsys", kNoEffect,
     "Nsight Systems options (no CUDA profiler in this build)"},
    {"**.profiler.tool_config.npu", kNoEffect, "Ascend NPU profiler options"},
    {"**.profiler.tool_config.torch", kNoEffect,
     "the timeline records every step and op (no content/step filter)"},
    {"global_profiler.global_tool_config.nsys", kNoEffect,
     "Nsight Systems options (no CUDA profiler in this build)"},
    {"global_profiler.global_tool_config.torch_memory.context", kNoEffect,
     "allocations are recorded with their full context"},
    {"global_profiler.global_tool_config.torch_memory.stacks", kNoEffect,
     "allocations are recorded with their full context"},
    {"actor_rollout_ref.rollout.enforce_eager", kNoEffect, kEngineKnob},
    {"actor_rollout_ref.rollout.cudagraph_capture_sizes", kNoEffect,
     kEngineKnob},
    {"actor_rollout_ref.rollout.load_format", kNoEffect, kEngineKnob},
    {"actor_rollout_ref.rollout.disable_log_stats", kNoEffect, kEngineKnob},
    {"actor_rollout_ref.rollout.skip_tokenizer_init", kNoEffect, kEngineKnob},
    {"actor_rollout_ref.rollout.enable_sleep_mode", kNoEffect, kEngineKnob},
    {"actor_rollout_ref.rollout.layered_summon", kNoEffect, kEngineKnob},
    {"actor_rollout_ref.rollout.multi_stage_wake_up", kNoEffect, kEngineKnob},
    {"actor_rollout_ref.rollout.update_weights_bucket_megabytes", kNoEffect,
     kEngineKnob},
    {"actor_rollout_ref.rollout.checkpoint_engine", kNoEffect, kEngineKnob},
    {"actor_rollout_ref.rollout.engine_kwargs.sglang", kNoEffect,
     "the built-in engine reads engine_kwargs.vllm (block_size, seed)"},
    {"actor_rollout_ref.rollout.engine_kwargs.trtllm", kNoEffect,
     "the built-in engine reads engine_kwargs.vllm (block_size, seed)"},
    {"actor_rollout_ref.rollout.trace.token2text", kNoEffect,
     "rollout tracing (mlflow/weave) is not available"},
    {"actor_rollout_ref.rollout.trace.max_samples_per_step_per_worker",
     kNoEffect, "rollout tracing (mlflow/weave) is not available"},
    {"actor_rollout_ref.rollout.skip_dump_dir", kNoEffect,
     "used with skip_rollout only"},
    {"critic.model.use_shm", kNoEffect, "no shared-memory copy"},
    {"critic.model.trust_remote_code", kNoEffect, "no remote code is run"},
    {"critic.model.enable_activation_offload", kNoEffect, kMemoryKnob},
    {"critic.model.tiled_mlp.num_shards", kNoEffect, kMemoryKnob},
    {"critic.forward_micro_batch_size", kNoEffect,
     "deprecated global size; use forward_micro_batch_size_per_gpu"},
    {"reward_model.n_gpus_per_node", kNoEffect,
     "the reward model runs on the trainer's ranks"},
    {"reward_model.nnodes", kNoEffect,
     "the reward model runs on the trainer's ranks"},
    {"reward_model.enable_resource_pool", kNoEffect, kNoRay},
    {"reward_model.model.input_tokenizer", kNoEffect,
     "the reward model scores the policy's tokens (same tokenizer)"},
    {"reward_model.model.use_shm", kNoEffect, "no shared-memory copy"},
    {"reward_model.model.trust_remote_code", kNoEffect,
     "no remote code is run"},
    {"reward_model.use_reward_loop", kNoEffect,
     "rewards are computed in process"},
    {"reward_model.launch_reward_fn_async", kNoEffect,
     "rewards are computed in process"},
    {"trainer.log_val_generations", kNoEffect,
     "validation generations are dumped with trainer.validation_data_dir"},
    {"trainer.esi_redundant_time", kNoEffect,
     "no elastic-server-instance expiry here"},
    {"trainer.ray_wait_register_center_timeout", kNoEffect, kNoRay},
    {"trainer.use_legacy_worker_impl", kNoEffect,
     "one worker implementation here"},
    {"**.megatron.seed", kNoEffect,
     "the weights come from the HF model or preset (seeded by data.seed)"},
    {"**.megatron.forward_only", kNoEffect, "set per role by the trainer"},
    {"**.megatron.use_mbridge", kNoEffect, kOneMegatron},
    {"**.megatron.vanilla_mbridge", kNoEffect, kOneMegatron},
    {"**.megatron.override_transformer_config.attention_backend", kNoEffect,
     kOneMegatron},
    {"**.megatron.override_transformer_config.variable_seq_lengths", kNoEffect,
     kOneMegatron},
    {"**.megatron.override_transformer_config.moe_token_dispatcher_type",
     kNoEffect, kOneMegatron},

    {"actor_rollout_ref.actor.tis_imp_ratio_cap", kServed, ""},
    {"actor_rollout_ref.actor.tau_pos", kServed,
     "copied into actor.policy_loss.tau_pos"},
    {"actor_rollout_ref.actor.tau_neg", kServed,
     "copied into actor.policy_loss.tau_neg"},
    {"reward_model.num_workers", kNoEffect, "rewards are computed in process"},
    {"reward_model.rollout", kNoEffect,
     "the reward model runs a forward pass in process (no separate engine); "
     "a generative reward model is not available"},
    {"reward_model.overlong_buffer", kServed,
     "copied into reward_model.reward_kwargs.overlong_buffer_cfg"},
    {"**.fsdp_config.seed", kNoEffect,
     "verl seeds enable_full_determinism with it; runs here are seeded by "
     "data.seed"},
    {"**.fsdp_config.full_determinism", kNoEffect,
     "runs here are deterministic already (CPU kernels, fixed reduction "
     "order)"},
    {"actor_rollout_ref.actor.use_prefix_grouper", kNoEffect,
     "a speed knob (shared prompt prefix computed once); results are the "
     "same"},
    {"actor_rollout_ref.actor.sum_pi_squared_checkpointing", kNoEffect,
     kMemoryKnob},
    {"critic.data_loader_seed", kNoEffect,
     "mini-batch shuffling is seeded by the trainer's seed"},
    {"critic.nccl_timeout", kNoEffect,
     "one process group for all roles: actor_rollout_ref.nccl_timeout"},
    {"reward_model.nccl_timeout", kNoEffect,
     "one process group for all roles: actor_rollout_ref.nccl_timeout"},
    {"**.megatron.use_remove_padding", kNoEffect,
     "the Megatron forward always runs on packed tokens"},
    {"actor_rollout_ref.rollout.layer_name_map", kNoEffect,
     "weights reach the engine under their HF names"},
    {"actor_rollout_ref.rollout.prometheus", kNoEffect,
     "read with prometheus.enable only (refused here)"},
    {"actor_rollout_ref.model.mtp", kNoEffect, kMtpOption},
    {"actor_rollout_ref.rollout.mtp", kNoEffect, kMtpOption},
    {"global_profiler.global_tool_config.torch_memory.kw_args", kNoEffect,
     "extra arguments of torch's CUDA allocator recorder"},
    {"ray_kwargs", kNoEffect, kNoRay},
    {"**.optim.lr_wsd_decay_style", kNoEffect,
     "read with lr_decay_style=WSD only (refused here)"},
    {"**.optim.lr_wsd_decay_steps", kNoEffect,
     "read with lr_decay_style=WSD only (refused here)"},
    {"**.lora.merge", kNoEffect,
     "the rollout engine always receives merged weights"},
    {"**.lora.a2a_experimental", kNoEffect,
     "a Megatron communication option; adapters are local here"},
    {"**.lora.dropout_position", kNoEffect,
     "read with lora.dropout > 0 only (refused here)"},
    {"**.lora.lora_A_init_method", kNoEffect,
     "A is initialised as PEFT does (kaiming-uniform); B is zero, so the "
     "starting policy is the base model for any A"},
    {"**.lora.freeze_vision_model", kNoEffect,
     "read with lora.type=vlm_lora only (refused here)"},
    {"**.lora.freeze_vision_projection", kNoEffect,
     "read with lora.type=vlm_lora only (refused here)"},
    {"**.lora.freeze_language_model", kNoEffect,
     "read with lora.type=vlm_lora only (refused here)"},
    {"actor_rollout_ref.model.torch_dtype", kNoEffect,
     "weights load in fsdp_config.model_dtype and compute in "
     "fsdp_config.dtype"},

    // ---- refused when set: the feature is not available ----
    {"**.router_replay", kNotServed, kRouterReplay},
    {"actor_rollout_ref.model.mtp.enable", kNotServed, kMtp},
    {"actor_rollout_ref.model.mtp.enable_train", kNotServed, kMtp},
    {"actor_rollout_ref.model.mtp.enable_rollout", kNotServed, kMtp},
    {"actor_rollout_ref.rollout.mtp.enable", kNotServed, kMtp},
    {"actor_rollout_ref.rollout.mtp.enable_train", kNotServed, kMtp},
    {"actor_rollout_ref.rollout.mtp.enable_rollout", kNotServed, kMtp},
    {"actor_rollout_ref.rollout.prometheus.enable", kNotServed,
     "Prometheus metrics of rollout servers need verl's Ray/HTTP servers; "
     "rollout metrics are logged with the trainer's"},
    {"actor_rollout_ref.rollout.quantization", kNotServed,
     "rollout quantization (fp8 weights in the engine) is not available"},
    {"actor_rollout_ref.rollout.quantization_config_file", kNotServed,
     "rollout quantization (fp8 weights in the engine) is not available"},
    {"actor_rollout_ref.rollout.limit_images", kNotServed, kVlm},
    {"actor_rollout_ref.rollout.checkpoint_engine.engine_kwargs", kNoEffect,
     kEngineKnob},
    {"reward_manager.module", kNotServed, kPython},
    {"reward_manager.source", kNotServed, kPython},
    {"reward_model.reward_loop_source", kNotServed, kPython},
    {"reward_model.reward_loop_module_path", kNotServed, kPython},
    {"reward_model.reward_loop_class_name", kNotServed, kPython},
    {"reward_model.megatron", kNotServed,
     "the reward model runs a replicated forward pass (no Megatron sharding "
     "for it)"},
    {"reward_model.load_weight", kNotServed, kLoadWeight},
    {"actor_rollout_ref.actor.load_weight", kNotServed, kLoadWeight},
    {"actor_rollout_ref.ref.load_weight", kNotServed, kLoadWeight},
    {"critic.load_weight", kNotServed, kLoadWeight},
    {"transfer_queue", kNotServed,
     "verl's TransferQueue (a Ray data plane) is not available: batches stay "
     "in process"},
    {"**.optim.lr_warmup_init", kNotServed, kMcoreScheduler},
    {"**.optim.lr_decay_steps", kNotServed, kMcoreScheduler},
    {"**.optim.weight_decay_incr_style", kNotServed,
     "weight decay is constant here"},
    {"**.optim.use_checkpoint_opt_param_scheduler", kNotServed,
     "the schedule's settings come from the config; a checkpoint restores "
     "its step only"},
    {"**.lora.dropout", kNotServed, "LoRA dropout is not built"},
    {"**.lora.lora_B_init_method", kNotServed,
     "B starts at zero (the starting policy is the base model)"},
    {"**.lora.dtype", kNotServed,
     "adapters are kept in the master-weight dtype (fp32)"},
    {"data.image_key", kServed, ""},
    {"data.video_key", kNotServed, kVlm},
    {"data.image_patch_size", kNotServed, kVlm},
    {"data.return_multi_modal_inputs", kNotServed, kVlm},
    {"actor_rollout_ref.actor.freeze_vision_tower", kServed, ""},
    {"data.custom_cls", kNotServed, kPython},
    {"data.datagen", kNotServed, kPython},
    {"data.sampler", kNotServed, kPython},
    {"data.apply_chat_template_kwargs", kNotServed,
     "extra chat-template arguments are not passed to the template"},
    {"data.tool_config_path", kNotServed, kMultiTurn},
    {"actor_rollout_ref.model.hf_config_path", kNotServed,
     "config.json is read from actor_rollout_ref.model.path"},
    {"actor_rollout_ref.model.external_lib", kNotServed, kPython},
    {"actor_rollout_ref.model.custom_chat_template", kNotServed,
     "the tokenizer's own chat template (tokenizer_config.json) is used"},
    {"actor_rollout_ref.actor.optim.optimizer_impl", kNotServed,
     "the optimizers are LibTorch's (torch.optim equivalents)"},
    {"actor_rollout_ref.actor.optim.override_optimizer_config", kNotServed,
     "extra optimizer arguments are not passed"},
    {"critic.optim.optimizer_impl", kNotServed,
     "the optimizers are LibTorch's (torch.optim equivalents)"},
    {"critic.optim.override_optimizer_config", kNotServed,
     "extra optimizer arguments are not passed"},
    {"**.fsdp_config.model_dtype", kNotServed,
     "master weights are fp32; set fsdp_config.dtype for the compute dtype"},
    {"**.fsdp_config.mixed_precision", kNotServed,
     "set <role>.fsdp_config.dtype (the compute dtype); reductions are fp32"},
    {"actor_rollout_ref.rollout.logprobs_mode", kNotServed,
     "the engine returns processed_logprobs only"},
    {"actor_rollout_ref.rollout.tensor_model_parallel_size", kServed, ""},
    {"actor_rollout_ref.rollout.data_parallel_size", kNotServed,
     "the rollout's data parallelism is the ranks / "
     "tensor_model_parallel_size (one engine replica per tp group)"},
    {"actor_rollout_ref.rollout.expert_parallel_size", kNotServed,
     "expert-parallel rollout is not available"},
    {"actor_rollout_ref.rollout.pipeline_model_parallel_size", kNotServed,
     "pipeline-parallel rollout is not available"},
    {"actor_rollout_ref.rollout.over_sample_rate", kNotServed,
     "rollout over-sampling is not available"},
    {"actor_rollout_ref.rollout.enable_rollout_routing_replay", kNotServed,
     "MoE routing replay is not available"},
    {"actor_rollout_ref.rollout.multi_turn", kServed, ""},
    {"actor_rollout_ref.rollout.multi_turn.use_inference_chat_template",
     kNoEffect, kLegacyMultiTurn},
    {"actor_rollout_ref.rollout.multi_turn.tokenization_sanity_check_mode",
     kNoEffect, kLegacyMultiTurn},
    {"actor_rollout_ref.rollout.multi_turn.num_repeat_rollouts", kNoEffect,
     kLegacyMultiTurn},
    {"actor_rollout_ref.rollout.agent", kServed, ""},
    {"actor_rollout_ref.rollout.agent.agent_loop_manager_class", kNotServed,
     kPython},
    {"actor_rollout_ref.rollout.agent.custom_async_server", kNotServed,
     kPython},
    {"actor_rollout_ref.rollout.trace.backend", kNotServed,
     "rollout tracing (mlflow/weave) needs a network service"},
    {"actor_rollout_ref.rollout.skip_rollout", kNotServed,
     "replaying dumped rollouts is not available"},
    {"critic.model.external_lib", kNotServed, kPython},
    {"reward_model.model.external_lib", kNotServed, kPython},
    {"reward_model.sandbox_fusion", kNotServed,
     "the sandbox-fusion code executor needs a network service"},
    {"**.megatron.use_dist_checkpointing", kNotServed,
     "loading the initial weights from an mcore dist checkpoint is not "
     "built (the model loads from the HF folder; the trainer's checkpoints "
     "of strategy megatron are always <role>/dist_ckpt/)"},
    {"**.megatron.dist_checkpointing_path", kNotServed,
     "loading the initial weights from an mcore dist checkpoint is not "
     "built"},
    {"**.megatron.dist_checkpointing_prefix", kNotServed,
     "loading the initial weights from an mcore dist checkpoint is not "
     "built"},
    {"**.megatron.override_ddp_config", kNotServed,
     "Megatron DDP overrides are not applied"},
    {"**.megatron.override_mcore_model_config", kNotServed,
     "mcore model-config overrides are not applied"},
    {"trainer.default_hdfs_dir", kNotServed, "no HDFS here"},
    {"trainer.del_local_ckpt_after_load", kNotServed,
     "checkpoints are never deleted after loading"},
};

std::vector<absl::string_view> Segments(absl::string_view key) {
  return absl::StrSplit(key, '.');
}

// Specificity of `pattern` for `key` (-1: no match). Literal patterns beat
// "**." ones; longer beats shorter.
int MatchScore(absl::string_view pattern, absl::string_view key) {
  const std::vector<absl::string_view> k = Segments(key);
  bool anywhere = absl::ConsumePrefix(&pattern, "**.");
  const std::vector<absl::string_view> p = Segments(pattern);
  for (size_t start = 0; start + p.size() <= k.size(); ++start) {
    if (!anywhere && start > 0) break;
    bool ok = true;
    for (size_t i = 0; i < p.size() && ok; ++i) ok = k[start + i] == p[i];
    if (ok) return static_cast<int>(p.size()) + (anywhere ? 0 : 1000);
  }
  return -1;
}

}  // namespace

absl::Span<const KeyRule> PpoKeyRules() { return kKeyRules; }

const KeyRule* FindKeyRule(absl::string_view key) {
  return FindKeyRuleIn(kKeyRules, key);
}

const KeyRule* FindKeyRuleIn(absl::Span<const KeyRule> rules,
                             absl::string_view key) {
  const KeyRule* best = nullptr;
  int best_score = -1;
  for (const KeyRule& rule : rules) {
    const int score = MatchScore(rule.pattern, key);
    if (score > best_score) {
      best_score = score;
      best = &rule;
    }
  }
  return best;
}

KeyUsage CheckKeyUse(const PpoTrainerConfig& config) {
  static const PpoTrainerConfig* const kDefaults =
      new PpoTrainerConfig(DefaultPpoTrainerConfig());
  return CheckKeyUseIn(kKeyRules, config, *kDefaults);
}

KeyUsage CheckKeyUseIn(absl::Span<const KeyRule> rules,
                       const google::protobuf::Message& config,
                       const google::protobuf::Message& defaults,
                       bool unset_is_default) {
  const auto flat_defaults = core::FlattenConfig(defaults);
  const std::map<std::string, std::string> kept(flat_defaults.begin(),
                                                flat_defaults.end());
  KeyUsage usage;
  for (const auto& [key, value] : core::FlattenConfig(config)) {
    auto it = kept.find(key);
    if (it != kept.end() && it->second == value) continue;
    if (unset_is_default &&
        (value == "null" || value == "[]" || value == "{}")) {
      continue;
    }
    const KeyRule* rule = FindKeyRuleIn(rules, key);
    if (rule == nullptr || rule->use == KeyUse::kServed) continue;
    if (rule->use == KeyUse::kNotServed) {
      usage.not_served.push_back(absl::StrCat(
          "'", key, "=", value, "' is not available here: ", rule->reason));
    } else {
      usage.no_effect.push_back(key);
    }
  }
  return usage;
}

}  // namespace verl::rl
