#include "verl/rl/workers/fsdp_train_state.h"

#include <torch/optim/adamw.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "verl/core/status.h"
#include "verl/models/decoder.h"
#include "verl/rl/algos/torch_functional.h"
#include "verl/rl/workers/optimizer_offload.h"

namespace verl::rl {
namespace {

// The decoder's layer hooks driving FsdpModule's per-unit schedule. The
// hooks run inside forward/backward, where a Status cannot be returned: a
// failed collective there ends the process with a line naming the rank
// (the launcher then stops the other ranks).
class FsdpLayerHooks : public models::LayerHooks {
 public:
  FsdpLayerHooks(std::weak_ptr<parallel::FsdpModule> fsdp,
                 std::vector<int> root_units, std::vector<int> layer_units)
      : fsdp_(std::move(fsdp)),
        root_units_(std::move(root_units)),
        layer_units_(std::move(layer_units)) {}

  void BeforeForward(int64_t stage) override {
    parallel::FsdpModule &f = Fsdp();
    if (stage == kRootStage) {
      for (int u : root_units_) Check(f.PreForward(u), "root forward");
      return;
    }
    const int next = stage + 1 < static_cast<int64_t>(layer_units_.size())
                         ? layer_units_[stage + 1]
                         : -1;
    Check(f.PreForward(Unit(stage), next), "forward");
  }
  void AfterForward(int64_t layer) override { Fsdp().PostForward(Unit(layer)); }
  void BeforeBackward(int64_t layer) override {
    Check(Fsdp().PreBackward(Unit(layer), layer > 0 ? Unit(layer - 1) : -1),
          "backward");
  }
  void AfterBackward(int64_t layer) override {
    Check(Fsdp().PostBackward(Unit(layer)), "gradient reduce-scatter");
  }
  void ReleaseRoot() override {
    parallel::FsdpModule &f = Fsdp();
    for (int u : root_units_) {
      if (!f.marked_for_reduce(u)) f.Reshard(u);
    }
  }

 private:
  parallel::FsdpModule &Fsdp() {
    std::shared_ptr<parallel::FsdpModule> f = fsdp_.lock();
    CHECK(f) << "model used after its FSDP train state was destroyed";
    return *f;  // the state (owner) outlives this call
  }
  int Unit(int64_t layer) const {
    CHECK(layer >= 0 && layer < static_cast<int64_t>(layer_units_.size()))
        << "FSDP hooks: no unit for layer " << layer;
    return layer_units_[layer];
  }
  void Check(const absl::Status &s, const char *what) {
    if (!s.ok()) {
      LOG(FATAL) << "FSDP " << what << " (rank "
                 << Fsdp().groups().shard->global_rank() << "): " << s;
    }
  }

