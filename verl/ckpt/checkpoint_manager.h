// File: verl/ckpt/checkpoint_manager.h
//
// verl's checkpoint layout with a crash-safe commit protocol:
//
//   {default_local_dir}/latest_checkpointed_iteration.txt   "N"
//   {default_local_dir}/global_step_{N}/data.pt             dataloader state
//   {default_local_dir}/global_step_{N}/{actor,critic}/
//       model_world_size_{W}_rank_{R}.pt        {HF name: rank R's chunk}
//       optim_world_size_{W}_rank_{R}.pt        AdamW's state_dict() (state
//                                               by index + param_groups)
//       extra_state_world_size_{W}_rank_{R}.pt  lr scheduler, RNG, JSON
//       fsdp_config.json                        world size + shard layout
//       (strategy megatron instead: dist_ckpt/, transformer_config.json)
//       huggingface/  config.json, generation_config.json, tokenizer files,
//                     full safetensors weights with save_contents hf_model
//
// Save (SPMD, every rank runs the same sequence; `Save` does it all):
//   rank 0  BeginSave: deletes leftover `global_step_*.tmp-*` folders and
//           creates `global_step_N.tmp-save/`           -- all-ok barrier --
//   all     SaveShard: own files per role, each fsynced  -- all-ok barrier --
//   rank 0  SaveRoleMeta / SaveDataState, then CommitSave: fsyncs the temp
//           tree, renames it to `global_step_N` (atomically exchanging an
//           existing one), fsyncs the parent, then atomically replaces the
//           tracker, then applies retention              -- all-ok barrier --
// A crash at any point leaves the previous checkpoint intact and the tracker
// pointing at it; the temp folder is ignored and removed at the next start
// (RemoveUnfinishedSaves) or save. A save that fails with an error removes
// its temp folder itself.
//
// Resume needs the same world size as the save (no resharding): a mismatch is
// FailedPrecondition naming both sizes. Use //tools:model_merger to turn a
// checkpoint into a full HF folder instead.
#ifndef VERL_CKPT_CHECKPOINT_MANAGER_H_
#define VERL_CKPT_CHECKPOINT_MANAGER_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "verl/ckpt/checkpoint_layout.h"
#include "verl/ckpt/checkpoint_pt.h"

namespace verl::ckpt {

inline constexpr char kTrackerFileName[] = "latest_checkpointed_iteration.txt";
inline constexpr char kFsdpConfigFileName[] = "fsdp_config.json";
inline constexpr char kHfSubdir[] = "huggingface";
// The dataloader / trainer state: a pickled dict as verl's data.pt (written),
// or data.json (read, from checkpoints of earlier versions).
inline constexpr char kDataStateFileName[] = "data.pt";
inline constexpr char kLegacyDataStateFileName[] = "data.json";

// "global_step_12".
std::string StepDirName(int64_t step);
// "model_world_size_4_rank_1.pt" for kind "model" ("optim", "extra_state").
std::string RankFileName(const std::string& kind, int rank, int world_size);
// The step of a folder named ".../global_step_N" (trailing '/' allowed).
absl::StatusOr<int64_t> StepFromDir(const std::string& dir);

enum class ResumeMode { kAuto, kDisable, kResumePath };
// "auto", "disable", "resume_path"; anything else is InvalidArgument.
absl::StatusOr<ResumeMode> ParseResumeMode(const std::string& mode);

struct CheckpointManagerOptions {
  std::string default_local_dir;
  // Subset of model, optimizer, extra, hf_model (must contain model).
  std::set<std::string> save_contents = {"model", "optimizer", "extra"};
  // Empty: same as save_contents.
  std::set<std::string> load_contents;
  // Role -> how many of its checkpoints to keep (absent or <= 0: all).
  std::map<std::string, int> max_ckpt_to_keep;
  // Per-role overrides of save_contents / load_contents (each role's
  // <role>.checkpoint block); absent roles use the two sets above.
  std::map<std::string, std::set<std::string>> role_save_contents;
  std::map<std::string, std::set<std::string>> role_load_contents;
};

// What one rank saves for one role.
struct RoleShard {
  std::map<std::string, at::Tensor> model;  // HF name -> this rank's chunk
  // "<name>.exp_avg", "<name>.exp_avg_sq", "<name>.step" (see
  // SavePtOptimizer); written with `optimizer_group` in torch's layout.
  std::map<std::string, at::Tensor> optimizer;
  OptimizerGroup optimizer_group;  // read back from the file on load
  ExtraState extra;
  // Set: writes this rank's files into the (temp) role folder instead of
  // the world-size .pt files above (Megatron's dist_ckpt/).
  std::function<absl::Status(const std::string& role_dir)> write_files;
};

// What rank 0 writes once per role.
struct RoleMeta {
  FsdpLayout layout;  // world size and the layout of every model tensor
  // The role's ranks wrote dist_ckpt/ (RoleShard::write_files): finalize
  // its .metadata (ckpt/dist_ckpt.h) for layout.world_size ranks instead of
  // writing fsdp_config.json.
  bool dist_ckpt = false;
  nlohmann::json hf_config;           // config.json; null: not written
  nlohmann::json generation_config;   // generation_config.json; null: none
  std::vector<std::string> hf_files;  // copied into huggingface/ (tokenizer)
  // Full weights for huggingface/ (only with save_contents hf_model).
  std::map<std::string, at::Tensor> hf_model;
  uint64_t hf_max_shard_size = 5'000'000'000;
  // LoRA roles: the full adapter tensors ("...lora_A/B..." names), written
  // as a PEFT folder <role>/lora_adapter/ as verl does; empty: none.
  std::map<std::string, at::Tensor> lora_adapter;
  double lora_alpha = 0;
};

// <role>/lora_adapter/: adapter_model.safetensors + adapter_config.json
// (peft_type LORA, r from the shapes, lora_alpha, target_modules).
inline constexpr char kLoraAdapterSubdir[] = "lora_adapter";
absl::Status WriteLoraAdapter(const std::string& dir,
                              const std::map<std::string, at::Tensor>& lora,
                              double lora_alpha);

struct RoleSave {
  RoleShard shard;
  RoleMeta meta;  // used on rank 0 only
};

// Called by every rank with its local status; returns OK only if every rank
// passed OK (e.g. an all-reduce of a failure flag). A single process that
// simulates all ranks, or a world of one, can pass `LocalAllOk`.
using AllOkFn = std::function<absl::Status(const absl::Status& local)>;
absl::Status LocalAllOk(const absl::Status& local);

class CheckpointManager {
 public:
  explicit CheckpointManager(CheckpointManagerOptions options);

