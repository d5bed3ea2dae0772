// File: verl/rl/trainer/trainer_checkpoint.h
//
// The PPO trainer's checkpoints (verl's RayPPOTrainer._save_checkpoint /
// _load_checkpoint) over verl::ckpt::CheckpointManager:
//
//   {trainer.default_local_dir}/global_step_{N}/
//     actor/   model/optim/extra_state_world_size_{W}_rank_{R}.pt,
//              fsdp_config.json, huggingface/ (config.json,
//              generation_config.json, tokenizer files; the full weights
//              with save_contents hf_model)
//              (strategy megatron: dist_ckpt/ + transformer_config.json +
//              huggingface/ instead, TrainState::SaveDistCheckpoint; any
//              tp/dp layout resumes it)
//     critic/  the same, when there is a critic
//     data.pt    {"dataloader": {epoch, batches_in_epoch}, "trainer": {...}}
//                (a pickled dict, as verl's data.pt; data.json of older
//                checkpoints is still read)
//   {trainer.default_local_dir}/latest_checkpointed_iteration.txt  "N", last
//
// Each model file is {HF name: this rank's dim-0 chunk} of the role's
// TrainState (replicated or FSDP: TrainState::SaveShard); the optimizer file
// holds the AdamW moments in the same chunks, in torch's optimizer
// state_dict() layout; extra_state holds the LR scheduler (as LambdaLR's
// state_dict()), the CPU RNG state and the skipped-step count. Trainer-level
// counters (uid counter, KL coefficient, ...) travel in data.pt, so a
// resumed run continues at step N+1 exactly as an uninterrupted one.
// Every call is collective over `world`; a failure on any rank becomes an
// error on every rank (never a hang).
#ifndef VERL_RL_TRAINER_TRAINER_CHECKPOINT_H_
#define VERL_RL_TRAINER_TRAINER_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "verl/ckpt/checkpoint_manager.h"
#include "verl/parallel/process_group.h"
#include "verl/rl/data/rl_dataset.h"
#include "verl/rl/trainer/config/config.pb.h"
#include "verl/rl/workers/train_state.h"

namespace verl::models {
class Tokenizer;
struct ModelConfig;
}  // namespace verl::models

namespace verl::rl {

// One role to checkpoint.
struct CheckpointRole {
  std::string name;             // "actor", "critic"
  TrainState* state = nullptr;  // its trainable state
  nlohmann::json hf_config;     // config.json for huggingface/ (null: none)
  nlohmann::json generation_config;  // generation_config.json (null: none)
  // <role>.checkpoint.save_contents / load_contents (model, optimizer,
  // extra, hf_model); empty load_contents: the save contents.
  std::set<std::string> save_contents = {"model", "optimizer", "extra"};
  std::set<std::string> load_contents;
  // LoRA roles: the adapter tensors under PEFT names, written as
  // <role>/lora_adapter/ (verl's PEFT folder); empty: not a LoRA role.
  std::map<std::string, at::Tensor> lora_adapter;
  double lora_alpha = 0;
};

// Trainer-level state besides the roles' (data.pt).
struct TrainerProgress {
  DataLoaderState dataloader;
  nlohmann::json trainer = nlohmann::json::object();  // free-form counters
};

struct TrainerCheckpointOptions {
  std::string default_local_dir;
  int64_t save_freq = -1;                       // <= 0: never
  std::string resume_mode = "auto";             // auto | disable | resume_path
  std::string resume_from_path;                 // for resume_path
  std::map<std::string, int> max_ckpt_to_keep;  // role -> count (<= 0: all)
  // Tokenizer whose files go into every role's huggingface/ (null: none).
  const models::Tokenizer* tokenizer = nullptr;
  // Writes the whole processing class into a folder instead (a
  // vision-language policy: the tokenizer plus preprocessor_config.json and
  // chat_template.json, verl's processor.save_pretrained); unset: the
  // tokenizer's files.
  std::function<absl::Status(const std::string& dir)> write_processing_files;
};

// trainer.* -> options (max_actor/critic_ckpt_to_keep; the deprecated
// remove_previous_ckpt_in_save means keep 1).
TrainerCheckpointOptions TrainerCheckpointOptionsFromConfig(
    const TrainerConfig& trainer);

// A role of the PPO trainer with its <role>.checkpoint contents and its
// config.json / generation_config.json (from `model`).
CheckpointRole MakeCheckpointRole(const std::string& name, TrainState* state,
                                  const models::ModelConfig& model,
                                  const ckpt::CheckpointConfig& contents);

class TrainerCheckpointer {
 public:
  TrainerCheckpointer(TrainerCheckpointOptions options,
                      std::shared_ptr<parallel::Communicator> world);

  // verl: save_freq > 0 and (last step or step % save_freq == 0).
  bool ShouldSave(int64_t step, bool last_step) const;

  // Writes global_step_{step} for `roles` and commits it (tracker last,
  // then retention). Collective.
  absl::Status Save(int64_t step, const std::vector<CheckpointRole>& roles,
                    const TrainerProgress& progress);

  // Rank 0 first removes what killed runs left in default_local_dir:
  // unfinished `global_step_*.tmp-*` saves and dead processes'
  // `.tokenizer.tmp-*` folders (nothing else). Then resolves
  // trainer.resume_mode and loads every role's files per its
  // load_contents (extra also restores this rank's CPU RNG) and data.pt
  // into `progress`. Returns the step resumed from, 0 when starting from
  // scratch. A checkpoint of another world size is FailedPrecondition
  // naming the files and both sizes. Collective.
  absl::StatusOr<int64_t> Resume(const std::vector<CheckpointRole>& roles,
                                 TrainerProgress* progress);

  const ckpt::CheckpointManager& manager() const { return *manager_; }

 private:
  // OK only if `local` is OK on every rank (an all-reduce of a flag).
  absl::Status AllOk(const absl::Status& local);
  void ConfigureRoles(const std::vector<CheckpointRole>& roles);
  void RemoveLeftovers();

  TrainerCheckpointOptions options_;
  std::shared_ptr<parallel::Communicator> world_;
  std::unique_ptr<ckpt::CheckpointManager> manager_;
};

}  // namespace verl::rl

#endif  // VERL_RL_TRAINER_TRAINER_CHECKPOINT_H_
