// File: verl/core/batch.cc
//
// Batch operations. The wire format lives in batch_wire.cc.
#include "verl/core/batch.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "verl/core/status.h"

namespace verl {
namespace core {
namespace {

using Json = Batch::Json;

// Dtypes a batch column may have (each has a wire code in batch_wire.cc).
constexpr at::ScalarType kSupportedDtypes[] = {
    at::kBool,  at::kByte,   at::kChar,         at::kShort,
    at::kInt,   at::kLong,   at::kHalf,         at::kBFloat16,
    at::kFloat, at::kDouble, at::kComplexFloat, at::kComplexDouble,
};

template <typename Map>
std::string KeysOf(const Map& map) {
  std::vector<std::string> keys;
  for (const auto& kv : map) keys.push_back(kv.first);
  return absl::StrCat("[", absl::StrJoin(keys, ", "), "]");
}

std::string MetaKeysOf(const Json& meta) {
  std::vector<std::string> keys;
  for (const auto& kv : meta.items()) keys.push_back(kv.key());
  return absl::StrCat("[", absl::StrJoin(keys, ", "), "]");
}

std::string Describe(const at::Tensor& t) {
  return absl::StrCat(c10::toString(t.scalar_type()), "[",
                      absl::StrJoin(t.sizes(), ", "), "]");
}

// CPU, contiguous, conj/neg bits resolved: the raw bytes to compare.
at::Tensor Materialize(const at::Tensor& t) {
  return t.cpu().resolve_conj().resolve_neg().contiguous();
}

uint64_t NumBytes(const at::Tensor& t) {
  return static_cast<uint64_t>(t.numel()) * t.element_size();
}

// Same dtype, shape and bytes (NaN payloads compare equal, -0.0 != 0.0).
bool Identical(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || !a.sizes().equals(b.sizes())) {
    return false;
  }
  at::Tensor ca = Materialize(a), cb = Materialize(b);
  const uint64_t n = NumBytes(ca);
  return n == 0 || std::memcmp(ca.data_ptr(), cb.data_ptr(), n) == 0;
}

absl::Status CheckTensor(const std::string& key, const at::Tensor& t) {
  if (!t.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Batch: tensor '", key, "' is undefined"));
  }
  if (t.dim() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Batch: tensor '", key,
                     "' is 0-dim; batch tensors need a leading batch dim"));
  }
  if (!Batch::SupportsDtype(t.scalar_type())) {
    return absl::InvalidArgumentError(
        absl::StrCat("Batch: tensor '", key, "' has unsupported dtype ",
                     c10::toString(t.scalar_type())));
  }
  return absl::OkStatus();
}

}  // namespace

// ---- Construction and column access -----------------------------------------

absl::StatusOr<Batch> Batch::FromColumns(
    std::map<std::string, at::Tensor> tensors,
    std::map<std::string, std::vector<Json>> non_tensors, Json meta_info) {
  if (!meta_info.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Batch: meta_info must be a JSON object, got ", meta_info.type_name()));
  }
  Batch out;
  for (auto& kv : tensors) {
    VERL_RETURN_IF_ERROR(out.SetTensor(kv.first, std::move(kv.second)));
  }
  for (auto& kv : non_tensors) {
    VERL_RETURN_IF_ERROR(out.SetNonTensor(kv.first, std::move(kv.second)));
  }
  out.meta_info_ = std::move(meta_info);
  return out;
}

bool Batch::SupportsDtype(at::ScalarType type) {
  return std::find(std::begin(kSupportedDtypes), std::end(kSupportedDtypes),
                   type) != std::end(kSupportedDtypes);
}

bool Batch::HasTensor(const std::string& key) const {
  return tensors_.count(key) > 0;
}

bool Batch::HasNonTensor(const std::string& key) const {
  return non_tensors_.count(key) > 0;
}

std::vector<std::string> Batch::TensorKeys() const {
  std::vector<std::string> keys;
  for (const auto& kv : tensors_) keys.push_back(kv.first);
  return keys;
}

std::vector<std::string> Batch::NonTensorKeys() const {
  std::vector<std::string> keys;
  for (const auto& kv : non_tensors_) keys.push_back(kv.first);
  return keys;
}

absl::Status Batch::CheckRows(absl::string_view what, const std::string& key,
                              int64_t rows) const {
  if (!has_no_columns() && rows != size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("Batch: ", what, " '", key, "' has ", rows,
                     " rows but the batch size is ", size_));
  }
  return absl::OkStatus();
}

void Batch::RecomputeSizeIfEmpty() {
  if (has_no_columns()) size_ = 0;
}

