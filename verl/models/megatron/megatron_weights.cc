// File: verl/models/megatron/megatron_weights.cc
#include "verl/models/megatron/megatron_weights.h"

#include <ATen/ATen.h>
#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "verl/core/status.h"
#include "verl/models/hf_checkpoint.h"
#include "verl/models/megatron/mla_layer.h"
#include "verl/models/megatron/moe_layer.h"
#include "verl/parallel/comm_autograd.h"
#include "verl/parallel/megatron/mappings.h"
#include "verl/parallel/megatron/parallel_state.h"

namespace verl::models {
namespace {

namespace mg = parallel::megatron;

struct RankInfo {
  int rank = 0, size = 1;
};

// Rows [start, start + n) of the vocabulary-padded table: rows past the
// real vocabulary are zeros.
at::Tensor PaddedRows(const at::Tensor& full, int64_t start, int64_t n) {
  const int64_t real = std::clamp<int64_t>(full.size(0) - start, 0, n);
  at::Tensor rows = full.narrow(0, std::min(start, full.size(0)), real);
  if (real == n) return rows;
  std::vector<int64_t> pad_shape = full.sizes().vec();
  pad_shape[0] = n - real;
  return at::cat({rows, at::zeros(pad_shape, full.options())});
}

// This rank's rows of the fused per-query-group q/k/v tensor (weight
// [rows, H] or bias [rows]), built from the groups it overlaps only.
at::Tensor FusedQkvRows(const at::Tensor& q, const at::Tensor& k,
                        const at::Tensor& v, const TpHeadLayout& h,
                        RankInfo r) {
  const int64_t qpg = h.heads / h.groups, hn = h.head_dim;
  const int64_t block = (qpg + 2) * hn;
  const int64_t begin = r.rank * h.fused_per_rank;
  const int64_t end = begin + h.fused_per_rank;
  std::vector<at::Tensor> blocks;
  const int64_t first = begin / block, last = (end - 1) / block;
  for (int64_t g = first; g <= last; ++g) {
    blocks.push_back(
        at::cat({q.narrow(0, g * qpg * hn, qpg * hn), k.narrow(0, g * hn, hn),
                 v.narrow(0, g * hn, hn)}));
  }
  return at::cat(blocks).narrow(0, begin - first * block, h.fused_per_rank);
}

// Multi-head latent attention: Megatron's MLASelfAttention parameter (under
// decoder.layers.L.self_attention.), HF's (under model.layers.L.self_attn.)
// and the tp split (rows over heads, or -1: replicated). linear_proj is
// o_proj as for the other families.
struct MlaParam {
  const char* megatron;
  const char* hf;
  int split_dim;
};
constexpr MlaParam kMlaParams[] = {
    {"linear_q_down_proj.weight", "q_a_proj.weight", -1},
    {"q_layernorm.weight", "q_a_layernorm.weight", -1},
    {"linear_q_up_proj.weight", "q_b_proj.weight", 0},
    {"linear_q_proj.weight", "q_proj.weight", 0},
    {"linear_kv_down_proj.weight", "kv_a_proj_with_mqa.weight", -1},
    {"kv_layernorm.weight", "kv_a_layernorm.weight", -1},
    {"linear_kv_up_proj.weight", "kv_b_proj.weight", 0},
};

// The MLA entry of `rest` ("self_attention.<name>"), or null.
const MlaParam* FindMlaParam(const std::string& rest) {
  constexpr absl::string_view kAttn = "self_attention.";
  if (!absl::StartsWith(rest, kAttn)) return nullptr;
  for (const MlaParam& p : kMlaParams) {
    if (rest.substr(kAttn.size()) == p.megatron) return &p;
  }
  return nullptr;
}

class ShardBuilder {
 public:
  ShardBuilder(const MegatronGPTModel& model, const HfTensorSource& hf)
      : model_(model),
        hf_(hf),
        r_{model.tp()->rank(), model.tp()->size()},
        heads_(MakeTpHeadLayout(model.config(), r_.size)) {}

