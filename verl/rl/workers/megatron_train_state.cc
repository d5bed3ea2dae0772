// File: verl/rl/workers/megatron_train_state.cc
#include "verl/rl/workers/megatron_train_state.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "verl/ckpt/dist_ckpt.h"
#include "verl/core/file_util.h"
#include "verl/core/status.h"
#include "verl/models/megatron/megatron_weights.h"
#include "verl/parallel/megatron/tp_layers.h"
#include "verl/rl/workers/optimizer_offload.h"

namespace verl::rl {

namespace mg = parallel::megatron;

// A run of parameters in one flat fp32 buffer: [offset, offset + numel)
// each, padded to a multiple of the group the distributed optimizer splits
// it over; that group's rank r owns [begin, begin + length). The dense
// parameters form one (over dp), a stage's local experts another (over edp:
// Megatron's expert-parallel buffers), as their replicas differ.
struct MegatronTrainState::Bucket {
  bool expert = false;
  std::vector<size_t> members;  // positions in Flat::params, in order
  int64_t total = 0, padded = 0, begin = 0, length = 0;
  mg::CommPtr group;  // dp, or edp for the experts
  // Distributed optimizer: the fp32 master copy of this rank's range (what
  // AdamW steps) and, per element of it, 1 where the element counts toward
  // the global grad norm on this rank (see the header), else 0.
  at::Tensor master, norm_weight;
  // The dtype the updated range is all-gathered in (the members' when they
  // share one, else fp32).
  at::ScalarType gather_dtype = at::kFloat;
};

struct MegatronTrainState::Flat {
  std::vector<std::string> names;
  std::vector<at::Tensor> params;
  std::vector<int64_t> offsets;                    // in the parameter's bucket
  std::map<const c10::TensorImpl*, size_t> index;  // param -> position
  std::vector<Bucket> buckets;  // dense, then the experts (if any)
  bool distributed = false;
  // Without it: what AdamW steps per parameter (a parameter's fp32 master
  // copy when the parameter is half, else the parameter itself), and which
  // parameters count toward the grad norm on this rank.
  std::vector<at::Tensor> masters;
  std::vector<bool> counted;
  // Which parameters are half (bf16 / fp16: fp32 gradient buffers and
  // masters); the parameters' dtype when they share one, else fp32.
  std::vector<bool> half;
  bool any_half = false;
  at::ScalarType gather_dtype = at::kFloat;
  // MoE: which of `params` are local experts (their gradients are summed
  // over the expert-data-parallel group, not averaged over dp: by
  // FinalizeGrads, or the distributed optimizer's reduce-scatter).
  std::vector<bool> expert;
  bool has_experts = false;
};

namespace {

// Parameters split over tp (they count toward the grad norm on every tp
// rank); all others are replicated.
std::set<const c10::TensorImpl*> TensorParallelParams(
    const torch::nn::Module& model) {
  std::set<const c10::TensorImpl*> out;
  auto add = [&](const at::Tensor& t) {
    if (t.defined()) out.insert(t.unsafeGetTensorImpl());
  };
  for (const auto& item : model.named_modules()) {
    const torch::nn::Module* m = item.value().get();
    if (const auto* c = dynamic_cast<const mg::ColumnParallelLinear*>(m)) {
      add(c->weight);
      add(c->bias);
    } else if (const auto* r = dynamic_cast<const mg::RowParallelLinear*>(m)) {
      add(r->weight);  // its bias is replicated
    } else if (const auto* e =
                   dynamic_cast<const mg::VocabParallelEmbedding*>(m)) {
      add(e->weight);
    }
  }
  return out;
}

// `tensors` (each [shape of param i]) flattened into one fp32 buffer of
// `size` elements (zeros past the end).
at::Tensor Flatten(const std::vector<at::Tensor>& tensors, int64_t size) {
  std::vector<at::Tensor> parts;
  int64_t n = 0;
  for (const at::Tensor& t : tensors) {
    parts.push_back(t.detach().to(at::kFloat).reshape(-1));
    n += t.numel();
  }
  if (size > n) parts.push_back(at::zeros({size - n}, at::kFloat));
  return at::cat(parts);
}

// The members' tensors of a bucket (`tensors` has one per parameter),
// flattened into its `size` fp32 elements.
at::Tensor Flatten(const std::vector<at::Tensor>& tensors,
                   const std::vector<size_t>& members, int64_t size) {
  std::vector<at::Tensor> picked;
  for (size_t i : members) picked.push_back(tensors[i]);
  return Flatten(picked, size);
}

// The [offset, offset + numel) slice of a flat buffer, shaped as `like`.
at::Tensor Slot(const at::Tensor& flat, int64_t offset,
                const at::Tensor& like) {
  return flat.narrow(0, offset, like.numel()).view(like.sizes());
}

std::vector<at::Tensor> Grads(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : params) {
    out.push_back(p.grad().defined() ? p.grad() : at::zeros_like(p));
  }
  return out;
}

// The world-size HF-layout shards (SaveShard / LoadShard, the format of
// earlier versions) are not built for pipeline stages.
absl::Status RefusePipelineCheckpoint(const mg::ParallelState& mpu) {
  if (mpu.pp_size() == 1) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(
      "megatron.pipeline_model_parallel_size=", mpu.pp_size(),
      ": the world-size HF-layout checkpoint shards are not built for "
      "pipeline stages (dist_ckpt/ is)"));
}

// Sum over `group` of a double (one all-reduce).
absl::StatusOr<double> SumOver(parallel::Communicator& group, double x) {
  at::Tensor t = at::full({1}, x, at::kDouble);
  VERL_RETURN_IF_ERROR(group.AllReduce(t, parallel::ReduceOp::kSum));
  return t.item<double>();
}

