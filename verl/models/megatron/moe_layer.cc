// File: verl/models/megatron/moe_layer.cc
#include "verl/models/megatron/moe_layer.h"

#include <ATen/ATen.h>
#include <glog/logging.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "verl/models/decoder.h"
#include "verl/parallel/megatron/expert_parallel.h"
#include "verl/parallel/megatron/mappings.h"

namespace verl::models {
namespace {

namespace mg = parallel::megatron;

// A named node of the module tree ("experts").
class Container : public torch::nn::Module {};

// Megatron's MoEAuxLossAutoScaler: returns `x` (a copy); backward passes
// x's gradient through and gives `loss` the gradient `scale`, so the loss
// joins the training objective without reaching the caller's loss value.
class AttachLoss : public torch::autograd::Function<AttachLoss> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx,
                            const at::Tensor& x, const at::Tensor& loss,
                            double scale) {
    ctx->saved_data["scale"] = scale;
    ctx->save_for_backward({loss});
    return x.clone();
  }
  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grads) {
    const at::Tensor loss = ctx->get_saved_variables()[0];
    return {grads[0], at::full_like(loss, ctx->saved_data["scale"].toDouble()),
            at::Tensor()};
  }
};

struct BalanceParts {
  at::Tensor balance;  // load-balancing loss part, without coefficient
  at::Tensor z;        // z-loss part (sum of lse^2 / all real tokens)
};

// This rank's parts of one layer's losses (moe_layer.h): `group` [N] is the
// sequence (seq_aux_loss) or 0 (aux_loss) of each row, -1 for rows that do
// not count; `groups` their number; counts summed over `comm`.
BalanceParts BalanceLossParts(const at::Tensor& logits, bool sigmoid, int64_t k,
                              const at::Tensor& group, int64_t groups,
                              const CommPtr& comm) {
  const int64_t e = logits.size(1);
  const at::Tensor lf = logits.to(ComputeDtype(logits.scalar_type()));
  const at::Tensor rows = (group >= 0).nonzero().squeeze(1);
  const at::Tensor g = group.index_select(0, rows);
  const at::Tensor row_logits = lf.index_select(0, rows);
  at::Tensor scores;
  if (sigmoid) {
    scores = at::sigmoid(row_logits);
    scores = scores / (scores.sum(-1, /*keepdim=*/true) + 1e-20);
  } else {
    scores = at::softmax(row_logits, -1);
  }
  // Per group: chosen pairs per expert (columns < e) and tokens (column e).
  at::Tensor stats = at::zeros({groups * (e + 1)}, at::kDouble);
  {
    at::NoGradGuard no_grad;
    const at::Tensor top = std::get<1>(at::topk(scores, k, 1));
    const at::Tensor pairs = (g.unsqueeze(1) * (e + 1) + top).reshape(-1);
    stats.index_add_(0, pairs, at::ones({pairs.numel()}, at::kDouble));
    stats.index_add_(0, g * (e + 1) + e, at::ones({g.numel()}, at::kDouble));
    if (comm && comm->size() > 1) stats = mg::AllReduceSum(stats, *comm);
  }
  stats = stats.view({groups, e + 1});
  const at::Tensor counts = stats.narrow(1, 0, e);
  const at::Tensor len = stats.select(1, e);
  const double nonempty = std::max(1.0, (len > 0).sum().item<double>());
  const at::Tensor weight =
      (counts * static_cast<double>(e) /
       (len.clamp_min(1.0).pow(2) * static_cast<double>(k)).unsqueeze(1))
          .to(scores.scalar_type());
  const at::Tensor summed =
      at::zeros({groups, e}, scores.options()).index_add(0, g, scores);
  BalanceParts parts;
  parts.balance = (summed * weight).sum() / nonempty;
  parts.z = at::logsumexp(row_logits, -1).pow(2).sum() /
            std::max(1.0, len.sum().item<double>());
  return parts;
}

}  // namespace