  absl::StatusOr<at::Tensor> Build(const std::string& name) {
    if (name == "embedding.word_embeddings.weight") {
      return VocabRows("model.embed_tokens.weight");
    }
    if (model_.config().is_value_model) {
      if (name == "output_layer.weight") return Get("score.weight");
      if (name == "output_layer.bias") return Get("score.bias");
    }
    if (name == "output_layer.weight") return VocabRows("lm_head.weight");
    if (name == "decoder.final_layernorm.weight")
      return Get("model.norm.weight");
    constexpr absl::string_view kLayers = "decoder.layers.";
    if (!absl::StartsWith(name, kLayers)) return Unknown(name);
    std::pair<std::string, std::string> parts =
        absl::StrSplit(name.substr(kLayers.size()), absl::MaxSplits('.', 1));
    int64_t layer = 0;
    if (!absl::SimpleAtoi(parts.first, &layer)) return Unknown(name);
    const std::string hf = absl::StrCat("model.layers.", layer, ".");
    const std::string& rest = parts.second;
    if (rest == "input_layernorm.weight") {
      return Get(hf + "input_layernorm.weight");
    }
    if (rest == "pre_mlp_layernorm.weight") {
      return Get(hf + "post_attention_layernorm.weight");
    }
    if (const MlaParam* p = FindMlaParam(rest);
        p != nullptr && model_.config().IsMla()) {
      const std::string name = hf + "self_attn." + p->hf;
      return p->split_dim < 0 ? Get(name) : Split(name, p->split_dim);
    }
    if (rest == "self_attention.q_layernorm.weight") {
      return Get(hf + "self_attn.q_norm.weight");
    }
    if (rest == "self_attention.k_layernorm.weight") {
      return Get(hf + "self_attn.k_norm.weight");
    }
    if (rest == "self_attention.linear_qkv.weight" ||
        rest == "self_attention.linear_qkv.bias") {
      const std::string kind =
          absl::EndsWith(rest, "weight") ? "weight" : "bias";
      VERL_ASSIGN_OR_RETURN(at::Tensor q, Get(hf + "self_attn.q_proj." + kind));
      VERL_ASSIGN_OR_RETURN(at::Tensor k, Get(hf + "self_attn.k_proj." + kind));
      VERL_ASSIGN_OR_RETURN(at::Tensor v, Get(hf + "self_attn.v_proj." + kind));
      return FusedQkvRows(q, k, v, heads_, r_);
    }
    if (rest == "self_attention.linear_proj.weight") {
      return Split(hf + "self_attn.o_proj.weight", 1);
    }
    if (rest == "mlp.linear_fc1.weight") {
      VERL_ASSIGN_OR_RETURN(at::Tensor gate,
                            Split(hf + "mlp.gate_proj.weight", 0));
      VERL_ASSIGN_OR_RETURN(at::Tensor up, Split(hf + "mlp.up_proj.weight", 0));
      return at::cat({gate, up});
    }
    if (rest == "mlp.linear_fc2.weight") {
      return Split(hf + "mlp.down_proj.weight", 1);
    }
    if (absl::StartsWith(rest, "mlp.")) {
      return BuildMoe(layer, rest.substr(4), hf + "mlp.", name);
    }
    return Unknown(name);
  }

 private:
  absl::StatusOr<at::Tensor> Get(const std::string& hf_name) {
    return hf_(hf_name);
  }

  // MoE layer parameters (moe_layer.h): the router, this rank's experts
  // (local i = global first_expert + i), the shared experts (tp-sharded).
  absl::StatusOr<at::Tensor> BuildMoe(int64_t layer, const std::string& rest,
                                      const std::string& hf,
                                      const std::string& name) {
    std::shared_ptr<TpTransformerLayer> local = model_.LocalLayer(layer);
    if (!local || !local->moe) return Unknown(name);
    const MegatronMoeLayer& moe = *local->moe;
    if (rest == "router.weight") return Get(hf + "gate.weight");
    if (rest == "router.expert_bias") {
      return Get(hf + "gate.e_score_correction_bias");
    }
    constexpr absl::string_view kLocal = "experts.local_experts.";
    if (absl::StartsWith(rest, kLocal)) {
      std::pair<std::string, std::string> parts =
          absl::StrSplit(rest.substr(kLocal.size()), absl::MaxSplits('.', 1));
      int64_t i = 0;
      if (!absl::SimpleAtoi(parts.first, &i)) return Unknown(name);
      const std::string e =
          absl::StrCat(hf, "experts.", moe.first_expert + i, ".");
      // This rank's etp shard (fc1 rows [gate_r; up_r], fc2 columns).
      const RankInfo etp{model_.etp()->rank(), model_.etp()->size()};
      if (parts.second == "linear_fc1.weight") {
        VERL_ASSIGN_OR_RETURN(at::Tensor gate,
                              Split(e + "gate_proj.weight", 0, etp));
        VERL_ASSIGN_OR_RETURN(at::Tensor up,
                              Split(e + "up_proj.weight", 0, etp));
        return at::cat({gate, up});
      }
      if (parts.second == "linear_fc2.weight") {
        return Split(e + "down_proj.weight", 1, etp);
      }
      return Unknown(name);
    }
    const std::string shared =
        hf + (moe.sigmoid ? "shared_experts." : "shared_expert.");
    if (rest == "shared_experts.linear_fc1.weight") {
      VERL_ASSIGN_OR_RETURN(at::Tensor gate,
                            Split(shared + "gate_proj.weight", 0));
      VERL_ASSIGN_OR_RETURN(at::Tensor up, Split(shared + "up_proj.weight", 0));
      return at::cat({gate, up});
    }
    if (rest == "shared_experts.linear_fc2.weight") {
      return Split(shared + "down_proj.weight", 1);
    }
    if (rest == "shared_experts.gate_weight") {
      return Get(hf + "shared_expert_gate.weight");
    }
    return Unknown(name);
  }

