// File: verl/models/megatron/megatron_merger.cc
#include "verl/models/megatron/megatron_merger.h"

#include <ATen/ATen.h>

#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "verl/ckpt/checkpoint_manager.h"
#include "verl/ckpt/dist_ckpt.h"
#include "verl/core/status.h"
#include "verl/models/hf_config.h"
#include "verl/models/megatron/megatron_weights.h"

namespace verl::models {
namespace fs = std::filesystem;
namespace {

// Keys of dist_ckpt/ that are not model tensors.
bool IsModelKey(const std::string& key) {
  return !absl::StartsWith(key, "optimizer.") &&
         !absl::StartsWith(key, "rng_state.");
}

absl::StatusOr<ModelConfig> ReadConfig(const ckpt::MergeOptions& options,
                                       const nlohmann::json& common) {
  std::string path =
      (fs::path(options.local_dir) / ckpt::kHfSubdir / "config.json").string();
  std::error_code ec;
  if (!fs::exists(path, ec) && !options.hf_model_path.empty()) {
    path = (fs::path(options.hf_model_path) / "config.json").string();
  }
  VERL_ASSIGN_OR_RETURN(ModelConfig config, ReadHfConfig(path));
  if (options.is_value_model ||
      common.value("megatron", nlohmann::json::object())
          .value("is_value_model", false)) {
    config.is_value_model = true;
  }
  return config;
}

absl::StatusOr<ckpt::MergeStats> MergeInto(const ckpt::MergeOptions& options,
                                           const std::string& tmp) {
  const std::string dir =
      (fs::path(options.local_dir) / ckpt::kDistCkptSubdir).string();
  std::error_code ec;
  if (!fs::is_directory(options.local_dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat("--local_dir ", options.local_dir, " is not a folder"));
  }
  if (!fs::is_directory(dir, ec)) {
    if (fs::exists(fs::path(options.local_dir) / ckpt::kFsdpConfigFileName,
                   ec)) {
      return absl::InvalidArgumentError(
          absl::StrCat(options.local_dir, " holds an FSDP checkpoint (",
                       ckpt::kFsdpConfigFileName,
                       "), not a Megatron one: use --backend "
                       "fsdp"));
    }
    return absl::NotFoundError(
        absl::StrCat(dir,
                     ": missing (a Megatron checkpoint's role folder holds "
                     "dist_ckpt/ with .metadata and __R_0.distcp files)"));
  }
  VERL_ASSIGN_OR_RETURN(std::unique_ptr<ckpt::DistCkptReader> reader,
                        ckpt::DistCkptReader::Open(dir));
  const ckpt::DistCkptMetadata& meta = reader->metadata();
  VERL_ASSIGN_OR_RETURN(ModelConfig config, ReadConfig(options, meta.common));
  ckpt::MergeStats stats;
  stats.world_size = meta.world_size;
  stats.num_shard_files = meta.world_size;
  for (int r = 0; r < meta.world_size; ++r) {
    stats.bytes_read +=
        fs::file_size(fs::path(dir) / ckpt::DistCkptDataFileName(r), ec);
  }
  // Plan from the metadata: the HF names and shapes of every model tensor
  // (the mapping run on meta tensors).
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, std::string> out_to_src;
  for (const auto& [key, m] : meta.tensors) {
    if (!IsModelKey(key)) continue;
    absl::StatusOr<std::map<std::string, at::Tensor>> hf = MegatronFullToHf(
        config, key,
        at::empty(m.shape,
                  at::TensorOptions().dtype(m.dtype).device(at::kMeta)));
    if (!hf.ok()) return Annotate(hf.status(), dir + "/.metadata");
    for (const auto& [name, t] : *hf) {
      if (options.tie_word_embedding && name == "lm_head.weight") continue;
      shapes[name] = t.sizes().vec();
      out_to_src[name] = key;
    }
  }
  if (shapes.empty()) {
    return absl::DataLossError(
        absl::StrCat(dir, "/.metadata: lists no model tensors"));
  }
  VERL_RETURN_IF_ERROR(ckpt::CopyHfFiles(options, tmp));
  // The last few Megatron tensors' HF pieces (q/k/v of one linear_qkv, gate
  // and up of one linear_fc1 are consecutive in the file order, except for
  // o_proj between k and q).
  std::deque<std::pair<std::string, std::map<std::string, at::Tensor>>> cache;
  VERL_RETURN_IF_ERROR(ckpt::WriteMergedWeights(
      options, tmp, shapes,
      [&](const std::string& name) -> absl::StatusOr<at::Tensor> {
        const std::string& src = out_to_src.at(name);
        // A piece leaves the cache when it is handed out (each is written
        // once), and an entry when its last piece is.
        auto take = [&](size_t i) {
          auto& pieces = cache[i].second;
          at::Tensor t = pieces.at(name);
          pieces.erase(name);
          if (pieces.empty()) cache.erase(cache.begin() + i);
          return t;
        };
        for (size_t i = 0; i < cache.size(); ++i) {
          if (cache[i].first == src) return take(i);
        }
        VERL_ASSIGN_OR_RETURN(at::Tensor full, reader->ReadFull(src));
        VERL_ASSIGN_OR_RETURN(auto pieces, MegatronFullToHf(config, src, full));
        full = at::Tensor();
        // Pieces not written (tied lm_head) are dropped.
        for (auto it = pieces.begin(); it != pieces.end();) {
          it = shapes.count(it->first) ? std::next(it) : pieces.erase(it);
        }
        cache.emplace_back(src, std::move(pieces));
        if (cache.size() > 2) cache.pop_front();
        return take(cache.size() - 1);
      },
      &stats));
  return stats;
}

}  // namespace

absl::StatusOr<ckpt::MergeStats> MergeMegatronCheckpoint(
    const ckpt::MergeOptions& options) {
  return ckpt::MergeIntoTarget(
      options, [&](const std::string& tmp) { return MergeInto(options, tmp); });
}

}  // namespace verl::models