// "torch.<dtype>" for transformer_config.json's params_dtype.
const char* TorchDtypeName(at::ScalarType t) {
  switch (t) {
    case at::kBFloat16:
      return "torch.bfloat16";
    case at::kHalf:
      return "torch.float16";
    default:
      return "torch.float32";
  }
}

// An fp32 gradient buffer (Megatron's main_grad) for a half parameter:
// autograd accumulates into a defined .grad in place (fp32 += half).
void EnsureFp32Grad(at::Tensor& p) {
  const at::Tensor& g = p.grad();
  if (g.defined() && g.scalar_type() == at::kFloat) {
    g.zero_();
    return;
  }
  p.mutable_grad() = at::zeros(p.sizes(), p.options().dtype(at::kFloat));
}

}  // namespace

void CastMegatronParameters(torch::nn::Module& model, at::ScalarType dtype) {
  at::NoGradGuard no_grad;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    at::Tensor p = item.value();
    // The MoE router's expert bias stays fp32 (as Megatron's buffer): its
    // aux-loss-free updates (1e-3 steps) would vanish in bf16.
    if (absl::EndsWith(item.key(), ".expert_bias")) continue;
    if (p.is_floating_point() && p.scalar_type() != dtype) {
      p.set_data(p.detach().to(dtype));
    }
  }
}

void MoveModuleParameters(torch::nn::Module& model, parallel::MemoryLocation to,
                          c10::Device device) {
  at::NoGradGuard no_grad;
  for (at::Tensor& p : model.parameters(/*recurse=*/true)) {
    p.set_data(to == parallel::MemoryLocation::kHost
                   ? parallel::HostCopy(p.detach())
                   : parallel::DeviceCopy(p.detach(), device));
  }
}

std::vector<at::Tensor> MegatronTrainState::BucketMasters(const Flat& f) {
  if (!f.distributed) return f.masters;
  std::vector<at::Tensor> out;
  for (const Bucket& b : f.buckets) out.push_back(b.master);
  return out;
}

MegatronTrainState::MegatronTrainState(
    std::shared_ptr<models::MegatronGPTModel> model,
    std::shared_ptr<mg::ParallelState> mpu, const OptimizerOptions& options,
    std::unique_ptr<Flat> flat)
    : AdamWTrainState(BucketMasters(*flat), options),
      model_(std::move(model)),
      mpu_(std::move(mpu)),
      flat_(std::move(flat)) {
  distributed_ = flat_->distributed;
}

MegatronTrainState::~MegatronTrainState() = default;

absl::StatusOr<std::unique_ptr<MegatronTrainState>> MegatronTrainState::Create(
    std::shared_ptr<models::MegatronGPTModel> model,
    std::shared_ptr<mg::ParallelState> mpu, const OptimizerOptions& options,
    bool distributed_optimizer) {
  MegatronStateOptions state;
  state.distributed_optimizer = distributed_optimizer;
  return Create(std::move(model), std::move(mpu), options, state);
}

absl::StatusOr<std::unique_ptr<MegatronTrainState>> MegatronTrainState::Create(
    std::shared_ptr<models::MegatronGPTModel> model,
    std::shared_ptr<mg::ParallelState> mpu, const OptimizerOptions& options,
    const MegatronStateOptions& state_options) {
  const bool distributed_optimizer = state_options.distributed_optimizer;
  if (!model || !mpu) {
    return absl::InvalidArgumentError("MegatronTrainState: no model");
  }
  auto flat = std::make_unique<Flat>();
  const std::set<const c10::TensorImpl*> split = TensorParallelParams(*model);
  std::set<const c10::TensorImpl*> experts;
  for (const at::Tensor& e : model->ExpertParameters()) {
    experts.insert(e.unsafeGetTensorImpl());
  }
  const bool first_tp = mpu->tp_rank() == 0;
  // A tied LM head's copy of the embedding on the last pipeline stage
  // counts toward the grad norm on the first stage only (Megatron's
  // shared-embedding rule).
  const at::Tensor head_copy =
      model->word_embeddings && !model->is_first_stage()
          ? model->word_embeddings->weight
          : at::Tensor();
  flat->buckets.resize(experts.empty() ? 1 : 2);
  flat->buckets[0].group = mpu->dp();
  if (!experts.empty()) {
    flat->buckets[1].expert = true;
    flat->buckets[1].group = mpu->group(mg::MpuGroup::kEdp);
  }
  for (const auto& item : model->named_parameters(/*recurse=*/true)) {
    const at::Tensor& p = item.value();
    if (!p.requires_grad()) continue;
    const at::ScalarType dtype = p.scalar_type();
    if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf) {
      return absl::UnimplementedError(absl::StrCat(
          "megatron parameter ", item.key(), ": dtype ", c10::toString(dtype),
          " (float32, bfloat16 or float16 are built)"));
    }
    const bool half = dtype != at::kFloat;
    flat->gather_dtype = flat->params.empty() || flat->gather_dtype == dtype
                             ? dtype
                             : at::kFloat;
    flat->half.push_back(half);
    flat->any_half = flat->any_half || half;
    if (half) {
      at::Tensor mutable_p = p;
      EnsureFp32Grad(mutable_p);
    }
    if (!distributed_optimizer) {
      flat->masters.push_back(
          half ? p.detach().to(at::kFloat).clone().set_requires_grad(true) : p);
    }
    const bool expert = experts.count(p.unsafeGetTensorImpl()) > 0;
    Bucket& bucket = flat->buckets[expert ? 1 : 0];
    bucket.gather_dtype = bucket.members.empty() || bucket.gather_dtype == dtype
                              ? dtype
                              : at::kFloat;
    flat->index[p.unsafeGetTensorImpl()] = flat->params.size();
    bucket.members.push_back(flat->params.size());
    flat->names.push_back(item.key());
    flat->params.push_back(p);
    flat->offsets.push_back(bucket.total);
    bucket.total += p.numel();
    flat->expert.push_back(expert);
    flat->has_experts = flat->has_experts || expert;
    // Experts count in their own sum (each shard once: Step), so on every
    // rank; the replicated dense parameters on tp rank 0 only; a tied
    // head's copy on the last stage not at all.
    flat->counted.push_back(
        expert || ((first_tp || split.count(p.unsafeGetTensorImpl()) > 0) &&
                   !(head_copy.defined() && p.is_same(head_copy))));
  }
  flat->distributed = distributed_optimizer;
  for (Bucket& b : flat->buckets) {
    const int64_t n = b.group->size();
    b.length = (b.total + n - 1) / n;
    b.padded = b.length * n;
    b.begin = b.group->rank() * b.length;
    if (!distributed_optimizer) continue;
    b.master = Flatten(flat->params, b.members, b.padded)
                   .narrow(0, b.begin, b.length)
                   .clone()
                   .set_requires_grad(true);
    b.norm_weight = at::zeros({b.length}, at::kDouble);
    const int64_t end = b.begin + b.length;
    for (size_t i : b.members) {
      if (!flat->counted[i]) continue;
      const int64_t lo = std::max(flat->offsets[i], b.begin);
      const int64_t hi =
          std::min(flat->offsets[i] + flat->params[i].numel(), end);
      if (hi > lo) b.norm_weight.narrow(0, lo - b.begin, hi - lo) = 1;
    }
  }
  const c10::Device device =
      flat->params.empty() ? c10::Device(c10::kCPU) : flat->params[0].device();
  auto out = std::unique_ptr<MegatronTrainState>(new MegatronTrainState(
      std::move(model), std::move(mpu), options, std::move(flat)));
  out->state_options_ = state_options;
  out->device_ = device;
  // Offloaded buffers rest in host memory.
  out->Move(state_options.param_offload, state_options.grad_offload,
            state_options.optimizer_offload, parallel::MemoryLocation::kHost);
  return out;
}