  // This rank's shard along `dim` over tp (or the group `r` describes).
  absl::StatusOr<at::Tensor> Split(const std::string& hf_name, int64_t dim) {
    return Split(hf_name, dim, r_);
  }
  absl::StatusOr<at::Tensor> Split(const std::string& hf_name, int64_t dim,
                                   RankInfo r) {
    VERL_ASSIGN_OR_RETURN(at::Tensor full, Get(hf_name));
    return mg::ShardOf(full, dim, r.rank, r.size, hf_name.c_str());
  }

  absl::StatusOr<at::Tensor> VocabRows(const std::string& hf_name) {
    VERL_ASSIGN_OR_RETURN(at::Tensor full, Get(hf_name));
    const int64_t per = model_.padded_vocab_size() / r_.size;
    return PaddedRows(full, r_.rank * per, per);
  }

  static absl::Status Unknown(const std::string& name) {
    return absl::NotFoundError(
        absl::StrCat("megatron parameter '", name, "' has no HF mapping"));
  }

  const MegatronGPTModel& model_;
  const HfTensorSource& hf_;
  RankInfo r_;
  TpHeadLayout heads_;
};

// Full tensor from every rank's shard along `dim` (no autograd).
at::Tensor Gathered(const at::Tensor& shard, int64_t dim,
                    parallel::Communicator& tp) {
  return mg::AllGatherDim(shard.detach(), dim, tp);
}

// Splits the full fused q/k/v tensor (rows in per-query-group order) into
// HF's q_proj / k_proj / v_proj tensors.
void UnfuseQkv(const at::Tensor& fused, const TpHeadLayout& h,
               const std::string& prefix, const std::string& kind,
               std::map<std::string, at::Tensor>* out) {
  const int64_t qpg = h.heads / h.groups, hn = h.head_dim;
  std::vector<int64_t> shape = {h.groups, qpg + 2, hn};
  for (int64_t d = 1; d < fused.dim(); ++d) shape.push_back(fused.size(d));
  at::Tensor g = fused.reshape(shape);
  auto flat = [&](const at::Tensor& t) {
    std::vector<int64_t> s = {-1};
    for (int64_t d = 1; d < fused.dim(); ++d) s.push_back(fused.size(d));
    return t.reshape(s).contiguous();
  };
  (*out)[prefix + "q_proj." + kind] = flat(g.narrow(1, 0, qpg));
  (*out)[prefix + "k_proj." + kind] = flat(g.select(1, qpg));
  (*out)[prefix + "v_proj." + kind] = flat(g.select(1, qpg + 1));
}

// The tensor gathered for `param`: the parameter's data, or what `of`
// returns for it (same shape, e.g. an AdamW moment).
at::Tensor Of(const ParamTensorFn& of, const at::Tensor& param) {
  return of ? of(param).detach() : param.detach();
}

// A tp-sharded SwiGLU MLP (fc1 shards are [gate_r; up_r]: both halves
// gathered separately) -> HF's gate/up/down_proj under `hf`.
void GatherMlp(const TpMlp& mlp, const std::string& hf, const ParamTensorFn& of,
               parallel::Communicator& tp,
               std::map<std::string, at::Tensor>* out) {
  std::vector<at::Tensor> gate_up = Of(of, mlp.linear_fc1->weight).chunk(2, 0);
  (*out)[hf + "gate_proj.weight"] = Gathered(gate_up[0], 0, tp);
  (*out)[hf + "up_proj.weight"] = Gathered(gate_up[1], 0, tp);
  (*out)[hf + "down_proj.weight"] =
      Gathered(Of(of, mlp.linear_fc2->weight), 1, tp);
}

// An MoE layer: the router (replicated), every expert (each rank's stacked
// local experts' shards all-gathered over etp — gate and up halves
// separately — then over ep), the shared experts (over tp).
void GatherMoe(const MegatronGPTModel& model, const MegatronMoeLayer& moe,
               const std::string& hf, const ParamTensorFn& of,
               std::map<std::string, at::Tensor>* out) {
  (*out)[hf + "gate.weight"] = Of(of, moe.router->weight).clone();
  if (moe.router->expert_bias.defined()) {
    (*out)[hf + "gate.e_score_correction_bias"] =
        Of(of, moe.router->expert_bias).clone();
  }
  std::vector<at::Tensor> gate, up, fc2;
  for (const auto& e : moe.local_experts) {
    std::vector<at::Tensor> gate_up = Of(of, e->linear_fc1->weight).chunk(2, 0);
    gate.push_back(gate_up[0]);
    up.push_back(gate_up[1]);
    fc2.push_back(Of(of, e->linear_fc2->weight));
  }
  parallel::Communicator& etp = *model.etp();
  parallel::Communicator& ep = *model.ep();
  at::Tensor all_gate = Gathered(Gathered(at::stack(gate), 1, etp), 0, ep);
  at::Tensor all_up = Gathered(Gathered(at::stack(up), 1, etp), 0, ep);
  at::Tensor all_fc2 = Gathered(Gathered(at::stack(fc2), 2, etp), 0, ep);
  for (int64_t g = 0; g < all_gate.size(0); ++g) {
    const std::string e = absl::StrCat(hf, "experts.", g, ".");
    (*out)[e + "gate_proj.weight"] = all_gate[g].contiguous();
    (*out)[e + "up_proj.weight"] = all_up[g].contiguous();
    (*out)[e + "down_proj.weight"] = all_fc2[g].contiguous();
  }
  if (moe.shared_experts) {
    GatherMlp(*moe.shared_experts,
              hf + (moe.sigmoid ? "shared_experts." : "shared_expert."), of,
              *model.tp(), out);
  }
  if (moe.shared_gate_weight.defined()) {
    (*out)[hf + "shared_expert_gate.weight"] =
        Of(of, moe.shared_gate_weight).clone();
  }
}

// Fused q/k/v attention -> HF's q/k/v_proj (+ biases), q/k norms, o_proj
// under `hf` (model.layers.L.self_attn.).
void GatherAttention(const TpSelfAttention& attn, const std::string& hf,
                     const ParamTensorFn& of, parallel::Communicator& tp,
                     std::map<std::string, at::Tensor>* out) {
  UnfuseQkv(Gathered(Of(of, attn.linear_qkv->weight), 0, tp), attn.heads, hf,
            "weight", out);
  if (attn.linear_qkv->bias.defined()) {
    UnfuseQkv(Gathered(Of(of, attn.linear_qkv->bias), 0, tp), attn.heads, hf,
              "bias", out);
  }
  if (attn.q_layernorm) {
    (*out)[hf + "q_norm.weight"] = Of(of, attn.q_layernorm->weight).clone();
    (*out)[hf + "k_norm.weight"] = Of(of, attn.k_layernorm->weight).clone();
  }
  (*out)[hf + "o_proj.weight"] =
      Gathered(Of(of, attn.linear_proj->weight), 1, tp);
}

void GatherLayer(const MegatronGPTModel& model, int64_t l,
                 const ParamTensorFn& of,
                 std::map<std::string, at::Tensor>* out) {
  parallel::Communicator& tp = *model.tp();
  std::shared_ptr<TpTransformerLayer> local = model.LocalLayer(l);
  CHECK(local != nullptr) << "decoder layer " << l
                          << " is on another pipeline stage";
  const TpTransformerLayer& layer = *local;
  const std::string hf = absl::StrCat("model.layers.", l, ".");
  (*out)[hf + "input_layernorm.weight"] =
      Of(of, layer.input_layernorm->weight).clone();
  (*out)[hf + "post_attention_layernorm.weight"] =
      Of(of, layer.pre_mlp_layernorm->weight).clone();
  if (layer.mla_attention) {
    for (const auto& item : layer.mla_attention->named_parameters()) {
      const MlaParam* p = FindMlaParam("self_attention." + item.key());
      if (p == nullptr) continue;  // linear_proj, below
      const at::Tensor t = Of(of, item.value());
      (*out)[hf + "self_attn." + p->hf] =
          p->split_dim < 0 ? t.clone() : Gathered(t, p->split_dim, tp);
    }
    (*out)[hf + "self_attn.o_proj.weight"] =
        Gathered(Of(of, layer.mla_attention->linear_proj->weight), 1, tp);
  } else {
    GatherAttention(*layer.self_attention, hf + "self_attn.", of, tp, out);
  }
  if (layer.moe) {
    GatherMoe(model, *layer.moe, hf + "mlp.", of, out);
  } else {
    GatherMlp(*layer.mlp, hf + "mlp.", of, tp, out);
  }
}

void GatherRoot(const MegatronGPTModel& model, const ParamTensorFn& of,
                std::map<std::string, at::Tensor>* out) {
  parallel::Communicator& tp = *model.tp();
  const int64_t vocab = model.config().vocab_size;
  if (model.is_first_stage()) {
    (*out)["model.embed_tokens.weight"] =
        Gathered(Of(of, model.word_embeddings->weight), 0, tp)
            .narrow(0, 0, vocab);
  }
  if (model.final_layernorm) {
    (*out)["model.norm.weight"] = Of(of, model.final_layernorm->weight).clone();
  }
  if (model.value_head) {
    (*out)["score.weight"] = Of(of, model.value_head->weight).clone();
    (*out)["score.bias"] = Of(of, model.value_head->bias).clone();
  }
  if (model.output_layer) {
    (*out)["lm_head.weight"] =
        Gathered(Of(of, model.output_layer->weight), 0, tp).narrow(0, 0, vocab);
  }
}

}  // namespace

std::map<std::string, at::Tensor> GatherHfTensors(const MegatronGPTModel& model,
                                                  int64_t layer,
                                                  const ParamTensorFn& of) {
  at::NoGradGuard no_grad;
  std::map<std::string, at::Tensor> out;
  if (layer == kMegatronRootStage) {
    GatherRoot(model, of, &out);
  } else {
    GatherLayer(model, layer, of, &out);
  }
  return out;
}

namespace {

// Copies `root`'s named tensors (names, dtypes, shapes unknown elsewhere) to
// every member of `group`.
void BroadcastNamedTensors(parallel::Communicator& group, int root,
                           std::map<std::string, at::Tensor>* tensors) {
  // Header: per tensor "name dtype ndim d0 d1 ...\n".
  std::string header;
  if (group.rank() == root) {
    for (const auto& [name, t] : *tensors) {
      absl::StrAppend(&header, name, " ", static_cast<int>(t.scalar_type()),
                      " ", t.dim());
      for (int64_t d : t.sizes()) absl::StrAppend(&header, " ", d);
      absl::StrAppend(&header, "\n");
    }
  }
  at::Tensor size =
      at::full({1}, static_cast<int64_t>(header.size()), at::kLong);
  parallel::DieOnCommError(group.Broadcast(size, root), group,
                           "weight broadcast over pp");
  at::Tensor text = at::zeros({size.item<int64_t>()}, at::kByte);
  if (group.rank() == root) {
    std::memcpy(text.data_ptr(), header.data(), header.size());
  }
  parallel::DieOnCommError(group.Broadcast(text, root), group,
                           "weight broadcast over pp");
  if (group.rank() != root) {
    header.assign(static_cast<const char*>(text.data_ptr()), text.numel());
    for (absl::string_view line :
         absl::StrSplit(header, '\n', absl::SkipEmpty())) {
      std::vector<std::string> f = absl::StrSplit(line, ' ');
      int dtype = 0, ndim = 0;
      CHECK(f.size() >= 3 && absl::SimpleAtoi(f[1], &dtype) &&
            absl::SimpleAtoi(f[2], &ndim) &&
            static_cast<int>(f.size()) == 3 + ndim);
      std::vector<int64_t> shape(ndim);
      for (int d = 0; d < ndim; ++d)
        CHECK(absl::SimpleAtoi(f[3 + d], &shape[d]));
      (*tensors)[f[0]] = at::empty(
          shape, at::TensorOptions().dtype(static_cast<at::ScalarType>(dtype)));
    }
  }
  for (auto& [name, t] : *tensors) {
    t = t.contiguous();
    parallel::DieOnCommError(group.Broadcast(t, root), group,
                             "weight broadcast over pp of " + name);
  }
}

}  // namespace

std::map<std::string, at::Tensor> GatherHfTensorsAllStages(
    const MegatronGPTModel& model, int64_t layer) {
  parallel::Communicator& pp =
      *model.mpu()->group(parallel::megatron::MpuGroup::kPp);
  if (pp.size() == 1) return GatherHfTensors(model, layer);
  std::vector<int> owners = {0, pp.size() - 1};  // root: first and last
  if (layer != kMegatronRootStage) owners = {model.StageOfLayer(layer)};
  std::map<std::string, at::Tensor> out;
  for (int owner : owners) {
    std::map<std::string, at::Tensor> part;
    if (pp.rank() == owner) part = GatherHfTensors(model, layer);
    BroadcastNamedTensors(pp, owner, &part);
    out.merge(part);
  }
  return out;
}

HfTensorSource HfSourceFromMap(const std::map<std::string, at::Tensor>& map) {
  return [&map](const std::string& name) -> absl::StatusOr<at::Tensor> {
    auto it = map.find(name);
    if (it == map.end()) {
      return absl::NotFoundError(
          absl::StrCat("HF tensor '", name, "' not found"));
    }
    return it->second;
  };
}

absl::StatusOr<at::Tensor> MegatronShardFromHf(const MegatronGPTModel& model,
                                               const std::string& name,
                                               const HfTensorSource& hf) {
  return ShardBuilder(model, hf).Build(name);
}

absl::Status LoadMegatronFromHf(const HfTensorSource& hf,
                                MegatronGPTModel* model) {
  ShardBuilder builder(*model, hf);
  at::NoGradGuard no_grad;
  for (const auto& item : model->named_parameters(/*recurse=*/true)) {
    absl::StatusOr<at::Tensor> shard = builder.Build(item.key());
    if (!shard.ok()) {
      return absl::Status(shard.status().code(),
                          absl::StrCat("loading megatron '", item.key(),
                                       "': ", shard.status().message()));
    }
    at::Tensor param = item.value();
    if (shard->sizes() != param.sizes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "loading megatron '", item.key(), "': shard shape [",
          absl::StrJoin(shard->sizes(), ", "), "] but the parameter is [",
          absl::StrJoin(param.sizes(), ", "), "]"));
    }
    param.copy_(*shard);
  }
  return absl::OkStatus();
}

