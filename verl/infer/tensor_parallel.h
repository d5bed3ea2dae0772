// File: verl/infer/tensor_parallel.h
//
// Tensor-parallel rollout (verl's actor_rollout_ref.rollout.
// tensor_model_parallel_size, vLLM's tensor_parallel_size): the engine's
// model split over a tp process group the way Megatron / vLLM split it.
//
//   q/k/v_proj (+bias)  column-parallel: rank r holds heads [r*nq/tp, ...)
//                       and KV heads [r*nkv/tp, ...); with nkv < tp (GQA
//                       with fewer KV heads than ranks; tp % nkv == 0) each
//                       KV head is replicated on tp/nkv ranks, rank r holding
//                       KV head r / (tp/nkv), as Megatron does.
//   o_proj              row-parallel (columns of the local heads); the
//                       partial outputs are all-reduced (one per attention).
//   gate/up_proj        column-parallel (rows [r*F/tp, ...)).
//   down_proj           row-parallel; one all-reduce per MLP block.
//   MoE (Qwen2/3-MoE)   every expert's and the shared expert's gate/up
//                       column-parallel and down row-parallel over their own
//                       intermediate sizes; the router (mlp.gate) and the
//                       shared-expert gate replicated, so every rank routes
//                       the same tokens to the same experts; one all-reduce
//                       per MoE block (MoeBlock::output_hook).
//   embed_tokens, norms, q/k_norm, lm_head   replicated.
//
// The shard is an ordinary models::CausalLM built from ShardConfig (heads,
// KV heads and intermediate size divided), so the paged KV cache holds only
// the local KV heads. The LM head is computed vocab-parallel — rank r the
// logits of vocabulary rows [r*V/tp, (r+1)*V/tp) — and all-gathered, so
// every rank samples from the same logits bit for bit (same seed → same
// tokens on every rank of the group).
//
// Weight sync stays by HF name with full (unsharded) tensors, one layer or
// tensor at a time: ShardOf cuts this rank's slice.
#ifndef VERL_INFER_TENSOR_PARALLEL_H_
#define VERL_INFER_TENSOR_PARALLEL_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "verl/models/decoder.h"
#include "verl/models/model_config.h"
#include "verl/parallel/process_group.h"

namespace verl::infer {

// The config key every tensor-parallel rollout error names.
inline constexpr char kRolloutTpKey[] =
    "actor_rollout_ref.rollout.tensor_model_parallel_size";

// One line naming kRolloutTpKey when `config` cannot be split over `tp`:
// heads, KV heads (nkv % tp or tp % nkv), intermediate sizes (dense, expert,
// shared expert); sigmoid-routed (DeepSeek) MoE, MLA and vision-language
// models are refused (not served under tp > 1).
absl::Status ValidateTensorParallel(const models::ModelConfig& config,
                                    int64_t tp);

// The config of one rank's shard (ValidateTensorParallel first).
models::ModelConfig ShardConfig(const models::ModelConfig& config, int64_t tp);

// Rows [begin, end) of a dim of `n` that rank `rank` of `tp` holds.
std::pair<int64_t, int64_t> ShardRange(int64_t n, int rank, int tp);

// This rank's slice of the full HF tensor `name` (a view; replicated
// tensors are returned as they are); undefined when a split tensor is not
// the full one (its size along the split dim is not the model's).
at::Tensor ShardOf(const std::string& name, const at::Tensor& full,
                   const models::ModelConfig& config, int rank, int tp);

// A shard model of `full` for rank `rank`: parameters in `full`'s dtype,
// copied from its slices; `full` is left untouched.
std::shared_ptr<models::CausalLM> ShardModel(const models::CausalLM& full,
                                             int rank, int tp);

// Sets the output hooks of the shard's o_proj and down_proj (models::Linear::
// output_hook) to the all-reduce over `group`, for the model's own forward
// (bf16, or EngineOptions::fused_forward=false); FusedForward does its own.
void InstallRowParallelHooks(models::CausalLM& shard,
                             std::shared_ptr<parallel::Communicator> group);

// In-place sum over `group` (bf16 reduced in fp32: Gloo has no bf16 sum).
// A failed collective ends the process naming the rank and the group.
void AllReduceSum(at::Tensor& x, parallel::Communicator& group);

// Logits shards [S, V_r] of every rank → [S, V] on every rank.
at::Tensor GatherVocabShards(const at::Tensor& local,
                             parallel::Communicator& group);

}  // namespace verl::infer

#endif  // VERL_INFER_TENSOR_PARALLEL_H_
