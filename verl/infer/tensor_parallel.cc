// File: verl/infer/tensor_parallel.cc
#include "verl/infer/tensor_parallel.h"

#include <c10/core/InferenceMode.h>
#include <glog/logging.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace verl::infer {
namespace {

int64_t KvHeads(const models::ModelConfig& c) {
  return c.num_key_value_heads > 0 ? c.num_key_value_heads
                                   : c.num_attention_heads;
}

absl::Status Refuse(int64_t tp, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat(kRolloutTpKey, "=", tp, ": ", why));
}

}  // namespace

absl::Status ValidateTensorParallel(const models::ModelConfig& c, int64_t tp) {
  if (tp <= 0) return Refuse(tp, "must be >= 1");
  if (tp == 1) return absl::OkStatus();
  if (c.IsMla() && c.attention_bias) {
    return Refuse(tp,
                  "multi-head latent attention with attention_bias (an "
                  "o_proj bias) is not split by the tensor-parallel rollout");
  }
  if (!c.mrope_section.empty()) {
    return Refuse(tp,
                  "vision-language models are not served by the "
                  "tensor-parallel rollout (set it to 1)");
  }
  if (c.is_value_model) return Refuse(tp, "a value model cannot generate");
  const int64_t nq = c.num_attention_heads, nkv = KvHeads(c);
  if (nq % tp != 0) {
    return Refuse(
        tp, absl::StrCat("does not divide num_attention_heads (", nq, ")"));
  }
  if (nkv % tp != 0 && tp % nkv != 0) {
    return Refuse(tp, absl::StrCat("and num_key_value_heads (", nkv,
                                   ") must divide one another"));
  }
  // DeepSeek's shared experts are n_shared_experts * moe_intermediate_size
  // wide, so they split whenever the routed experts do.
  const std::pair<const char*, int64_t> split[] = {
      {"intermediate_size", c.intermediate_size},
      {"moe_intermediate_size", c.IsMoe() ? c.moe_intermediate_size : 0},
      {"shared_expert_intermediate_size",
       c.IsMoe() ? c.shared_expert_intermediate_size : 0}};
  for (const auto& [key, size] : split) {
    if (size % tp != 0) {
      return Refuse(tp, absl::StrCat("does not divide ", key, " (", size, ")"));
    }
  }
  return absl::OkStatus();
}

models::ModelConfig ShardConfig(const models::ModelConfig& c, int64_t tp) {
  models::ModelConfig s = c;
  s.head_dim = c.HeadDim();
  s.num_attention_heads = c.num_attention_heads / tp;
  s.num_key_value_heads = std::max<int64_t>(KvHeads(c) / tp, 1);
  s.intermediate_size = c.intermediate_size / tp;
  s.moe_intermediate_size = c.moe_intermediate_size / tp;
  s.shared_expert_intermediate_size = c.shared_expert_intermediate_size / tp;
  return s;
}

std::pair<int64_t, int64_t> ShardRange(int64_t n, int rank, int tp) {
  return {n * rank / tp, n * (rank + 1) / tp};
}