absl::Status LoadMegatronFromHfFolder(const std::string& dir,
                                      MegatronGPTModel* model) {
  VERL_ASSIGN_OR_RETURN(HfCheckpoint ckpt, LoadHfCheckpoint(dir));
  return LoadMegatronFromHf(HfSourceFromMap(ckpt.tensors), model);
}

// ---- Global (tp = 1) tensors -----------------------------------------------

namespace {

// "decoder.layers.<L>.<rest>" -> (L, rest); false for other names.
bool SplitLayerName(const std::string& name, int64_t* layer,
                    std::string* rest) {
  constexpr absl::string_view kLayers = "decoder.layers.";
  if (!absl::StartsWith(name, kLayers)) return false;
  std::pair<std::string, std::string> parts =
      absl::StrSplit(name.substr(kLayers.size()), absl::MaxSplits('.', 1));
  *rest = parts.second;
  return absl::SimpleAtoi(parts.first, layer);
}

}  // namespace

std::vector<int64_t> MegatronParamSlice::BoxSizes() const {
  std::vector<int64_t> sizes = view_shape;
  if (rows >= 0 && !sizes.empty()) sizes[0] = rows;
  return sizes;
}

at::Tensor MegatronParamSlice::Box(const at::Tensor& local) const {
  at::Tensor v = local.view(view_shape);
  return rows >= 0 ? v.narrow(0, 0, rows) : v;
}