  std::weak_ptr<parallel::FsdpModule> fsdp_;
  std::vector<int> root_units_, layer_units_;
};

std::vector<std::string> TrainableNames(
    const std::vector<parallel::FsdpUnitSpec> &units) {
  std::vector<std::string> trainable;  // FsdpModule's trainable params
  for (const auto &unit : units) {
    for (const auto &[name, tensor] : unit.params) {
      if (tensor.requires_grad()) trainable.push_back(name);
    }
  }
  return trainable;
}

// Unit index of each decoder layer ("model.layers.<i>") and the others
// (root); false if some layer has no unit.
bool LayerUnits(const std::vector<parallel::FsdpUnitSpec> &units,
                int64_t num_layers, std::vector<int> *root,
                std::vector<int> *layers) {
  std::map<std::string, int> index;
  for (size_t i = 0; i < units.size(); ++i) index[units[i].name] = i;
  layers->clear();
  for (int64_t l = 0; l < num_layers; ++l) {
    auto it = index.find(absl::StrCat("model.layers.", l));
    if (it == index.end()) return false;
    layers->push_back(it->second);
    index.erase(it);
  }
  root->clear();
  for (const auto &[name, i] : index) root->push_back(i);
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FsdpTrainState>> FsdpTrainState::Create(
    std::vector<parallel::FsdpUnitSpec> units, const OptimizerOptions &options,
    parallel::FsdpGroups groups, parallel::FsdpOptions fsdp_options) {
  std::vector<std::string> trainable = TrainableNames(units);
  auto fsdp = std::make_shared<parallel::FsdpModule>(
      std::move(units), std::move(groups), fsdp_options);
  VERL_RETURN_IF_ERROR(fsdp->GatherAll());
  auto state = std::unique_ptr<FsdpTrainState>(
      new FsdpTrainState(std::move(fsdp), options));
  state->trainable_names_ = std::move(trainable);
  // param_offload / optimizer_offload: resting place is host memory.
  VERL_RETURN_IF_ERROR(state->PlaceOffloaded(parallel::MemoryLocation::kHost));
  return state;
}

absl::StatusOr<at::ScalarType> DtypeFromName(const std::string &name) {
  if (name == "bf16" || name == "bfloat16") return at::kBFloat16;
  if (name == "fp16" || name == "float16") return at::kHalf;
  if (name == "fp32" || name == "float32") return at::kFloat;
  return absl::InvalidArgumentError(
      absl::StrCat("fsdp_config.dtype: \"", name,
                   "\" (expected bf16, bfloat16, fp16, float16, fp32 or "
                   "float32)"));
}

namespace {

absl::StatusOr<parallel::FsdpOptions> FsdpOptionsFromConfig(
    const parallel::FsdpConfig &config) {
  parallel::FsdpOptions fsdp_options;
  VERL_ASSIGN_OR_RETURN(fsdp_options.compute_dtype,
                        DtypeFromName(config.dtype()));
  fsdp_options.param_offload = config.param_offload();
  fsdp_options.optimizer_offload = config.optimizer_offload();
  fsdp_options.reshard_after_forward = config.reshard_after_forward();
  fsdp_options.forward_prefetch = config.forward_prefetch();
  return fsdp_options;
}

// One unit per decoder layer plus embed / head (UnitsByLayer). A
// vision-language model's tower (`visual.*`: patch embedding, vision
// blocks, merger) is one more unit, "visual": a root unit, gathered with
// the embeddings before the image features are computed and kept until
// Step() reduce-scatters its gradients (the tower runs once per forward,
// before the decoder's layers).
std::vector<parallel::FsdpUnitSpec> ModuleUnits(torch::nn::Module &model) {
  parallel::NamedTensors params, visual;
  for (const auto &item : model.named_parameters(/*recurse=*/true)) {
    (item.key().rfind("visual.", 0) == 0 ? visual : params)
        .emplace_back(item.key(), item.value());
  }
  std::vector<parallel::FsdpUnitSpec> units = parallel::UnitsByLayer(params);
  if (!visual.empty()) units.push_back({"visual", std::move(visual)});
  return units;
}

}  // namespace

absl::StatusOr<std::shared_ptr<parallel::FsdpModule>> ShardForInference(
    models::CausalLM &model, const parallel::FsdpConfig &config,
    std::shared_ptr<parallel::Communicator> group) {
  VERL_ASSIGN_OR_RETURN(parallel::FsdpOptions fsdp_options,
                        FsdpOptionsFromConfig(config));
  VERL_ASSIGN_OR_RETURN(
      parallel::FsdpGroups groups,
      parallel::MakeFsdpGroups(std::move(group), config.fsdp_size()));
  for (at::Tensor &p : model.parameters()) p.set_requires_grad(false);
  std::vector<parallel::FsdpUnitSpec> units = ModuleUnits(model);
  std::vector<int> root, layers;
  const bool per_layer =
      LayerUnits(units, model.config().num_hidden_layers, &root, &layers);
  auto fsdp = std::make_shared<parallel::FsdpModule>(
      std::move(units), std::move(groups), fsdp_options);
  if (per_layer) {
    model.set_layer_hooks(std::make_shared<FsdpLayerHooks>(fsdp, root, layers));
  } else {
    VERL_RETURN_IF_ERROR(fsdp->GatherAll());
  }
  if (fsdp_options.param_offload) {
    VERL_RETURN_IF_ERROR(fsdp->MoveShards(parallel::MemoryLocation::kHost));
  }
  return fsdp;
}

absl::StatusOr<std::unique_ptr<FsdpTrainState>> FsdpTrainState::ForModule(
    torch::nn::Module &model, const parallel::FsdpConfig &config,
    const OptimizerOptions &options,
    std::shared_ptr<parallel::Communicator> dp_group, bool per_layer) {
  VERL_ASSIGN_OR_RETURN(parallel::FsdpOptions fsdp_options,
                        FsdpOptionsFromConfig(config));
  VERL_ASSIGN_OR_RETURN(
      parallel::FsdpGroups groups,
      parallel::MakeFsdpGroups(std::move(dp_group), config.fsdp_size()));
  std::vector<parallel::FsdpUnitSpec> units = ModuleUnits(model);
  auto *lm = dynamic_cast<models::CausalLM *>(&model);
  std::vector<int> root, layers;
  if (!per_layer || lm == nullptr ||
      !LayerUnits(units, lm->config().num_hidden_layers, &root, &layers)) {
    return Create(std::move(units), options, std::move(groups), fsdp_options);
  }
  std::vector<std::string> trainable = TrainableNames(units);
  auto fsdp = std::make_shared<parallel::FsdpModule>(
      std::move(units), std::move(groups), fsdp_options);
  lm->set_layer_hooks(std::make_shared<FsdpLayerHooks>(fsdp, root, layers));
  auto state =
      std::unique_ptr<FsdpTrainState>(new FsdpTrainState(fsdp, options));
  state->trainable_names_ = std::move(trainable);
  state->per_layer_ = true;
  // param_offload / optimizer_offload: resting place is host memory.
  VERL_RETURN_IF_ERROR(state->PlaceOffloaded(parallel::MemoryLocation::kHost));
  return state;
}

FsdpTrainState::FsdpTrainState(std::shared_ptr<parallel::FsdpModule> fsdp,
                               const OptimizerOptions &options)
    : AdamWTrainState(fsdp->shard_params(), options), fsdp_(std::move(fsdp)) {}

FsdpTrainState::~FsdpTrainState() = default;

void FsdpTrainState::ZeroGrad() { fsdp_->ZeroGrad(); }

absl::Status FsdpTrainState::RefreshParams() {
  fsdp_->ReshardAll();
  return per_layer_ ? absl::OkStatus() : fsdp_->GatherAll();
}

absl::Status FsdpTrainState::PlaceOffloaded(parallel::MemoryLocation to) {
  if (fsdp_->options().param_offload)
    VERL_RETURN_IF_ERROR(fsdp_->MoveShards(to));
  if (fsdp_->options().optimizer_offload) MoveOptimizerState(to);
  return absl::OkStatus();
}

void FsdpTrainState::MoveOptimizerState(parallel::MemoryLocation to) {
  MoveAdamWState(*optimizer_, to, fsdp_->options().device);
  optimizer_location_ = to;
}

parallel::FsdpMemory FsdpTrainState::Memory() const {
  parallel::FsdpMemory m = fsdp_->Memory();
  (optimizer_location_ == parallel::MemoryLocation::kHost ? m.host_bytes
                                                          : m.device_bytes) +=
      OptimizerStateBytes();
  return m;
}

absl::StatusOr<double> FsdpTrainState::Step() {
  // Per-layer: the layers were reduced in backward; the root (and any unit
  // whose backward did not run) is reduced here.
  VERL_RETURN_IF_ERROR(per_layer_ ? fsdp_->ReduceMarkedGradients()
                                  : fsdp_->ReduceAllGradients());
  // Offloaded shards / AdamW state come to the device for the step only.
  VERL_RETURN_IF_ERROR(PlaceOffloaded(parallel::MemoryLocation::kDevice));
  absl::StatusOr<double> norm = StepOnDevice();
  VERL_RETURN_IF_ERROR(PlaceOffloaded(parallel::MemoryLocation::kHost));
  return norm;
}

absl::StatusOr<double> FsdpTrainState::StepOnDevice() {
  VERL_ASSIGN_OR_RETURN(const double norm, fsdp_->GradNorm());
  ClipAndStep(norm, [&](double coef) { fsdp_->ScaleGrads(coef); });
  VERL_RETURN_IF_ERROR(RefreshParams());
  return norm;
}

int64_t FsdpTrainState::OptimizerStateBytes() const {
  return AdamWStateBytes(*optimizer_);
}

// ---- Checkpoints ----------------------------------------------------------

namespace {

// `t`'s first `rows` rows as a contiguous copy (drops FSDP's padding rows).
at::Tensor Unpadded(const at::Tensor &t, int64_t rows) {
  return t.detach().narrow(0, 0, rows).clone();
}

// `chunk` zero-padded to the shard shape of `layout`, checking its rows.
absl::StatusOr<at::Tensor> Padded(const std::string &name,
                                  const at::Tensor &chunk,
                                  const parallel::ShardLayout &layout,
                                  int rank) {
  std::vector<int64_t> want = layout.ShardShape();
  want[0] = layout.ValidRows(rank);
  if (chunk.sizes().vec() != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint tensor ", name, ": chunk of rank ", rank,
                     " of ", layout.world, " has the wrong shape"));
  }
  at::Tensor out = at::zeros(layout.ShardShape(), at::kFloat);
  out.narrow(0, 0, want[0]).copy_(chunk);
  return out;
}

}  // namespace

absl::StatusOr<TrainStateShard> FsdpTrainState::SaveShard() {
  TrainStateShard shard;
  shard.shard_rank = fsdp_->groups().shard->rank();
  shard.shard_world = fsdp_->groups().shard->size();
  for (const parallel::ShardedTensor &s : fsdp_->ShardedStateDict()) {
    if (s.layout.full_shape.empty()) {
      return absl::UnimplementedError(absl::StrCat(
          "checkpoint of FSDP 0-d parameter ", s.name, " is not supported"));
    }
    shard.shapes.emplace_back(s.name, s.layout.full_shape);
    shard.model[s.name] = Unpadded(s.shard, s.layout.ValidRows(s.rank));
  }
  const std::vector<at::Tensor> params = fsdp_->shard_params();
  if (params.size() != trainable_names_.size()) {
    return absl::InternalError("FSDP trainable parameter names out of sync");
  }
  shard.optimizer_params = trainable_names_;
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string &name = trainable_names_[i];
    const int64_t rows = shard.model.at(name).size(0);
    SaveAdamState(
        name, params[i], [&](const at::Tensor &t) { return Unpadded(t, rows); },
        &shard);
  }
  SaveCounters(&shard);
  return shard;
}