  const CheckpointManagerOptions& options() const { return options_; }
  std::string StepDir(int64_t step) const;
  std::string TempStepDir(int64_t step) const;  // global_step_N.tmp-save
  std::string TrackerPath() const;

  // The effective save / load contents of `role` (load: the role's
  // load_contents, else the global one, else the save contents).
  std::set<std::string> SaveContents(const std::string& role) const;
  std::set<std::string> LoadContents(const std::string& role) const;

  // Removes `global_step_*.tmp-*` folders of saves that never committed
  // (rank 0, at start and in BeginSave).
  absl::Status RemoveUnfinishedSaves();

  // --- save protocol steps (see the file comment) ---
  absl::Status BeginSave(int64_t step);
  absl::Status SaveShard(int64_t step, const std::string& role, int rank,
                         int world_size, const RoleShard& shard);
  absl::Status SaveRoleMeta(int64_t step, const std::string& role,
                            const RoleMeta& meta);
  absl::Status SaveDataState(int64_t step, const nlohmann::json& state);
  absl::Status CommitSave(int64_t step);

  // The whole protocol for one SPMD rank. `data_state` (rank 0; null: none)
  // is the dataloader state (data.pt: a dict of JSON-like values).
  absl::Status Save(int64_t step, int rank, int world_size,
                    const std::map<std::string, RoleSave>& roles,
                    const nlohmann::json& data_state, const AllOkFn& all_ok);

  // --- resume ---
  // The tracker's step; NotFound when there is no tracker file.
  absl::StatusOr<int64_t> LatestStep() const;
  // The step folder to resume from, or nullopt to start from scratch
  // (disable, or auto without tracker). Errors: resume_path without
  // "global_step_" or missing; a tracker naming a missing folder.
  absl::StatusOr<std::optional<std::string>> ResolveResumeDir(
      ResumeMode mode, const std::string& resume_from_path = "") const;
  // Reads `role`'s fsdp_config.json in `step_dir`.
  absl::StatusOr<FsdpLayout> LoadLayout(const std::string& step_dir,
                                        const std::string& role) const;
  // This rank's files per load_contents (parts not loaded stay empty). For a
  // (ddp, fsdp) mesh the model chunks are over the last mesh dim (chunk
  // rank % fsdp size), else over the world.
  absl::StatusOr<RoleShard> LoadShard(const std::string& step_dir,
                                      const std::string& role, int rank,
                                      int world_size) const;
  // data.pt (else a legacy data.json), or nullopt when the step has none.
  absl::StatusOr<std::optional<nlohmann::json>> LoadDataState(
      const std::string& step_dir) const;

 private:
  absl::Status ApplyRetention(int64_t just_saved);

  CheckpointManagerOptions options_;
};

}  // namespace verl::ckpt

#endif  // VERL_CKPT_CHECKPOINT_MANAGER_H_