absl::Status Batch::SetTensor(const std::string& key, at::Tensor tensor) {
  VERL_RETURN_IF_ERROR(CheckTensor(key, tensor));
  VERL_RETURN_IF_ERROR(CheckRows("tensor", key, tensor.size(0)));
  size_ = tensor.size(0);
  tensors_[key] = std::move(tensor);
  return absl::OkStatus();
}

absl::Status Batch::SetNonTensor(const std::string& key,
                                 std::vector<Json> values) {
  const int64_t rows = static_cast<int64_t>(values.size());
  VERL_RETURN_IF_ERROR(CheckRows("non-tensor column", key, rows));
  size_ = rows;
  non_tensors_[key] = std::move(values);
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> Batch::GetTensor(const std::string& key) const {
  auto it = tensors_.find(key);
  if (it == tensors_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "Batch: no tensor '", key, "' (tensors: ", KeysOf(tensors_), ")"));
  }
  return it->second;
}

absl::StatusOr<std::vector<Json>> Batch::GetNonTensor(
    const std::string& key) const {
  auto it = non_tensors_.find(key);
  if (it == non_tensors_.end()) {
    return absl::NotFoundError(
        absl::StrCat("Batch: no non-tensor column '", key,
                     "' (non-tensor columns: ", KeysOf(non_tensors_), ")"));
  }
  return it->second;
}

const at::Tensor& Batch::tensor(const std::string& key) const {
  auto it = tensors_.find(key);
  CHECK(it != tensors_.end())
      << "Batch: no tensor '" << key << "' (tensors: " << KeysOf(tensors_)
      << "); use GetTensor() for keys that may be missing";
  return it->second;
}

const std::vector<Json>& Batch::non_tensor(const std::string& key) const {
  auto it = non_tensors_.find(key);
  CHECK(it != non_tensors_.end())
      << "Batch: no non-tensor '" << key
      << "' (non-tensor columns: " << KeysOf(non_tensors_)
      << "); use GetNonTensor() for keys that may be "
      << "missing";
  return it->second;
}

absl::StatusOr<at::Tensor> Batch::PopTensor(const std::string& key) {
  VERL_ASSIGN_OR_RETURN(at::Tensor t, GetTensor(key));
  tensors_.erase(key);
  RecomputeSizeIfEmpty();
  return t;
}

absl::StatusOr<std::vector<Json>> Batch::PopNonTensor(const std::string& key) {
  auto it = non_tensors_.find(key);
  if (it == non_tensors_.end()) return GetNonTensor(key).status();
  std::vector<Json> values = std::move(it->second);
  non_tensors_.erase(it);
  RecomputeSizeIfEmpty();
  return values;
}

absl::StatusOr<Batch> Batch::Pop(
    const std::vector<std::string>& tensor_keys,
    const std::vector<std::string>& non_tensor_keys,
    const std::vector<std::string>& meta_keys) {
  VERL_ASSIGN_OR_RETURN(Batch out,
                        Select(tensor_keys, non_tensor_keys, meta_keys));
  for (const std::string& k : tensor_keys) tensors_.erase(k);
  for (const std::string& k : non_tensor_keys) non_tensors_.erase(k);
  for (const std::string& k : meta_keys) meta_info_.erase(k);
  RecomputeSizeIfEmpty();
  return out;
}

absl::Status Batch::Rename(const std::string& from, const std::string& to) {
  auto rename = [&](auto& map, absl::string_view kind) -> absl::Status {
    if (map.count(to)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Batch::Rename: ", kind, " '", to, "' already exists"));
    }
    auto node = map.extract(from);
    node.key() = to;
    map.insert(std::move(node));
    return absl::OkStatus();
  };
  if (HasTensor(from)) return rename(tensors_, "tensor");
  if (HasNonTensor(from)) return rename(non_tensors_, "non-tensor column");
  return absl::NotFoundError(absl::StrCat(
      "Batch::Rename: no column '", from, "' (tensors: ", KeysOf(tensors_),
      ", non-tensor columns: ", KeysOf(non_tensors_), ")"));
}

// ---- Row operations
// -----------------------------------------------------------

template <typename TensorFn, typename JsonFn>
Batch Batch::MapColumns(int64_t new_size, TensorFn tensor_fn,
                        JsonFn json_fn) const {
  Batch out;
  for (const auto& kv : tensors_) out.tensors_[kv.first] = tensor_fn(kv.second);
  for (const auto& kv : non_tensors_) {
    out.non_tensors_[kv.first] = json_fn(kv.second);
  }
  out.size_ = has_no_columns() ? 0 : new_size;
  out.meta_info_ = meta_info_;
  return out;
}

