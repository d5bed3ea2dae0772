// File: verl/rl/trainer/policy_loader.h
//
// Building the policy and its copies for the PPO trainer's roles: the
// tokenizer (HF folder or the built-in one), the policy (HF folder or a
// preset, with the tokenizer's stop and pad ids), clones for the reference,
// critic (value head) and rollout engine, and the trainable state a role's
// strategy asks for (FSDP, Megatron or replicated).
#ifndef VERL_RL_TRAINER_POLICY_LOADER_H_
#define VERL_RL_TRAINER_POLICY_LOADER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "verl/models/decoder.h"
#include "verl/models/megatron/megatron_gpt.h"
#include "verl/models/model_settings.pb.h"
#include "verl/models/tokenizer/tokenizer.h"
#include "verl/models/vlm/image_processor.h"
#include "verl/models/vlm/vlm_config.h"
#include "verl/parallel/fsdp_config.pb.h"
#include "verl/parallel/megatron/megatron_config.pb.h"
#include "verl/parallel/megatron/parallel_state.h"
#include "verl/parallel/process_group.h"
#include "verl/rl/trainer/config/config.pb.h"
#include "verl/rl/workers/train_state.h"

namespace verl::rl {

struct LoadedPolicy {
  models::ModelConfig config;
  std::shared_ptr<models::CausalLM> model;
  std::string hf_dir;  // source folder when loaded from HF
  // Vision-language policies (Qwen2.5-VL): `model` is a
  // models::vlm::Qwen2VLForConditionalGeneration with this config.
  std::optional<models::vlm::VlmConfig> vlm;
};

// Whether model.preset names a vision-language preset (tiny-qwen2.5-vl) or
// model.path holds a vision-language config.json (one with vision_config).
absl::StatusOr<bool> IsVisionLanguage(const models::ModelSettings& m);

// model.tokenizer_path, else model.path; neither: the built-in tokenizer
// (for a vision-language preset with its vision special tokens and the
// Qwen2-VL chat template, MakeVlmTokenizer).
absl::StatusOr<models::Tokenizer> LoadTokenizer(const models::ModelSettings& m);

// The image processor of a vision-language policy: model.path's
// preprocessor_config.json (HF's defaults when absent), HF's defaults for a
// preset; nullopt for text-only models.
absl::StatusOr<std::optional<models::vlm::ImageProcessorConfig>>
LoadImageProcessor(const models::ModelSettings& m);

// model.path (HF config + weights, generation_config's eos ids) or
// model.preset sized to the tokenizer's vocabulary; the tokenizer's eos and
// pad ids are added to the model's config. Vision-language folders and
// presets give a Qwen2VLForConditionalGeneration (override_config is
// refused for them).
absl::StatusOr<LoadedPolicy> LoadPolicy(const models::ModelSettings& m,
                                        const models::Tokenizer& tokenizer,
                                        uint64_t seed);

// A copy of `src` (same config) with its own parameters; `value_head`
// replaces the LM head by a fresh value head (the critic). A
// vision-language `src` gives a vision-language copy (its critic with
// value_head).
std::shared_ptr<models::CausalLM> CloneModel(const models::CausalLM& src,
                                             bool value_head, uint64_t seed);

// The role's trainable state: FSDP (sharded parameters, gradients and AdamW
// state, gathered layer by layer) for strategy fsdp/fsdp2 on more than one
// rank, else replicated. Parameters are sharded over every rank (dp x sp).
absl::StatusOr<std::unique_ptr<TrainState>> MakeTrainState(
    models::CausalLM& model, Strategy::Value strategy,
    const parallel::FsdpConfig& fsdp, const OptimizerOptions& options,
    std::shared_ptr<parallel::Communicator> world);

// strategy: megatron. The tensor-parallel copy of `source` (its config and
// current weights, HF names) on the groups of `mpu`, with the options of
// `<prefix>` (e.g. "actor_rollout_ref.actor.megatron"); errors name the key.
// Collective over the mpu's world.
absl::StatusOr<std::shared_ptr<models::MegatronGPTModel>> MakeMegatronModel(
    const models::CausalLM& source,
    const parallel::megatron::MegatronConfig& config, const std::string& prefix,
    std::shared_ptr<parallel::megatron::ParallelState> mpu);

// The above plus its MegatronTrainState (use_distributed_optimizer from the
// config); `*model` receives the tensor-parallel model.
absl::StatusOr<std::unique_ptr<TrainState>> MakeMegatronTrainState(
    const models::CausalLM& source,
    const parallel::megatron::MegatronConfig& config, const std::string& prefix,
    const OptimizerOptions& options,
    std::shared_ptr<parallel::megatron::ParallelState> mpu,
    std::shared_ptr<models::MegatronGPTModel>* model);

}  // namespace verl::rl

#endif  // VERL_RL_TRAINER_POLICY_LOADER_H_
