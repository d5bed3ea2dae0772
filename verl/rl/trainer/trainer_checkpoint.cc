// File: verl/rl/trainer/trainer_checkpoint.cc
#include "verl/rl/trainer/trainer_checkpoint.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "verl/ckpt/checkpoint_layout.h"
#include "verl/ckpt/dist_ckpt.h"
#include "verl/core/file_util.h"
#include "verl/core/status.h"
#include "verl/models/hf_config.h"
#include "verl/models/model_config.h"
#include "verl/models/tokenizer/tokenizer.h"

namespace verl::rl {
namespace fs = std::filesystem;
namespace {

constexpr char kSkippedSteps[] = "skipped_steps";

std::set<std::string> Contents(const CheckpointRole& role, bool load) {
  if (load && !role.load_contents.empty()) return role.load_contents;
  return role.save_contents;
}

// fsdp_config.json for a shard chunked over `shard.shard_world` of `world`
// ranks: one "fsdp" dim, or ("ddp", "fsdp") for hybrid sharding.
ckpt::FsdpLayout LayoutOf(const TrainStateShard& shard, int world) {
  ckpt::FsdpLayout layout;
  layout.world_size = world;
  if (shard.shard_world != world) {
    layout.mesh_dim_names = {"ddp", "fsdp"};
    layout.mesh_shape = {world / shard.shard_world, shard.shard_world};
  }
  for (const auto& [name, shape] : shard.shapes) {
    layout.params[name] = ckpt::MakeParamLayout(
        shape, shard.model.at(name).scalar_type(), shard.shard_world);
  }
  return layout;
}

// The optimizer file's param group: AdamW's hyperparameters, the LR in
// effect and the scheduler's base LR (torch's initial_lr), the parameters in
// the optimizer's order.
ckpt::OptimizerGroup OptimizerGroupOf(const TrainStateShard& shard) {
  ckpt::OptimizerGroup g;
  g.param_names = shard.optimizer_params;
  if (g.param_names.empty()) {
    for (const auto& [name, shape] : shard.shapes)
      g.param_names.push_back(name);
  }
  const OptimizerOptions& o = shard.optimizer_options;
  g.lr = shard.lr;
  g.initial_lr = o.lr;
  g.beta1 = o.beta1;
  g.beta2 = o.beta2;
  g.eps = o.eps;
  g.weight_decay = o.weight_decay;
  return g;
}

// The scratch folder of TokenizerFiles: "<prefix><host>-<pid>".
constexpr char kTokenizerTmpPrefix[] = ".tokenizer.tmp-";

// The processing class's files (the tokenizer's, or what `write` writes),
// written once into a scratch folder beside the checkpoints (not named
// global_step_*, so BeginSave leaves it alone); removed when done, or at the
// next start if the process was killed.
class TokenizerFiles {
 public:
  TokenizerFiles(const TrainerCheckpointOptions& options,
                 const std::string& root)
      : dir_(absl::StrCat(root, "/",
                          core::ProcessTempName(kTokenizerTmpPrefix))) {
    if (options.write_processing_files) {
      status_ = options.write_processing_files(dir_);
    } else if (options.tokenizer != nullptr) {
      status_ = options.tokenizer->SaveToDirectory(dir_);
    } else {
      return;
    }
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_, ec)) {
      files_.push_back(e.path().string());
    }
  }
  ~TokenizerFiles() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const absl::Status& status() const { return status_; }
  const std::vector<std::string>& files() const { return files_; }

 private:
  std::string dir_;
  absl::Status status_;
  std::vector<std::string> files_;
};

}  // namespace

CheckpointRole MakeCheckpointRole(const std::string& name, TrainState* state,
                                  const models::ModelConfig& model,
                                  const ckpt::CheckpointConfig& contents) {
  CheckpointRole role;
  role.name = name;
  role.state = state;
  absl::StatusOr<nlohmann::json> hf = models::ModelConfigToHfJson(model);
  if (hf.ok()) {
    role.hf_config = *hf;
  } else {
    LOG(WARNING) << name << ": no config.json in checkpoints: " << hf.status();
  }
  models::GenerationConfig gen;
  gen.bos_token_id = model.bos_token_id;
  gen.eos_token_ids = model.eos_token_ids;
  gen.pad_token_id = model.pad_token_id;
  role.generation_config = models::GenerationConfigToJson(gen);
  if (contents.save_contents_size() > 0) {
    role.save_contents = {contents.save_contents().begin(),
                          contents.save_contents().end()};
  }
  role.load_contents = {contents.load_contents().begin(),
                        contents.load_contents().end()};
  return role;
}

