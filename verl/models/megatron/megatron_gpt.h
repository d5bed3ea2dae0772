// File: verl/models/megatron/megatron_gpt.h
//
// The decoder family (Llama, Qwen2/2.5, Qwen3; Qwen2/3-MoE layers, below) built
// from Megatron's tensor-parallel layers, with Megatron-core's module names
// (local spec):
//
//   embedding.word_embeddings.weight              [Vp/tp, H]  vocab rows
//   decoder.layers.L.input_layernorm.weight       [H]         replicated
//   decoder.layers.L.self_attention.linear_qkv.{weight,bias}  column
//   decoder.layers.L.self_attention.{q,k}_layernorm.weight    replicated
//   decoder.layers.L.self_attention.linear_proj.weight        row
//   decoder.layers.L.pre_mlp_layernorm.weight     [H]         replicated
//   decoder.layers.L.mlp.linear_fc1.weight        [2F/tp, H]  [gate_r; up_r]
//   decoder.layers.L.mlp.linear_fc2.weight        [H, F/tp]   row
//   decoder.final_layernorm.weight, output_layer.weight [Vp/tp, H]
//   (value model: output_layer.{weight [1, H], bias [1]}, replicated)
//
// linear_qkv is fused in Megatron's per-query-group layout: for each of the
// ng KV groups, its np/ng query heads, then its key head, then its value
// head; the fused rows are split evenly over tp. With ng >= tp each rank
// holds ng/tp whole groups; with ng < tp (GQA with fewer KV heads than
// ranks) the rank all-gathers the fused activations, keeps its group's block
// and its np/tp query heads, as Megatron's get_query_key_value_tensors does.
// Vp is the vocabulary padded to make_vocab_size_divisible_by * tp; padded
// logit columns are excluded by the vocab-parallel losses.
//
// Forward takes packed tokens (verl's remove-padding layout: input_ids [T],
// position_ids [T], cu_seqlens) and returns this rank's vocab shard of the
// logits [T, Vp/tp]; use verl/parallel/megatron/vocab_parallel.h for
// log-probs/entropy. With sequence parallelism the token stream is padded to
// a multiple of tp internally (the pad is its own sequence, trimmed from the
// output). After backward, call FinalizeGrads() (Megatron's
// finalize_model_grads for tp: sums the partial gradients of replicated
// parameters that saw only part of the tokens or heads).
//
// Pipeline parallelism (mpu pp > 1): this rank builds only its stage —
// the decoder layers of PipelineStageLayers (named by their global index,
// decoder.layers.<L>), the embedding on the first stage, the final norm and
// head on the last. With tied embeddings the last stage holds a copy of
// embedding.word_embeddings.weight for the head, initialised alike and
// kept equal by summing both copies' gradients over the embedding group
// (first + last stage) in FinalizeGrads, as Megatron does. StageForward
// runs one stage (pipeline schedules: verl/parallel/megatron/
// pipeline_schedule.h); Forward is the pp = 1 special case.
//
// Virtual pipeline stages (mpu vpp = v > 1, the interleaved schedule): the
// model is cut into p*v virtual stages of num_layers/(p*v) layers and this
// rank holds v chunks, chunk c running virtual stage c*p + s (Megatron's
// layer assignment: with p = 2, v = 2 and 8 layers, stage 0 holds layers
// 0-1 and 4-5, stage 1 layers 2-3 and 6-7). Parameters keep their global
// layer index, so checkpoints and merges do not depend on v. The
// embedding belongs to chunk 0 of stage 0, the final norm and head to
// chunk v-1 of the last stage; StageForward(..., chunk) runs one chunk.
//
// Context parallelism (mpu cp > 1, verl/parallel/megatron/context_parallel.h):
// Forward keeps the same contract — whole packed stream in, every token's
// output on every rank out — but each cp rank embeds and runs the layers on
// its load-balanced share of every sequence only (attention over the cp
// ring); the output is all-gathered over cp at the end. FinalizeGrads()
// then also sums every gradient over cp (each rank's covers its tokens).
//
// Multi-head latent attention (DeepSeek-V3 configs, kv_lora_rank > 0):
// Megatron's MLASelfAttention in place of linear_qkv (mla_layer.h); the
// rotary tables then cover qk_rope_head_dim (YaRN as HF's).
//
// MoE layers (Qwen2/3-MoE, DeepSeek-V3's router; verl/models/megatron/
// moe_layer.h): experts split over the mpu's ep group (each expert's ffn
// over its etp group), tokens dispatched by all-to-all (and all-gathered
// over etp). Every rank routes its own tokens (with ep > 1 over dp ranks,
// each its own batch). FinalizeGrads() sums the expert gradients over the
// expert-data-parallel group instead of cp, so they hold the gradient of
// the sum of every dp rank's loss (Megatron's expert grads before the
// 1/dp scaling), or leaves that sum to the distributed optimizer's
// reduce-scatter over edp.
#ifndef VERL_MODELS_MEGATRON_GPT_H_
#define VERL_MODELS_MEGATRON_GPT_H_

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "verl/models/attention.h"
#include "verl/models/layers.h"
#include "verl/models/model_config.h"
#include "verl/models/recompute.h"
#include "verl/parallel/megatron/parallel_state.h"
#include "verl/parallel/megatron/pipeline_schedule.h"
#include "verl/parallel/megatron/tp_layers.h"