void MegatronTrainState::ZeroGrad() {
  for (size_t i = 0; i < flat_->params.size(); ++i) {
    at::Tensor& p = flat_->params[i];
    if (flat_->half[i]) {
      EnsureFp32Grad(p);  // also after anything reset it to none
    } else if (p.grad().defined()) {
      p.mutable_grad().zero_();
    }
  }
  for (Bucket& b : flat_->buckets) {
    if (b.master.defined() && b.master.grad().defined()) {
      b.master.mutable_grad().zero_();
    }
  }
}

void MegatronTrainState::Move(bool params, bool grads, bool optimizer,
                              parallel::MemoryLocation to) {
  Flat& f = *flat_;
  auto move = [&](const at::Tensor& t) {
    return to == parallel::MemoryLocation::kHost
               ? parallel::HostCopy(t)
               : parallel::DeviceCopy(t, device_);
  };
  at::NoGradGuard no_grad;
  if (params && param_location_ != to) {
    for (at::Tensor& p : f.params) p.set_data(move(p.detach()));
    param_location_ = to;
  }
  if (grads && grad_location_ != to) {
    for (at::Tensor& p : f.params) {
      if (p.grad().defined()) p.mutable_grad() = move(p.grad());
    }
    for (Bucket& b : f.buckets) {
      if (b.master.defined() && b.master.grad().defined()) {
        b.master.mutable_grad() = move(b.master.grad());
      }
    }
    grad_location_ = to;
  }
  if (optimizer && optimizer_location_ != to) {
    MoveAdamWState(*optimizer_, to, device_);
    for (Bucket& b : f.buckets) {
      if (b.master.defined()) b.master.set_data(move(b.master.detach()));
    }
    for (size_t i = 0; i < f.masters.size(); ++i) {
      if (f.half[i]) f.masters[i].set_data(move(f.masters[i].detach()));
    }
    optimizer_location_ = to;
  }
}

absl::Status MegatronTrainState::LoadToDevice() {
  Move(state_options_.param_offload, state_options_.grad_offload, false,
       parallel::MemoryLocation::kDevice);
  return absl::OkStatus();
}

absl::Status MegatronTrainState::OffloadToHost() {
  Move(state_options_.param_offload, state_options_.grad_offload, false,
       parallel::MemoryLocation::kHost);
  return absl::OkStatus();
}

parallel::FsdpMemory MegatronTrainState::Memory() const {
  const Flat& f = *flat_;
  parallel::FsdpMemory m;
  m.param_shard_bytes = ParameterBytes();
  auto bytes = [](const at::Tensor& t) {
    return t.defined() ? t.numel() * t.element_size() : int64_t{0};
  };
  for (const at::Tensor& p : f.params) m.grad_shard_bytes += bytes(p.grad());
  for (const Bucket& b : f.buckets) {
    if (b.master.defined()) m.grad_shard_bytes += bytes(b.master.grad());
  }
  auto add = [&](parallel::MemoryLocation where, int64_t n) {
    (where == parallel::MemoryLocation::kHost ? m.host_bytes
                                              : m.device_bytes) += n;
  };
  add(param_location_, m.param_shard_bytes);
  add(grad_location_, m.grad_shard_bytes);
  add(optimizer_location_, OptimizerStateBytes());
  return m;
}

std::vector<at::Tensor> MegatronTrainState::MasterParams() const {
  return BucketMasters(*flat_);
}

