// File: verl/models/decoder.h
//
// The HF-compatible decoder family (Llama 3, Mistral, Qwen2/2.5, Qwen3, their
// MoE variants, and DeepSeek-V3 with multi-head latent attention from
// verl/models/mla and the sigmoid router from verl/models/moe) as one
// configurable torch::nn::Module. Parameter names
// are exactly HF's (`model.layers.0.self_attn.q_proj.weight`, ...), so HF
// checkpoints load by name and weights sync to the rollout engine by name.
//
// Layouts: the core Forward() works on packed tokens ([T], all sequences
// concatenated) with a pluggable AttentionBackend. ForwardPacked() is verl's
// use_remove_padding path; ForwardPadded() takes [B, L] batches with
// attention_mask and position_ids (left or right padding).
#ifndef VERL_MODELS_DECODER_H_
#define VERL_MODELS_DECODER_H_

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "verl/models/attention.h"
#include "verl/models/layers.h"
#include "verl/models/logprob.h"
#include "verl/models/mla/mla_attention.h"
#include "verl/models/model_config.h"
#include "verl/models/moe/router.h"

namespace verl::models {

// Token embedding: `weight` [vocab, hidden].
class Embedding : public torch::nn::Module {
 public:
  Embedding(int64_t vocab, int64_t hidden);
  at::Tensor Forward(const at::Tensor& ids) const;
  at::Tensor weight;
};

// Self-attention: q/k/v/o projections (+bias on q/k/v when attention_bias),
// per-head q/k RMSNorm when qk_norm, RoPE, then the backend.
class Attention : public torch::nn::Module {
 public:
  Attention(const ModelConfig& config, int64_t layer);
  // x [T, H]; cos/sin [T, head_dim]. Returns [T, H].
  at::Tensor Forward(const at::Tensor& x, const at::Tensor& cos,
                     const at::Tensor& sin, AttentionBackend& backend) const;

  int64_t layer, num_heads, num_kv_heads, head_dim;
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj;
  std::shared_ptr<RMSNorm> q_norm, k_norm;  // null unless qk_norm
};

// Sparse MoE block (Qwen2-MoE / Qwen3-MoE): softmax router, top-k,
// optional renormalisation (norm_topk_prob), optional shared expert with a
// sigmoid gate (Qwen2-MoE).
class MoeBlock : public torch::nn::Module {
 public:
  explicit MoeBlock(const ModelConfig& config);
  // x [T, H] -> {out [T, H], router_logits [T, E]}.
  std::pair<at::Tensor, at::Tensor> Forward(const at::Tensor& x) const;

  int64_t num_experts, top_k;
  bool norm_topk_prob;
  std::shared_ptr<Linear> gate;  // router, `mlp.gate.weight` [E, H]
  std::vector<std::shared_ptr<MLP>> experts;
  std::shared_ptr<MLP> shared_expert;          // null unless Qwen2-MoE
  std::shared_ptr<Linear> shared_expert_gate;  // [1, H]
  // Row-parallel seam as Linear::output_hook: when set, Forward returns
  // output_hook(routed + shared output) — for the tensor-parallel rollout,
  // whose experts hold column/row slices, the one all-reduce of the block's
  // partial sums. Empty (the default): none.
  std::function<at::Tensor(const at::Tensor&)> output_hook;
};

class DecoderLayer : public torch::nn::Module {
 public:
  DecoderLayer(const ModelConfig& config, int64_t layer);
  // Returns {hidden [T, H], router_logits [T, E] or undefined (dense)}.
  std::pair<at::Tensor, at::Tensor> Forward(const at::Tensor& x,
                                            const at::Tensor& cos,
                                            const at::Tensor& sin,
                                            AttentionBackend& backend) const;

  std::shared_ptr<RMSNorm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<Attention> self_attn;    // null for MLA models
  std::shared_ptr<MlaAttention> mla_attn;  // MLA (registered as "self_attn")
  std::shared_ptr<MLP> mlp;                // dense layers
  std::shared_ptr<MoeBlock> moe;  // softmax-router MoE (registered as "mlp")
  std::shared_ptr<DeepseekMoe> deepseek_moe;  // sigmoid router ("mlp")
};

// The `model.` sub-tree: embed_tokens, layers, norm.
class DecoderModel : public torch::nn::Module {
 public:
  explicit DecoderModel(const ModelConfig& config);
  std::shared_ptr<Embedding> embed_tokens;
  std::vector<std::shared_ptr<DecoderLayer>> layers;
  std::shared_ptr<RMSNorm> norm;
};

// Optional callbacks around each decoder layer's compute: the seam where
// sharded data parallelism (FSDP's pre/post forward and backward hooks)
// gathers a layer's parameters just before use and frees them after.
// Stage kRootStage stands for the embeddings, final norm and heads: its
// BeforeForward runs once per Forward(), before the embedding, and it gets
// no other calls. For layer i: BeforeForward(i) / AfterForward(i) around its
// forward; when autograd differentiates through the layer, BeforeBackward(i)
// runs before its backward (checkpoint recompute included) and
// AfterBackward(i) once its parameter gradients have been accumulated.
class LayerHooks {
 public:
  static constexpr int64_t kRootStage = -1;
  virtual ~LayerHooks() = default;
  virtual void BeforeForward(int64_t stage) = 0;
  virtual void AfterForward(int64_t layer) = 0;
  virtual void BeforeBackward(int64_t layer) = 0;
  virtual void AfterBackward(int64_t layer) = 0;
  // A forward-only caller is done with its no-grad forwards' outputs (heads
  // included): what BeforeForward(kRootStage) gathered may be freed.
  virtual void ReleaseRoot() {}
};

struct ForwardOutput {
  at::Tensor logits;    // LM: [T, V] packed / [B, L, V] padded (0 at pads)
  at::Tensor values;    // value model: [T] packed / [B, L] padded
  at::Tensor aux_loss;  // MoE load-balancing loss (HF aux_loss, not yet
                        // multiplied by router_aux_loss_coef); else undefined
                        // (dense models, DeepSeek's sigmoid router)
};

// *ForCausalLM (lm_head, tied to embed_tokens when tie_word_embeddings) or,
// when config.is_value_model, *ForTokenClassification with one label
// (`score.weight` [1, H], `score.bias` [1]).
class CausalLM : public torch::nn::Module {
 public:
  explicit CausalLM(const ModelConfig& config);