absl::StatusOr<Batch> Batch::Select(KeyList tensor_keys,
                                    KeyList non_tensor_keys,
                                    KeyList meta_keys) const {
  Batch out;
  if (!tensor_keys) tensor_keys = TensorKeys();
  if (!non_tensor_keys) non_tensor_keys = NonTensorKeys();
  for (const std::string& k : *tensor_keys) {
    VERL_ASSIGN_OR_RETURN(out.tensors_[k], GetTensor(k));
  }
  for (const std::string& k : *non_tensor_keys) {
    VERL_ASSIGN_OR_RETURN(out.non_tensors_[k], GetNonTensor(k));
  }
  out.size_ = out.has_no_columns() ? 0 : size_;
  if (!meta_keys) {
    out.meta_info_ = meta_info_;
  } else {
    for (const std::string& k : *meta_keys) {
      if (!meta_info_.contains(k)) {
        return absl::NotFoundError(
            absl::StrCat("Batch: no meta_info key '", k,
                         "' (meta_info keys: ", MetaKeysOf(meta_info_), ")"));
      }
      out.meta_info_[k] = meta_info_[k];
    }
  }
  return out;
}

absl::StatusOr<Batch> Batch::Slice(int64_t start, int64_t end,
                                   int64_t step) const {
  if (start < 0 || start > end || end > size_ || step < 1) {
    return absl::OutOfRangeError(absl::StrCat("Batch::Slice: bad range [",
                                              start, ", ", end, ") step ", step,
                                              " for batch size ", size_));
  }
  const int64_t rows = (end - start + step - 1) / step;
  return MapColumns(
      rows, [&](const at::Tensor& t) { return t.slice(0, start, end, step); },
      [&](const std::vector<Json>& col) {
        std::vector<Json> out;
        out.reserve(rows);
        for (int64_t i = start; i < end; i += step) out.push_back(col[i]);
        return out;
      });
}

Batch Batch::Gather(const std::vector<int64_t>& indices) const {
  const int64_t rows = static_cast<int64_t>(indices.size());
  at::Tensor idx = at::empty({rows}, at::TensorOptions().dtype(at::kLong));
  if (rows > 0) {
    std::memcpy(idx.data_ptr<int64_t>(), indices.data(),
                rows * sizeof(int64_t));
  }
  return MapColumns(
      rows,
      [&](const at::Tensor& t) {
        return t.index_select(0, idx.to(t.device()));
      },
      [&](const std::vector<Json>& col) {
        std::vector<Json> out;
        out.reserve(rows);
        for (int64_t i : indices) out.push_back(col[i]);
        return out;
      });
}

absl::StatusOr<Batch> Batch::Index(const std::vector<int64_t>& indices) const {
  std::vector<int64_t> wrapped(indices);
  for (int64_t& i : wrapped) {
    if (i < -size_ || i >= size_) {
      return absl::OutOfRangeError(absl::StrCat(
          "Batch::Index: index ", i, " out of range for batch size ", size_));
    }
    if (i < 0) i += size_;
  }
  return Gather(wrapped);
}

absl::StatusOr<Batch> Batch::Index(const at::Tensor& indices) const {
  if (!indices.defined() || indices.dim() != 1) {
    return absl::InvalidArgumentError(
        "Batch::Index: indices must be a defined 1-D tensor");
  }
  at::Tensor idx = indices;
  if (idx.scalar_type() == at::kBool) {
    if (idx.size(0) != size_) {
      return absl::InvalidArgumentError(
          absl::StrCat("Batch::Index: bool mask has length ", idx.size(0),
                       " but the batch size is ", size_));
    }
    idx = idx.nonzero().reshape({-1});
  } else if (!at::isIntegralType(idx.scalar_type(), /*includeBool=*/false)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Batch::Index: indices must be integer or bool, got ",
                     c10::toString(idx.scalar_type())));
  }
  idx = idx.to(at::kCPU, at::kLong).contiguous();
  const int64_t* p = idx.data_ptr<int64_t>();
  return Index(std::vector<int64_t>(p, p + idx.numel()));
}

absl::Status Batch::Reorder(const at::Tensor& indices) {
  VERL_ASSIGN_OR_RETURN(*this, Index(indices));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Batch>> Batch::Chunk(int64_t n) const {
  if (n < 1 || size_ % n != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Batch::Chunk: cannot split a batch of ", size_,
                     " rows into ", n, " equal chunks"));
  }
  return Split(std::vector<int64_t>(n, size_ / n));
}