at::Tensor ShardOf(const std::string& name, const at::Tensor& full,
                   const models::ModelConfig& c, int rank, int tp) {
  if (tp == 1) return full;
  const int64_t d = c.HeadDim(), nq = c.num_attention_heads, nkv = KvHeads(c);
  // A tensor that is not the full one (wrong size along the split dim):
  // undefined, for the caller to report.
  auto rows = [&](int64_t dim, int64_t n, int64_t unit) {
    if (full.dim() <= dim || full.size(dim) != n * unit) return at::Tensor();
    const auto [b, e] = ShardRange(n, rank, tp);
    return full.narrow(dim, b * unit, (e - b) * unit);
  };
  auto ends = [&](const char* suffix) { return absl::EndsWith(name, suffix); };
  if (c.IsMla()) {
    // Multi-head latent attention: the up projections and o_proj split by
    // heads; the down projections, their norms and so the cached latent
    // are the same on every rank.
    const int64_t qk = c.qk_nope_head_dim + c.qk_rope_head_dim;
    if (ends(".self_attn.q_b_proj.weight") ||
        ends(".self_attn.q_proj.weight")) {
      return rows(0, nq, qk);
    }
    if (ends(".self_attn.kv_b_proj.weight")) {
      return rows(0, nq, c.qk_nope_head_dim + c.v_head_dim);
    }
    if (ends(".self_attn.o_proj.weight")) return rows(1, nq, c.v_head_dim);
  }
  if (ends(".self_attn.q_proj.weight") || ends(".self_attn.q_proj.bias")) {
    return rows(0, nq, d);
  }
  if (ends(".self_attn.k_proj.weight") || ends(".self_attn.k_proj.bias") ||
      ends(".self_attn.v_proj.weight") || ends(".self_attn.v_proj.bias")) {
    if (nkv >= tp) return rows(0, nkv, d);
    if (full.dim() < 1 || full.size(0) != nkv * d) return at::Tensor();
    return full.narrow(0, rank / (tp / nkv) * d, d);  // replicated KV head
  }
  if (ends(".self_attn.o_proj.weight")) return rows(1, nq, d);
  // MLPs: a dense layer's, each expert's (mlp.experts.N.*) and the shared
  // expert's (Qwen2-MoE mlp.shared_expert.*, DeepSeek mlp.shared_experts.*)
  // split along their own intermediate size.
  const int64_t inter = absl::StrContains(name, ".mlp.experts.")
                            ? c.moe_intermediate_size
                        : absl::StrContains(name, ".mlp.shared_expert.")
                            ? c.shared_expert_intermediate_size
                        : absl::StrContains(name, ".mlp.shared_experts.")
                            ? c.n_shared_experts * c.moe_intermediate_size
                            : c.intermediate_size;
  if (ends(".gate_proj.weight") || ends(".up_proj.weight")) {
    return rows(0, inter, 1);
  }
  if (ends(".down_proj.weight")) return rows(1, inter, 1);
  return full;
}

std::shared_ptr<models::CausalLM> ShardModel(const models::CausalLM& full,
                                             int rank, int tp) {
  const models::ModelConfig& c = full.config();
  auto shard = std::make_shared<models::CausalLM>(ShardConfig(c, tp));
  const auto src = full.named_parameters(/*recurse=*/true);
  torch::NoGradGuard no_grad;
  shard->to(src.begin()->value().scalar_type());
  for (auto& item : shard->named_parameters(/*recurse=*/true)) {
    const at::Tensor* p = src.find(item.key());
    CHECK(p != nullptr) << "ShardModel: no parameter '" << item.key() << "'";
    item.value().copy_(ShardOf(item.key(), *p, c, rank, tp));
  }
  return shard;
}

void InstallRowParallelHooks(models::CausalLM& shard,
                             std::shared_ptr<parallel::Communicator> group) {
  auto reduce = [group](const at::Tensor& y) {
    at::Tensor sum = y.contiguous();
    AllReduceSum(sum, *group);
    return sum;
  };
  for (const auto& layer : shard.model->layers) {
    models::Linear& o_proj =
        layer->self_attn ? *layer->self_attn->o_proj : *layer->mla_attn->o_proj;
    CHECK(!o_proj.bias.defined());
    o_proj.output_hook = reduce;
    if (layer->mlp) layer->mlp->down_proj->output_hook = reduce;
    if (layer->moe) layer->moe->output_hook = reduce;
    if (layer->deepseek_moe) layer->deepseek_moe->output_hook = reduce;
  }
}

void AllReduceSum(at::Tensor& x, parallel::Communicator& group) {
  if (x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf) {
    at::Tensor f = x.to(at::kFloat);
    AllReduceSum(f, group);
    x.copy_(f);
    return;
  }
  const absl::Status s = group.AllReduce(x);
  CHECK(s.ok()) << "tensor-parallel rollout, rank " << group.global_rank()
                << " of group '" << group.name() << "': " << s;
}

at::Tensor GatherVocabShards(const at::Tensor& local,
                             parallel::Communicator& group) {
  // Gloo writes the gathered rows from its own thread, outside the caller's
  // InferenceMode: normal (not inference) tensors in and out.
  c10::InferenceMode normal(false);
  absl::StatusOr<at::Tensor> all = group.AllGatherCat(local.t().contiguous());
  CHECK(all.ok()) << "tensor-parallel rollout, rank " << group.global_rank()
                  << " of group '" << group.name() << "': " << all.status();
  return all->t().contiguous();
}

}  // namespace verl::infer