namespace verl::models {

struct MoeRows;  // moe_layer.h

// verl's actor.megatron.* options that shape the model.
struct MegatronModelOptions {
  bool sequence_parallel = false;
  int64_t make_vocab_size_divisible_by = 128;
  // override_transformer_config.recompute_*: granularity "" (none), "full"
  // or "selective"; method "uniform" (chunks of num_layers layers) or
  // "block" (the first num_layers layers); modules for selective:
  // "core_attn", "mlp".
  std::string recompute_granularity;
  std::string recompute_method = "uniform";
  int64_t recompute_num_layers = 1;
  std::vector<std::string> recompute_modules = {"core_attn"};
  // override_transformer_config.num_layers_in_{first,last}_pipeline_stage:
  // decoder layers of the first / last pipeline stage (-1: unset, the
  // layers are split uniformly over the remaining stages).
  int64_t num_layers_in_first_pipeline_stage = -1;
  int64_t num_layers_in_last_pipeline_stage = -1;
  // MoE (override_transformer_config.moe_*, Megatron's TransformerConfig):
  // capacity-based token dropping when moe_expert_capacity_factor is set
  // (> 0; each rank's experts keep at most ExpertCapacity(its real tokens)
  // pairs, chosen by moe_token_drop_policy "probs" | "position"); and
  // DeepSeek-V3's aux-loss-free balancing: after each step's backward
  // (FinalizeGrads) router.expert_bias += moe_router_bias_update_rate *
  // sign(mean load - load), the load summed over tp x cp x dp.
  std::optional<double> moe_expert_capacity_factor;
  std::string moe_token_drop_policy = "probs";
  bool moe_router_enable_expert_bias = false;
  double moe_router_bias_update_rate = 1e-3;
  // Megatron's per-layer load-balancing loss (moe_layer.h): "none",
  // "aux_loss" (over the micro-batch's tokens) or "seq_aux_loss" (per
  // sequence, DeepSeek-V2/V3), times moe_aux_loss_coeff; and the router
  // z-loss times moe_z_loss_coeff (0: none). Added to the training loss
  // through the router's activations, scaled by SetMoeAuxLossScale.
  std::string moe_router_load_balancing_type = "none";
  double moe_aux_loss_coeff = 0.0;
  double moe_z_loss_coeff = 0.0;
  // HF's all-layer aux loss as well (moe_aux_loss(): CausalLM's
  // ForwardOutput::aux_loss, for comparisons with the HF model). Off in
  // training, which uses the per-layer losses above: it keeps every MoE
  // layer's router logits with their graph and gathers them over tp.
  bool moe_hf_aux_loss = false;
};

// Decoder layers of each of the `pp` pipeline stages (Megatron's
// get_num_layers_to_build): the first / last stage get their override when
// set (>= 0), the other stages split the rest evenly. One line naming the
// key when they do not divide.
absl::StatusOr<std::vector<int64_t>> PipelineStageLayers(
    int64_t num_layers, int64_t pp, const MegatronModelOptions& options);

// Decoder layers of each virtual stage c*pp + s (chunk c of stage s), in
// model order; vpp <= 1 is PipelineStageLayers. With vpp > 1 the layers
// split evenly over pp*vpp (one line naming the key otherwise); the
// first/last-stage overrides are refused with vpp > 1.
absl::StatusOr<std::vector<int64_t>> VirtualStageLayers(
    int64_t num_layers, int64_t pp, int64_t vpp,
    const MegatronModelOptions& options);

// One line naming the key when the model cannot be split over `sizes.tp`
// or uses what this backend does not serve yet (pipeline parallelism, MoE,
// sliding window).
absl::Status ValidateMegatronModel(
    const ModelConfig& config, const MegatronModelOptions& options,
    const parallel::megatron::ModelParallelSizes& sizes);

// The recompute fields alone; errors name `prefix` + ".override_transformer_
// config.<key>" (prefix e.g. "actor_rollout_ref.actor.megatron").
absl::Status ValidateRecomputeOptions(const MegatronModelOptions& options,
                                      const std::string& prefix);

// Head layout of one rank (Megatron's per-partition attention sizes).
struct TpHeadLayout {
  int64_t heads, groups, head_dim;  // global np, ng, hn
  int64_t heads_per_rank;           // np / tp
  int64_t groups_per_rank;          // ng / tp, or 1 when ng < tp
  int64_t fused_per_rank;           // ng * (np/ng + 2) * hn / tp
  bool gather_groups;               // ng < tp
};
TpHeadLayout MakeTpHeadLayout(const ModelConfig& config, int64_t tp);

using parallel::megatron::CommPtr;

class TpSelfAttention : public torch::nn::Module {
 public:
  TpSelfAttention(const ModelConfig& config, int64_t layer,
                  const MegatronModelOptions& options, CommPtr tp);
  // q [T, np/tp, hn], k/v [T, groups_per_rank, hn] after q/k norm and RoPE.
  TensorList QueryKeyValue(const at::Tensor& x, const at::Tensor& cos,
                           const at::Tensor& sin) const;
  // x [T, H] ([T/tp, H] with sp) -> same.
  at::Tensor Forward(const at::Tensor& x, const at::Tensor& cos,
                     const at::Tensor& sin,
                     std::shared_ptr<AttentionBackend> backend) const;