ExpertMlp::ExpertMlp(int64_t hidden, int64_t ffn) {
  linear_fc1 = register_module(
      "linear_fc1", std::make_shared<Linear>(hidden, 2 * ffn, false));
  linear_fc2 = register_module("linear_fc2",
                               std::make_shared<Linear>(ffn, hidden, false));
}

at::Tensor ExpertMlp::Forward(const at::Tensor& x) const {
  std::vector<at::Tensor> gate_up = linear_fc1->Forward(x).chunk(2, -1);
  return linear_fc2->Forward(at::silu(gate_up[0]) * gate_up[1]);
}

MoeRouter::MoeRouter(int64_t num_experts, int64_t hidden, bool with_bias) {
  weight = register_parameter("weight", at::zeros({num_experts, hidden}));
  if (with_bias) {
    expert_bias = register_parameter("expert_bias", at::zeros({num_experts}),
                                     /*requires_grad=*/false);
  }
}

MegatronMoeLayer::MegatronMoeLayer(const ModelConfig& c,
                                   const MegatronModelOptions& o, CommPtr tp,
                                   CommPtr ep, CommPtr etp)
    : num_experts(c.num_experts),
      top_k(c.num_experts_per_tok),
      sigmoid(c.scoring_func == "sigmoid"),
      norm_topk_prob(c.norm_topk_prob),
      capacity_factor(o.moe_expert_capacity_factor),
      balance_type(o.moe_router_load_balancing_type),
      aux_coeff(o.moe_aux_loss_coeff),
      z_coeff(o.moe_z_loss_coeff),
      drop_policy(o.moe_token_drop_policy == "position"
                      ? TokenDropPolicy::kPosition
                      : TokenDropPolicy::kProbs),
      ep_(std::move(ep)),
      etp_(std::move(etp)) {
  CHECK(ep_ != nullptr) << "MoE layer without an ep group";
  CHECK_EQ(num_experts % ep_->size(), 0);
  const int64_t etp_size = etp_ ? etp_->size() : 1;
  CHECK_EQ(c.moe_intermediate_size % etp_size, 0);
  group_options.top_k = top_k;
  group_options.n_group = c.n_group;
  group_options.topk_group = c.topk_group;
  group_options.norm_topk_prob = c.norm_topk_prob;
  group_options.routed_scaling_factor = c.routed_scaling_factor;
  const int64_t h = c.hidden_size, local = num_experts / ep_->size();
  first_expert = ep_->rank() * local;
  router = register_module(
      "router", std::make_shared<MoeRouter>(num_experts, h, sigmoid));
  auto experts = register_module("experts", std::make_shared<Container>());
  auto list =
      experts->register_module("local_experts", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < local; ++i) {
    local_experts.push_back(
        std::make_shared<ExpertMlp>(h, c.moe_intermediate_size / etp_size));
    list->Add(local_experts.back());
  }
  const int64_t shared = sigmoid ? c.n_shared_experts * c.moe_intermediate_size
                                 : c.shared_expert_intermediate_size;
  if (shared > 0) {
    ModelConfig sc = c;
    sc.intermediate_size = shared;
    shared_experts =
        register_module("shared_experts", std::make_shared<TpMlp>(sc, o, tp));
    if (!sigmoid) {
      shared_gate_weight =
          shared_experts->register_parameter("gate_weight", at::zeros({1, h}));
    }
  }
}

