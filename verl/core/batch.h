// File: verl/core/batch.h
//
// Batch: verl's DataProto in C++. A batch of B rows made of
//   * named tensors that all share dim 0 (= B), e.g. input_ids [B, T];
//   * non-tensor columns: one JSON value per row (uid strings, data_source,
//     reward_model dicts, extra_info, ...), verl's `non_tensor_batch`;
//   * meta_info: one JSON object for the whole batch (temperature,
//     global_steps, metrics, ...).
// Every row operation (slice, index, chunk, split, concat, repeat, padding)
// acts on tensors and non-tensor columns alike; meta_info is carried along.
// The byte format that moves batches between ranks is in batch_wire.h.
//
// The batch size is dim 0 of any column; a batch without columns has size 0
// and accepts columns of any size. Tensor-producing operations return views
// where verl does (Slice, Chunk, Split, Select share storage); Index, Repeat,
// PadToDivisor and Concat copy.
#ifndef VERL_CORE_BATCH_H_
#define VERL_CORE_BATCH_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace verl {
namespace core {

class Batch {
 public:
  using Json = nlohmann::json;
  // Optional key list: std::nullopt means "all keys" (verl's `None`).
  // Careful: a bare `{}` argument also converts to std::nullopt; to select no
  // key, pass `std::vector<std::string>{}`.
  using KeyList = std::optional<std::vector<std::string>>;

  Batch() : meta_info_(Json::object()) {}

  // Builds a batch from columns (verl's DataProto.from_dict); errors on
  // mismatched sizes, 0-dim/undefined tensors, unsupported dtypes, or a
  // meta_info that is not an object.
  static absl::StatusOr<Batch> FromColumns(
      std::map<std::string, at::Tensor> tensors,
      std::map<std::string, std::vector<Json>> non_tensors = {},
      Json meta_info = Json::object());

  // Number of rows (0 for a batch without columns).
  int64_t size() const { return size_; }
  // Whether a tensor column may have this dtype: bool, integer, float (incl.
  // half/bfloat16) and complex float/double; not quantized or complex-half.
  static bool SupportsDtype(at::ScalarType type);
  // True when the batch has neither tensor nor non-tensor columns.
  bool has_no_columns() const {
    return tensors_.empty() && non_tensors_.empty();
  }

  // ---- Column access --------------------------------------------------------
  bool HasTensor(const std::string& key) const;
  bool HasNonTensor(const std::string& key) const;
  std::vector<std::string> TensorKeys() const;     // sorted
  std::vector<std::string> NonTensorKeys() const;  // sorted
  const std::map<std::string, at::Tensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::vector<Json>>& non_tensors() const {
    return non_tensors_;
  }

  // Adds or replaces a column. Errors: undefined or 0-dim tensor, unsupported
  // dtype (quantized/complex-half), or dim 0 / length != size() while the batch
  // has columns.
  absl::Status SetTensor(const std::string& key, at::Tensor tensor);
  absl::Status SetNonTensor(const std::string& key, std::vector<Json> values);

  // Lookups for keys that may be missing (from configs, user data, another
  // role's output): NotFound names the key and lists the present keys, e.g.
  // "Batch: no tensor 'old_log_probs' (tensors: [input_ids, responses])".
  // The Tensor is a shared handle (no copy of the data).
  absl::StatusOr<at::Tensor> GetTensor(const std::string& key) const;
  absl::StatusOr<std::vector<Json>> GetNonTensor(const std::string& key) const;
  // Accessors for keys the caller itself just set (an invariant): a missing
  // key CHECK-fails, naming the present keys.
  const at::Tensor& tensor(const std::string& key) const;
  const std::vector<Json>& non_tensor(const std::string& key) const;

  // Removes and returns one column.
  absl::StatusOr<at::Tensor> PopTensor(const std::string& key);
  absl::StatusOr<std::vector<Json>> PopNonTensor(const std::string& key);
  // verl's pop(): removes the named tensor, non-tensor and meta keys and
  // returns them as a new batch. All keys are checked before anything moves.
  absl::StatusOr<Batch> Pop(
      const std::vector<std::string>& tensor_keys,
      const std::vector<std::string>& non_tensor_keys = {},
      const std::vector<std::string>& meta_keys = {});
  // Renames the tensor column `from` if there is one, else the non-tensor
  // column `from`; error if neither exists or `to` exists in that kind.
  absl::Status Rename(const std::string& from, const std::string& to);