  int64_t layer;
  TpHeadLayout heads;
  bool recompute_core_attn = false;
  std::shared_ptr<parallel::megatron::ColumnParallelLinear> linear_qkv;
  std::shared_ptr<RMSNorm> q_layernorm, k_layernorm;  // null unless qk_norm
  std::shared_ptr<parallel::megatron::RowParallelLinear> linear_proj;

 private:
  CommPtr tp_;
};

class TpMlp : public torch::nn::Module {
 public:
  TpMlp(const ModelConfig& config, const MegatronModelOptions& options,
        CommPtr tp);
  at::Tensor Forward(const at::Tensor& x) const;

  std::shared_ptr<parallel::megatron::ColumnParallelLinear> linear_fc1;
  std::shared_ptr<parallel::megatron::RowParallelLinear> linear_fc2;
};

class MegatronMoeLayer;  // moe_layer.h
class TpMlaAttention;    // mla_layer.h

class TpTransformerLayer : public torch::nn::Module {
 public:
  // `ep`: the expert-parallel group (needed when `layer` is an MoE layer);
  // `etp`: the expert tensor-parallel group (null: etp 1).
  TpTransformerLayer(const ModelConfig& config, int64_t layer,
                     const MegatronModelOptions& options, CommPtr tp,
                     CommPtr ep = nullptr, CommPtr etp = nullptr);
  at::Tensor Forward(const at::Tensor& x, const at::Tensor& cos,
                     const at::Tensor& sin,
                     std::shared_ptr<AttentionBackend> backend) const;