absl::StatusOr<std::vector<Batch>> Batch::Split(
    const std::vector<int64_t>& sizes) const {
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0 || s > size_ - total) {
      return absl::InvalidArgumentError(
          absl::StrCat("Batch::Split: sizes [", absl::StrJoin(sizes, ", "),
                       "] do not add up to the batch size ", size_));
    }
    total += s;
  }
  if (total != size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("Batch::Split: sizes [", absl::StrJoin(sizes, ", "),
                     "] add up to ", total, ", not the batch size ", size_));
  }
  std::vector<Batch> parts;
  parts.reserve(sizes.size());
  int64_t start = 0;
  for (int64_t s : sizes) {
    VERL_ASSIGN_OR_RETURN(Batch part, Slice(start, start + s));
    parts.push_back(std::move(part));
    start += s;
  }
  return parts;
}

absl::StatusOr<std::vector<Batch>> Batch::SplitEvery(int64_t part_size) const {
  if (part_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Batch::SplitEvery: part size must be >= 1, got ", part_size));
  }
  std::vector<int64_t> sizes(size_ / part_size, part_size);
  if (size_ % part_size != 0) sizes.push_back(size_ % part_size);
  return Split(sizes);
}

absl::StatusOr<Batch> Batch::Repeat(int64_t n, bool interleave) const {
  if (n < 1 || (size_ > 0 && n > std::numeric_limits<int32_t>::max() / size_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Batch::Repeat: bad repeat count ", n, " for batch size ", size_));
  }
  std::vector<int64_t> indices;
  indices.reserve(n * size_);
  if (interleave) {
    for (int64_t i = 0; i < size_; ++i) indices.insert(indices.end(), n, i);
  } else {
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t i = 0; i < size_; ++i) indices.push_back(i);
    }
  }
  return Gather(indices);
}

absl::StatusOr<std::pair<Batch, int64_t>> Batch::PadToDivisor(int64_t k) const {
  if (k < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Batch::PadToDivisor: divisor must be >= 1, got ", k));
  }
  if (size_ % k == 0) return std::make_pair(*this, int64_t{0});
  const int64_t pad = k - size_ % k;
  std::vector<int64_t> indices;
  indices.reserve(size_ + pad);
  for (int64_t i = 0; i < size_ + pad; ++i) indices.push_back(i % size_);
  return std::make_pair(Gather(indices), pad);
}

absl::StatusOr<Batch> Batch::Unpad(int64_t pad_size) const {
  if (pad_size < 0 || pad_size > size_) {
    return absl::OutOfRangeError(
        absl::StrCat("Batch::Unpad: pad size ", pad_size,
                     " out of range for batch size ", size_));
  }
  return Slice(0, size_ - pad_size);
}

namespace {

// verl's concat meta merge: equal keys must agree; "metrics" entries (dicts or
// lists of dicts) become one dict of lists keyed like the first entry.
absl::StatusOr<Json> MergeMeta(const std::vector<Batch>& batches) {
  Json merged = Json::object();
  std::vector<Json> metrics;
  for (size_t b = 0; b < batches.size(); ++b) {
    for (const auto& kv : batches[b].meta_info().items()) {
      if (kv.key() == "metrics") {
        if (kv.value().is_array()) {
          metrics.insert(metrics.end(), kv.value().begin(), kv.value().end());
        } else if (!kv.value().is_null()) {
          metrics.push_back(kv.value());
        }
      } else if (!merged.contains(kv.key())) {
        merged[kv.key()] = kv.value();
      } else if (merged[kv.key()] != kv.value()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Batch::Concat: conflicting values for meta_info key '", kv.key(),
            "' in batch ", b, ": ", merged[kv.key()].dump(), " vs ",
            kv.value().dump()));
      }
    }
  }
  if (metrics.empty()) return merged;
  Json lists = Json::object();
  for (const Json& m : metrics) {
    if (!m.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Batch::Concat: meta_info 'metrics' entry is not an object: ",
          m.dump()));
    }
  }
  for (const auto& kv : metrics[0].items()) lists[kv.key()] = Json::array();
  for (const Json& m : metrics) {
    for (const auto& kv : m.items()) {
      if (!lists.contains(kv.key())) {
        return absl::InvalidArgumentError(
            absl::StrCat("Batch::Concat: meta_info 'metrics' key '", kv.key(),
                         "' is missing from the first metrics entry"));
      }
      lists[kv.key()].push_back(kv.value());
    }
  }
  merged["metrics"] = std::move(lists);
  return merged;
}

}  // namespace