absl::StatusOr<double> MegatronTrainState::Step() {
  // Offloaded buffers come to the device for the step; the optimizer's
  // state goes back to host memory after it, the parameters and gradients
  // with OffloadToHost (after the pass that used them).
  Move(state_options_.param_offload, state_options_.grad_offload,
       state_options_.optimizer_offload, parallel::MemoryLocation::kDevice);
  absl::StatusOr<double> norm = StepOnDevice();
  Move(false, false, state_options_.optimizer_offload,
       parallel::MemoryLocation::kHost);
  return norm;
}

absl::StatusOr<double> MegatronTrainState::StepOnDevice() {
  Flat& f = *flat_;
  // tp: partial gradients of replicated params; the experts' summed over
  // edp unless the distributed optimizer reduce-scatters them.
  model_->FinalizeGrads(/*sum_expert_grads=*/!distributed_);
  parallel::Communicator& dp = *mpu_->dp();
  const std::vector<at::Tensor> grads = Grads(f.params);
  // Squared gradient norms: dense parameters (tp-split ones on every tp
  // rank, replicated ones on tp rank 0) and experts (every etp x ep shard
  // once; the stages hold different layers' experts, and a stage may hold
  // none, so every rank of an MoE model joins the sums).
  double sq = 0, expert_sq = 0;
  if (distributed_) {
    for (Bucket& b : f.buckets) {
      // Reduce-scatter: this rank's range of the gradients summed over the
      // bucket's group (dense: dp; experts: edp, Megatron's expert data
      // parallel group, which holds the cp ranks too).
      VERL_ASSIGN_OR_RETURN(
          at::Tensor mine,
          b.group->ReduceScatter(Flatten(grads, b.members, b.padded),
                                 parallel::ReduceOp::kSum));
      // The dp average (experts: Megatron's 1/dp scaling of their sum over
      // every dp rank's loss).
      mine.div_(dp.size());
      b.master.mutable_grad() = mine;
      (b.expert ? expert_sq : sq) +=
          (mine.to(at::kDouble).pow(2) * b.norm_weight).sum().item<double>();
    }
    // One all-reduce over the world: the ranges partition each bucket over
    // its group (dp or edp), the groups tile tp x pp (etp x ep x pp). The
    // cp ranks of a dp rank hold the same dense range (FinalizeGrads summed
    // their gradients): it counts 1/cp on each; edp holds the cp ranks.
    VERL_ASSIGN_OR_RETURN(
        sq, SumOver(*mpu_->world(),
                    sq / mpu_->group(mg::MpuGroup::kCp)->size() + expert_sq));
  } else {
    const Bucket& dense = f.buckets[0];
    if (dp.size() > 1) {
      at::Tensor all = Flatten(grads, dense.members, dense.total);
      VERL_RETURN_IF_ERROR(dp.AllReduce(all, parallel::ReduceOp::kAvg));
      for (size_t i : dense.members) {
        f.params[i].mutable_grad() =
            Slot(all, f.offsets[i], f.params[i]).clone();
      }
      for (size_t i = 0; i < f.params.size(); ++i) {
        // Already the sum over every dp rank's loss (FinalizeGrads):
        // Megatron's 1/dp scaling makes it the dp average.
        if (f.expert[i]) f.params[i].mutable_grad().div_(dp.size());
      }
    }
    for (size_t i = 0; i < f.params.size(); ++i) {
      const at::Tensor& g = f.params[i].grad();
      if (!g.defined() || !f.counted[i]) continue;
      (f.expert[i] ? expert_sq : sq) +=
          g.to(at::kDouble).pow(2).sum().item<double>();
    }
    // The stages hold different parameters: over tp x pp.
    VERL_ASSIGN_OR_RETURN(sq, SumOver(*mpu_->group(mg::MpuGroup::kMp), sq));
    if (model_->config().IsMoe()) {
      // The etp x ep group of a stage holds every expert's every etp shard
      // (Megatron's expert grad-norm group), the stages different layers'.
      VERL_ASSIGN_OR_RETURN(
          expert_sq, SumOver(*mpu_->group(mg::MpuGroup::kEtpEp), expert_sq));
      if (mpu_->pp_size() > 1) {
        VERL_ASSIGN_OR_RETURN(
            expert_sq, SumOver(*mpu_->group(mg::MpuGroup::kPp), expert_sq));
      }
      sq += expert_sq;
    }
  }
  const double norm = std::sqrt(sq);
  if (!distributed_ && f.any_half) {
    // The fp32 gradients (shared, so clipping scales both) drive the fp32
    // masters.
    for (size_t i = 0; i < f.params.size(); ++i) {
      if (!f.half[i]) continue;
      const at::Tensor& g = f.params[i].grad();
      f.masters[i].mutable_grad() =
          g.defined() ? (g.scalar_type() == at::kFloat ? g : g.to(at::kFloat))
                      : at::zeros_like(f.masters[i]);
    }
  }
  ClipAndStep(norm, [&](double coef) {
    if (distributed_) {
      for (Bucket& b : f.buckets) b.master.mutable_grad().mul_(coef);
      return;
    }
    for (at::Tensor& p : f.params) {
      if (p.grad().defined()) p.mutable_grad().mul_(coef);
    }
  });
  if (!distributed_ && f.any_half && std::isfinite(norm)) {
    at::NoGradGuard no_grad;  // the updated masters rounded into the params
    for (size_t i = 0; i < f.params.size(); ++i) {
      if (f.half[i]) f.params[i].detach().copy_(f.masters[i].detach());
    }
  }
  if (distributed_ && std::isfinite(norm)) {
    // Every group rank's updated range back into the parameters (in their
    // dtype, as Megatron's param all-gather): dense over dp, experts over
    // edp.
    for (const Bucket& b : f.buckets) {
      VERL_ASSIGN_OR_RETURN(
          at::Tensor all,
          b.group->AllGatherCat(b.master.detach().to(b.gather_dtype)));
      at::NoGradGuard no_grad;
      for (size_t i : b.members) {
        f.params[i].detach().copy_(Slot(all, f.offsets[i], f.params[i]));
      }
    }
  }
  return norm;
}