  std::shared_ptr<RMSNorm> input_layernorm, pre_mlp_layernorm;
  // One of the two (both registered as "self_attention"): multi-head
  // latent attention for DeepSeek-V3 configs (kv_lora_rank > 0).
  std::shared_ptr<TpSelfAttention> self_attention;
  std::shared_ptr<TpMlaAttention> mla_attention;
  std::shared_ptr<TpMlp> mlp;             // dense layers
  std::shared_ptr<MegatronMoeLayer> moe;  // MoE layers (also "mlp")
  bool recompute_mlp = false;
};

class MegatronGPTModel : public torch::nn::Module {
 public:
  // Call ValidateMegatronModel first (the constructor CHECKs the same).
  // Parameters start at zero (norm weights at one); load weights with
  // megatron_weights.h.
  MegatronGPTModel(const ModelConfig& config, MegatronModelOptions options,
                   std::shared_ptr<parallel::megatron::ParallelState> mpu);

  // Packed tokens -> this rank's logits shard [T, Vp/tp] (language model)
  // or the values [T] (value model: the critic), the same on every rank.
  // `final_hidden`, if given, gets the final-norm hidden states of every
  // token [T, H], the same on every rank (all-gathered along the sequence
  // under sequence parallelism; backward then keeps this rank's slice of the
  // gradient, so a loss computed alike on every tp rank — FlowRL's log-Z
  // head — gets the single-process gradient).
  // pp = 1 only (use StageForward through a schedule otherwise).
  at::Tensor Forward(const at::Tensor& input_ids,
                     const at::Tensor& position_ids,
                     const std::vector<int64_t>& cu_seqlens,
                     at::Tensor* final_hidden = nullptr);

  // One pipeline stage on the whole packed micro-batch (every stage gets
  // the same ids/positions/cu_seqlens). `input`: the previous stage's
  // output (ignored on the first stage). Returns, on the last stage, what
  // Forward returns; on the others the hidden states to send on, shaped
  // StageHiddenShape (this rank's tokens: its cp share, its sequence shard
  // under sequence parallelism). `final_hidden`: last stage only.
  // `chunk`: which of this rank's num_chunks() model chunks runs (virtual
  // pipeline stages); the model's output comes from chunk
  // num_chunks() - 1 of the last stage.
  at::Tensor StageForward(const at::Tensor& input_ids,
                          const at::Tensor& position_ids,
                          const std::vector<int64_t>& cu_seqlens,
                          const at::Tensor& input,
                          at::Tensor* final_hidden = nullptr,
                          int64_t chunk = 0);
  std::vector<int64_t> StageHiddenShape(
      const std::vector<int64_t>& cu_seqlens) const;

  // This rank's pipeline stage holds the embedding (chunk 0) / the model's
  // output (its last chunk).
  bool is_first_stage() const { return first_stage_; }
  bool is_last_stage() const { return last_stage_; }
  int64_t first_layer() const { return first_layer_; }
  // Model chunks of this rank (virtual_pipeline_model_parallel_size, 1
  // without virtual stages).
  int64_t num_chunks() const {
    return static_cast<int64_t>(chunk_begin_.size()) - 1;
  }
  // The decoder layer with global index `layer`, or null when another
  // pipeline stage holds it.
  std::shared_ptr<TpTransformerLayer> LocalLayer(int64_t layer) const;
  // The pipeline stage (pp rank) holding decoder layer `layer`.
  int StageOfLayer(int64_t layer) const;

