// File: verl/ckpt/checkpoint_manager.cc
#include "verl/ckpt/checkpoint_manager.h"

#include <fcntl.h>
#include <stdio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "glog/logging.h"
#include "verl/ckpt/dist_ckpt.h"
#include "verl/ckpt/safetensors_sharded.h"
#include "verl/core/file_util.h"
#include "verl/core/status.h"

namespace verl::ckpt {
namespace fs = std::filesystem;
namespace {

constexpr char kStepPrefix[] = "global_step_";
constexpr char kTempSuffix[] = ".tmp-save";
constexpr char kOldSuffix[] = ".tmp-old";

std::string Join(const std::string& a, const std::string& b) {
  return (fs::path(a) / b).string();
}

absl::Status FsError(const std::string& what, const std::string& path,
                     const std::error_code& ec) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", ec.message()));
}

absl::Status RemoveAll(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  return ec ? FsError("cannot remove", path, ec) : absl::OkStatus();
}

// fsyncs every folder of the tree at `root` (files are fsynced when written).
absl::Status FsyncTree(const std::string& root) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory()) {
      VERL_RETURN_IF_ERROR(core::FsyncPath(it->path().string()));
    }
  }
  if (ec) return FsError("cannot list", root, ec);
  return core::FsyncPath(root);
}

absl::Status CopyFileSynced(const std::string& src, const std::string& dst) {
  VERL_ASSIGN_OR_RETURN(std::string bytes, core::ReadFile(src));
  return core::WriteFileAtomic(dst, bytes);
}

absl::Status WriteJson(const std::string& path, const nlohmann::json& json) {
  return core::WriteFileAtomic(path, json.dump(2) + "\n");
}

// Committed step folders in `dir` (no temp folders), by step.
std::map<int64_t, std::string> CommittedSteps(const std::string& dir) {
  std::map<int64_t, std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    absl::string_view rest = name;
    int64_t step = 0;
    if (entry.is_directory() && absl::ConsumePrefix(&rest, kStepPrefix) &&
        absl::SimpleAtoi(rest, &step)) {
      out[step] = entry.path().string();
    }
  }
  return out;
}

}  // namespace

std::string StepDirName(int64_t step) {
  return absl::StrCat(kStepPrefix, step);
}

std::string RankFileName(const std::string& kind, int rank, int world_size) {
  return absl::StrCat(kind, "_world_size_", world_size, "_rank_", rank, ".pt");
}

absl::StatusOr<int64_t> StepFromDir(const std::string& dir) {
  std::string path = dir;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const std::string name = fs::path(path).filename().string();
  absl::string_view rest = name;
  int64_t step = 0;
  if (!absl::ConsumePrefix(&rest, kStepPrefix) ||
      !absl::SimpleAtoi(rest, &step) || step < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint folder '", dir, "' is not named global_step_<N>"));
  }
  return step;
}

absl::StatusOr<ResumeMode> ParseResumeMode(const std::string& mode) {
  if (mode == "auto") return ResumeMode::kAuto;
  if (mode == "disable") return ResumeMode::kDisable;
  if (mode == "resume_path") return ResumeMode::kResumePath;
  return absl::InvalidArgumentError(
      absl::StrCat("trainer.resume_mode: unknown value '", mode,
                   "' (expected auto, disable or resume_path)"));
}

absl::Status LocalAllOk(const absl::Status& local) { return local; }

CheckpointManager::CheckpointManager(CheckpointManagerOptions options)
    : options_(std::move(options)) {}

std::string CheckpointManager::StepDir(int64_t step) const {
  return Join(options_.default_local_dir, StepDirName(step));
}

std::string CheckpointManager::TempStepDir(int64_t step) const {
  return StepDir(step) + kTempSuffix;
}

std::string CheckpointManager::TrackerPath() const {
  return Join(options_.default_local_dir, kTrackerFileName);
}

std::set<std::string> CheckpointManager::SaveContents(
    const std::string& role) const {
  auto it = options_.role_save_contents.find(role);
  return it != options_.role_save_contents.end() ? it->second
                                                 : options_.save_contents;
}