absl::StatusOr<Batch> Batch::Concat(const std::vector<Batch>& batches) {
  if (batches.empty()) return Batch();
  const Batch& first = batches[0];
  for (size_t b = 1; b < batches.size(); ++b) {
    const Batch& other = batches[b];
    if (other.TensorKeys() != first.TensorKeys() ||
        other.NonTensorKeys() != first.NonTensorKeys()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Batch::Concat: batch ", b, " has keys ", KeysOf(other.tensors_),
          " / ", KeysOf(other.non_tensors_), " but batch 0 has ",
          KeysOf(first.tensors_), " / ", KeysOf(first.non_tensors_)));
    }
    for (const auto& kv : first.tensors_) {
      const at::Tensor& a = kv.second;
      const at::Tensor& t = other.tensors_.at(kv.first);
      if (t.scalar_type() != a.scalar_type() || t.device() != a.device() ||
          t.dim() != a.dim() ||
          !t.sizes().slice(1).equals(a.sizes().slice(1))) {
        return absl::InvalidArgumentError(
            absl::StrCat("Batch::Concat: tensor '", kv.first, "' is ",
                         Describe(t), " on ", t.device().str(), " in batch ", b,
                         " but ", Describe(a), " on ", a.device().str(),
                         " in batch 0 (dtype, device and trailing shape "
                         "must match)"));
      }
    }
  }
  Batch out;
  VERL_ASSIGN_OR_RETURN(out.meta_info_, MergeMeta(batches));
  for (const Batch& b : batches) out.size_ += b.size_;
  for (const auto& kv : first.tensors_) {
    std::vector<at::Tensor> parts;
    for (const Batch& b : batches) parts.push_back(b.tensors_.at(kv.first));
    out.tensors_[kv.first] = at::cat(parts, 0);
  }
  for (const auto& kv : first.non_tensors_) {
    std::vector<Json>& col = out.non_tensors_[kv.first];
    col.reserve(out.size_);
    for (const Batch& b : batches) {
      const std::vector<Json>& part = b.non_tensors_.at(kv.first);
      col.insert(col.end(), part.begin(), part.end());
    }
  }
  return out;
}

absl::Status Batch::Union(const Batch& other) {
  if (!has_no_columns() && !other.has_no_columns() && size_ != other.size_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Batch::Union: batch sizes differ (", size_, " vs ", other.size_, ")"));
  }
  auto conflict = [](absl::string_view kind, const std::string& key) {
    return absl::InvalidArgumentError(
        absl::StrCat("Batch::Union: ", kind, " '", key,
                     "' exists in both batches with different content"));
  };
  for (const auto& kv : other.tensors_) {
    auto it = tensors_.find(kv.first);
    if (it != tensors_.end() && !Identical(it->second, kv.second)) {
      return conflict("tensor", kv.first);
    }
  }
  for (const auto& kv : other.non_tensors_) {
    auto it = non_tensors_.find(kv.first);
    if (it != non_tensors_.end() && it->second != kv.second) {
      return conflict("non-tensor column", kv.first);
    }
  }
  for (const auto& kv : other.meta_info_.items()) {
    if (meta_info_.contains(kv.key()) && meta_info_[kv.key()] != kv.value()) {
      return conflict("meta_info key", kv.key());
    }
  }
  if (!other.has_no_columns()) size_ = other.size_;
  tensors_.insert(other.tensors_.begin(), other.tensors_.end());
  non_tensors_.insert(other.non_tensors_.begin(), other.non_tensors_.end());
  for (const auto& kv : other.meta_info_.items()) {
    meta_info_[kv.key()] = kv.value();
  }
  return absl::OkStatus();
}

bool Batch::Equal(const Batch& other) const {
  if (size_ != other.size_ || TensorKeys() != other.TensorKeys() ||
      non_tensors_ != other.non_tensors_ || meta_info_ != other.meta_info_) {
    return false;
  }
  for (const auto& kv : tensors_) {
    if (!Identical(kv.second, other.tensors_.at(kv.first))) return false;
  }
  return true;
}

std::string Batch::DebugString() const {
  std::vector<std::string> tensors;
  for (const auto& kv : tensors_) {
    tensors.push_back(absl::StrCat(kv.first, ": ", Describe(kv.second)));
  }
  std::vector<std::string> meta;
  for (const auto& kv : meta_info_.items()) meta.push_back(kv.key());
  return absl::StrCat("Batch(size=", size_, ", tensors={",
                      absl::StrJoin(tensors, ", "), "}, non_tensors={",
                      absl::StrJoin(NonTensorKeys(), ", "), "}, meta={",
                      absl::StrJoin(meta, ", "), "})");
}

}  // namespace core
}  // namespace verl