  // Sums over tp the gradients of replicated parameters that got partial
  // ones: every norm weight and the value head under sequence parallelism,
  // q/k norm weights always. Collective over tp; with cp > 1 then sums every
  // gradient over cp (collective over cp); with tied embeddings and pp > 1
  // sums the embedding gradient over the first and last stage; then
  // UpdateExpertBias(). `sum_expert_grads` false leaves the expert
  // gradients this rank's (the distributed optimizer reduce-scatters them
  // over edp instead, as Megatron).
  void FinalizeGrads(bool sum_expert_grads = true);

  const ModelConfig& config() const { return config_; }
  const MegatronModelOptions& options() const { return options_; }
  int64_t padded_vocab_size() const { return padded_vocab_; }
  const CommPtr& tp() const { return mpu_->tp(); }
  const CommPtr& cp() const {
    return mpu_->group(parallel::megatron::MpuGroup::kCp);
  }
  const CommPtr& ep() const {
    return mpu_->group(parallel::megatron::MpuGroup::kEp);
  }
  const CommPtr& etp() const {
    return mpu_->group(parallel::megatron::MpuGroup::kEtp);
  }
  const std::shared_ptr<parallel::megatron::ParallelState>& mpu() const {
    return mpu_;
  }

  // MoE: the last Forward's load-balancing loss, HF's aux_loss over every
  // MoE layer and every token of the packed batch (the same on every tp /
  // cp rank; the caller scales it by config().router_aux_loss_coef, as for
  // CausalLM's ForwardOutput::aux_loss). Undefined for dense models, the
  // sigmoid router (aux-loss-free balancing) and when !HasMoeAuxLoss().
  const at::Tensor& moe_aux_loss() const { return moe_aux_loss_; }
  // Whether moe_aux_loss() is computed: options().moe_hf_aux_loss, and as
  // HF's aux loss is one product of means over every layer's routing, it
  // needs all MoE layers' router logits with their graph on one rank: false
  // with pipeline stages (pp > 1) and when MoE layers are recomputed (full,
  // or selective "mlp": their forward runs without a graph). Training uses
  // Megatron's per-layer losses (moe_router_load_balancing_type) instead.
  bool HasMoeAuxLoss() const;
  // Expert load since the last call: per MoE layer, the dispatched (token,
  // slot) count of every expert over the real tokens of this rank's
  // forwards (all routed pairs, less those capacity dropping removed),
  // summed over tp and cp (collective over tp x cp), and every pipeline
  // stage's layers (collective over pp). Empty for dense models.
  std::map<int64_t, std::vector<double>> TakeExpertLoad();
  // Aux-loss-free balancing (options().moe_router_enable_expert_bias; else
  // nothing): each MoE layer's router.expert_bias += rate * sign(mean -
  // load), the load being the dispatched pairs per expert of the training
  // (grad-enabled) forwards since the last update, summed over tp x cp x dp.
  // Collective over those groups; FinalizeGrads calls it (Megatron's
  // finalize_model_grads), once per optimizer step.
  void UpdateExpertBias();
  // The local experts' parameters of every MoE layer.
  std::vector<at::Tensor> ExpertParameters() const;
  // The factor on the gradient of every MoE layer's load-balancing and z
  // losses in the next training forwards (Megatron's MoEAuxLossAutoScaler
  // scale: 1 / the micro-batches of the optimizer step; default 1).
  void SetMoeAuxLossScale(double scale);
  // Load-balancing and z losses of the training forwards since the last
  // call (options().moe_*; empty when both are off): per MoE layer the loss
  // without its coefficient, averaged over the forwards, summed over tp x
  // cp (each rank's part) and pp, then averaged over the MoE layers, as
  // Megatron logs them: "moe/load_balancing_loss" (aux_loss),
  // "moe/seq_load_balancing_loss" (seq_aux_loss), "moe/z_loss". Collective
  // over tp x cp and pp.
  std::map<std::string, double> TakeMoeAuxLosses();