std::set<std::string> CheckpointManager::LoadContents(
    const std::string& role) const {
  auto it = options_.role_load_contents.find(role);
  if (it != options_.role_load_contents.end() && !it->second.empty()) {
    return it->second;
  }
  if (!options_.role_load_contents.count(role) &&
      !options_.load_contents.empty()) {
    return options_.load_contents;
  }
  return SaveContents(role);
}

absl::Status CheckpointManager::BeginSave(int64_t step) {
  if (!options_.save_contents.count("model")) {
    return absl::InvalidArgumentError(
        "checkpoint.save_contents must contain 'model'");
  }
  for (const auto& [role, contents] : options_.role_save_contents) {
    if (!contents.count("model")) {
      return absl::InvalidArgumentError(
          absl::StrCat(role, ".checkpoint.save_contents must contain 'model'"));
    }
  }
  VERL_RETURN_IF_ERROR(core::MakeDirs(options_.default_local_dir));
  VERL_RETURN_IF_ERROR(RemoveUnfinishedSaves());
  return core::MakeDirs(TempStepDir(step));
}

absl::Status CheckpointManager::RemoveUnfinishedSaves() {
  std::error_code ec;
  if (!fs::is_directory(options_.default_local_dir, ec)) {
    return absl::OkStatus();
  }
  for (const auto& entry :
       fs::directory_iterator(options_.default_local_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (absl::StartsWith(name, kStepPrefix) &&
        absl::StrContains(name, ".tmp-")) {
      LOG(INFO) << "removing unfinished checkpoint folder " << entry.path();
      VERL_RETURN_IF_ERROR(RemoveAll(entry.path().string()));
    }
  }
  if (ec) return FsError("cannot list", options_.default_local_dir, ec);
  return absl::OkStatus();
}

absl::Status CheckpointManager::SaveShard(int64_t step, const std::string& role,
                                          int rank, int world_size,
                                          const RoleShard& shard) {
  const std::string dir = Join(TempStepDir(step), role);
  VERL_RETURN_IF_ERROR(core::MakeDirs(dir));
  if (shard.write_files) return shard.write_files(dir);
  const std::set<std::string> contents = SaveContents(role);
  VERL_RETURN_IF_ERROR(SavePtTensorDict(
      Join(dir, RankFileName("model", rank, world_size)), shard.model));
  if (contents.count("optimizer")) {
    VERL_RETURN_IF_ERROR(
        SavePtOptimizer(Join(dir, RankFileName("optim", rank, world_size)),
                        shard.optimizer_group, shard.optimizer));
  }
  if (contents.count("extra")) {
    VERL_RETURN_IF_ERROR(SavePtExtraState(
        Join(dir, RankFileName("extra_state", rank, world_size)), shard.extra));
  }
  return absl::OkStatus();
}

absl::Status WriteLoraAdapter(const std::string& dir,
                              const std::map<std::string, at::Tensor>& lora,
                              double lora_alpha) {
  VERL_RETURN_IF_ERROR(core::MakeDirs(dir));
  VERL_RETURN_IF_ERROR(
      SaveSafetensors(Join(dir, "adapter_model.safetensors"), lora));
  std::set<std::string> targets;
  int64_t rank = 0;
  for (const auto& [name, t] : lora) {
    // "...self_attn.q_proj.lora_A.weight" -> "q_proj".
    const size_t pos = name.find(".lora_");
    const std::string module = name.substr(0, pos);
    targets.insert(module.substr(module.rfind('.') + 1));
    if (t.dim() == 2) rank = std::min(t.size(0), t.size(1));
  }
  nlohmann::json config = {{"peft_type", "LORA"},
                           {"task_type", "CAUSAL_LM"},
                           {"r", rank},
                           {"lora_alpha", lora_alpha},
                           {"target_modules", targets},
                           {"bias", "none"}};
  return core::WriteFileAtomic(Join(dir, "adapter_config.json"),
                               config.dump(2) + "\n");
}

absl::Status CheckpointManager::SaveRoleMeta(int64_t step,
                                             const std::string& role,
                                             const RoleMeta& meta) {
  const std::string dir = Join(TempStepDir(step), role);
  VERL_RETURN_IF_ERROR(core::MakeDirs(dir));
  if (meta.dist_ckpt) {
    VERL_RETURN_IF_ERROR(
        FinalizeDistCkpt(Join(dir, kDistCkptSubdir), meta.layout.world_size));
  } else {
    VERL_RETURN_IF_ERROR(WriteJson(Join(dir, kFsdpConfigFileName),
                                   FsdpLayoutToJson(meta.layout)));
  }
  const std::string hf = Join(dir, kHfSubdir);
  VERL_RETURN_IF_ERROR(core::MakeDirs(hf));
  if (!meta.hf_config.is_null()) {
    VERL_RETURN_IF_ERROR(WriteJson(Join(hf, "config.json"), meta.hf_config));
  }
  if (!meta.generation_config.is_null()) {
    VERL_RETURN_IF_ERROR(
        WriteJson(Join(hf, "generation_config.json"), meta.generation_config));
  }
  for (const std::string& file : meta.hf_files) {
    VERL_RETURN_IF_ERROR(
        CopyFileSynced(file, Join(hf, fs::path(file).filename().string())));
  }
  if (SaveContents(role).count("hf_model")) {
    if (meta.hf_model.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("role ", role,
                       ": save_contents has hf_model but no full weights "
                       "were given"));
    }
    VERL_RETURN_IF_ERROR(
        SaveSafetensorsFolder(hf, meta.hf_model, meta.hf_max_shard_size));
  }
  if (!meta.lora_adapter.empty()) {
    VERL_RETURN_IF_ERROR(WriteLoraAdapter(Join(dir, kLoraAdapterSubdir),
                                          meta.lora_adapter, meta.lora_alpha));
  }
  return absl::OkStatus();
}

