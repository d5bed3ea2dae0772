// File: verl/rl/workers/lora_policy.h
//
// LoRA actor wiring (actor_rollout_ref.model.lora_rank > 0), as verl's FSDP
// workers do it with PEFT: adapters on the policy, only adapter parameters
// trainable; the reference policy is the same model with adapters disabled
// (no second copy, verl's ref_in_actor); the rollout engine, which holds the
// plain base architecture, receives merged weights W + (alpha/r)·B·A.
#ifndef VERL_RL_WORKERS_LORA_POLICY_H_
#define VERL_RL_WORKERS_LORA_POLICY_H_

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "verl/models/lora.h"
#include "verl/models/model_settings.pb.h"

namespace verl::rl {

using NamedTensorList = std::vector<std::pair<std::string, at::Tensor>>;

// actor_rollout_ref.model.{lora_rank, lora_alpha, target_modules,
// exclude_modules}; exclude_modules is read as a comma list of module names
// (verl takes a regex). Empty target_modules means all-linear.
models::LoraConfig LoraConfigFromSettings(const models::ModelSettings& m);

// The parameters that require grad, with their names (the adapters after
// ApplyLora).
NamedTensorList TrainableParameters(const torch::nn::Module& model);

// Every parameter of `model` under its HF name with adapters folded into the
// adapted weights (computed in fp32 like MergeLora, cast back), adapter
// tensors left out; the model itself is not modified. Unadapted tensors are
// the model's own (detached, no copy).
NamedTensorList MergedLoraWeights(const torch::nn::Module& model);

// The same tensors one at a time (at most one merged weight alive), for the
// weight sync into the rollout engine; stops at the first error.
absl::Status ForEachMergedLoraWeight(
    const torch::nn::Module& model,
    const std::function<absl::Status(const std::string&, const at::Tensor&)>&
        fn);

}  // namespace verl::rl

#endif  // VERL_RL_WORKERS_LORA_POLICY_H_