TrainerCheckpointOptions TrainerCheckpointOptionsFromConfig(
    const TrainerConfig& trainer) {
  TrainerCheckpointOptions o;
  o.default_local_dir = trainer.default_local_dir();
  o.save_freq = trainer.save_freq();
  o.resume_mode = trainer.resume_mode();
  o.resume_from_path = trainer.resume_from_path();
  const int legacy = trainer.remove_previous_ckpt_in_save() ? 1 : 0;
  o.max_ckpt_to_keep["actor"] =
      trainer.has_max_actor_ckpt_to_keep()
          ? static_cast<int>(trainer.max_actor_ckpt_to_keep())
          : legacy;
  o.max_ckpt_to_keep["critic"] =
      trainer.has_max_critic_ckpt_to_keep()
          ? static_cast<int>(trainer.max_critic_ckpt_to_keep())
          : legacy;
  return o;
}

TrainerCheckpointer::TrainerCheckpointer(
    TrainerCheckpointOptions options,
    std::shared_ptr<parallel::Communicator> world)
    : options_(std::move(options)),
      world_(world ? std::move(world) : parallel::SingleProcessCommunicator()) {
  ckpt::CheckpointManagerOptions mo;
  mo.default_local_dir = options_.default_local_dir;
  mo.max_ckpt_to_keep = options_.max_ckpt_to_keep;
  manager_ = std::make_unique<ckpt::CheckpointManager>(mo);
}

bool TrainerCheckpointer::ShouldSave(int64_t step, bool last_step) const {
  return options_.save_freq > 0 &&
         (last_step || step % options_.save_freq == 0);
}

absl::Status TrainerCheckpointer::AllOk(const absl::Status& local) {
  if (world_->size() == 1) return local;
  at::Tensor failed = at::full({1}, local.ok() ? 0.0 : 1.0, at::kFloat);
  VERL_RETURN_IF_ERROR(world_->AllReduce(failed, parallel::ReduceOp::kMax));
  if (!local.ok()) return local;
  if (failed.item<float>() > 0) {
    return absl::AbortedError(absl::StrCat(
        "checkpoint: another rank failed (this is rank ", world_->rank(), ")"));
  }
  return absl::OkStatus();
}

void TrainerCheckpointer::ConfigureRoles(
    const std::vector<CheckpointRole>& roles) {
  ckpt::CheckpointManagerOptions mo = manager_->options();
  for (const CheckpointRole& r : roles) {
    mo.role_save_contents[r.name] = Contents(r, /*load=*/false);
    mo.role_load_contents[r.name] = Contents(r, /*load=*/true);
  }
  manager_ = std::make_unique<ckpt::CheckpointManager>(mo);
}