  Json& meta_info() { return meta_info_; }
  const Json& meta_info() const { return meta_info_; }

  // ---- Row operations (all leave *this unchanged) ---------------------------
  // Keeps the listed keys (nullopt = all of that kind). Unknown key: NotFound.
  absl::StatusOr<Batch> Select(KeyList tensor_keys,
                               KeyList non_tensor_keys = std::nullopt,
                               KeyList meta_keys = std::nullopt) const;
  // Rows start, start+step, ... < end; requires 0 <= start <= end <= size(),
  // step >= 1. Tensors are views.
  absl::StatusOr<Batch> Slice(int64_t start, int64_t end,
                              int64_t step = 1) const;
  // Gathers rows in the given order (repeats allowed). Indices may be negative
  // (counted from the end, as in Python). The tensor overload takes a 1-D
  // integer tensor or a 1-D bool mask of length size() (verl's select_idxs).
  absl::StatusOr<Batch> Index(const std::vector<int64_t>& indices) const;
  absl::StatusOr<Batch> Index(const at::Tensor& indices) const;
  // In-place Index (verl's reorder).
  absl::Status Reorder(const at::Tensor& indices);
  // n equal parts; error unless n >= 1 and size() % n == 0 (verl's chunk).
  absl::StatusOr<std::vector<Batch>> Chunk(int64_t n) const;
  // Consecutive parts of the given sizes; they must be >= 0 and sum to size().
  absl::StatusOr<std::vector<Batch>> Split(
      const std::vector<int64_t>& sizes) const;
  // Consecutive parts of `part_size` rows, the last one possibly smaller
  // (verl's split(split_size), e.g. PPO mini-batches). part_size >= 1.
  absl::StatusOr<std::vector<Batch>> SplitEvery(int64_t part_size) const;
  // Each row n times: interleave -> r0 r0 r1 r1 ..., else r0 r1 .. r0 r1 ..
  // (verl's repeat(times, interleave)). Requires n >= 1.
  absl::StatusOr<Batch> Repeat(int64_t n, bool interleave = true) const;
  // verl's pad_dataproto_to_divisor: appends rows 0, 1, 2, ... (cycling) until
  // size() is a multiple of k; returns (padded batch, pad_size). k >= 1.
  absl::StatusOr<std::pair<Batch, int64_t>> PadToDivisor(int64_t k) const;
  // Drops the last pad_size rows (0 <= pad_size <= size()).
  absl::StatusOr<Batch> Unpad(int64_t pad_size) const;

  // Row-wise concatenation. All batches must have the same tensor keys with
  // the same dtypes, devices and trailing shapes, and the same non-tensor
  // keys. meta_info is merged as in verl: equal keys must agree, except
  // "metrics" whose entries (a dict, or a list of dicts) are collected into
  // one dict of lists. An empty list gives an empty batch.
  static absl::StatusOr<Batch> Concat(const std::vector<Batch>& batches);

  // Merges `other` into *this (verl's union): sizes must match unless one side
  // has no columns; a key present in both must hold identical content (same
  // dtype, shape and bytes / equal JSON values); meta_info keys likewise.
  // On error *this is unchanged.
  absl::Status Union(const Batch& other);

  // Exact equality: same keys; tensors with the same dtype, shape and bytes;
  // equal JSON values and meta_info.
  bool Equal(const Batch& other) const;
  // "Batch(size=4, tensors={a: Float[4, 3]}, non_tensors={uid}, meta={temp})"
  std::string DebugString() const;

 private:
  // Builds a batch with the same meta_info whose columns are `f(column)`.
  template <typename TensorFn, typename JsonFn>
  Batch MapColumns(int64_t new_size, TensorFn tensor_fn, JsonFn json_fn) const;
  // Index() after the indices were validated and made non-negative.
  Batch Gather(const std::vector<int64_t>& indices) const;
  absl::Status CheckRows(absl::string_view what, const std::string& key,
                         int64_t rows) const;
  void RecomputeSizeIfEmpty();

  int64_t size_ = 0;
  std::map<std::string, at::Tensor> tensors_;
  std::map<std::string, std::vector<Json>> non_tensors_;
  Json meta_info_;
};

}  // namespace core
}  // namespace verl

#endif  // VERL_CORE_BATCH_H_