int64_t MegatronTrainState::ParameterBytes() const {
  int64_t bytes = 0;
  for (const at::Tensor& p : flat_->params) {
    bytes += p.numel() * p.element_size();
  }
  return bytes;
}

int64_t MegatronTrainState::OptimizerStateBytes() const {
  const Flat& f = *flat_;
  int64_t bytes = AdamWStateBytes(*optimizer_);
  for (const Bucket& b : f.buckets) {
    if (b.master.defined()) bytes += b.master.numel() * b.master.element_size();
  }
  for (size_t i = 0; i < f.masters.size(); ++i) {
    if (f.half[i]) bytes += f.masters[i].numel() * f.masters[i].element_size();
  }
  return bytes;
}

absl::StatusOr<std::vector<at::Tensor>> MegatronTrainState::FullMasters() {
  const Flat& f = *flat_;
  std::vector<at::Tensor> out;
  if (!distributed_) {
    for (const at::Tensor& m : f.masters) out.push_back(m.detach());
    return out;
  }
  out.resize(f.params.size());
  for (const Bucket& b : f.buckets) {
    VERL_ASSIGN_OR_RETURN(at::Tensor all,
                          b.group->AllGatherCat(b.master.detach()));
    for (size_t i : b.members) out[i] = Slot(all, f.offsets[i], f.params[i]);
  }
  return out;
}

void MegatronTrainState::SetMasters(const std::vector<at::Tensor>& full) {
  Flat& f = *flat_;
  const std::vector<at::Tensor>& from = full.empty() ? f.params : full;
  at::NoGradGuard no_grad;
  if (distributed_) {
    for (Bucket& b : f.buckets) {
      b.master.detach().copy_(
          Flatten(from, b.members, b.padded).narrow(0, b.begin, b.length));
    }
    return;
  }
  for (size_t i = 0; i < f.masters.size(); ++i) {
    if (f.half[i]) f.masters[i].detach().copy_(from[i]);
  }
}

// ---- Checkpoints (HF layout, chunked over the world) ----------------------

absl::StatusOr<std::vector<std::pair<at::Tensor, at::Tensor>>>
MegatronTrainState::LocalMoments(int64_t* step) {
  const Flat& f = *flat_;
  std::vector<std::pair<at::Tensor, at::Tensor>> out;
  if (distributed_) {
    // The buckets step together: all have state or none.
    if (!GetAdamState(*optimizer_, f.buckets[0].master)) return out;
    out.resize(f.params.size());
    for (const Bucket& b : f.buckets) {
      std::optional<AdamMoments> m = GetAdamState(*optimizer_, b.master);
      if (!m) {
        return absl::InternalError(
            "megatron distributed optimizer: a bucket without AdamW state");
      }
      *step = m->step;
      VERL_ASSIGN_OR_RETURN(at::Tensor avg, b.group->AllGatherCat(m->exp_avg));
      VERL_ASSIGN_OR_RETURN(at::Tensor avg_sq,
                            b.group->AllGatherCat(m->exp_avg_sq));
      for (size_t i : b.members) {
        out[i] = {Slot(avg, f.offsets[i], f.params[i]),
                  Slot(avg_sq, f.offsets[i], f.params[i])};
      }
    }
    return out;
  }
  bool any = false;
  for (const at::Tensor& p : f.masters) {
    std::optional<AdamMoments> m = GetAdamState(*optimizer_, p);
    if (m) {
      any = true;
      *step = m->step;
      out.emplace_back(m->exp_avg, m->exp_avg_sq);
    } else {  // no gradient yet: zero moments
      out.emplace_back(at::zeros_like(p), at::zeros_like(p));
    }
  }
  if (!any) out.clear();
  return out;
}

absl::StatusOr<TrainStateShard> MegatronTrainState::SaveShard() {
  VERL_RETURN_IF_ERROR(RefusePipelineCheckpoint(*mpu_));
  const parallel::Communicator& world = *mpu_->world();
  TrainStateShard shard;
  shard.shard_world = world.size();
  shard.shard_rank = world.rank();
  int64_t step = 0;
  VERL_ASSIGN_OR_RETURN(auto moments, LocalMoments(&step));
  auto moment = [&](bool second) -> models::ParamTensorFn {
    return [&, second](const at::Tensor& p) {
      const auto& m = moments.at(flat_->index.at(p.unsafeGetTensorImpl()));
      return second ? m.second : m.first;
    };
  };
  auto chunk = [&](const at::Tensor& full) {
    return ChunkOf(full, shard.shard_rank, shard.shard_world);
  };
  // Half parameters: the model tensors saved are their fp32 masters.
  std::vector<at::Tensor> masters;
  if (flat_->any_half) {
    VERL_ASSIGN_OR_RETURN(masters, FullMasters());
  }
  const models::ParamTensorFn master_of =
      [&](const at::Tensor& p) -> at::Tensor {
    return masters.empty()
               ? p
               : masters.at(flat_->index.at(p.unsafeGetTensorImpl()));
  };
  const int64_t layers = model_->config().num_hidden_layers;
  for (int64_t stage = models::kMegatronRootStage; stage < layers; ++stage) {
    for (const auto& [name, full] :
         models::GatherHfTensors(*model_, stage, master_of)) {
      shard.shapes.emplace_back(name, full.sizes().vec());
      shard.model[name] = chunk(full);
    }
    if (moments.empty()) continue;  // before the first step
    for (const bool second : {false, true}) {
      for (const auto& [name, full] :
           models::GatherHfTensors(*model_, stage, moment(second))) {
        shard.optimizer[name + (second ? ".exp_avg_sq" : ".exp_avg")] =
            chunk(full);
        shard.optimizer[name + ".step"] = at::scalar_tensor(step, at::kLong);
      }
    }
  }
  SaveCounters(&shard);
  return shard;
}

