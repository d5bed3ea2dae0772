// File: verl/ckpt/merger/checkpoint_merger.h
//
// The model merger as a library: turns one role folder of a sharded
// checkpoint (`.../global_step_N/actor`) into a HuggingFace folder, and
// compares two HF folders tensor by tensor (the merger's `test` mode).
//
// Merge: the world size and mesh come from `fsdp_config.json`, each tensor's
// placement from its stored shard layout (verl-written files without a layout:
// dim-0 concatenation, scalars replicated). The merge streams: the shard
// files' zip directories and pickles are read first (thread pool), every
// chunk shape is checked and the output layout (safetensors shards, headers)
// is computed from that metadata; then one tensor at a time is read from all
// shards straight into its rows (one thread per shard file, CRC-32 checked),
// converted to the output dtype and written at its offset. Peak memory is
// about one full tensor in the stored dtype plus its converted copy, not the
// model (docs/checkpoints.md has measured figures).
// Everything is written into `<target_dir>.tmp-merge-<host>-<pid>` (such
// folders of killed merges are removed first) and renamed to
// `target_dir` only on success: on any error nothing is left at target_dir.
// LoRA checkpoints (keys with "lora_") also get a PEFT adapter folder.
#ifndef VERL_CKPT_CHECKPOINT_MERGER_H_
#define VERL_CKPT_CHECKPOINT_MERGER_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "verl/ckpt/safetensors_sharded.h"

namespace verl::ckpt {

struct MergeOptions {
  std::string local_dir;   // the role folder (holds fsdp_config.json)
  std::string target_dir;  // HF folder to create
  // Config/tokenizer source when local_dir/huggingface has no config.json.
  std::string hf_model_path;
  bool tie_word_embedding = false;  // leave lm_head.weight out
  // Megatron: the checkpoint is a value model (critic): output_layer is
  // written as score.weight / score.bias (verl's --is-value-model).
  bool is_value_model = false;
  // Override of fsdp_config.json's mesh_dim_names ("fsdp" or "ddp,fsdp").
  std::vector<std::string> mesh_dim_names;
  at::ScalarType dtype = at::kBFloat16;
  uint64_t max_shard_size = kDefaultMaxShardSize;
  // Files copied from the HF source folder when present (config.json and
  // generation_config.json are always copied).
  std::vector<std::string> extra_hf_files;
  int num_threads = 8;  // shard reads and dtype conversion (at most 32)
  // LoRA checkpoints: also fold each adapter into its base weight,
  // W + (lora_alpha / r) * B @ A in fp32, so the HF folder is the merged full
  // model (lora_adapter/ is still written). Needs lora_alpha > 0: verl's
  // checkpoints do not store it.
  bool merge_lora = false;
  double lora_alpha = 0;
  // An existing target_dir that is not empty is replaced only when set (its
  // files are deleted); otherwise the merge is refused before any work.
  bool overwrite = false;
};

struct MergeStats {
  int world_size = 0;
  int num_shard_files = 0;
  int64_t num_tensors = 0;
  uint64_t bytes_read = 0;     // size of the shard files
  uint64_t bytes_written = 0;  // tensor bytes in the output
  int64_t num_lora_tensors = 0;
};

// Merges `options.local_dir` into `options.target_dir`. Errors name the file.
absl::StatusOr<MergeStats> MergeFsdpCheckpoint(const MergeOptions& options);

// --- The output side, shared with the Megatron backend
// (verl/models/megatron/megatron_merger.h) ---

// Checks target_dir (refused when it exists, is not empty and
// options.overwrite is unset), runs `merge(tmp)` in a fresh
// `<target_dir>.tmp-merge-<host>-<pid>` folder (killed merges' folders are
// removed first) and renames it to target_dir on success; on any error the
// temp folder is removed and target_dir is untouched.
absl::StatusOr<MergeStats> MergeIntoTarget(
    const MergeOptions& options,
    const std::function<absl::StatusOr<MergeStats>(const std::string& tmp)>&
        merge);
// config.json, generation_config.json (dtype keys patched) and
// options.extra_hf_files from local_dir/huggingface (else hf_model_path).
absl::Status CopyHfFiles(const MergeOptions& options, const std::string& tmp);
// Streams the output weights into `tmp`: `shapes` plans model.safetensors or
// shards + index (options.max_shard_size); each tensor is asked of
// `produce` once, in file order, converted to options.dtype and written, so
// about one tensor is in memory at a time. Counts into `stats`.
absl::Status WriteMergedWeights(
    const MergeOptions& options, const std::string& tmp,
    const std::map<std::string, std::vector<int64_t>>& shapes,
    const std::function<absl::StatusOr<at::Tensor>(const std::string& name)>&
        produce,
    MergeStats* stats);

struct CompareReport {
  std::vector<std::string> mismatches;  // one line each
  double max_abs_diff = 0;
  int64_t num_tensors = 0;
  bool ok() const { return mismatches.empty(); }
};

// Compares the tensors of two HF folders: same names, shapes, dtypes and
// |a - b| <= atol + rtol * |b| everywhere.
absl::StatusOr<CompareReport> CompareHfFolders(const std::string& merged,
                                               const std::string& reference,
                                               double atol = 1e-6,
                                               double rtol = 1e-6);

// "5GB", "500MB", "2GiB", "1024" (bytes) -> bytes.
absl::StatusOr<uint64_t> ParseByteSize(const std::string& text);
// "bf16"/"bfloat16", "fp16"/"float16", "fp32"/"float32".
absl::StatusOr<at::ScalarType> ParseMergeDtype(const std::string& text);

}  // namespace verl::ckpt

#endif  // VERL_CKPT_CHECKPOINT_MERGER_H_