  const ModelConfig& config() const { return config_; }

  // Packed forward: input_ids [T], position_ids [T] (or [3, T] when the
  // config has mrope_section) -> final-normed hidden [T, H]. `router_logits`,
  // if given, receives each MoE layer's [T, E] router logits. With gradient
  // checkpointing on and grad mode enabled, `attention` must stay alive until
  // backward() has run.
  at::Tensor Forward(const at::Tensor& input_ids,
                     const at::Tensor& position_ids,
                     AttentionBackend& attention,
                     std::vector<at::Tensor>* router_logits = nullptr);
  // As Forward, from input embeddings [T, H] the caller computed (a
  // multimodal model splices image features into embed_tokens' output).
  at::Tensor ForwardEmbeds(const at::Tensor& inputs_embeds,
                           const at::Tensor& position_ids,
                           AttentionBackend& attention);
  // As ForwardEmbeds, sharing ownership of `attention` with the backward
  // graph (as ForwardPacked does), so the caller need not keep it alive.
  at::Tensor ForwardEmbeds(const at::Tensor& inputs_embeds,
                           const at::Tensor& position_ids,
                           std::shared_ptr<AttentionBackend> attention);
  // LM head: hidden [..., H] -> logits [..., V].
  at::Tensor Logits(const at::Tensor& hidden) const;
  // Log-probs of `labels` [N] (and, when with_entropy, the entropy) under
  // the LM head at `temperature` for hidden [N, H]: what
  // LogProbsAndEntropy(Logits(hidden), ...) returns, as one fused op
  // (FusedLinearLogProbs: one GEMM, one pass over the logits each way)
  // for fp32 CPU heads without LoRA or output hook; else exactly that.
  LogProbEntropy LabelLogProbs(const at::Tensor& hidden,
                               const at::Tensor& labels, double temperature,
                               bool with_entropy) const;
  // Value head: hidden [..., H] -> values [...].
  at::Tensor Values(const at::Tensor& hidden) const;

  // verl use_remove_padding: packed tokens with cu_seqlens [num_seqs + 1];
  // `router_logits` as Forward's.
  ForwardOutput ForwardPacked(const at::Tensor& input_ids,
                              const at::Tensor& position_ids,
                              const std::vector<int64_t>& cu_seqlens,
                              std::vector<at::Tensor>* router_logits = nullptr);
  // Padded batch: input_ids/attention_mask/position_ids [B, L].
  ForwardOutput ForwardPadded(const at::Tensor& input_ids,
                              const at::Tensor& attention_mask,
                              const at::Tensor& position_ids);

  // Recompute each decoder layer in backward instead of keeping its
  // activations (HF gradient_checkpointing_enable / verl
  // enable_gradient_checkpointing).
  void enable_gradient_checkpointing(bool enable = true) {
    checkpointing_ = enable;
  }
  bool gradient_checkpointing() const { return checkpointing_; }

  // Installs (null: removes) per-layer hooks for every later forward.
  void set_layer_hooks(std::shared_ptr<LayerHooks> hooks) {
    hooks_ = std::move(hooks);
  }
  LayerHooks* layer_hooks() const { return hooks_.get(); }

  // Sliding window per layer (0 => full), from the config.
  std::vector<int64_t> LayerWindows() const;

  std::shared_ptr<DecoderModel> model;
  std::shared_ptr<Linear> lm_head;  // null when tied or value model
  std::shared_ptr<Linear> score;    // value model only

 private:
  // Embeds `input_ids` unless `inputs_embeds` is defined.
  at::Tensor RunLayers(const at::Tensor& input_ids,
                       const at::Tensor& inputs_embeds,
                       const at::Tensor& position_ids,
                       std::shared_ptr<AttentionBackend> attention,
                       std::vector<at::Tensor>* router_logits);
  ForwardOutput Heads(const at::Tensor& hidden,
                      const std::vector<at::Tensor>& router_logits) const;

  ModelConfig config_;
  at::Tensor inv_freq_;      // RoPE inverse frequencies (double, CPU)
  double rope_scale_ = 1.0;  // cos/sin factor (YaRN attention_factor)
  bool checkpointing_ = false;
  std::shared_ptr<LayerHooks> hooks_;
};

// HF load_balancing_loss_func over all MoE layers' router logits:
// E * sum_{slot<k} sum_e (fraction of tokens whose slot-th choice is e) *
// (mean router prob of e), all layers' tokens pooled (HF sums the k slots).
at::Tensor LoadBalancingLoss(const std::vector<at::Tensor>& router_logits,
                             int64_t num_experts, int64_t top_k);

// Builds a model with HF-style deterministic init from `seed`: linear and
// embedding weights ~ N(0, init_std), biases 0, norm weights 1; score head
// too. Parameters are fp32; use `->to(dtype)` for bf16.
std::shared_ptr<CausalLM> CreateModel(const ModelConfig& config, uint64_t seed,
                                      double init_std = 0.02);

// Number of parameters (tied embeddings counted once).
int64_t NumParameters(const torch::nn::Module& module);

}  // namespace verl::models

#endif  // VERL_MODELS_DECODER_H_
