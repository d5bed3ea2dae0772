// File: verl/models/decoder.cc
#include "verl/models/decoder.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <glog/logging.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <functional>
#include <string>
#include <utility>

#include "verl/models/fused_ops.h"
#include "verl/models/padding.h"
#include "verl/models/recompute.h"

namespace verl::models {
namespace {

using torch::autograd::variable_list;

// Registers `child` under `name` and returns it (keeps constructors short).
template <typename M>
std::shared_ptr<M> Reg(torch::nn::Module* parent, const std::string& name,
                       std::shared_ptr<M> child) {
  return parent->register_module(name, std::move(child));
}

// Identity in forward; in backward calls `fn` (once all incoming gradients
// have arrived) and passes the gradients through. Wraps the tensors of `xs`
// that require grad; returns `xs` unchanged when none does.
class HookBackward : public torch::autograd::Node {
 public:
  explicit HookBackward(std::function<void()> fn) : fn_(std::move(fn)) {}
  std::string name() const override { return "LayerHookBackward"; }
  variable_list apply(variable_list&& grads) override {
    if (fn_) fn_();
    fn_ = nullptr;
    return std::move(grads);
  }
  void release_variables() override { fn_ = nullptr; }

 private:
  std::function<void()> fn_;
};

variable_list OnBackward(variable_list xs, std::function<void()> fn) {
  if (!torch::GradMode::is_enabled()) return xs;
  variable_list wrapped;
  for (const at::Tensor& x : xs) {
    if (x.defined() && x.requires_grad()) wrapped.push_back(x);
  }
  if (wrapped.empty()) return xs;
  auto node = std::shared_ptr<HookBackward>(new HookBackward(std::move(fn)),
                                            torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(wrapped));
  for (at::Tensor& x : xs) {
    if (!x.defined() || !x.requires_grad()) continue;
    x = x.detach();
    torch::autograd::set_history(x, node);
  }
  return xs;
}

}  // namespace

Embedding::Embedding(int64_t vocab, int64_t hidden) {
  weight = register_parameter("weight", at::zeros({vocab, hidden}));
}

at::Tensor Embedding::Forward(const at::Tensor& ids) const {
  return at::embedding(weight, ids);
}

Attention::Attention(const ModelConfig& c, int64_t layer_index)
    : layer(layer_index),
      num_heads(c.num_attention_heads),
      num_kv_heads(c.num_key_value_heads > 0 ? c.num_key_value_heads
                                             : c.num_attention_heads),
      head_dim(c.HeadDim()) {
  const int64_t h = c.hidden_size;
  const bool b = c.attention_bias;
  q_proj =
      Reg(this, "q_proj", std::make_shared<Linear>(h, num_heads * head_dim, b));
  k_proj = Reg(this, "k_proj",
               std::make_shared<Linear>(h, num_kv_heads * head_dim, b));
  v_proj = Reg(this, "v_proj",
               std::make_shared<Linear>(h, num_kv_heads * head_dim, b));
  o_proj = Reg(this, "o_proj",
               std::make_shared<Linear>(num_heads * head_dim, h, false));
  if (c.qk_norm) {
    q_norm = Reg(this, "q_norm",
                 std::make_shared<RMSNorm>(head_dim, c.rms_norm_eps));
    k_norm = Reg(this, "k_norm",
                 std::make_shared<RMSNorm>(head_dim, c.rms_norm_eps));
  }
}

at::Tensor Attention::Forward(const at::Tensor& x, const at::Tensor& cos,
                              const at::Tensor& sin,
                              AttentionBackend& backend) const {
  const int64_t t = x.size(0);
  at::Tensor q = q_proj->Forward(x).view({t, num_heads, head_dim});
  at::Tensor k = k_proj->Forward(x).view({t, num_kv_heads, head_dim});
  at::Tensor v = v_proj->Forward(x).view({t, num_kv_heads, head_dim});
  if (q_norm) {
    q = q_norm->Forward(q);
    k = k_norm->Forward(k);
  }
  q = ApplyRope(q, cos, sin);
  k = ApplyRope(k, cos, sin);
  at::Tensor o = backend.Attend(layer, q, k, v);
  return o_proj->Forward(o.reshape({t, num_heads * head_dim}));
}

MoeBlock::MoeBlock(const ModelConfig& c)
    : num_experts(c.num_experts),
      top_k(c.num_experts_per_tok),
      norm_topk_prob(c.norm_topk_prob) {
  CHECK_GT(top_k, 0) << "num_experts_per_tok must be > 0";
  CHECK_LE(top_k, num_experts);
  const int64_t h = c.hidden_size;
  gate = Reg(this, "gate", std::make_shared<Linear>(h, num_experts, false));
  auto list = Reg(this, "experts", std::make_shared<ModuleList>());
  for (int64_t e = 0; e < num_experts; ++e) {
    experts.push_back(std::make_shared<MLP>(h, c.moe_intermediate_size));
    list->Add(experts.back());
  }
  if (c.shared_expert_intermediate_size > 0) {
    shared_expert =
        Reg(this, "shared_expert",
            std::make_shared<MLP>(h, c.shared_expert_intermediate_size));
    shared_expert_gate =
        Reg(this, "shared_expert_gate", std::make_shared<Linear>(h, 1, false));
  }
}

std::pair<at::Tensor, at::Tensor> MoeBlock::Forward(const at::Tensor& x) const {
  at::Tensor router_logits = gate->Forward(x);  // [T, E]
  at::Tensor out =
      RunExperts(x, experts, SoftmaxTopK(router_logits, top_k, norm_topk_prob));
  if (shared_expert) {
    out = out + at::sigmoid(shared_expert_gate->Forward(x)) *
                    shared_expert->Forward(x);
  }
  if (output_hook) out = output_hook(out);
  return {out, router_logits};
}

DecoderLayer::DecoderLayer(const ModelConfig& c, int64_t layer) {
  input_layernorm =
      Reg(this, "input_layernorm",
          std::make_shared<RMSNorm>(c.hidden_size, c.rms_norm_eps));
  if (c.IsMla()) {
    mla_attn = Reg(this, "self_attn", std::make_shared<MlaAttention>(c, layer));
  } else {
    self_attn = Reg(this, "self_attn", std::make_shared<Attention>(c, layer));
  }
  post_attention_layernorm =
      Reg(this, "post_attention_layernorm",
          std::make_shared<RMSNorm>(c.hidden_size, c.rms_norm_eps));
  if (c.LayerIsMoe(layer) && c.scoring_func == "sigmoid") {
    deepseek_moe = Reg(this, "mlp", std::make_shared<DeepseekMoe>(c));
  } else if (c.LayerIsMoe(layer)) {
    moe = Reg(this, "mlp", std::make_shared<MoeBlock>(c));
  } else {
    mlp = Reg(this, "mlp",
              std::make_shared<MLP>(c.hidden_size, c.intermediate_size));
  }
}

std::pair<at::Tensor, at::Tensor> DecoderLayer::Forward(
    const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
    AttentionBackend& backend) const {
  at::Tensor normed = input_layernorm->Forward(x);
  at::Tensor h = x + (mla_attn ? mla_attn->Forward(normed, cos, sin, backend)
                               : self_attn->Forward(normed, cos, sin, backend));
  normed = post_attention_layernorm->Forward(h);
  if (moe) {
    auto [y, router_logits] = moe->Forward(normed);
    return {h + y, router_logits};
  }
  if (deepseek_moe) {
    at::Tensor router_logits;
    at::Tensor y = deepseek_moe->Forward(normed, &router_logits);
    return {h + y, router_logits};
  }
  return {h + mlp->Forward(normed), at::Tensor()};
}

DecoderModel::DecoderModel(const ModelConfig& c) {
  embed_tokens = Reg(this, "embed_tokens",
                     std::make_shared<Embedding>(c.vocab_size, c.hidden_size));
  auto list = Reg(this, "layers", std::make_shared<ModuleList>());
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    layers.push_back(std::make_shared<DecoderLayer>(c, l));
    list->Add(layers.back());
  }
  norm = Reg(this, "norm",
             std::make_shared<RMSNorm>(c.hidden_size, c.rms_norm_eps));
}