at::Tensor MegatronMoeLayer::Forward(const at::Tensor& x) const {
  // Router logits as the single-process blocks compute them: the softmax
  // router in x's dtype (HF's gate Linear), the sigmoid one in fp32.
  at::Tensor logits;
  Routing routing;
  if (sigmoid) {
    const c10::ScalarType ct = ComputeDtype(x.scalar_type());
    logits = at::linear(x.to(ct), router->weight.to(ct));
    routing =
        SigmoidGroupLimitedTopK(logits, router->expert_bias, group_options);
  } else {
    logits = at::linear(x, router->weight);
    routing = SoftmaxTopK(logits, top_k, norm_topk_prob);
  }
  // Kept (with its graph) only for the model's aux loss.
  last_router_logits = keep_router_logits ? logits : at::Tensor();
  last_indices = routing.indices.detach();
  last_kept = at::Tensor();
  const at::Tensor real_rows = rows ? rows->real : at::Tensor();
  if (capacity_factor.has_value()) {
    const int64_t real = real_rows.defined() ? real_rows.sum().item<int64_t>()
                                             : routing.indices.size(0);
    last_kept = CapacityKeepMask(
        routing, num_experts,
        ExpertCapacity(real, top_k, num_experts, *capacity_factor), drop_policy,
        real_rows);
  }
  at::Tensor weights = routing.weights;
  const bool balance = balance_type != "none" && aux_coeff > 0.0;
  if ((balance || z_coeff > 0.0) && at::GradMode::is_enabled() &&
      logits.requires_grad()) {
    at::Tensor group;
    int64_t groups = 1;
    if (balance_type == "seq_aux_loss" && rows && rows->sequence.defined()) {
      group = rows->sequence;
      groups = rows->num_sequences;
    } else {
      group = at::zeros({logits.size(0)}, at::kLong);
      if (real_rows.defined()) group.masked_fill_(real_rows.logical_not(), -1);
    }
    const BalanceParts parts =
        BalanceLossParts(logits, sigmoid, top_k, group, groups, tp_cp);
    at::Tensor loss = at::zeros({}, parts.balance.options());
    if (balance) loss = loss + aux_coeff * parts.balance;
    if (z_coeff > 0.0) loss = loss + z_coeff * parts.z;
    weights = AttachLoss::apply(weights, loss, aux_scale);
    balance_sum += parts.balance.item<double>();
    z_sum += parts.z.item<double>();
    ++loss_forwards;
  }
  const mg::ExpertDispatch plan =
      mg::PlanExpertDispatch(routing.indices, num_experts, *ep_, last_kept);
  at::Tensor rows = mg::DispatchTokens(x, plan, ep_);
  const std::vector<int64_t>* offsets = &plan.local_offsets;
  mg::EtpGather gather;
  const bool etp = etp_ && etp_->size() > 1;
  if (etp) {  // every etp member's rows for the shards of these experts
    gather = mg::PlanEtpGather(plan.local_offsets, *etp_);
    rows = mg::GatherExpertRows(rows, gather, etp_);
    offsets = &gather.local_offsets;
  }
  // Each local expert on its block; the empty slice keeps `rows` in the
  // graph when no token came here (every rank joins the backward).
  std::vector<at::Tensor> outs = {rows.narrow(0, 0, 0)};
  for (size_t e = 0; e < local_experts.size(); ++e) {
    const int64_t begin = (*offsets)[e];
    const int64_t n = (*offsets)[e + 1] - begin;
    if (n > 0)
      outs.push_back(local_experts[e]->Forward(rows.narrow(0, begin, n)));
  }
  at::Tensor y = at::cat(outs);
  if (etp) y = mg::ReduceScatterExpertRows(y, gather, etp_);
  at::Tensor out = mg::CombineTokens(y, weights, plan, ep_);
  if (shared_experts) {
    at::Tensor s = shared_experts->Forward(x);
    if (shared_gate_weight.defined()) {
      s = at::sigmoid(at::linear(x, shared_gate_weight)) * s;
    }
    out = out + s;
  }
  return out;
}

std::map<std::string, double> ExpertLoadMetrics(
    const std::map<int64_t, std::vector<double>>& load) {
  std::map<std::string, double> m;
  double worst = 0.0, sum = 0.0;
  for (const auto& [layer, counts] : load) {
    if (counts.empty()) continue;
    const auto [lo, hi] = std::minmax_element(counts.begin(), counts.end());
    double total = 0.0;
    for (double v : counts) total += v;
    const double mean = total / static_cast<double>(counts.size());
    const double imbalance = mean > 0.0 ? *hi / mean : 0.0;
    const std::string p = absl::StrCat("moe/layer_", layer, "/");
    m[p + "tokens_per_expert_max"] = *hi;
    m[p + "tokens_per_expert_min"] = *lo;
    m[p + "tokens_per_expert_mean"] = mean;
    m[p + "imbalance"] = imbalance;
    worst = std::max(worst, imbalance);
    sum += imbalance;
  }
  if (!load.empty()) {
    m["moe/imbalance_max"] = worst;
    m["moe/imbalance_mean"] = sum / static_cast<double>(load.size());
  }
  return m;
}