absl::Status CheckpointManager::SaveDataState(int64_t step,
                                              const nlohmann::json& state) {
  return SavePtJson(Join(TempStepDir(step), kDataStateFileName), state);
}

absl::Status CheckpointManager::CommitSave(int64_t step) {
  const std::string tmp = TempStepDir(step);
  const std::string final_dir = StepDir(step);
  VERL_RETURN_IF_ERROR(FsyncTree(tmp));
  std::error_code ec;
  if (fs::exists(final_dir, ec)) {
    // Re-saving a step: swap atomically, then drop the old copy.
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_dir.c_str(),
                    RENAME_EXCHANGE) != 0) {
      return absl::InternalError(absl::StrCat("cannot exchange ", tmp, " and ",
                                              final_dir, ": ",
                                              std::strerror(errno)));
    }
    const std::string old = final_dir + kOldSuffix;
    fs::rename(tmp, old, ec);
    if (ec) return FsError("cannot rename", tmp, ec);
    VERL_RETURN_IF_ERROR(core::FsyncPath(options_.default_local_dir));
    VERL_RETURN_IF_ERROR(RemoveAll(old));
  } else {
    fs::rename(tmp, final_dir, ec);
    if (ec) return FsError("cannot rename", tmp, ec);
  }
  VERL_RETURN_IF_ERROR(core::FsyncPath(options_.default_local_dir));
  VERL_RETURN_IF_ERROR(
      core::WriteFileAtomic(TrackerPath(), absl::StrCat(step)));
  return ApplyRetention(step);
}