absl::Status MegatronTrainState::LoadShard(const TrainStateShard& shard,
                                           const TrainStateLoadParts& parts) {
  VERL_RETURN_IF_ERROR(RefusePipelineCheckpoint(*mpu_));
  parallel::Communicator& world = *mpu_->world();
  if (shard.shard_world != world.size() || shard.shard_rank != world.rank()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint shard ", shard.shard_rank, " of ", shard.shard_world,
        " does not fit rank ", world.rank(), " of ", world.size()));
  }
  Flat& f = *flat_;
  at::NoGradGuard no_grad;
  // Full HF tensors from the chunks; the current model gives names/shapes.
  std::map<std::string, at::Tensor> weights, avg, avg_sq;
  int64_t step = 0;
  const int64_t layers = model_->config().num_hidden_layers;
  for (int64_t stage = models::kMegatronRootStage; stage < layers; ++stage) {
    for (const auto& [name, current] :
         models::GatherHfTensors(*model_, stage)) {
      auto full = [&](const std::string& key,
                      const std::map<std::string, at::Tensor>& from)
          -> absl::StatusOr<at::Tensor> {
        VERL_ASSIGN_OR_RETURN(at::Tensor c, FindCheckpointTensor(from, key));
        return GatherChunks(&world, key, c.to(at::kFloat), current.sizes());
      };
      if (parts.model) {
        VERL_ASSIGN_OR_RETURN(weights[name], full(name, shard.model));
      }
      auto has_step = shard.optimizer.find(name + ".step");
      if (!parts.optimizer || has_step == shard.optimizer.end()) continue;
      step = has_step->second.item<int64_t>();
      VERL_ASSIGN_OR_RETURN(avg[name],
                            full(name + ".exp_avg", shard.optimizer));
      VERL_ASSIGN_OR_RETURN(avg_sq[name],
                            full(name + ".exp_avg_sq", shard.optimizer));
    }
  }
  if (parts.model) {
    VERL_RETURN_IF_ERROR(models::LoadMegatronFromHf(
        models::HfSourceFromMap(weights), model_.get()));
    // The masters from the saved fp32 tensors (not the rounded params).
    std::vector<at::Tensor> full;
    for (const std::string& name : f.names) {
      VERL_ASSIGN_OR_RETURN(
          full.emplace_back(),
          models::MegatronShardFromHf(*model_, name,
                                      models::HfSourceFromMap(weights)));
    }
    SetMasters(full);
  }
  if (!parts.optimizer) {
    if (parts.counters) LoadCounters(shard);
    return absl::OkStatus();
  }
  // This rank's shard of each moment, as the parameters are sharded.
  std::vector<at::Tensor> shard_avg, shard_avg_sq;
  for (const std::string& name : f.names) {
    if (avg.empty()) break;
    VERL_ASSIGN_OR_RETURN(at::Tensor a,
                          models::MegatronShardFromHf(
                              *model_, name, models::HfSourceFromMap(avg)));
    VERL_ASSIGN_OR_RETURN(at::Tensor s,
                          models::MegatronShardFromHf(
                              *model_, name, models::HfSourceFromMap(avg_sq)));
    shard_avg.push_back(a);
    shard_avg_sq.push_back(s);
  }
  SetLocalMoments(step, shard_avg, shard_avg_sq);
  if (parts.counters) LoadCounters(shard);
  return absl::OkStatus();
}

void MegatronTrainState::SetLocalMoments(
    int64_t step, const std::vector<at::Tensor>& avg,
    const std::vector<at::Tensor>& avg_sq) {
  Flat& f = *flat_;
  auto moments = [&](const at::Tensor& a, const at::Tensor& s) {
    return std::optional<AdamMoments>(
        AdamMoments{step, a.contiguous().clone(), s.contiguous().clone()});
  };
  if (distributed_) {
    for (const Bucket& b : f.buckets) {
      auto range = [&](const std::vector<at::Tensor>& full) {
        return Flatten(full, b.members, b.padded).narrow(0, b.begin, b.length);
      };
      SetAdamState(
          *optimizer_, b.master,
          avg.empty() ? std::nullopt : moments(range(avg), range(avg_sq)));
    }
  } else {
    for (size_t i = 0; i < f.masters.size(); ++i) {
      SetAdamState(*optimizer_, f.masters[i],
                   avg.empty() ? std::nullopt : moments(avg[i], avg_sq[i]));
    }
  }
}

// ---- Megatron dist_ckpt ----------------------------------------------------