// ---- MegatronGPTModel's MoE parts -----------------------------------------

void MegatronGPTModel::CollectExpertLoad(int64_t chunk,
                                         const at::Tensor& real) {
  // A training forward's load also counts for the bias update.
  const bool training = at::GradMode::is_enabled();
  at::NoGradGuard no_grad;
  for (int64_t l = chunk_begin_[chunk]; l < chunk_begin_[chunk + 1]; ++l) {
    const auto& moe = layers[l]->moe;
    if (!moe) continue;
    // The dispatched pairs of the real tokens (capacity dropping removes
    // some).
    at::Tensor chosen = moe->last_indices.index({real});
    if (moe->last_kept.defined()) {
      chosen = chosen.masked_select(moe->last_kept.index({real}));
    }
    at::Tensor counts =
        at::bincount(chosen.reshape({-1}), {}, config_.num_experts)
            .to(at::kDouble);
    at::Tensor& acc = expert_load_[first_layer() + l];
    acc = acc.defined() ? acc + counts : counts;
    if (training && options_.moe_router_enable_expert_bias) {
      at::Tensor& b = bias_load_[first_layer() + l];
      b = b.defined() ? b + counts : counts;
    }
  }
}

bool MegatronGPTModel::HasMoeAuxLoss() const {
  const bool recomputed =
      options_.recompute_granularity == "full" ||
      (options_.recompute_granularity == "selective" &&
       std::count(options_.recompute_modules.begin(),
                  options_.recompute_modules.end(), "mlp") > 0);
  return options_.moe_hf_aux_loss && mpu_->pp_size() == 1 && !recomputed;
}

void MegatronGPTModel::CollectAuxLoss(
    const std::function<at::Tensor(const at::Tensor&)>& gather_tokens) {
  const bool aux = HasMoeAuxLoss();
  std::vector<at::Tensor> logits;
  for (const auto& layer : layers) {
    const auto& moe = layer->moe;
    if (!moe) continue;
    if (aux && !moe->sigmoid) {
      logits.push_back(gather_tokens(moe->last_router_logits));
    }
    moe->last_router_logits = at::Tensor();  // its graph
  }
  moe_aux_loss_ = logits.empty()
                      ? at::Tensor()
                      : LoadBalancingLoss(logits, config_.num_experts,
                                          config_.num_experts_per_tok);
}

std::map<int64_t, std::vector<double>> MegatronGPTModel::TakeExpertLoad() {
  // Every MoE layer of the model, one row each: this stage's counts (zeros
  // for other stages' layers), summed over tp x cp and then over pp, where
  // each layer has exactly one stage.
  std::vector<int64_t> moe_layers;
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    if (config_.LayerIsMoe(l)) moe_layers.push_back(l);
  }
  std::map<int64_t, std::vector<double>> out;
  if (moe_layers.empty()) return out;
  at::Tensor all =
      at::zeros({static_cast<int64_t>(moe_layers.size()), config_.num_experts},
                at::kDouble);
  for (size_t i = 0; i < moe_layers.size(); ++i) {
    auto it = expert_load_.find(moe_layers[i]);
    if (it == expert_load_.end() || !it->second.defined()) continue;
    all[static_cast<int64_t>(i)].copy_(it->second);
    it->second = at::Tensor();
  }
  all =
      mg::AllReduceSum(all, *mpu_->group(parallel::megatron::MpuGroup::kTpCp));
  if (mpu_->pp_size() > 1) {
    all =
        mg::AllReduceSum(all, *mpu_->group(parallel::megatron::MpuGroup::kPp));
  }
  for (size_t i = 0; i < moe_layers.size(); ++i) {
    const at::Tensor row = all[static_cast<int64_t>(i)].contiguous();
    out[moe_layers[i]] = std::vector<double>(
        row.data_ptr<double>(), row.data_ptr<double>() + row.numel());
  }
  return out;
}