absl::Status CheckpointManager::ApplyRetention(int64_t just_saved) {
  const auto steps = CommittedSteps(options_.default_local_dir);
  for (const auto& [role, keep] : options_.max_ckpt_to_keep) {
    if (keep <= 0) continue;
    std::vector<int64_t> with_role;
    for (const auto& [step, dir] : steps) {
      if (fs::is_directory(Join(dir, role))) with_role.push_back(step);
    }
    // Newest `keep` by step number survive; the step just saved always does.
    int kept = 0;
    for (auto it = with_role.rbegin(); it != with_role.rend(); ++it) {
      if (*it == just_saved || kept < keep) {
        ++kept;
        continue;
      }
      LOG(INFO) << "retention: removing " << Join(steps.at(*it), role);
      VERL_RETURN_IF_ERROR(RemoveAll(Join(steps.at(*it), role)));
    }
  }
  // Drop step folders that no longer hold any role.
  for (const auto& [step, dir] : steps) {
    if (step == just_saved) continue;
    bool has_role = false;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      has_role |= entry.is_directory();
    }
    if (!has_role && !ec) VERL_RETURN_IF_ERROR(RemoveAll(dir));
  }
  return core::FsyncPath(options_.default_local_dir);
}

absl::Status CheckpointManager::Save(
    int64_t step, int rank, int world_size,
    const std::map<std::string, RoleSave>& roles,
    const nlohmann::json& data_state, const AllOkFn& all_ok) {
  // A failed phase ends the save on every rank (after the all-ok barrier,
  // so no rank still writes); rank 0 then removes the temp folder.
  auto fail = [&](const absl::Status& s, const char* phase) {
    if (rank == 0) {
      std::error_code ec;
      fs::remove_all(TempStepDir(step), ec);
      LOG_IF(WARNING, ec) << "cannot remove " << TempStepDir(step) << ": "
                          << ec.message();
    }
    return Annotate(s, absl::StrCat("checkpoint save of step ", step, " (",
                                    phase, ", rank ", rank, ")"));
  };
  absl::Status s = all_ok(rank == 0 ? BeginSave(step) : absl::OkStatus());
  if (!s.ok()) return fail(s, "begin");
  absl::Status local;
  for (const auto& [role, save] : roles) {
    if (!local.ok()) break;
    local = SaveShard(step, role, rank, world_size, save.shard);
  }
  s = all_ok(local);
  if (!s.ok()) return fail(s, "shards");
  if (rank == 0) {
    for (const auto& [role, save] : roles) {
      if (!local.ok()) break;
      local = SaveRoleMeta(step, role, save.meta);
    }
    if (local.ok() && !data_state.is_null()) {
      local = SaveDataState(step, data_state);
    }
    if (local.ok()) local = CommitSave(step);
  }
  s = all_ok(local);
  return s.ok() ? s : fail(s, "commit");
}

absl::StatusOr<int64_t> CheckpointManager::LatestStep() const {
  const std::string path = TrackerPath();
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat("no tracker file ", path));
  }
  VERL_ASSIGN_OR_RETURN(std::string text, core::ReadFile(path));
  int64_t step = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &step) || step < 0) {
    return absl::DataLossError(absl::StrCat(
        path, ": expected a step number, found '", text.substr(0, 40), "'"));
  }
  return step;
}

absl::StatusOr<std::optional<std::string>> CheckpointManager::ResolveResumeDir(
    ResumeMode mode, const std::string& resume_from_path) const {
  std::error_code ec;
  switch (mode) {
    case ResumeMode::kDisable:
      return std::optional<std::string>();
    case ResumeMode::kResumePath: {
      if (!absl::StrContains(resume_from_path, kStepPrefix)) {
        return absl::InvalidArgumentError(
            absl::StrCat("trainer.resume_from_path '", resume_from_path,
                         "' must name a global_step_<N> folder"));
      }
      VERL_RETURN_IF_ERROR(StepFromDir(resume_from_path).status());
      if (!fs::is_directory(resume_from_path, ec)) {
        return absl::NotFoundError(absl::StrCat(
            "trainer.resume_from_path: no folder ", resume_from_path));
      }
      return std::optional<std::string>(resume_from_path);
    }
    case ResumeMode::kAuto: {
      absl::StatusOr<int64_t> step = LatestStep();
      if (absl::IsNotFound(step.status())) {
        LOG(INFO) << "no checkpoint in " << options_.default_local_dir
                  << ": training from scratch";
        return std::optional<std::string>();
      }
      VERL_RETURN_IF_ERROR(step.status());
      const std::string dir = StepDir(*step);
      if (!fs::is_directory(dir, ec)) {
        return absl::DataLossError(absl::StrCat(TrackerPath(), " names step ",
                                                *step, " but ", dir,
                                                " does not exist"));
      }
      return std::optional<std::string>(dir);
    }
  }
  return absl::InternalError("bad resume mode");
}