absl::Status FsdpTrainState::LoadShard(const TrainStateShard &shard,
                                       const TrainStateLoadParts &parts) {
  const int rank = fsdp_->groups().shard->rank();
  const int world = fsdp_->groups().shard->size();
  if (shard.shard_world != world || shard.shard_rank != rank) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint shard ", shard.shard_rank, " of ", shard.shard_world,
        " does not fit FSDP shard ", rank, " of ", world));
  }
  std::map<std::string, parallel::ShardLayout> layouts;
  std::vector<parallel::ShardedTensor> current = fsdp_->ShardedStateDict();
  for (const parallel::ShardedTensor &s : current) layouts[s.name] = s.layout;
  if (parts.model) {
    for (parallel::ShardedTensor &s : current) {
      VERL_ASSIGN_OR_RETURN(at::Tensor chunk,
                            FindCheckpointTensor(shard.model, s.name));
      VERL_ASSIGN_OR_RETURN(s.shard, Padded(s.name, chunk, s.layout, rank));
    }
    VERL_RETURN_IF_ERROR(fsdp_->LoadShardedStateDict(current));
    VERL_RETURN_IF_ERROR(RefreshParams());
  }
  if (parts.optimizer) {
    const std::vector<at::Tensor> params = fsdp_->shard_params();
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string &name = trainable_names_[i];
      VERL_RETURN_IF_ERROR(
          LoadAdamState(shard, name, params[i],
                        [&](const std::string &key, const at::Tensor &chunk) {
                          return Padded(key, chunk, layouts.at(name), rank);
                        }));
    }
  }
  if (parts.counters) LoadCounters(shard);
  return absl::OkStatus();
}

absl::StatusOr<NamedParams> FsdpTrainState::FullStateDict() {
  return fsdp_->FullStateDict(/*root=*/0);
}

}  // namespace verl::rl