namespace {

constexpr char kExpAvg[] = "optimizer.state.exp_avg.";
constexpr char kExpAvgSq[] = "optimizer.state.exp_avg_sq.";
constexpr char kMaster[] = "optimizer.state.fp32_param.";
constexpr char kRng[] = "rng_state.";

// mcore's TransformerConfig fields for transformer_config.json (verl writes
// the model's TransformerConfig there).
nlohmann::json TransformerConfigJson(const models::MegatronGPTModel& model,
                                     int pp) {
  const models::ModelConfig& c = model.config();
  const models::TpHeadLayout h = models::MakeTpHeadLayout(c, 1);
  nlohmann::json j = {
      {"num_layers", c.num_hidden_layers},
      {"hidden_size", c.hidden_size},
      {"ffn_hidden_size", c.intermediate_size},
      {"num_attention_heads", c.num_attention_heads},
      {"num_query_groups", c.num_key_value_heads},
      {"kv_channels", h.head_dim},
      {"normalization", "RMSNorm"},
      {"layernorm_epsilon", c.rms_norm_eps},
      {"gated_linear_unit", true},
      {"activation_func", "silu"},
      {"add_bias_linear", false},
      {"add_qkv_bias", c.attention_bias},
      {"qk_layernorm", c.qk_norm},
      {"rotary_base", c.rope_theta},
      {"vocab_size", c.vocab_size},
      {"padded_vocab_size", model.padded_vocab_size()},
      {"share_embeddings_and_output_weights", c.tie_word_embeddings},
      {"is_value_model", c.is_value_model},
      {"tensor_model_parallel_size", model.tp()->size()},
      {"pipeline_model_parallel_size", pp},
      {"sequence_parallel", model.options().sequence_parallel},
      {"params_dtype", "torch.float32"}};
  if (c.IsMoe()) {  // Megatron's MoE fields
    j["num_moe_experts"] = c.num_experts;
    j["moe_router_topk"] = c.num_experts_per_tok;
    j["moe_ffn_hidden_size"] = c.moe_intermediate_size;
    j["expert_model_parallel_size"] = model.ep()->size();
    j["expert_tensor_parallel_size"] = model.etp()->size();
  }
  return j;
}

}  // namespace

absl::StatusOr<TrainState::DistCheckpointWriter>
MegatronTrainState::PrepareDistCheckpoint(
    const TrainStateLoadParts& parts,
    const std::map<std::string, at::Tensor>& rng) {
  const Flat& f = *flat_;
  const parallel::Communicator& world = *mpu_->world();
  const int dp = mpu_->dp()->size(), dp_rank = mpu_->dp_rank();
  int64_t step = 0;
  std::vector<std::pair<at::Tensor, at::Tensor>> moments;
  // The fp32 masters (full, tp-local): the distributed optimizer's after the
  // first step, half parameters' always.
  std::vector<at::Tensor> masters;
  if (parts.optimizer) {
    VERL_ASSIGN_OR_RETURN(moments, LocalMoments(&step));  // collective
    if ((distributed_ && !moments.empty()) || f.any_half) {
      VERL_ASSIGN_OR_RETURN(masters, FullMasters());  // collective
    }
  }
  auto slices = std::make_shared<std::map<std::string, ckpt::DistSlice>>();
  // Replicas (over dp, over tp for replicated tensors, over cp always,
  // the tied head's copy on the last pipeline stage; experts: over edp
  // only) are saved by one rank; `i` spreads the writes over the replicas.
  const parallel::Communicator& edp = *mpu_->group(mg::MpuGroup::kEdp);
  auto saves = [&](const models::MegatronParamSlice& sl, size_t i,
                   const at::Tensor& p) {
    if (sl.expert) return static_cast<int>(i % edp.size()) == edp.rank();
    return static_cast<int>(i % dp) == dp_rank && mpu_->cp_rank() == 0 &&
           (!sl.replicated || mpu_->tp_rank() == 0) &&
           !(!model_->is_first_stage() && model_->word_embeddings &&
             p.is_same(model_->word_embeddings->weight));
  };
  for (size_t i = 0; i < f.params.size(); ++i) {
    VERL_ASSIGN_OR_RETURN(models::MegatronParamSlice sl,
                          models::MegatronSliceOf(*model_, f.names[i]));
    if (!saves(sl, i, f.params[i])) continue;
    const std::string& key = sl.key;
    auto box = [&](const at::Tensor& local) {
      return ckpt::DistSlice{sl.Box(local.detach()).clone(), sl.global_shape,
                             sl.offsets};
    };
    (*slices)[key] = box(f.params[i]);
    if (!masters.empty()) (*slices)[kMaster + key] = box(masters[i]);
    if (moments.empty()) continue;
    (*slices)[kExpAvg + key] = box(moments[i].first);
    (*slices)[kExpAvgSq + key] = box(moments[i].second);
  }
  // Parameters without gradient (the MoE router's expert_bias): model
  // state without optimizer entries.
  for (const auto& item : model_->named_parameters(/*recurse=*/true)) {
    if (item.value().requires_grad()) continue;
    VERL_ASSIGN_OR_RETURN(models::MegatronParamSlice sl,
                          models::MegatronSliceOf(*model_, item.key()));
    if (!saves(sl, 0, item.value())) continue;
    (*slices)[sl.key] = ckpt::DistSlice{sl.Box(item.value().detach()).clone(),
                                        sl.global_shape, sl.offsets};
  }
  nlohmann::json common = {{"optimizer_step", step},
                           {"has_optimizer", !moments.empty()}};
  if (parts.counters) {
    for (const auto& [kind, state] : rng) {
      at::Tensor row = state.reshape({1, -1});
      (*slices)[kRng + kind] = {
          row, {world.size(), row.size(1)}, {world.rank(), 0}};
    }
    TrainStateShard counters;
    SaveCounters(&counters);
    common["schedule_step"] = counters.schedule_step;
    common["skipped_steps"] = counters.skipped_steps;
    common["lr"] = counters.lr;
  }
  common["megatron"] = TransformerConfigJson(*model_, 1);
  common["megatron"]["params_dtype"] =
      TorchDtypeName(f.params.empty() ? at::kFloat : f.gather_dtype);
  const int rank = world.rank(), size = world.size();
  return DistCheckpointWriter(
      [slices, common, rank, size](const std::string& role_dir) {
        const std::string dir = role_dir + "/" + ckpt::kDistCkptSubdir;
        VERL_RETURN_IF_ERROR(core::MakeDirs(dir));
        if (rank == 0) {
          VERL_RETURN_IF_ERROR(
              core::WriteFileAtomic(role_dir + "/transformer_config.json",
                                    common["megatron"].dump(2) + "\n"));
        }
        return ckpt::SaveDistCkptRank(dir, rank, size, *slices, common);
      });
}