absl::StatusOr<MegatronParamSlice> MegatronSliceOf(
    const MegatronGPTModel& model, const std::string& name) {
  const auto params = model.named_parameters(/*recurse=*/true);
  const at::Tensor* p = params.find(name);
  if (p == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("megatron model has no parameter '", name, "'"));
  }
  const int64_t tp = model.tp()->size(), r = model.tp()->rank();
  MegatronParamSlice s;
  s.key = name;
  s.view_shape = p->sizes().vec();
  s.global_shape = s.view_shape;
  s.offsets.assign(s.view_shape.size(), 0);
  auto split = [&](size_t dim) {
    s.global_shape[dim] *= tp;
    s.offsets[dim] = r * s.view_shape[dim];
  };
  const bool value = model.config().is_value_model;
  if (name == "embedding.word_embeddings.weight" ||
      (name == "output_layer.weight" && !value)) {
    const int64_t vocab = model.config().vocab_size, per = s.view_shape[0];
    s.global_shape[0] = vocab;
    s.offsets[0] = std::min(r * per, vocab);
    s.rows = std::clamp<int64_t>(vocab - r * per, 0, per);
    return s;
  }
  int64_t layer = 0;
  std::string rest;
  const bool in_layer = SplitLayerName(name, &layer, &rest);
  if (absl::EndsWith(name, "layernorm.weight") ||
      (value && absl::StartsWith(name, "output_layer.")) ||
      (in_layer &&
       (rest == "self_attention.linear_proj.bias" ||
        rest == "mlp.linear_fc2.bias" || rest == "mlp.router.weight" ||
        rest == "mlp.router.expert_bias" ||
        rest == "mlp.shared_experts.gate_weight"))) {
    s.replicated = true;
    return s;
  }
  // The MoE layer's shared experts: as the dense MLP.
  if (in_layer && absl::StartsWith(rest, "mlp.shared_experts.")) {
    rest = "mlp." + rest.substr(std::string("mlp.shared_experts.").size());
  }
  constexpr absl::string_view kLocal = "mlp.experts.local_experts.";
  if (in_layer && absl::StartsWith(rest, kLocal)) {
    // A local expert's etp shard, keyed by its global index.
    std::pair<std::string, std::string> parts =
        absl::StrSplit(rest.substr(kLocal.size()), absl::MaxSplits('.', 1));
    int64_t i = 0;
    std::shared_ptr<TpTransformerLayer> local = model.LocalLayer(layer);
    if (!absl::SimpleAtoi(parts.first, &i) || !local || !local->moe) {
      return absl::NotFoundError(
          absl::StrCat("megatron parameter '", name, "' is not an expert"));
    }
    s.key = absl::StrCat("decoder.layers.", layer, ".", kLocal,
                         local->moe->first_expert + i, ".", parts.second);
    s.expert = true;
    const int64_t etp = model.etp()->size(), er = model.etp()->rank();
    if (parts.second == "linear_fc1.weight") {
      const int64_t f = s.view_shape[0] / 2;
      s.view_shape = {2, f, s.view_shape[1]};
      s.global_shape = {2, f * etp, s.view_shape[2]};
      s.offsets = {0, er * f, 0};
      return s;
    }
    if (parts.second == "linear_fc2.weight") {
      s.global_shape[1] *= etp;
      s.offsets[1] = er * s.view_shape[1];
      return s;
    }
  }
  if (in_layer && (rest == "self_attention.linear_qkv.weight" ||
                   rest == "self_attention.linear_qkv.bias")) {
    split(0);
    return s;
  }
  if (const MlaParam* mla = in_layer ? FindMlaParam(rest) : nullptr) {
    if (mla->split_dim < 0) {
      s.replicated = true;
    } else {
      split(mla->split_dim);
    }
    return s;
  }
  if (in_layer && (rest == "self_attention.linear_proj.weight" ||
                   rest == "mlp.linear_fc2.weight")) {
    split(1);
    return s;
  }
  if (in_layer && rest == "mlp.linear_fc1.weight") {
    const int64_t f = s.view_shape[0] / 2;
    s.view_shape = {2, f, s.view_shape[1]};
    s.global_shape = {2, f * tp, s.view_shape[2]};
    s.offsets = {0, r * f, 0};
    return s;
  }
  return absl::UnimplementedError(absl::StrCat(
      "megatron parameter '", name, "' has no dist_ckpt sharding rule"));
}

