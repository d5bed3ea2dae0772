// File: verl/rl/data/rl_dataset.h
//
// verl's RL dataset (rows in verl's format, read from Parquet or JSONL files
// listed in data.train_files / data.val_files) and a resumable data loader with
// the semantics of verl's StatefulDataLoader: fixed batch size, drop_last for
// training, a seeded per-epoch shuffle, and a position that can be saved in a
// checkpoint and restored exactly.
#ifndef VERL_RL_DATA_RL_DATASET_H_
#define VERL_RL_DATA_RL_DATASET_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace verl::rl {

// Sizes of the built-in datasets ("builtin:arithmetic/train", ".../test"):
// the same rows `//tools:prepare_data` writes with its defaults.
inline constexpr int64_t kBuiltinTrainRows = 2000;
inline constexpr int64_t kBuiltinTestRows = 200;

struct RLDatasetOptions {
  // .parquet (verl's format) or JSON Lines paths, by extension, or
  // "builtin:<arithmetic|countdown>/<train|test>".
  std::vector<std::string> files;
  std::string prompt_key = "prompt";
  // data.image_key: the column of a row's images (list of bytes / paths /
  // {"bytes"|"path"} objects, verl's multimodal rows); checked for form
  // only here, decoded by the PromptEncoder. Empty: not checked.
  std::string image_key = "images";
  int64_t max_samples = -1;  // data.train_max_samples; -1 = all
  bool shuffle = true;       // a random subset when max_samples is set
  uint64_t seed = 1;
  // data.filter_overlong_prompts: drop rows whose templated prompt has more
  // than max_prompt_length tokens. `prompt_length` returns that length.
  bool filter_overlong_prompts = false;
  int64_t max_prompt_length = 512;
  std::function<int64_t(const nlohmann::json& row)> prompt_length;
};

class RLDataset {
 public:
  // Loads, validates (every row needs `prompt_key` as a list of chat messages
  // and a data_source), subsamples and filters. Errors name file and line.
  static absl::StatusOr<RLDataset> Load(const RLDatasetOptions& options);
  explicit RLDataset(std::vector<nlohmann::json> rows)
      : rows_(std::move(rows)) {}

  int64_t size() const { return static_cast<int64_t>(rows_.size()); }
  const nlohmann::json& row(int64_t i) const { return rows_[i]; }
  const std::vector<nlohmann::json>& rows() const { return rows_; }

 private:
  std::vector<nlohmann::json> rows_;
};

// Position of a DataLoader; serialised into the checkpoint (data.pt's role).
struct DataLoaderState {
  int64_t epoch = 0;
  int64_t batches_in_epoch = 0;  // batches already yielded in `epoch`
  nlohmann::json ToJson() const;
  static absl::StatusOr<DataLoaderState> FromJson(const nlohmann::json& j);
};

class DataLoader {
 public:
  // batch_size <= 0 means the whole dataset as one batch (val_batch_size null).
  DataLoader(const RLDataset* dataset, int64_t batch_size, bool shuffle,
             uint64_t seed, bool drop_last);

  // Batches per epoch (len(dataloader)).
  int64_t num_batches() const;
  // Next batch of the current epoch, or nullopt at the end of the epoch (the
  // loader then moves to the next epoch).
  std::optional<std::vector<nlohmann::json>> Next();

  const DataLoaderState& state() const { return state_; }
  void set_state(const DataLoaderState& state) { state_ = state; }

 private:
  // Sample order of `epoch` (cached for the current epoch).
  const std::vector<int64_t>& EpochOrder(int64_t epoch);

  const RLDataset* dataset_;
  int64_t batch_size_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  DataLoaderState state_;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> cached_order_;
};

}  // namespace verl::rl

#endif  // VERL_RL_DATA_RL_DATASET_H_
