// File: verl/ckpt/checkpoint_layout.h
//
// How a parameter is split over the ranks of a sharded checkpoint, as FSDP2
// does it (torch.chunk on dim 0): with n rows and W ranks every rank owns
// ceil(n/W) rows, rank i the rows [i*ceil(n/W), min((i+1)*ceil(n/W), n))
// (possibly none); `padding` = ceil(n/W)*W - n is what FSDP2 pads internally.
// Scalars are replicated. The layout of every parameter, the world size and
// the mesh dim names are stored in `fsdp_config.json`, so a merger knows the
// placement of each tensor without guessing.
#ifndef VERL_CKPT_CHECKPOINT_LAYOUT_H_
#define VERL_CKPT_CHECKPOINT_LAYOUT_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace verl::ckpt {

struct ParamLayout {
  std::vector<int64_t> shape;  // full (unsharded) shape
  int shard_dim = 0;           // -1: replicated on every rank
  int64_t padding = 0;         // rows FSDP2 pads to a multiple of W
  std::string dtype;           // "float32", "bfloat16", ... (informative)

  // Rows [begin, end) of the shard dim owned by `rank` of `world_size`.
  std::pair<int64_t, int64_t> RowRange(int rank, int world_size) const;
  // The shape of `rank`'s chunk.
  std::vector<int64_t> ChunkShape(int rank, int world_size) const;
};

struct FsdpLayout {
  int fsdp_version = 2;
  int world_size = 1;
  std::vector<std::string> mesh_dim_names = {"fsdp"};
  // Mesh sizes per dim name; empty means {world_size}. For HSDP
  // ("ddp", "fsdp") the shards are over the last dim only.
  std::vector<int64_t> mesh_shape;
  std::map<std::string, ParamLayout> params;  // HF name -> layout
};

// dtype names as PyTorch prints them without "torch." ("float32", ...).
std::string DtypeName(at::ScalarType type);
absl::StatusOr<at::ScalarType> DtypeFromName(const std::string& name);

// The layout of a full tensor of `shape` over `world_size` ranks.
ParamLayout MakeParamLayout(const std::vector<int64_t>& shape,
                            at::ScalarType dtype, int world_size);
// The layout of every tensor of a full state dict.
FsdpLayout MakeFsdpLayout(const std::map<std::string, at::Tensor>& full,
                          int world_size);

// `rank`'s chunk of `full` (a contiguous copy, so saving it writes only the
// chunk's bytes).
at::Tensor ShardForRank(const at::Tensor& full, const ParamLayout& layout,
                        int rank, int world_size);
// Every tensor's chunk for `rank`.
std::map<std::string, at::Tensor> ShardStateDict(
    const std::map<std::string, at::Tensor>& full, const FsdpLayout& layout,
    int rank);

// Checks rank-ordered chunk shapes and dtypes against the layout (chunks
// over shapes.size() ranks). Errors name `name` and the rank.
absl::Status CheckChunks(const std::string& name, const ParamLayout& layout,
                         const std::vector<std::vector<int64_t>>& shapes,
                         const std::vector<at::ScalarType>& dtypes);

// Reassembles the full tensor from all ranks' chunks (rank order), checking
// each chunk's shape against the layout. Errors name `name` and the rank.
absl::StatusOr<at::Tensor> UnshardTensor(const std::string& name,
                                         const ParamLayout& layout,
                                         const std::vector<at::Tensor>& chunks);

// fsdp_config.json: {"FSDP_version", "world_size", "mesh_dim_names",
// "mesh_shape", "shard_layout": {name: {shape, shard_dim, padding, dtype}}}.
nlohmann::json FsdpLayoutToJson(const FsdpLayout& layout);
// Parses fsdp_config.json content; `source` names the file in errors. A file
// without "shard_layout" (as verl writes it) gives an empty `params`.
absl::StatusOr<FsdpLayout> FsdpLayoutFromJson(const nlohmann::json& json,
                                              const std::string& source);

}  // namespace verl::ckpt

#endif  // VERL_CKPT_CHECKPOINT_LAYOUT_H_