absl::StatusOr<std::map<std::string, at::Tensor>> MegatronFullToHf(
    const ModelConfig& config, const std::string& name,
    const at::Tensor& full) {
  std::map<std::string, at::Tensor> out;
  if (name == "embedding.word_embeddings.weight") {
    out["model.embed_tokens.weight"] = full;
  } else if (name == "decoder.final_layernorm.weight") {
    out["model.norm.weight"] = full;
  } else if (name == "output_layer.weight") {
    out[config.is_value_model ? "score.weight" : "lm_head.weight"] = full;
  } else if (name == "output_layer.bias" && config.is_value_model) {
    out["score.bias"] = full;
  }
  if (!out.empty()) return out;
  int64_t layer = 0;
  std::string rest;
  if (!SplitLayerName(name, &layer, &rest)) {
    return absl::NotFoundError(
        absl::StrCat("megatron tensor '", name, "' has no HF mapping"));
  }
  const std::string hf = absl::StrCat("model.layers.", layer, ".");
  if (const MlaParam* p = FindMlaParam(rest); p != nullptr && config.IsMla()) {
    out[hf + "self_attn." + p->hf] = full;
    return out;
  }
  // MoE names: the shared experts as a dense MLP under their HF prefix, the
  // experts by global index (megatron_weights.h).
  const std::string shared = config.scoring_func == "sigmoid"
                                 ? "mlp.shared_experts."
                                 : "mlp.shared_expert.";
  constexpr absl::string_view kLocal = "mlp.experts.local_experts.";
  std::string mlp = "mlp.";  // HF prefix of linear_fc1 / linear_fc2
  if (absl::StartsWith(rest, "mlp.shared_experts.linear_fc")) {
    mlp = shared;
    rest = "mlp." + rest.substr(std::string("mlp.shared_experts.").size());
  } else if (absl::StartsWith(rest, kLocal)) {
    std::pair<std::string, std::string> parts =
        absl::StrSplit(rest.substr(kLocal.size()), absl::MaxSplits('.', 1));
    int64_t g = 0;
    if (absl::SimpleAtoi(parts.first, &g) && g >= 0 && g < config.num_experts) {
      mlp = absl::StrCat("mlp.experts.", g, ".");
      rest = "mlp." + parts.second;
    }
  }
  static const std::map<std::string, std::string> kMoe = {
      {"mlp.router.weight", "mlp.gate.weight"},
      {"mlp.router.expert_bias", "mlp.gate.e_score_correction_bias"},
      {"mlp.shared_experts.gate_weight", "mlp.shared_expert_gate.weight"},
  };
  if (auto it = kMoe.find(rest); it != kMoe.end()) {
    out[hf + it->second] = full;
    return out;
  }
  static const std::map<std::string, std::string> kSame = {
      {"input_layernorm.weight", "input_layernorm.weight"},
      {"pre_mlp_layernorm.weight", "post_attention_layernorm.weight"},
      {"self_attention.q_layernorm.weight", "self_attn.q_norm.weight"},
      {"self_attention.k_layernorm.weight", "self_attn.k_norm.weight"},
      {"self_attention.linear_proj.weight", "self_attn.o_proj.weight"},
      {"self_attention.linear_proj.bias", "self_attn.o_proj.bias"},
  };
  if (rest == "mlp.linear_fc2.weight" || rest == "mlp.linear_fc2.bias") {
    out[hf + mlp + "down_proj." +
        (absl::EndsWith(rest, "weight") ? "weight" : "bias")] = full;
  } else if (auto it = kSame.find(rest); it != kSame.end()) {
    out[hf + it->second] = full;
  } else if (rest == "self_attention.linear_qkv.weight" ||
             rest == "self_attention.linear_qkv.bias") {
    const TpHeadLayout h = MakeTpHeadLayout(config, 1);
    if (full.dim() < 1 ||
        full.size(0) != h.groups * (h.heads / h.groups + 2) * h.head_dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "megatron tensor '", name, "' has ", full.dim() ? full.size(0) : 0,
          " rows; config.json's heads give ",
          h.groups * (h.heads / h.groups + 2) * h.head_dim));
    }
    UnfuseQkv(full, h, hf + "self_attn.",
              absl::EndsWith(rest, "weight") ? "weight" : "bias", &out);
  } else if (rest == "mlp.linear_fc1.weight") {
    if (full.dim() != 3 || full.size(0) != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("megatron tensor '", name,
                       "' must be [2, ffn, hidden] ([gate; up])"));
    }
    out[hf + mlp + "gate_proj.weight"] = full.select(0, 0);
    out[hf + mlp + "up_proj.weight"] = full.select(0, 1);
  } else {
    return absl::NotFoundError(
        absl::StrCat("megatron tensor '", name, "' has no HF mapping"));
  }
  return out;
}

}  // namespace verl::models