CausalLM::CausalLM(const ModelConfig& c) : config_(c) {
  CHECK_GT(c.vocab_size, 0) << "vocab_size must be set";
  CHECK_GT(c.num_attention_heads, 0) << "num_attention_heads must be set";
  if (config_.num_key_value_heads <= 0) {
    config_.num_key_value_heads = config_.num_attention_heads;
  }
  if (config_.IsMla()) config_.head_dim = config_.qk_rope_head_dim;
  model = Reg(this, "model", std::make_shared<DecoderModel>(config_));
  if (config_.is_value_model) {
    score =
        Reg(this, "score", std::make_shared<Linear>(c.hidden_size, 1, true));
  } else if (!config_.tie_word_embeddings) {
    lm_head = Reg(this, "lm_head",
                  std::make_shared<Linear>(c.hidden_size, c.vocab_size, false));
  }
  inv_freq_ = RopeInvFreq(config_);
  rope_scale_ = RopeAttentionFactor(config_);
}

std::vector<int64_t> CausalLM::LayerWindows() const {
  std::vector<int64_t> w;
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    w.push_back(config_.LayerSlidingWindow(l));
  }
  return w;
}

at::Tensor CausalLM::RunLayers(const at::Tensor& input_ids,
                               const at::Tensor& inputs_embeds,
                               const at::Tensor& position_ids,
                               std::shared_ptr<AttentionBackend> attention,
                               std::vector<at::Tensor>* router_logits) {
  const int64_t tokens =
      inputs_embeds.defined() ? inputs_embeds.size(0) : input_ids.numel();
  CHECK(inputs_embeds.defined() ? inputs_embeds.dim() == 2
                                : input_ids.dim() == 1)
      << "packed input_ids must be [T], inputs_embeds [T, H]";
  // M-RoPE positions are [3, T]; 1-D positions may come as [T] or [1, T].
  const bool mrope = !config_.mrope_section.empty() &&
                     position_ids.dim() == 2 && position_ids.size(0) == 3 &&
                     position_ids.size(1) == tokens;
  CHECK_EQ(position_ids.numel(), (mrope ? 3 : 1) * tokens);
  std::shared_ptr<LayerHooks> hooks = hooks_;
  if (hooks) hooks->BeforeForward(LayerHooks::kRootStage);
  at::Tensor h = inputs_embeds.defined()
                     ? inputs_embeds
                     : model->embed_tokens->Forward(input_ids);
  auto [cos, sin] = mrope ? MropeCosSin(inv_freq_, position_ids,
                                        config_.mrope_section, h.scalar_type())
                          : RopeCosSin(inv_freq_, position_ids.reshape({-1}),
                                       h.scalar_type());
  if (rope_scale_ != 1.0) {
    cos = cos * rope_scale_;
    sin = sin * rope_scale_;
  }
  const bool checkpoint = checkpointing_ && torch::GradMode::is_enabled();
  for (int64_t i = 0; i < static_cast<int64_t>(model->layers.size()); ++i) {
    const auto& layer = model->layers[i];
    at::Tensor rl;
    if (hooks) {
      hooks->BeforeForward(i);
      h = OnBackward({h}, [hooks, i] { hooks->AfterBackward(i); })[0];
    }
    if (checkpoint) {
      // The closure owns everything the recompute needs (layer, rope
      // tables, backend) so backward can run after this frame returns.
      RecomputeFn fn = [layer, cos = cos, sin = sin,
                        attention](const TensorList& x) {
        auto [y, logits] = layer->Forward(x[0], cos, sin, *attention);
        return logits.defined() ? TensorList{y, logits} : TensorList{y};
      };
      TensorList outs = Checkpoint(fn, {h}, layer->parameters());
      h = outs[0];
      if (outs.size() > 1) rl = outs[1];
    } else {
      std::tie(h, rl) = layer->Forward(h, cos, sin, *attention);
    }
    if (hooks) {
      hooks->AfterForward(i);
      variable_list outs =
          OnBackward({h, rl}, [hooks, i] { hooks->BeforeBackward(i); });
      h = outs[0];
      rl = outs[1];
    }
    if (rl.defined() && router_logits != nullptr) router_logits->push_back(rl);
  }
  return model->norm->Forward(h);
}