  // First stage (and, for a tied LM head, the last stage's copy); else null.
  std::shared_ptr<parallel::megatron::VocabParallelEmbedding> word_embeddings;
  // This stage's layers, in order (chunk by chunk; global indices from
  // first_layer() on, each chunk's a run of consecutive ones).
  std::vector<std::shared_ptr<TpTransformerLayer>> layers;
  std::shared_ptr<RMSNorm> final_layernorm;  // last stage only
  // Null when tie_word_embeddings (the embedding table is used) or for a
  // value model.
  std::shared_ptr<parallel::megatron::ColumnParallelLinear> output_layer;
  // Value model only (registered as "output_layer", weight [1, H] and bias
  // [1], replicated; verl's LinearForLastLayer): values of this rank's tokens,
  // all-gathered along the sequence under sequence parallelism.
  std::shared_ptr<Linear> value_head;

 private:
  struct Tokens;
  Tokens Prepare(const at::Tensor& input_ids, const at::Tensor& position_ids,
                 const std::vector<int64_t>& cu_seqlens) const;
  // [rows of this rank] int64: the sequence (index into cu_seqlens) of each
  // row, -1 for cp / sp padding.
  at::Tensor RowSequences(const Tokens& k,
                          const std::vector<int64_t>& cu_seqlens) const;
  // Layers [begin, end) of `layers` (one chunk), recompute applied
  // within it; `moe_rows` set on the MoE layers (null for dense models).
  at::Tensor RunLayers(at::Tensor h, const at::Tensor& cos,
                       const at::Tensor& sin,
                       const std::shared_ptr<AttentionBackend>& backend,
                       const std::shared_ptr<const MoeRows>& moe_rows,
                       int64_t begin, int64_t end);

  // Sums the gradients of `params` over `group` in place (undefined ones
  // become zeros first); nothing for a group of one.
  void SumGrads(const std::vector<at::Tensor>& params,
                parallel::Communicator& group);
  // After chunk `chunk`'s layers ran: the expert load of its MoE layers
  // over the rows where `real` [N] is true.
  void CollectExpertLoad(int64_t chunk, const at::Tensor& real);
  // After the last layer: the load-balancing loss from every MoE layer's
  // router logits (`gather_tokens` maps this rank's rows to the whole
  // stream), when HasMoeAuxLoss().
  void CollectAuxLoss(
      const std::function<at::Tensor(const at::Tensor&)>& gather_tokens);

  ModelConfig config_;
  MegatronModelOptions options_;
  std::shared_ptr<parallel::megatron::ParallelState> mpu_;
  int64_t padded_vocab_ = 0;
  at::Tensor inv_freq_;
  double rope_scale_ = 1.0;  // cos/sin factor (YaRN's attention_factor)
  at::Tensor moe_aux_loss_;
  std::map<int64_t, at::Tensor> expert_load_;  // layer -> [E] double
  std::map<int64_t, at::Tensor> bias_load_;    // the same, for the bias
  bool first_stage_ = true, last_stage_ = true;
  int64_t first_layer_ = 0;
  // Chunk c's layers are layers[chunk_begin_[c], chunk_begin_[c + 1]).
  std::vector<int64_t> chunk_begin_ = {0, 0};
  // Global layer -> index in `layers` (-1: another stage), and its stage.
  std::vector<int64_t> local_index_;
  std::vector<int> layer_stage_;
};

// One packed micro-batch as StageForward takes it (the vector must outlive
// the schedule's callbacks).
struct StageMicroBatch {
  at::Tensor ids, pos;
  const std::vector<int64_t>* cu_seqlens = nullptr;
};

// The pipeline schedules' stage callbacks of `model` (input_shape, forward,
// num_chunks and chunk_forward for virtual stages) over micro-batches
// `micro_batch(m)`; the caller adds `loss`. `model` must outlive them.
parallel::megatron::PipelineStageFns StageFns(
    MegatronGPTModel& model,
    std::function<StageMicroBatch(int64_t mb)> micro_batch);

}  // namespace verl::models

#endif  // VERL_MODELS_MEGATRON_GPT_H_
