// File: verl/models/megatron/megatron_weights.h
//
// HF weights in, Megatron tensor-parallel shards out: each rank builds only
// its slices of every MegatronGPTModel parameter from HF-named full tensors
// (model.layers.L.self_attn.q_proj.weight, ...). The source can be the
// memory-mapped tensors of an HF folder (LoadHfCheckpoint: a rank's copy
// touches only the pages of its slices) or a single-process model's state
// dict (CausalLM::named_parameters()).
//
// The mapping (Megatron's HF converters): q/k/v fused per query group into
// linear_qkv and split evenly by rows; gate/up into linear_fc1 as
// [gate rows of rank r; up rows of rank r]; o_proj/down_proj split by
// columns; embeddings and lm_head by vocabulary rows, zero rows past
// vocab_size (padding); norms replicated.
#ifndef VERL_MODELS_MEGATRON_WEIGHTS_H_
#define VERL_MODELS_MEGATRON_WEIGHTS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "verl/models/megatron/megatron_gpt.h"

namespace verl::models {

// HF name -> full tensor (a view is enough); NotFound for a missing name.
using HfTensorSource =
    std::function<absl::StatusOr<at::Tensor>(const std::string& hf_name)>;

// A source over a name -> tensor map (kept by reference: it must outlive
// the source).
HfTensorSource HfSourceFromMap(const std::map<std::string, at::Tensor>& map);

// This rank's shard of the parameter `name` (a MegatronGPTModel parameter
// name) of `model`, built from `hf`; same shape as the parameter.
absl::StatusOr<at::Tensor> MegatronShardFromHf(const MegatronGPTModel& model,
                                               const std::string& name,
                                               const HfTensorSource& hf);

// Copies every parameter's shard into `model` (no autograd). Errors name
// the Megatron and HF tensors.
absl::Status LoadMegatronFromHf(const HfTensorSource& hf,
                                MegatronGPTModel* model);

// LoadHfCheckpoint(dir) (mapped, nothing read until sliced) + the above.
absl::Status LoadMegatronFromHfFolder(const std::string& dir,
                                      MegatronGPTModel* model);

// The inverse, for weight sync and HF export: the full HF-named tensors of
// decoder layer `layer` (model.layers.<layer>.*), or of the embeddings,
// final norm and lm_head for layer == kMegatronRootStage, all-gathered over
// tp (collective: every tp rank calls it with the same layer; every rank
// gets the full tensors). One layer at a time keeps the peak at one layer.
// `of` (optional) gathers, instead of each parameter's data, a tensor of
// the same shape that belongs to it (e.g. its AdamW moment, for
// checkpoints in HF layout).
inline constexpr int64_t kMegatronRootStage = -1;
using ParamTensorFn = std::function<at::Tensor(const at::Tensor& param)>;
std::map<std::string, at::Tensor> GatherHfTensors(
    const MegatronGPTModel& model, int64_t layer,
    const ParamTensorFn& of = nullptr);

}  // namespace verl::models

#endif  // VERL_MODELS_MEGATRON_WEIGHTS_H_