absl::StatusOr<FsdpLayout> CheckpointManager::LoadLayout(
    const std::string& step_dir, const std::string& role) const {
  const std::string path = Join(Join(step_dir, role), kFsdpConfigFileName);
  VERL_ASSIGN_OR_RETURN(nlohmann::json json, core::ReadJsonFile(path));
  return FsdpLayoutFromJson(json, path);
}

absl::StatusOr<RoleShard> CheckpointManager::LoadShard(
    const std::string& step_dir, const std::string& role, int rank,
    int world_size) const {
  const std::string dir = Join(step_dir, role);
  VERL_ASSIGN_OR_RETURN(FsdpLayout layout, LoadLayout(step_dir, role));
  if (layout.world_size != world_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        Join(dir, RankFileName("model", 0, layout.world_size)), " .. ",
        RankFileName("model", layout.world_size - 1, layout.world_size), " (",
        kFsdpConfigFileName, " world_size ", layout.world_size,
        ") were saved by ", layout.world_size,
        " ranks but this run has world size ", world_size, " (it looks for ",
        RankFileName("model", rank, world_size),
        "); resuming with a different world size is not supported (merge it "
        "with //tools:model_merger and start from the HF folder instead)"));
  }
  // Chunks are over the last mesh dim for HSDP ("ddp", "fsdp").
  int chunks = world_size;
  if (layout.mesh_shape.size() == 2 && layout.mesh_shape[1] > 0) {
    chunks = static_cast<int>(layout.mesh_shape[1]);
  }
  const int chunk = rank % chunks;
  const std::set<std::string> contents = LoadContents(role);
  RoleShard shard;
  if (contents.count("model")) {
    const std::string path = Join(dir, RankFileName("model", rank, world_size));
    VERL_ASSIGN_OR_RETURN(shard.model, LoadPtTensorDict(path));
    for (const auto& [name, tensor] : shard.model) {
      auto it = layout.params.find(name);
      if (it == layout.params.end()) {
        if (layout.params.empty()) continue;  // verl-written: no layout
        return absl::DataLossError(absl::StrCat(
            path, ": tensor '", name, "' is not in ", kFsdpConfigFileName));
      }
      if (tensor.sizes().vec() != it->second.ChunkShape(chunk, chunks)) {
        return absl::DataLossError(absl::StrCat(
            path, ": tensor '", name, "' has the wrong chunk shape for chunk ",
            chunk, " of ", chunks));
      }
    }
  }
  if (contents.count("optimizer")) {
    VERL_ASSIGN_OR_RETURN(
        shard.optimizer,
        LoadPtOptimizer(Join(dir, RankFileName("optim", rank, world_size)),
                        &shard.optimizer_group));
  }
  if (contents.count("extra")) {
    VERL_ASSIGN_OR_RETURN(
        shard.extra, LoadPtExtraState(Join(
                         dir, RankFileName("extra_state", rank, world_size))));
  }
  return shard;
}

absl::StatusOr<std::optional<nlohmann::json>> CheckpointManager::LoadDataState(
    const std::string& step_dir) const {
  const std::string path = Join(step_dir, kDataStateFileName);
  const std::string legacy = Join(step_dir, kLegacyDataStateFileName);
  std::error_code ec;
  if (fs::exists(path, ec)) {
    VERL_ASSIGN_OR_RETURN(nlohmann::json json, LoadPtJson(path));
    return std::optional<nlohmann::json>(std::move(json));
  }
  if (!fs::exists(legacy, ec)) return std::optional<nlohmann::json>();
  VERL_ASSIGN_OR_RETURN(nlohmann::json json, core::ReadJsonFile(legacy));
  return std::optional<nlohmann::json>(std::move(json));
}

}  // namespace verl::ckpt