void MegatronGPTModel::UpdateExpertBias() {
  if (!options_.moe_router_enable_expert_bias) return;
  std::vector<at::Tensor> loads;
  std::vector<MegatronMoeLayer*> moes;
  for (int64_t l = 0; l < static_cast<int64_t>(layers.size()); ++l) {
    if (!layers[l]->moe) continue;
    at::Tensor& acc = bias_load_[first_layer() + l];
    loads.push_back(
        acc.defined() ? acc : at::zeros({config_.num_experts}, at::kDouble));
    acc = at::Tensor();
    moes.push_back(layers[l]->moe.get());
  }
  if (loads.empty()) return;
  // Megatron's get_updated_expert_bias: the step's load over tp x cp x dp
  // (every rank's routed tokens), one all-reduce per group for all layers.
  at::Tensor load =
      mg::AllReduceSum(at::stack(loads), *mpu_->group(mg::MpuGroup::kTpCp));
  load = mg::AllReduceSum(load, *mpu_->dp());
  at::Tensor step = at::sign(load.mean(1, /*keepdim=*/true) - load) *
                    options_.moe_router_bias_update_rate;
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < moes.size(); ++i) {
    at::Tensor& bias = moes[i]->router->expert_bias;
    bias.copy_(bias.to(at::kDouble) + step[i].to(bias.device()));
  }
}

void MegatronGPTModel::SetMoeAuxLossScale(double scale) {
  for (const auto& layer : layers) {
    if (layer->moe) layer->moe->aux_scale = scale;
  }
}

std::map<std::string, double> MegatronGPTModel::TakeMoeAuxLosses() {
  std::map<std::string, double> out;
  const std::string& type = options_.moe_router_load_balancing_type;
  const bool balance = type != "none" && options_.moe_aux_loss_coeff > 0.0;
  const bool z = options_.moe_z_loss_coeff > 0.0;
  if (!config_.IsMoe() || (!balance && !z)) return out;
  // Per MoE layer of the model: this rank's part of the balance and z sums
  // and its forwards / (tp x cp) (the parts add up over tp x cp, the
  // forwards are each rank's), summed over tp x cp and then pp.
  const CommPtr& tp_cp = mpu_->group(mg::MpuGroup::kTpCp);
  at::Tensor all = at::zeros({config_.num_hidden_layers, 3}, at::kDouble);
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    const auto layer = LocalLayer(l);
    if (!layer || !layer->moe) continue;
    const auto& moe = layer->moe;
    at::Tensor row = all[l];
    row[0] = moe->balance_sum;
    row[1] = moe->z_sum;
    row[2] = static_cast<double>(moe->loss_forwards) / tp_cp->size();
    moe->balance_sum = moe->z_sum = 0.0;
    moe->loss_forwards = 0;
  }
  all = mg::AllReduceSum(all, *tp_cp);
  if (mpu_->pp_size() > 1) {
    all = mg::AllReduceSum(all, *mpu_->group(mg::MpuGroup::kPp));
  }
  const at::Tensor forwards = all.select(1, 2);
  const at::Tensor counted = forwards > 0;
  const double layers_counted = counted.sum().item<double>();
  if (layers_counted == 0) return out;
  const at::Tensor mean =
      (all.narrow(1, 0, 2) / forwards.clamp_min(1.0).unsqueeze(1))
          .index({counted})
          .sum(0) /
      layers_counted;
  if (balance) {
    out[type == "seq_aux_loss" ? "moe/seq_load_balancing_loss"
                               : "moe/load_balancing_loss"] =
        mean[0].item<double>();
  }
  if (z) out["moe/z_loss"] = mean[1].item<double>();
  return out;
}

std::vector<at::Tensor> MegatronGPTModel::ExpertParameters() const {
  std::vector<at::Tensor> params;
  for (const auto& layer : layers) {
    if (!layer->moe) continue;
    for (const auto& expert : layer->moe->local_experts) {
      for (const at::Tensor& p : expert->parameters()) params.push_back(p);
    }
  }
  return params;
}

}  // namespace verl::models
