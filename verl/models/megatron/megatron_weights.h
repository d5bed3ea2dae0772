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
#include <vector>

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
// checkpoints in HF layout). With pipeline stages a rank gathers only what
// its stage holds: `layer` must be one of its layers (CHECK), and
// kMegatronRootStage gives the embeddings on the first stage and the final
// norm and head on the last.
inline constexpr int64_t kMegatronRootStage = -1;
using ParamTensorFn = std::function<at::Tensor(const at::Tensor& param)>;
std::map<std::string, at::Tensor> GatherHfTensors(
    const MegatronGPTModel& model, int64_t layer,
    const ParamTensorFn& of = nullptr);

// GatherHfTensors from whichever pipeline stage holds `layer` (for
// kMegatronRootStage: the first stage's embeddings and the last stage's
// final norm and head), broadcast over the pp group, so every rank gets the
// full tensors (weight sync to the rollout engine). Collective over tp and
// pp; the same as GatherHfTensors when pp = 1.
std::map<std::string, at::Tensor> GatherHfTensorsAllStages(
    const MegatronGPTModel& model, int64_t layer);

// ---- Global (tp = 1) tensors, for dist checkpoints ----------------------
//
// How this rank's shard of one parameter sits in the parameter's global
// tensor: Megatron's names, the tp = 1 layout (linear_qkv fused per query
// group, so a rank's rows are contiguous; linear_fc1 as [2, ffn, H] =
// [gate; up], so a rank's [gate_r; up_r] is the box [0:2, r*f:(r+1)*f, :],
// as Megatron's swiglu sharded factory stores it), and the vocabulary
// unpadded (padding depends on tp; its rows are zero and not saved).
// MoE: the router, its expert_bias and the shared-expert gate are
// replicated, the shared experts tp-split as the dense MLP; a local expert
// i of ep rank j is saved under its global index g = j*E/ep + i
// (`decoder.layers.L.mlp.experts.local_experts.<g>.linear_fc{1,2}.weight`,
// global [2, F, H] / [H, F]), its box this rank's etp shard, so a
// checkpoint loads under any ep / etp.
struct MegatronParamSlice {
  std::string key;  // the dist_ckpt key (the parameter name but for experts)
  std::vector<int64_t> global_shape;
  std::vector<int64_t> offsets;     // of this rank's box
  std::vector<int64_t> view_shape;  // the local tensor viewed so
  int64_t rows = -1;  // real rows of the view's dim 0 (vocab padding); -1 all
  bool replicated = false;  // the same on every tp rank (tp rank 0 saves)
  bool expert = false;      // a local expert's shard: replicas over edp only

  std::vector<int64_t> BoxSizes() const;
  // This rank's box of `local` (shaped like the parameter), a view.
  at::Tensor Box(const at::Tensor& local) const;
};
absl::StatusOr<MegatronParamSlice> MegatronSliceOf(
    const MegatronGPTModel& model, const std::string& name);

// HF tensors from the global tensor of one Megatron parameter (the layout
// above): linear_qkv split per query group into q/k/v, linear_fc1 into
// gate/up, norms, final norm, head (value models: output_layer -> score);
// MoE: router -> mlp.gate (.weight, .e_score_correction_bias), experts by
// global index -> mlp.experts.<g>.{gate,up,down}_proj, shared experts ->
// mlp.shared_expert(s) (DeepSeek's plural for the sigmoid router), the
// shared gate -> mlp.shared_expert_gate.
// Works on meta tensors too (shapes only). NotFound for an unknown name.
absl::StatusOr<std::map<std::string, at::Tensor>> MegatronFullToHf(
    const ModelConfig& config, const std::string& name, const at::Tensor& full);

}  // namespace verl::models

#endif  // VERL_MODELS_MEGATRON_WEIGHTS_H_