at::Tensor CausalLM::Forward(const at::Tensor& input_ids,
                             const at::Tensor& position_ids,
                             AttentionBackend& attention,
                             std::vector<at::Tensor>* router_logits) {
  // Non-owning handle: the caller keeps `attention` alive.
  std::shared_ptr<AttentionBackend> handle(&attention,
                                           [](AttentionBackend*) {});
  return RunLayers(input_ids, at::Tensor(), position_ids, std::move(handle),
                   router_logits);
}

at::Tensor CausalLM::ForwardEmbeds(const at::Tensor& inputs_embeds,
                                   const at::Tensor& position_ids,
                                   AttentionBackend& attention) {
  std::shared_ptr<AttentionBackend> handle(&attention,
                                           [](AttentionBackend*) {});
  return RunLayers(at::Tensor(), inputs_embeds, position_ids, std::move(handle),
                   nullptr);
}

at::Tensor CausalLM::ForwardEmbeds(
    const at::Tensor& inputs_embeds, const at::Tensor& position_ids,
    std::shared_ptr<AttentionBackend> attention) {
  return RunLayers(at::Tensor(), inputs_embeds, position_ids,
                   std::move(attention), nullptr);
}

at::Tensor CausalLM::Logits(const at::Tensor& hidden) const {
  CHECK(!config_.is_value_model) << "Logits() on a value model";
  return lm_head ? lm_head->Forward(hidden)
                 : LinearOp(hidden, model->embed_tokens->weight);
}