absl::Status TrainerCheckpointer::Save(int64_t step,
                                       const std::vector<CheckpointRole>& roles,
                                       const TrainerProgress& progress) {
  ConfigureRoles(roles);
  const int rank = world_->rank();
  const int world = world_->size();
  std::map<std::string, ckpt::RoleSave> saves;
  absl::Status local;
  for (const CheckpointRole& role : roles) {
    if (!local.ok()) break;
    if (role.state->UsesDistCheckpoint()) {
      // strategy: megatron: <role>/dist_ckpt/ + transformer_config.json,
      // written by every rank inside the save protocol.
      ckpt::RoleSave& save = saves[role.name];
      const std::set<std::string> contents = Contents(role, false);
      TrainStateLoadParts parts;
      parts.optimizer = contents.count("optimizer") > 0;
      parts.counters = contents.count("extra") > 0;
      std::map<std::string, at::Tensor> rng = {{"cpu", ckpt::CpuRngState()}};
#ifdef VERL_WITH_CUDA
      if (at::Tensor cuda = ckpt::CudaRngState(); cuda.defined()) {
        rng["cuda"] = cuda;
      }
#endif
      // The collective part now (every rank, every role, in order); the
      // files are written inside the save protocol.
      absl::StatusOr<TrainState::DistCheckpointWriter> write =
          role.state->PrepareDistCheckpoint(parts, rng);
      if (!write.ok()) {
        local = Annotate(write.status(), absl::StrCat("role ", role.name));
        break;
      }
      save.shard.write_files = std::move(*write);
      save.meta.dist_ckpt = true;
      save.meta.layout.world_size = world;
      save.meta.hf_config = role.hf_config;
      save.meta.generation_config = role.generation_config;
      continue;
    }
    absl::StatusOr<TrainStateShard> shard = role.state->SaveShard();
    if (!shard.ok()) {
      local = Annotate(shard.status(), absl::StrCat("role ", role.name));
      break;
    }
    ckpt::RoleSave& save = saves[role.name];
    save.meta.layout = LayoutOf(*shard, world);
    save.shard.model = std::move(shard->model);
    save.shard.optimizer = std::move(shard->optimizer);
    save.shard.optimizer_group = OptimizerGroupOf(*shard);
    save.shard.extra.lr_scheduler_step = shard->schedule_step;
    save.shard.extra.lr_scheduler_base_lr = shard->optimizer_options.lr;
    save.shard.extra.lr_scheduler_last_lr = shard->lr;
    save.shard.extra.rng["cpu"] = ckpt::CpuRngState();
#ifdef VERL_WITH_CUDA
    if (at::Tensor cuda = ckpt::CudaRngState(); cuda.defined()) {
      save.shard.extra.rng["cuda"] = cuda;  // verl's rng["cuda"]
    }
#endif
    save.shard.extra.user[kSkippedSteps] = shard->skipped_steps;
    save.meta.hf_config = role.hf_config;
    save.meta.generation_config = role.generation_config;
    save.meta.lora_adapter = role.lora_adapter;
    save.meta.lora_alpha = role.lora_alpha;
  }
  VERL_RETURN_IF_ERROR(AllOk(local));
  // Full weights for huggingface/ (collective per role).
  for (const CheckpointRole& role : roles) {
    if (!Contents(role, false).count("hf_model")) continue;
    VERL_ASSIGN_OR_RETURN(NamedParams full, role.state->FullStateDict());
    for (auto& [name, t] : full) saves[role.name].meta.hf_model[name] = t;
  }
  std::unique_ptr<TokenizerFiles> tokenizer;
  if (rank == 0) {
    tokenizer =
        std::make_unique<TokenizerFiles>(options_, options_.default_local_dir);
    local = tokenizer->status();
    for (auto& [name, save] : saves) save.meta.hf_files = tokenizer->files();
  }
  VERL_RETURN_IF_ERROR(AllOk(local));
  const nlohmann::json data = {{"dataloader", progress.dataloader.ToJson()},
                               {"trainer", progress.trainer}};
  return manager_->Save(step, rank, world, saves, data,
                        [this](const absl::Status& s) { return AllOk(s); });
}

void TrainerCheckpointer::RemoveLeftovers() {
  const absl::Status s = manager_->RemoveUnfinishedSaves();
  LOG_IF(WARNING, !s.ok()) << s;
  const int removed =
      core::RemoveDeadTempDirs(options_.default_local_dir, kTokenizerTmpPrefix);
  LOG_IF(INFO, removed > 0)
      << "removed " << removed << " " << kTokenizerTmpPrefix
      << "* folder(s) of killed runs in " << options_.default_local_dir;
}

