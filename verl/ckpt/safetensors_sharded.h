// File: verl/ckpt/safetensors_sharded.h
//
// HF-style safetensors folders: a single `model.safetensors`, or shards
// `model-00001-of-0000N.safetensors` with `model.safetensors.index.json`
// ({"metadata": {"total_size": bytes}, "weight_map": {tensor: file}}).
// Sharding follows huggingface_hub's split_state_dict_into_shards: greedy in
// key order, a new shard when the next tensor would exceed the limit, a
// tensor larger than the limit alone in its own shard.
#ifndef VERL_CKPT_SAFETENSORS_SHARDED_H_
#define VERL_CKPT_SAFETENSORS_SHARDED_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "verl/ckpt/safetensors.h"

namespace verl::ckpt {

inline constexpr char kSafetensorsSingleFile[] = "model.safetensors";
inline constexpr char kSafetensorsIndexFile[] = "model.safetensors.index.json";
// huggingface_hub's default max_shard_size (5 GB).
inline constexpr uint64_t kDefaultMaxShardSize = 5'000'000'000;

struct ShardIndex {
  uint64_t total_size = 0;                        // metadata.total_size
  std::map<std::string, std::string> weight_map;  // tensor -> shard file

  // Distinct shard file names, sorted.
  std::vector<std::string> Files() const;
};

// Reads and validates an index file (shard names must be plain file names).
absl::StatusOr<ShardIndex> ReadShardIndex(const std::string& path);
// The index as HF writes it (sorted keys, indent 2, trailing newline).
std::string ShardIndexToJson(const ShardIndex& index);

// "model-00002-of-00005.safetensors" for index 1 (0-based) of 5.
std::string ShardFileName(int index, int count);

// Tensor names per shard, in key order, for shards of at most
// `max_shard_size` bytes (a bigger tensor gets a shard of its own).
std::vector<std::vector<std::string>> PlanShards(const TensorMap& tensors,
                                                 uint64_t max_shard_size);

// Writes `tensors` into the existing folder `dir`: `model.safetensors` when
// one shard suffices, otherwise the shards and then the index (each file
// atomically). Afterwards removes stale model shards / index left by an
// earlier save so the folder never mixes two saves.
absl::Status SaveSafetensorsFolder(
    const std::string& dir, const TensorMap& tensors,
    uint64_t max_shard_size = kDefaultMaxShardSize,
    const StMetadata& metadata = {{"format", "pt"}});

// The safetensors files of `dir` (from the index if present, else
// `model.safetensors`), as full paths. NotFound when there are neither.
absl::StatusOr<std::vector<std::string>> SafetensorsFolderFiles(
    const std::string& dir);

// Calls `fn` for every tensor of the folder, one file mapped at a time, after
// checking each shard holds exactly the tensors the index assigns to it.
// Tensors are views of the mapping (kept alive only if `fn` keeps them).
absl::Status ForEachTensorInFolder(
    const std::string& dir,
    const std::function<absl::Status(const std::string& name,
                                     const at::Tensor& tensor)>& fn);

// Every tensor of the folder (views of the mapped files).
absl::StatusOr<TensorMap> LoadSafetensorsFolder(const std::string& dir);

}  // namespace verl::ckpt

#endif  // VERL_CKPT_SAFETENSORS_SHARDED_H_