LogProbEntropy CausalLM::LabelLogProbs(const at::Tensor& hidden,
                                       const at::Tensor& labels,
                                       double temperature,
                                       bool with_entropy) const {
  CHECK(!config_.is_value_model) << "LabelLogProbs() on a value model";
  const at::Tensor& w = lm_head ? lm_head->weight : model->embed_tokens->weight;
  const bool plain_head =
      !lm_head || (!lm_head->bias.defined() && !lm_head->lora.lora_A &&
                   !lm_head->output_hook);
  if (plain_head && hidden.dim() == 2 && FusedOpsApply({hidden, w})) {
    FusedLogProbs f =
        FusedLinearLogProbs(hidden, w, labels, temperature, with_entropy);
    return {f.log_probs, f.entropy};
  }
  return LogProbsAndEntropy(Logits(hidden), labels, temperature, with_entropy);
}

at::Tensor CausalLM::Values(const at::Tensor& hidden) const {
  CHECK(score) << "Values() on a model without value head";
  return score->Forward(hidden).squeeze(-1);
}

ForwardOutput CausalLM::Heads(
    const at::Tensor& hidden,
    const std::vector<at::Tensor>& router_logits) const {
  ForwardOutput out;
  if (config_.is_value_model) {
    out.values = Values(hidden);
  } else {
    out.logits = Logits(hidden);
  }
  // HF's aux loss: the softmax routers' (DeepSeek-V3's has none).
  if (!router_logits.empty() && config_.scoring_func != "sigmoid") {
    out.aux_loss = LoadBalancingLoss(router_logits, config_.num_experts,
                                     config_.num_experts_per_tok);
  }
  return out;
}

ForwardOutput CausalLM::ForwardPacked(const at::Tensor& input_ids,
                                      const at::Tensor& position_ids,
                                      const std::vector<int64_t>& cu_seqlens,
                                      std::vector<at::Tensor>* router_logits) {
  auto attention =
      std::make_shared<VarlenCausalAttention>(cu_seqlens, LayerWindows());
  std::vector<at::Tensor> logits;
  at::Tensor hidden =
      RunLayers(input_ids, at::Tensor(), position_ids, attention, &logits);
  ForwardOutput out = Heads(hidden, logits);
  if (router_logits) *router_logits = std::move(logits);
  return out;
}

ForwardOutput CausalLM::ForwardPadded(const at::Tensor& input_ids,
                                      const at::Tensor& attention_mask,
                                      const at::Tensor& position_ids) {
  CHECK_EQ(input_ids.dim(), 2) << "padded input_ids must be [B, L]";
  CHECK(input_ids.sizes() == attention_mask.sizes());
  CHECK(input_ids.sizes() == position_ids.sizes());
  UnpadInfo info = Unpad(attention_mask);
  ForwardOutput packed =
      ForwardPacked(UnpadTensor(input_ids, info),
                    UnpadTensor(position_ids, info), info.cu_seqlens);
  ForwardOutput out;
  if (packed.logits.defined()) out.logits = PadTensor(packed.logits, info);
  if (packed.values.defined()) out.values = PadTensor(packed.values, info);
  out.aux_loss = packed.aux_loss;
  return out;
}

at::Tensor LoadBalancingLoss(const std::vector<at::Tensor>& router_logits,
                             int64_t num_experts, int64_t top_k) {
  CHECK(!router_logits.empty());
  at::Tensor logits = at::cat(router_logits, 0);
  at::Tensor probs =
      at::softmax(logits, -1, ComputeDtype(logits.scalar_type()));
  at::Tensor selected = std::get<1>(at::topk(probs, top_k, -1));  // [N, k]
  at::Tensor expert_mask =
      at::one_hot(selected, num_experts).to(probs.scalar_type());  // [N, k, E]
  at::Tensor tokens_per_expert = expert_mask.mean(0);              // [k, E]
  at::Tensor prob_per_expert = probs.mean(0);                      // [E]
  return (tokens_per_expert * prob_per_expert.unsqueeze(0)).sum() *
         static_cast<double>(num_experts);
}

std::shared_ptr<CausalLM> CreateModel(const ModelConfig& config, uint64_t seed,
                                      double init_std) {
  auto model = std::make_shared<CausalLM>(config);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  torch::NoGradGuard no_grad;
  // named_parameters() order is deterministic (registration order).
  for (const auto& item : model->named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    at::Tensor p = item.value();
    const bool is_norm = name.find("norm.weight") != std::string::npos ||
                         name.find("layernorm.weight") != std::string::npos;
    auto ends_with = [&name](const std::string& suffix) {
      return name.size() >= suffix.size() &&
             name.compare(name.size() - suffix.size(), suffix.size(), suffix) ==
                 0;
    };
    const bool is_bias = ends_with(".bias") || ends_with("_bias");
    if (is_norm) {
      p.fill_(1.0);
    } else if (is_bias) {
      p.zero_();
    } else {
      p.normal_(0.0, init_std, gen);
    }
  }
  return model;
}

int64_t NumParameters(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const at::Tensor& p : module.parameters()) n += p.numel();
  return n;
}

}  // namespace verl::models
