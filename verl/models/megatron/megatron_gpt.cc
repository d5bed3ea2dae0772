// File: verl/models/megatron/megatron_gpt.cc
#include "verl/models/megatron/megatron_gpt.h"

#include <ATen/ATen.h>
#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "verl/core/status.h"
#include "verl/models/megatron/mla_layer.h"
#include "verl/models/megatron/moe_layer.h"
#include "verl/parallel/comm_autograd.h"
#include "verl/parallel/megatron/context_parallel.h"
#include "verl/parallel/megatron/mappings.h"

namespace verl::models {
namespace {

namespace mg = parallel::megatron;

absl::Status Bad(const std::string& key, int64_t value,
                 const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(key, "=", value, ": ", why));
}
absl::Status Bad(const std::string& key, const std::string& value,
                 const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(key, "=", value, ": ", why));
}

// A named node of the module tree ("embedding", "decoder").
class Container : public torch::nn::Module {};

std::shared_ptr<RMSNorm> Norm(torch::nn::Module* parent,
                              const std::string& name, int64_t dim,
                              double eps) {
  return parent->register_module(name, std::make_shared<RMSNorm>(dim, eps));
}

// Attention over the cp ring for this forward's token layout.
class RingAttentionBackend : public AttentionBackend {
 public:
  RingAttentionBackend(std::shared_ptr<const mg::CpLayout> layout, CommPtr cp)
      : layout_(std::move(layout)), cp_(std::move(cp)) {}
  at::Tensor Attend(int64_t layer, const at::Tensor& q, const at::Tensor& k,
                    const at::Tensor& v) override {
    const int64_t dv = v.size(-1), dk = k.size(-1);
    if (dv == dk) return mg::RingAttention(q, k, v, layout_, cp_);
    // MLA: values narrower than keys ride the ring zero-padded to the key
    // width (Megatron pads them so for packed attention); the padded output
    // columns are zeros and dropped.
    CHECK_LT(dv, dk) << "ring attention: value head dim above the key's";
    return mg::RingAttention(q, k, at::constant_pad_nd(v, {0, dk - dv}),
                             layout_, cp_)
        .narrow(-1, 0, dv);
  }

 private:
  std::shared_ptr<const mg::CpLayout> layout_;
  CommPtr cp_;
};