absl::StatusOr<int64_t> TrainerCheckpointer::Resume(
    const std::vector<CheckpointRole>& roles, TrainerProgress* progress) {
  ConfigureRoles(roles);
  if (world_->rank() == 0) RemoveLeftovers();
  VERL_ASSIGN_OR_RETURN(ckpt::ResumeMode mode,
                        ckpt::ParseResumeMode(options_.resume_mode));
  absl::StatusOr<std::optional<std::string>> dir =
      manager_->ResolveResumeDir(mode, options_.resume_from_path);
  VERL_RETURN_IF_ERROR(AllOk(dir.status()));
  if (!dir->has_value()) return 0;
  const std::string step_dir = **dir;
  VERL_ASSIGN_OR_RETURN(const int64_t step, ckpt::StepFromDir(step_dir));
  const int rank = world_->rank();
  for (const CheckpointRole& role : roles) {
    const std::set<std::string> contents = Contents(role, /*load=*/true);
    std::error_code ec;
    const std::string role_dir = absl::StrCat(step_dir, "/", role.name);
    if (role.state->UsesDistCheckpoint() &&
        fs::is_directory(absl::StrCat(role_dir, "/", ckpt::kDistCkptSubdir),
                         ec)) {
      // Any tp/dp layout loads (resharding); checkpoints of this strategy
      // in the world-size layout (older versions) take the path below.
      TrainStateLoadParts parts;
      parts.model = contents.count("model") > 0;
      parts.optimizer = contents.count("optimizer") > 0;
      parts.counters = contents.count("extra") > 0;
      absl::StatusOr<std::map<std::string, at::Tensor>> rng =
          role.state->LoadDistCheckpoint(role_dir, parts);
      absl::Status loaded = rng.status();
      if (loaded.ok() && rng->count("cpu")) {
        loaded = ckpt::RestoreCpuRngState(rng->at("cpu"));
      }
#ifdef VERL_WITH_CUDA
      if (loaded.ok() && rng->count("cuda")) {
        absl::Status cuda = ckpt::RestoreCudaRngState(rng->at("cuda"));
        if (absl::IsFailedPrecondition(cuda)) {
          LOG(WARNING) << role_dir << ": " << cuda.message()
                       << "; the CUDA generator keeps its seed";
        } else {
          loaded = cuda;
        }
      }
#endif
      VERL_RETURN_IF_ERROR(AllOk(Annotate(
          loaded, absl::StrCat("loading ", role.name, " from ", step_dir))));
      continue;
    }
    absl::StatusOr<ckpt::RoleShard> files =
        manager_->LoadShard(step_dir, role.name, rank, world_->size());
    absl::StatusOr<ckpt::FsdpLayout> layout =
        files.ok() ? manager_->LoadLayout(step_dir, role.name)
                   : absl::StatusOr<ckpt::FsdpLayout>(files.status());
    VERL_RETURN_IF_ERROR(AllOk(layout.status()));
    TrainStateShard shard;
    shard.shard_world = layout->mesh_shape.size() == 2
                            ? static_cast<int>(layout->mesh_shape[1])
                            : layout->world_size;
    shard.shard_rank = rank % shard.shard_world;
    shard.model = std::move(files->model);
    shard.optimizer = std::move(files->optimizer);
    const ckpt::ExtraState& extra = files->extra;
    shard.schedule_step = std::max<int64_t>(extra.lr_scheduler_step, 0);
    shard.skipped_steps = extra.user.value(kSkippedSteps, int64_t{0});
    TrainStateLoadParts parts;
    parts.model = contents.count("model") > 0;
    parts.optimizer = contents.count("optimizer") > 0;
    parts.counters = contents.count("extra") > 0;
    absl::Status loaded = role.state->LoadShard(shard, parts);
    if (loaded.ok() && parts.counters && extra.rng.count("cpu")) {
      loaded = ckpt::RestoreCpuRngState(extra.rng.at("cpu"));
    }
#ifdef VERL_WITH_CUDA
    if (loaded.ok() && parts.counters && extra.rng.count("cuda")) {
      absl::Status cuda = ckpt::RestoreCudaRngState(extra.rng.at("cuda"));
      if (absl::IsFailedPrecondition(cuda)) {
        LOG(WARNING) << step_dir << " " << role.name << ": " << cuda.message()
                     << "; the CUDA generator keeps its seed";
      } else {
        loaded = cuda;
      }
    }
#endif
    VERL_RETURN_IF_ERROR(AllOk(Annotate(
        loaded, absl::StrCat("loading ", role.name, " from ", step_dir))));
  }
  absl::StatusOr<std::optional<nlohmann::json>> data =
      manager_->LoadDataState(step_dir);
  absl::Status parsed = data.status();
  if (parsed.ok() && data->has_value()) {
    const nlohmann::json& j = **data;
    absl::StatusOr<DataLoaderState> dl =
        DataLoaderState::FromJson(j.value("dataloader", nlohmann::json()));
    parsed = Annotate(dl.status(),
                      absl::StrCat(step_dir, "/", ckpt::kDataStateFileName));
    if (dl.ok()) {
      progress->dataloader = *dl;
      progress->trainer = j.value("trainer", nlohmann::json::object());
    }
  } else if (parsed.ok()) {
    LOG(WARNING) << step_dir << " has no " << ckpt::kDataStateFileName
                 << ": the dataloader starts from the beginning";
  }
  VERL_RETURN_IF_ERROR(AllOk(parsed));
  LOG_IF(INFO, rank == 0) << "resumed from " << step_dir << " (global step "
                          << step << ")";
  return step;
}

}  // namespace verl::rl
