// File: verl/ckpt/dist_ckpt.h
//
// A distributed checkpoint in the spirit of torch.distributed.checkpoint
// (DCP) and Megatron's dist_checkpointing: every tensor has a global key,
// shape and dtype; each rank writes the boxes (N-d slices) of the tensors it
// owns into its own data file, and one metadata file records, per tensor,
// every rank's box. A reader assembles any box of any tensor from the chunks
// that overlap it, so a checkpoint saved with one parallel layout loads into
// another (resharding on load).
//
//   dist_ckpt/
//     .metadata           JSON: {"format": "verl_cpp_dist_ckpt", "version": 1,
//                          "world_size": W, "common": {...},
//                          "tensors": {key: {"shape", "dtype",
//                            "chunks": [{"rank", "offsets", "sizes"}]}}}
//     metadata.json       Megatron's marker ({"sharded_backend": ...})
//     __R_0.distcp        rank R's chunks: a safetensors file (one tensor per
//                         key, the box's data); its header's __metadata__
//                         holds the rank's boxes (and rank 0's common state)
//
// Differences from DCP (docs/checkpoints.md): `.metadata` is JSON, not a
// pickled `Metadata` object; the data files are safetensors (header + raw
// bytes, checkable without torch) instead of concatenated torch.save
// records; a key appears at most once per rank file.
//
// Writing (SPMD): every rank calls SaveDistCkptRank (its file only, atomic),
// then, after all ranks succeeded, rank 0 calls FinalizeDistCkpt, which reads
// the rank files' headers, checks that every tensor's chunks tile it exactly
// (in bounds, disjoint, full volume, one dtype) and writes `.metadata`.
#ifndef VERL_CKPT_DIST_CKPT_H_
#define VERL_CKPT_DIST_CKPT_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace verl::ckpt {

inline constexpr char kDistCkptSubdir[] = "dist_ckpt";
inline constexpr char kDistCkptMetadataFile[] = ".metadata";
inline constexpr char kDistCkptMarkerFile[] = "metadata.json";

// "__3_0.distcp".
std::string DistCkptDataFileName(int rank);

// An uninitialised tensor; from 1 MiB up an anonymous mapping unmapped when
// the tensor dies (glibc's heap would keep freed multi-MB blocks, so a
// streaming reader's peak RSS would creep towards the model size).
at::Tensor LargeBufferTensor(at::IntArrayRef shape, at::ScalarType dtype);

// One rank's part of a global tensor: `data` is the box at `offsets` (its
// sizes are data's sizes) of a tensor of `global_shape`.
struct DistSlice {
  at::Tensor data;
  std::vector<int64_t> global_shape;
  std::vector<int64_t> offsets;
};

// Writes rank `rank`'s data file into `dir` (created if needed). `common`
// (free JSON: counters, hyper-parameters) is kept from rank 0's file.
absl::Status SaveDistCkptRank(const std::string& dir, int rank, int world_size,
                              const std::map<std::string, DistSlice>& slices,
                              const nlohmann::json& common = nullptr);

struct DistChunk {
  int rank = 0;
  std::vector<int64_t> offsets, sizes;
};
struct DistTensorMeta {
  std::vector<int64_t> shape;
  at::ScalarType dtype = at::kFloat;
  std::vector<DistChunk> chunks;
};
struct DistCkptMetadata {
  int world_size = 0;
  nlohmann::json common;
  std::map<std::string, DistTensorMeta> tensors;
};

// Rank 0, after every rank's SaveDistCkptRank: consolidates the headers into
// `.metadata` (+ metadata.json). Errors name the rank file and key.
absl::Status FinalizeDistCkpt(const std::string& dir, int world_size);

// Reads a finalized checkpoint. Open checks `.metadata`, that every rank
// file exists, is complete (its safetensors header matches its size) and
// holds exactly the chunks `.metadata` lists for it (shapes, dtypes); data is
// read with pread only when asked for.
class DistCkptReader {
 public:
  static absl::StatusOr<std::unique_ptr<DistCkptReader>> Open(
      const std::string& dir);
  ~DistCkptReader();

  const DistCkptMetadata& metadata() const { return meta_; }
  const std::string& dir() const { return dir_; }
  bool Has(const std::string& key) const {
    return meta_.tensors.count(key) > 0;
  }
  // The box [offsets, offsets + sizes) of `key` in its stored dtype,
  // assembled from every chunk that overlaps it.
  absl::StatusOr<at::Tensor> ReadBox(const std::string& key,
                                     const std::vector<int64_t>& offsets,
                                     const std::vector<int64_t>& sizes) const;
  absl::StatusOr<at::Tensor> ReadFull(const std::string& key) const;
  // Rank `rank`'s own chunk of `key` (e.g. per-rank RNG state), whole.
  absl::StatusOr<at::Tensor> ReadChunk(const std::string& key, int rank) const;

 private:
  struct RankFile;
  DistCkptReader() = default;
  absl::Status ReadChunkInto(const std::string& key, const DistChunk& chunk,
                             at::Tensor* out) const;

  std::string dir_;
  DistCkptMetadata meta_;
  std::vector<std::unique_ptr<RankFile>> files_;
};

}  // namespace verl::ckpt

#endif  // VERL_CKPT_DIST_CKPT_H_