// Expert parallelism's limits (moe_layer.h), one line naming the key.
absl::Status ValidateMoe(const ModelConfig& c, const MegatronModelOptions& o,
                         const mg::ModelParallelSizes& sizes) {
  const std::string kEp = "megatron.expert_model_parallel_size";
  if (sizes.ep < 1) return Bad(kEp, sizes.ep, "must be >= 1");
  const std::string kOtc = "megatron.override_transformer_config.";
  if (!c.IsMoe()) {
    if (sizes.ep > 1) {
      return Bad(kEp, sizes.ep, "the model has no experts (num_experts 0)");
    }
    if (o.moe_expert_capacity_factor.has_value()) {
      return Bad(kOtc + "moe_expert_capacity_factor",
                 absl::StrCat(*o.moe_expert_capacity_factor),
                 "the model has no experts (num_experts 0)");
    }
    if (o.moe_router_enable_expert_bias) {
      return Bad(kOtc + "moe_router_enable_expert_bias", "true",
                 "the model has no experts (num_experts 0)");
    }
    if (o.moe_router_load_balancing_type != "none") {
      return Bad(kOtc + "moe_router_load_balancing_type",
                 o.moe_router_load_balancing_type,
                 "the model has no experts (num_experts 0)");
    }
    if (o.moe_z_loss_coeff != 0.0) {
      return Bad(kOtc + "moe_z_loss_coeff", absl::StrCat(o.moe_z_loss_coeff),
                 "the model has no experts (num_experts 0)");
    }
    return absl::OkStatus();
  }
  const std::string& balance = o.moe_router_load_balancing_type;
  if (balance == "sinkhorn") {
    return absl::UnimplementedError(absl::StrCat(
        kOtc,
        "moe_router_load_balancing_type=sinkhorn: not built (none, "
        "aux_loss and seq_aux_loss are)"));
  }
  if (balance != "none" && balance != "aux_loss" && balance != "seq_aux_loss") {
    return Bad(kOtc + "moe_router_load_balancing_type",
               absl::StrCat("'", balance, "'"),
               "expected 'none', 'aux_loss' or 'seq_aux_loss'");
  }
  for (const auto& [key, v] :
       {std::pair{"moe_aux_loss_coeff", o.moe_aux_loss_coeff},
        std::pair{"moe_z_loss_coeff", o.moe_z_loss_coeff}}) {
    if (!(v >= 0.0) || std::isinf(v)) {
      return Bad(kOtc + key, absl::StrCat(v), "must be a finite number >= 0");
    }
  }
  if (o.moe_expert_capacity_factor.has_value() &&
      !(*o.moe_expert_capacity_factor > 0.0)) {
    return Bad(kOtc + "moe_expert_capacity_factor",
               absl::StrCat(*o.moe_expert_capacity_factor),
               "must be > 0 (null: no token is dropped)");
  }
  if (o.moe_token_drop_policy != "probs" &&
      o.moe_token_drop_policy != "position") {
    return Bad(kOtc + "moe_token_drop_policy",
               absl::StrCat("'", o.moe_token_drop_policy, "'"),
               "expected 'probs' or 'position'");
  }
  if (o.moe_router_enable_expert_bias && c.scoring_func != "sigmoid") {
    return Bad(kOtc + "moe_router_enable_expert_bias", "true",
               absl::StrCat("the expert bias of aux-loss-free balancing needs "
                            "the sigmoid router (scoring_func sigmoid, "
                            "DeepSeek-V3), as Megatron; this model's is '",
                            c.scoring_func, "'"));
  }
  if (!(o.moe_router_bias_update_rate >= 0.0)) {
    return Bad(kOtc + "moe_router_bias_update_rate",
               absl::StrCat(o.moe_router_bias_update_rate), "must be >= 0");
  }
  if (c.num_experts % sizes.ep != 0) {
    return Bad(kEp, sizes.ep,
               absl::StrCat("does not divide num_experts ", c.num_experts));
  }
  // Expert tensor parallelism splits every expert's ffn over etp (null:
  // tp, as Megatron).
  const int etp = sizes.etp > 0 ? sizes.etp : sizes.tp;
  if (etp < 1 || c.moe_intermediate_size % etp != 0) {
    return Bad("megatron.expert_tensor_parallel_size", etp,
               absl::StrCat("must be >= 1 and divide moe_intermediate_size ",
                            c.moe_intermediate_size,
                            " (null means tensor_model_parallel_size)"));
  }
  if (sizes.tp > 1 && !o.sequence_parallel) {
    return absl::InvalidArgumentError(
        "megatron.sequence_parallel=false: MoE layers with "
        "tensor_model_parallel_size > 1 need sequence parallelism (as "
        "Megatron)");
  }
  if (c.num_experts_per_tok < 1 || c.num_experts_per_tok > c.num_experts) {
    return Bad("num_experts_per_tok", c.num_experts_per_tok,
               absl::StrCat("must be in [1, num_experts ", c.num_experts, "]"));
  }
  if (c.moe_intermediate_size < 1) {
    return Bad("moe_intermediate_size", c.moe_intermediate_size,
               "must be >= 1");
  }
  const int64_t shared = c.scoring_func == "sigmoid"
                             ? c.n_shared_experts * c.moe_intermediate_size
                             : c.shared_expert_intermediate_size;
  if (shared % sizes.tp != 0) {
    return Bad(
        "megatron.tensor_model_parallel_size", sizes.tp,
        absl::StrCat("does not divide the shared experts' size ", shared));
  }
  if (c.scoring_func == "sigmoid" &&
      (c.n_group < 1 || c.num_experts % c.n_group != 0 || c.topk_group < 1 ||
       c.topk_group > c.n_group)) {
    return Bad("n_group", c.n_group,
               absl::StrCat("must divide num_experts ", c.num_experts,
                            " with 1 <= topk_group <= n_group"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateMegatronModel(const ModelConfig& c,
                                   const MegatronModelOptions& o,
                                   const mg::ModelParallelSizes& sizes) {
  const std::string kTp = "megatron.tensor_model_parallel_size";
  const int64_t tp = sizes.tp;
  if (tp < 1) return Bad(kTp, tp, "must be >= 1");
  VERL_RETURN_IF_ERROR(
      VirtualStageLayers(c.num_hidden_layers, sizes.pp, sizes.vpp, o).status());
  if (sizes.cp < 1) {
    return Bad("megatron.context_parallel_size", sizes.cp, "must be >= 1");
  }
  const int64_t np = c.num_attention_heads;
  const int64_t ng = c.num_key_value_heads > 0 ? c.num_key_value_heads : np;
  if (np <= 0 || np % ng != 0) {
    return Bad("num_key_value_heads", ng,
               absl::StrCat("must divide num_attention_heads ", np));
  }
  if (np % tp != 0) {
    return Bad(kTp, tp,
               absl::StrCat("does not divide num_attention_heads ", np));
  }
  if (ng >= tp ? ng % tp != 0 : tp % ng != 0) {
    return Bad(kTp, tp,
               absl::StrCat("and num_key_value_heads ", ng,
                            " must divide one another (Megatron's query "
                            "groups)"));
  }
  if (c.intermediate_size % tp != 0) {
    return Bad(kTp, tp,
               absl::StrCat("does not divide intermediate_size ",
                            c.intermediate_size));
  }
  if (c.IsMla()) VERL_RETURN_IF_ERROR(ValidateMegatronMla(c, tp));
  VERL_RETURN_IF_ERROR(ValidateMoe(c, o, sizes));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    if (c.LayerSlidingWindow(l) > 0) {
      return absl::UnimplementedError(
          "megatron: sliding-window attention is not built yet");
    }
  }
  if (c.hidden_act != "silu") {
    return absl::InvalidArgumentError(absl::StrCat(
        "megatron: hidden_act '", c.hidden_act, "' (only silu/SwiGLU)"));
  }
  if (o.make_vocab_size_divisible_by < 1) {
    return Bad("megatron.make_vocab_size_divisible_by",
               o.make_vocab_size_divisible_by, "must be >= 1");
  }
  return ValidateRecomputeOptions(o, "megatron");
}

absl::StatusOr<std::vector<int64_t>> PipelineStageLayers(
    int64_t num_layers, int64_t pp, const MegatronModelOptions& o) {
  const std::string kPp = "megatron.pipeline_model_parallel_size";
  if (pp < 1) return Bad(kPp, pp, "must be >= 1");
  const std::string kOtc = "megatron.override_transformer_config.";
  int64_t rest = num_layers, stages = pp;
  const std::pair<const char*, int64_t> overrides[] = {
      {"num_layers_in_first_pipeline_stage",
       o.num_layers_in_first_pipeline_stage},
      {"num_layers_in_last_pipeline_stage",
       o.num_layers_in_last_pipeline_stage}};
  for (const auto& [key, n] : overrides) {
    if (n < 0) continue;
    if (pp == 1) {
      return Bad(kOtc + key, n, "needs pipeline_model_parallel_size > 1");
    }
    if (n > rest) {
      return Bad(
          kOtc + key, n,
          absl::StrCat("exceeds the ", rest, " layers left of ", num_layers));
    }
    rest -= n;
    --stages;
  }
  if (stages == 0 ? rest != 0 : rest % stages != 0) {
    return Bad(
        stages == pp ? kPp
                     : kOtc +
                           "num_layers_in_first/last_"
                           "pipeline_stage",
        stages == pp ? pp : num_layers - rest,
        absl::StrCat("the other ", stages, " stage(s) cannot split ", rest,
                     " of num_hidden_layers ", num_layers, " evenly"));
  }
  std::vector<int64_t> counts(pp, stages == 0 ? 0 : rest / stages);
  if (o.num_layers_in_first_pipeline_stage >= 0) {
    counts.front() = o.num_layers_in_first_pipeline_stage;
  }
  if (o.num_layers_in_last_pipeline_stage >= 0) {
    counts.back() = o.num_layers_in_last_pipeline_stage;
  }
  return counts;
}

absl::StatusOr<std::vector<int64_t>> VirtualStageLayers(
    int64_t num_layers, int64_t pp, int64_t vpp,
    const MegatronModelOptions& o) {
  if (vpp <= 1) return PipelineStageLayers(num_layers, pp, o);
  const std::string kVpp = "megatron.virtual_pipeline_model_parallel_size";
  if (pp < 2) return Bad(kVpp, vpp, "needs pipeline_model_parallel_size > 1");
  if (o.num_layers_in_first_pipeline_stage >= 0 ||
      o.num_layers_in_last_pipeline_stage >= 0) {
    return absl::UnimplementedError(absl::StrCat(
        kVpp, "=", vpp,
        ": uneven first/last pipeline stages "
        "(override_transformer_config.num_layers_in_first/last_pipeline_"
        "stage) with virtual stages are not built"));
  }
  if (num_layers % (pp * vpp) != 0) {
    return Bad(kVpp, vpp,
               absl::StrCat("pipeline_model_parallel_size ", pp, " x ", vpp,
                            " virtual stages cannot split num_hidden_layers ",
                            num_layers, " evenly"));
  }
  return std::vector<int64_t>(pp * vpp, num_layers / (pp * vpp));
}

absl::Status ValidateRecomputeOptions(const MegatronModelOptions& o,
                                      const std::string& prefix) {
  const std::string& g = o.recompute_granularity;
  const std::string kOverride =
      absl::StrCat(prefix, ".override_transformer_config.");
  if (!g.empty() && g != "full" && g != "selective") {
    return absl::InvalidArgumentError(
        absl::StrCat(kOverride, "recompute_granularity='", g,
                     "': expected null, 'full' or 'selective'"));
  }
  if (g == "full") {
    if (o.recompute_method != "uniform" && o.recompute_method != "block") {
      return absl::InvalidArgumentError(
          absl::StrCat(kOverride, "recompute_method='", o.recompute_method,
                       "': expected 'uniform' or 'block'"));
    }
    if (o.recompute_num_layers < 1) {
      return Bad(kOverride + "recompute_num_layers", o.recompute_num_layers,
                 "must be >= 1 with recompute_granularity=full");
    }
  }
  if (g == "selective") {
    for (const std::string& m : o.recompute_modules) {
      if (m != "core_attn" && m != "mlp") {
        return absl::UnimplementedError(
            absl::StrCat(kOverride, "recompute_modules: '", m,
                         "' is not built (core_attn, mlp are)"));
      }
    }
  }
  return absl::OkStatus();
}

TpHeadLayout MakeTpHeadLayout(const ModelConfig& c, int64_t tp) {
  TpHeadLayout h;
  h.heads = c.num_attention_heads;
  h.groups = c.num_key_value_heads > 0 ? c.num_key_value_heads : h.heads;
  h.head_dim = c.HeadDim();
  h.heads_per_rank = h.heads / tp;
  h.gather_groups = h.groups < tp;
  h.groups_per_rank = h.gather_groups ? 1 : h.groups / tp;
  h.fused_per_rank = h.groups * (h.heads / h.groups + 2) * h.head_dim / tp;
  return h;
}

TpSelfAttention::TpSelfAttention(const ModelConfig& c, int64_t layer_index,
                                 const MegatronModelOptions& o, CommPtr tp)
    : layer(layer_index), heads(MakeTpHeadLayout(c, tp->size())), tp_(tp) {
  const int64_t n = tp->size();
  const bool sp = o.sequence_parallel;
  linear_qkv =
      register_module("linear_qkv", std::make_shared<mg::ColumnParallelLinear>(
                                        c.hidden_size, heads.fused_per_rank * n,
                                        c.attention_bias,
                                        /*gather_output=*/false, sp, tp));
  if (c.qk_norm) {
    q_layernorm = Norm(this, "q_layernorm", heads.head_dim, c.rms_norm_eps);
    k_layernorm = Norm(this, "k_layernorm", heads.head_dim, c.rms_norm_eps);
  }
  linear_proj = register_module(
      "linear_proj", std::make_shared<mg::RowParallelLinear>(
                         heads.heads * heads.head_dim, c.hidden_size,
                         /*bias=*/false, /*input_is_parallel=*/true, sp, tp));
  recompute_core_attn = o.recompute_granularity == "selective" &&
                        std::count(o.recompute_modules.begin(),
                                   o.recompute_modules.end(), "core_attn") > 0;
}

TensorList TpSelfAttention::QueryKeyValue(const at::Tensor& x,
                                          const at::Tensor& cos,
                                          const at::Tensor& sin) const {
  const int64_t qpg = heads.heads / heads.groups, hn = heads.head_dim;
  const int64_t block = (qpg + 2) * hn;  // one query group's q, k, v
  at::Tensor mixed = linear_qkv->Forward(x);
  const int64_t t = mixed.size(0);
  const int64_t ranks_per_group = tp_->size() / heads.groups;
  if (heads.gather_groups) {
    mixed = mg::AllGatherLastDimFromTensorParallelRegion(mixed, tp_)
                .narrow(-1, tp_->rank() / ranks_per_group * block, block);
  }
  mixed = mixed.view({t, heads.groups_per_rank, block});
  at::Tensor q = mixed.narrow(-1, 0, qpg * hn)
                     .reshape({t, heads.groups_per_rank * qpg, hn});
  at::Tensor k = mixed.narrow(-1, qpg * hn, hn);
  at::Tensor v = mixed.narrow(-1, (qpg + 1) * hn, hn);
  if (heads.gather_groups) {
    q = q.narrow(1, tp_->rank() % ranks_per_group * heads.heads_per_rank,
                 heads.heads_per_rank);
  }
  if (q_layernorm) {
    q = q_layernorm->Forward(q);
    k = k_layernorm->Forward(k);
  }
  return {ApplyRope(q, cos, sin), ApplyRope(k, cos, sin), v.contiguous()};
}

at::Tensor TpSelfAttention::Forward(
    const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
    std::shared_ptr<AttentionBackend> backend) const {
  TensorList qkv = QueryKeyValue(x, cos, sin);
  RecomputeFn core = [backend, l = layer](const TensorList& in) {
    return TensorList{backend->Attend(l, in[0], in[1], in[2])};
  };
  at::Tensor o =
      recompute_core_attn ? Checkpoint(core, qkv, {})[0] : core(qkv)[0];
  return linear_proj->Forward(
      o.reshape({o.size(0), heads.heads_per_rank * heads.head_dim}));
}

TpMlp::TpMlp(const ModelConfig& c, const MegatronModelOptions& o, CommPtr tp) {
  linear_fc1 =
      register_module("linear_fc1", std::make_shared<mg::ColumnParallelLinear>(
                                        c.hidden_size, 2 * c.intermediate_size,
                                        false, false, o.sequence_parallel, tp));
  linear_fc2 =
      register_module("linear_fc2", std::make_shared<mg::RowParallelLinear>(
                                        c.intermediate_size, c.hidden_size,
                                        false, true, o.sequence_parallel, tp));
}

at::Tensor TpMlp::Forward(const at::Tensor& x) const {
  std::vector<at::Tensor> gate_up = linear_fc1->Forward(x).chunk(2, -1);
  return linear_fc2->Forward(at::silu(gate_up[0]) * gate_up[1]);
}

TpTransformerLayer::TpTransformerLayer(const ModelConfig& c, int64_t layer,
                                       const MegatronModelOptions& o,
                                       CommPtr tp, CommPtr ep, CommPtr etp) {
  input_layernorm =
      Norm(this, "input_layernorm", c.hidden_size, c.rms_norm_eps);
  if (c.IsMla()) {
    mla_attention = register_module(
        "self_attention", std::make_shared<TpMlaAttention>(c, layer, o, tp));
  } else {
    self_attention = register_module(
        "self_attention", std::make_shared<TpSelfAttention>(c, layer, o, tp));
  }
  pre_mlp_layernorm =
      Norm(this, "pre_mlp_layernorm", c.hidden_size, c.rms_norm_eps);
  if (c.LayerIsMoe(layer)) {
    moe = register_module(
        "mlp", std::make_shared<MegatronMoeLayer>(c, o, tp, ep, etp));
  } else {
    mlp = register_module("mlp", std::make_shared<TpMlp>(c, o, tp));
  }
  recompute_mlp = o.recompute_granularity == "selective" &&
                  std::count(o.recompute_modules.begin(),
                             o.recompute_modules.end(), "mlp") > 0;
}

at::Tensor TpTransformerLayer::Forward(
    const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
    std::shared_ptr<AttentionBackend> backend) const {
  const at::Tensor normed_in = input_layernorm->Forward(x);
  at::Tensor h =
      x +
      (mla_attention
           ? mla_attention->Forward(normed_in, cos, sin, std::move(backend))
           : self_attention->Forward(normed_in, cos, sin, std::move(backend)));
  at::Tensor normed = pre_mlp_layernorm->Forward(h);
  if (!recompute_mlp)
    return h + (moe ? moe->Forward(normed) : mlp->Forward(normed));
  // Selective mlp recompute, MoE layers included (their dispatch runs again
  // in backward, in the same order on every rank of the ep group).
  torch::nn::Module* module = moe ? static_cast<torch::nn::Module*>(moe.get())
                                  : static_cast<torch::nn::Module*>(mlp.get());
  RecomputeFn fn = [moe = moe, mlp = mlp,
                    rows = moe ? moe->rows : nullptr](const TensorList& in) {
    if (moe) moe->rows = rows;  // this forward's, in the recompute too
    return TensorList{moe ? moe->Forward(in[0]) : mlp->Forward(in[0])};
  };
  return h + Checkpoint(fn, {normed}, module->parameters())[0];
}

MegatronGPTModel::MegatronGPTModel(
    const ModelConfig& config, MegatronModelOptions options,
    std::shared_ptr<parallel::megatron::ParallelState> mpu)
    : config_(config), options_(std::move(options)), mpu_(std::move(mpu)) {
  const int64_t tp = mpu_->tp_size();
  VERL_CHECK_OK(
      ValidateMegatronModel(config_, options_, mpu_->layout().sizes()));
  if (config_.num_key_value_heads <= 0) {
    config_.num_key_value_heads = config_.num_attention_heads;
  }
  options_.sequence_parallel = options_.sequence_parallel && tp > 1;
  padded_vocab_ = mg::PaddedVocabSize(
      config_.vocab_size, options_.make_vocab_size_divisible_by, tp);
  const CommPtr& group = mpu_->tp();
  const int pp = mpu_->pp_size(), stage = mpu_->pp_rank();
  const int vpp = std::max(1, mpu_->layout().sizes().vpp);
  first_stage_ = stage == 0;
  last_stage_ = stage == pp - 1;
  // Virtual stage v = c * pp + s holds counts[v] layers, in model order.
  const std::vector<int64_t> counts = *VirtualStageLayers(
      config_.num_hidden_layers, pp, mpu_->layout().sizes().vpp, options_);
  local_index_.assign(config_.num_hidden_layers, -1);
  layer_stage_.assign(config_.num_hidden_layers, 0);
  std::vector<std::pair<int64_t, int64_t>> mine;  // (first layer, count)
  for (int64_t v = 0, first = 0; v < pp * vpp; first += counts[v++]) {
    for (int64_t l = first; l < first + counts[v]; ++l) {
      layer_stage_[l] = static_cast<int>(v % pp);
    }
    if (v % pp == stage) mine.emplace_back(first, counts[v]);
  }
  first_layer_ = mine.front().first;
  const bool lm_head = !config_.is_value_model;
  if (first_stage_ || (last_stage_ && lm_head && config_.tie_word_embeddings)) {
    auto embedding =
        register_module("embedding", std::make_shared<Container>());
    word_embeddings = std::make_shared<mg::VocabParallelEmbedding>(
        padded_vocab_, config_.hidden_size, options_.sequence_parallel, group);
    embedding->register_module("word_embeddings", word_embeddings);
  }
  auto decoder = register_module("decoder", std::make_shared<Container>());
  auto list = decoder->register_module("layers", std::make_shared<Container>());
  chunk_begin_ = {0};
  for (const auto& [first, count] : mine) {
    for (int64_t l = first; l < first + count; ++l) {
      local_index_[l] = static_cast<int64_t>(layers.size());
      layers.push_back(std::make_shared<TpTransformerLayer>(
          config_, l, options_, group, ep(), etp()));
      if (layers.back()->moe) {
        layers.back()->moe->keep_router_logits = HasMoeAuxLoss();
        layers.back()->moe->tp_cp = mpu_->group(mg::MpuGroup::kTpCp);
      }
      list->register_module(std::to_string(l), layers.back());
    }
    chunk_begin_.push_back(static_cast<int64_t>(layers.size()));
  }
  if (last_stage_) {
    final_layernorm = Norm(decoder.get(), "final_layernorm",
                           config_.hidden_size, config_.rms_norm_eps);
    if (!lm_head) {
      value_head = register_module(
          "output_layer",
          std::make_shared<Linear>(config_.hidden_size, 1, true));
    } else if (!config_.tie_word_embeddings) {
      output_layer = register_module(
          "output_layer", std::make_shared<mg::ColumnParallelLinear>(
                              config_.hidden_size, padded_vocab_, false, false,
                              options_.sequence_parallel, group));
    }
  }
  // MLA: the rotary tables cover the rope part of q/k only (HF sets
  // head_dim so too).
  ModelConfig rope = config_;
  if (rope.IsMla()) rope.head_dim = rope.qk_rope_head_dim;
  inv_freq_ = RopeInvFreq(rope);
  rope_scale_ = RopeAttentionFactor(rope);
}

at::Tensor MegatronGPTModel::RunLayers(
    at::Tensor h, const at::Tensor& cos, const at::Tensor& sin,
    const std::shared_ptr<AttentionBackend>& backend,
    const std::shared_ptr<const MoeRows>& moe_rows, int64_t begin,
    int64_t end) {
  const int64_t n = end - begin;
  const bool full = options_.recompute_granularity == "full";
  const bool block = options_.recompute_method == "block";
  const int64_t step = full && !block ? options_.recompute_num_layers : 1;
  for (int64_t first = 0; first < n; first += step) {
    const int64_t last = std::min(n, first + step);
    const bool recompute =
        full && (!block || first < options_.recompute_num_layers);
    std::vector<std::shared_ptr<TpTransformerLayer>> chunk(
        layers.begin() + begin + first, layers.begin() + begin + last);
    // A recompute runs after later micro-batches' forwards: their MoE rows
    // are set again.
    RecomputeFn fn = [chunk, cos, sin, backend,
                      moe_rows](const TensorList& in) {
      at::Tensor x = in[0];
      for (const auto& layer : chunk) {
        if (layer->moe) layer->moe->rows = moe_rows;
        x = layer->Forward(x, cos, sin, backend);
      }
      return TensorList{x};
    };
    if (!recompute) {
      h = fn({h})[0];
      continue;
    }
    TensorList params;
    for (const auto& layer : chunk) {
      for (const at::Tensor& p : layer->parameters()) params.push_back(p);
    }
    h = Checkpoint(fn, {h}, params)[0];
  }
  return h;
}

// The packed stream as this rank runs it: its cp share (or padded to a
// multiple of tp under sequence parallelism) and the attention over it.
struct MegatronGPTModel::Tokens {
  at::Tensor ids, pos;
  std::shared_ptr<AttentionBackend> backend;
  std::shared_ptr<const mg::CpLayout> cp_layout;
  int64_t t = 0, pad = 0;
  int64_t local() const { return ids.size(0); }
};

MegatronGPTModel::Tokens MegatronGPTModel::Prepare(
    const at::Tensor& input_ids, const at::Tensor& position_ids,
    const std::vector<int64_t>& cu_seqlens) const {
  CHECK_EQ(input_ids.dim(), 1) << "packed input_ids must be [T]";
  CHECK_EQ(position_ids.numel(), input_ids.numel());
  const int64_t tp = mpu_->tp_size();
  const bool sp = options_.sequence_parallel;
  Tokens k;
  k.t = input_ids.size(0);
  k.ids = input_ids;
  k.pos = position_ids.reshape({-1});
  if (cp()->size() > 1) {
    // This rank's two chunks of every sequence, each sequence padded to a
    // multiple of 2*cp (times tp under sequence parallelism, so the local
    // stream splits evenly over tp).
    absl::StatusOr<mg::CpLayout> layout = mg::CpLayout::Create(
        cu_seqlens, cp()->size(), cp()->rank(), sp ? tp : 1);
    VERL_CHECK_OK(layout.status());
    k.cp_layout = std::make_shared<const mg::CpLayout>(*std::move(layout));
    k.ids = k.cp_layout->Shard(k.ids);
    k.pos = k.cp_layout->ShardPositions(k.pos);
    k.backend = std::make_shared<RingAttentionBackend>(k.cp_layout, cp());
    return k;
  }
  std::vector<int64_t> cu = cu_seqlens;
  k.pad = sp ? (tp - k.t % tp) % tp : 0;
  if (k.pad > 0) {  // a separate dummy sequence, trimmed from the output
    k.ids = at::cat({k.ids, at::zeros({k.pad}, k.ids.options())});
    k.pos = at::cat({k.pos, at::arange(k.pad, k.pos.options())});
    cu.push_back(k.t + k.pad);
  }
  k.backend = std::make_shared<VarlenCausalAttention>(cu);
  return k;
}

at::Tensor MegatronGPTModel::RowSequences(
    const Tokens& k, const std::vector<int64_t>& cu_seqlens) const {
  at::Tensor seq;
  if (k.cp_layout) {
    std::vector<int64_t> lens;
    for (size_t s = 0; s + 1 < cu_seqlens.size(); ++s) {
      lens.push_back(cu_seqlens[s + 1] - cu_seqlens[s]);
    }
    const int r = cp()->rank();
    seq = k.cp_layout->seq_ids(r);
    const at::Tensor real = k.cp_layout->offsets(r) <
                            at::tensor(lens, at::kLong).index_select(0, seq);
    seq = seq.masked_fill(real.logical_not(), -1);
  } else {
    const at::Tensor ends = at::tensor(
        std::vector<int64_t>(cu_seqlens.begin() + 1, cu_seqlens.end()),
        at::kLong);
    const at::Tensor rows = at::arange(k.t + k.pad, at::kLong);
    seq = at::searchsorted(ends, rows, /*out_int32=*/false, /*right=*/true)
              .masked_fill(rows >= k.t, -1);
  }
  if (options_.sequence_parallel) {
    const int64_t n = seq.size(0) / mpu_->tp_size();
    seq = seq.narrow(0, mpu_->tp_rank() * n, n);
  }
  return seq;
}

std::vector<int64_t> MegatronGPTModel::StageHiddenShape(
    const std::vector<int64_t>& cu_seqlens) const {
  const int64_t t = cu_seqlens.empty() ? 0 : cu_seqlens.back();
  const int64_t tp = mpu_->tp_size();
  const bool sp = options_.sequence_parallel;
  int64_t local = t + (sp ? (tp - t % tp) % tp : 0);
  if (cp()->size() > 1) {
    absl::StatusOr<mg::CpLayout> layout = mg::CpLayout::Create(
        cu_seqlens, cp()->size(), cp()->rank(), sp ? tp : 1);
    VERL_CHECK_OK(layout.status());
    local = layout->local_tokens();
  }
  return {sp ? local / tp : local, config_.hidden_size};
}

std::shared_ptr<TpTransformerLayer> MegatronGPTModel::LocalLayer(
    int64_t layer) const {
  if (layer < 0 || layer >= static_cast<int64_t>(local_index_.size()) ||
      local_index_[layer] < 0) {
    return nullptr;
  }
  return layers[local_index_[layer]];
}

int MegatronGPTModel::StageOfLayer(int64_t layer) const {
  CHECK(layer >= 0 && layer < static_cast<int64_t>(layer_stage_.size()))
      << "decoder layer " << layer << " out of range";
  return layer_stage_[layer];
}

at::Tensor MegatronGPTModel::Forward(const at::Tensor& input_ids,
                                     const at::Tensor& position_ids,
                                     const std::vector<int64_t>& cu_seqlens,
                                     at::Tensor* final_hidden) {
  CHECK(first_stage_ && last_stage_)
      << "MegatronGPTModel::Forward with pipeline_model_parallel_size > 1: "
         "run StageForward through a pipeline schedule";
  return StageForward(input_ids, position_ids, cu_seqlens, {}, final_hidden);
}

at::Tensor MegatronGPTModel::StageForward(
    const at::Tensor& input_ids, const at::Tensor& position_ids,
    const std::vector<int64_t>& cu_seqlens, const at::Tensor& input,
    at::Tensor* final_hidden, int64_t chunk) {
  CHECK(chunk >= 0 && chunk < num_chunks())
      << "model chunk " << chunk << " of " << num_chunks();
  const bool sp = options_.sequence_parallel;
  Tokens k = Prepare(input_ids, position_ids, cu_seqlens);
  at::Tensor h;
  if (first_stage_ && chunk == 0) {
    h = word_embeddings->Forward(k.ids);
  } else {
    CHECK(input.defined()) << "pipeline stage " << mpu_->pp_rank() << " chunk "
                           << chunk
                           << " needs the previous stage's hidden states";
    h = input;
  }
  // MoE: this rank's rows that are real tokens (not cp / sp padding) and
  // their sequences, for capacity dropping, the losses and the expert load.
  at::Tensor real;
  std::shared_ptr<const MoeRows> moe_rows;
  if (config_.IsMoe()) {
    auto rows = std::make_shared<MoeRows>();
    rows->sequence = RowSequences(k, cu_seqlens);
    rows->real = real = rows->sequence >= 0;
    rows->num_sequences = static_cast<int64_t>(cu_seqlens.size()) - 1;
    moe_rows = std::move(rows);
  }
  auto [cos, sin] = RopeCosSin(inv_freq_, k.pos, h.scalar_type());
  if (rope_scale_ != 1.0) {
    cos = cos * rope_scale_;
    sin = sin * rope_scale_;
  }
  h = RunLayers(h, cos, sin, k.backend, moe_rows, chunk_begin_[chunk],
                chunk_begin_[chunk + 1]);
  // The expert load of this chunk's MoE layers, on every stage.
  if (config_.IsMoe()) CollectExpertLoad(chunk, real);
  if (!last_stage_ || chunk != num_chunks() - 1) return h;
  // Back to every token of the unpadded stream, on every rank.
  auto whole = [&](const at::Tensor& x) {
    if (k.cp_layout) return k.cp_layout->Gather(x, cp());
    return k.pad > 0 ? x.narrow(0, 0, k.t) : x;
  };
  h = final_layernorm->Forward(h);
  if (config_.IsMoe()) {
    // Router logits of every token for the aux loss.
    CollectAuxLoss([&](const at::Tensor& x) {
      return whole(
          sp ? mg::GatherFromSequenceParallelRegion(
                   x, mpu_->tp(), /*tensor_parallel_output_grad=*/false)
             : x);
    });
  }
  if (final_hidden) {
    at::Tensor all = h;
    if (sp) {
      all = mg::GatherFromSequenceParallelRegion(
          h, mpu_->tp(), /*tensor_parallel_output_grad=*/false);
    }
    *final_hidden = whole(all);
  }
  at::Tensor out;
  if (value_head) {
    out = value_head->Forward(h).squeeze(-1);
    if (sp) {
      out = mg::GatherFromSequenceParallelRegion(
          out, mpu_->tp(), /*tensor_parallel_output_grad=*/false);
    }
  } else if (output_layer) {
    out = output_layer->Forward(h);
  } else {
    out = mg::ColumnParallelForward(h, word_embeddings->weight, {}, false, sp,
                                    mpu_->tp());
  }
  return whole(out);
}

void MegatronGPTModel::FinalizeGrads(bool sum_expert_grads) {
  std::vector<at::Tensor> partial;
  const bool sp = options_.sequence_parallel;
  if (sp && final_layernorm) partial.push_back(final_layernorm->weight);
  if (sp && value_head) {
    partial.push_back(value_head->weight);
    partial.push_back(value_head->bias);
  }
  for (const auto& layer : layers) {
    if (sp) {
      partial.push_back(layer->input_layernorm->weight);
      partial.push_back(layer->pre_mlp_layernorm->weight);
    }
    if (sp && layer->moe) {  // replicated, each tp rank routes T/tp tokens
      partial.push_back(layer->moe->router->weight);
      if (layer->moe->shared_gate_weight.defined()) {
        partial.push_back(layer->moe->shared_gate_weight);
      }
    }
    if (layer->self_attention && layer->self_attention->q_layernorm) {
      partial.push_back(layer->self_attention->q_layernorm->weight);
      partial.push_back(layer->self_attention->k_layernorm->weight);
    }
    if (sp && layer->mla_attention) {  // each tp rank's tokens only
      for (const at::Tensor& p : layer->mla_attention->ReplicatedParameters()) {
        partial.push_back(p);
      }
    }
  }
  mg::SumGradsOverTensorParallel(partial, *mpu_->tp());
  // Expert gradients already hold every token of the ep group (the
  // dispatch brought them); they are summed over the expert-data-parallel
  // group (which holds the cp replicas too), the rest over cp.
  // An expert that got no token has zero gradient (not none), so every
  // rank's optimizer state advances alike.
  const std::vector<at::Tensor> experts = ExpertParameters();
  std::unordered_set<const void*> expert_set;
  for (const at::Tensor& e : experts) {
    expert_set.insert(e.unsafeGetTensorImpl());
    if (!e.grad().defined()) e.mutable_grad() = at::zeros_like(e);
  }
  std::vector<at::Tensor> dense;
  for (const at::Tensor& p : parameters()) {
    if (p.requires_grad() && !expert_set.count(p.unsafeGetTensorImpl())) {
      dense.push_back(p);
    }
  }
  SumGrads(dense, *cp());
  if (sum_expert_grads) SumGrads(experts, *mpu_->group(mg::MpuGroup::kEdp));
  if (mpu_->pp_size() > 1 && word_embeddings && config_.tie_word_embeddings &&
      !config_.is_value_model) {
    // The first stage's table and the last stage's head copy: Megatron's
    // _allreduce_word_embedding_grads.
    at::Tensor& g = word_embeddings->weight.mutable_grad();
    if (!g.defined()) g = at::zeros_like(word_embeddings->weight);
    parallel::DieOnCommError(mpu_->embedding()->AllReduce(g),
                             *mpu_->embedding(),
                             "tied embedding gradient all-reduce");
  }
  UpdateExpertBias();
}

void MegatronGPTModel::SumGrads(const std::vector<at::Tensor>& params,
                                parallel::Communicator& group) {
  if (group.size() == 1 || params.empty()) return;
  // One all-reduce of every gradient, flattened (undefined ones as zeros).
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : params) {
    at::Tensor& g = p.mutable_grad();
    if (!g.defined()) g = at::zeros_like(p);
    grads.push_back(g.reshape({-1}));
  }
  at::Tensor sum = mg::AllReduceSum(at::cat(grads), group);
  int64_t offset = 0;
  for (const at::Tensor& p : params) {
    at::Tensor& g = p.mutable_grad();
    g.copy_(sum.narrow(0, offset, g.numel()).view(g.sizes()));
    offset += g.numel();
  }
}

parallel::megatron::PipelineStageFns StageFns(
    MegatronGPTModel& model,
    std::function<StageMicroBatch(int64_t mb)> micro_batch) {
  parallel::megatron::PipelineStageFns fns;
  fns.input_shape = [&model, micro_batch](int64_t m) {
    return model.StageHiddenShape(*micro_batch(m).cu_seqlens);
  };
  fns.forward = [&model, micro_batch](int64_t m, const at::Tensor& in) {
    const StageMicroBatch b = micro_batch(m);
    return model.StageForward(b.ids, b.pos, *b.cu_seqlens, in);
  };
  fns.num_chunks = model.num_chunks();
  fns.chunk_forward = [&model, micro_batch](int64_t m, int64_t chunk,
                                            const at::Tensor& in) {
    const StageMicroBatch b = micro_batch(m);
    return model.StageForward(b.ids, b.pos, *b.cu_seqlens, in, nullptr, chunk);
  };
  return fns;
}

}  // namespace verl::models