absl::StatusOr<std::map<std::string, at::Tensor>>
MegatronTrainState::LoadDistCheckpoint(const std::string& role_dir,
                                       const TrainStateLoadParts& parts) {
  Flat& f = *flat_;
  const std::string dir = role_dir + "/" + ckpt::kDistCkptSubdir;
  VERL_ASSIGN_OR_RETURN(std::unique_ptr<ckpt::DistCkptReader> reader,
                        ckpt::DistCkptReader::Open(dir));
  const nlohmann::json& common = reader->metadata().common;
  // This rank's local tensor of `key` for parameter i (zeros where the
  // layout pads, e.g. vocabulary rows past vocab_size).
  // `prefix` + the parameter's key (experts: by global index).
  auto local_of = [&](const std::string& prefix, const std::string& name,
                      const at::Tensor& param) -> absl::StatusOr<at::Tensor> {
    VERL_ASSIGN_OR_RETURN(models::MegatronParamSlice sl,
                          models::MegatronSliceOf(*model_, name));
    const std::string key = prefix + sl.key;
    if (!reader->Has(key)) {
      return absl::NotFoundError(
          absl::StrCat(dir, ": the checkpoint has no tensor '", key, "'"));
    }
    const ckpt::DistTensorMeta& m = reader->metadata().tensors.at(key);
    if (m.shape != sl.global_shape) {
      return absl::FailedPreconditionError(absl::StrCat(
          dir, ": tensor '", key, "' is [", absl::StrJoin(m.shape, ", "),
          "] in the checkpoint but [", absl::StrJoin(sl.global_shape, ", "),
          "] in this model"));
    }
    VERL_ASSIGN_OR_RETURN(at::Tensor box,
                          reader->ReadBox(key, sl.offsets, sl.BoxSizes()));
    // In the saved dtype (fp32 moments and masters of half parameters).
    at::Tensor out = at::zeros(param.sizes(), box.options());
    sl.Box(out).copy_(box);
    return out;
  };
  auto local = [&](const std::string& prefix, size_t i) {
    return local_of(prefix, f.names[i], f.params[i]);
  };
  at::NoGradGuard no_grad;
  if (parts.model) {
    for (size_t i = 0; i < f.params.size(); ++i) {
      VERL_ASSIGN_OR_RETURN(at::Tensor t, local("", i));
      f.params[i].detach().copy_(t);
    }
    for (const auto& item : model_->named_parameters(/*recurse=*/true)) {
      if (item.value().requires_grad()) continue;
      VERL_ASSIGN_OR_RETURN(at::Tensor t,
                            local_of("", item.key(), item.value()));
      item.value().detach().copy_(t);
    }
  }
  if (parts.optimizer) {
    std::vector<at::Tensor> avg, avg_sq;
    if (common.value("has_optimizer", false)) {
      for (size_t i = 0; i < f.params.size(); ++i) {
        VERL_ASSIGN_OR_RETURN(avg.emplace_back(), local(kExpAvg, i));
        VERL_ASSIGN_OR_RETURN(avg_sq.emplace_back(), local(kExpAvgSq, i));
      }
    }
    SetLocalMoments(common.value("optimizer_step", int64_t{0}), avg, avg_sq);
  }
  if ((distributed_ || f.any_half) && (parts.model || parts.optimizer)) {
    // The fp32 masters: saved (distributed optimizer, half parameters) or
    // the parameters (a checkpoint of an fp32 run without them).
    std::vector<at::Tensor> master;
    for (size_t i = 0; i < f.params.size(); ++i) {
      VERL_ASSIGN_OR_RETURN(models::MegatronParamSlice sl,
                            models::MegatronSliceOf(*model_, f.names[i]));
      if (!reader->Has(kMaster + sl.key)) {
        master.clear();
        break;
      }
      VERL_ASSIGN_OR_RETURN(master.emplace_back(), local(kMaster, i));
    }
    SetMasters(master);
  }
  std::map<std::string, at::Tensor> rng;
  if (!parts.counters) return rng;
  TrainStateShard counters;
  counters.schedule_step = common.value("schedule_step", int64_t{0});
  counters.skipped_steps = common.value("skipped_steps", int64_t{0});
  LoadCounters(counters);
  const int saved_world = reader->metadata().world_size;
  const int from =
      mpu_->world()->rank() < saved_world ? mpu_->world()->rank() : 0;
  for (const auto& [key, m] : reader->metadata().tensors) {
    if (!absl::StartsWith(key, kRng)) continue;
    VERL_ASSIGN_OR_RETURN(at::Tensor row, reader->ReadChunk(key, from));
    rng[key.substr(std::string(kRng).size())] = row.reshape({-1});
  }
  return rng;
}

absl::StatusOr<NamedParams> MegatronTrainState::FullStateDict() {
  NamedParams out;
  const bool root = mpu_->world()->rank() == 0;
  const int64_t layers = model_->config().num_hidden_layers;
  for (int64_t stage = models::kMegatronRootStage; stage < layers; ++stage) {
    for (auto& [name, full] :
         models::GatherHfTensorsAllStages(*model_, stage)) {
      if (root) out.emplace_back(name, full);
    }
  }
  return out;
}

}  // namespace verl::rl
