// File: verl/parallel/batch_comm.cc
#include "verl/parallel/batch_comm.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "verl/core/batch_wire.h"
#include "verl/core/status.h"

namespace verl::parallel {
namespace {

using core::Batch;
using core::DeserializeBatch;
using core::SerializeBatch;

at::Tensor ToBytes(const std::string& bytes) {
  at::Tensor t = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  if (!bytes.empty())
    std::memcpy(t.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  return t;
}

absl::StatusOr<Batch> FromBytes(const at::Tensor& t, int64_t offset,
                                int64_t length) {
  const char* data =
      reinterpret_cast<const char*>(t.data_ptr<uint8_t>()) + offset;
  return DeserializeBatch(absl::string_view(data, length));
}

std::string Who(const Communicator& comm, const char* op) {
  return absl::StrCat("rank ", comm.global_rank(), ": ", op);
}

}  // namespace

absl::StatusOr<Batch> LocalChunk(const Communicator& comm, const Batch& batch) {
  absl::StatusOr<std::vector<Batch>> chunks = batch.Chunk(comm.size());
  if (!chunks.ok()) {
    return Annotate(chunks.status(), Who(comm, "local_chunk"));
  }
  return (*chunks)[comm.rank()];
}

absl::StatusOr<Batch> ScatterBatch(Communicator& comm, const Batch& batch,
                                   int root) {
  constexpr const char* kOp = "scatter_batch";
  if (root < 0 || root >= comm.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        Who(comm, kOp), ": root ", root, " is outside [0, ", comm.size(), ")"));
  }
  const int n = comm.size();
  const bool is_root = comm.rank() == root;
  // The root serializes every part; a failure is announced to all ranks
  // first so nobody waits for bytes that will not come.
  absl::Status root_error;
  std::string payload;
  std::vector<int64_t> splits(n, 0);
  if (is_root) {
    absl::StatusOr<std::vector<Batch>> parts = batch.Chunk(n);
    if (!parts.ok()) {
      root_error = Annotate(parts.status(), Who(comm, kOp));
    } else {
      for (int r = 0; r < n; ++r) {
        std::string bytes = SerializeBatch((*parts)[r]);
        splits[r] = static_cast<int64_t>(bytes.size());
        payload += bytes;
      }
    }
  }
  at::Tensor ok = at::full({1}, root_error.ok() ? 1 : 0, at::kLong);
  VERL_RETURN_IF_ERROR(comm.Broadcast(ok, root));
  if (ok.item<int64_t>() == 0) {
    if (is_root) return root_error;
    return absl::FailedPreconditionError(
        absl::StrCat(Who(comm, kOp), ": the root (rank ",
                     comm.global_ranks()[root], ") could not split its batch"));
  }
  if (n == 1) return DeserializeBatch(payload);
  VERL_ASSIGN_OR_RETURN(at::Tensor received,
                        comm.AllToAll(ToBytes(payload), splits));
  return FromBytes(received, 0, received.numel());
}

absl::StatusOr<Batch> GatherBatch(Communicator& comm, const Batch& local) {
  if (comm.size() == 1) return local;
  VERL_ASSIGN_OR_RETURN(std::vector<at::Tensor> parts,
                        comm.AllGather(ToBytes(SerializeBatch(local))));
  std::vector<Batch> batches;
  batches.reserve(parts.size());
  for (size_t r = 0; r < parts.size(); ++r) {
    at::Tensor bytes = parts[r].contiguous();
    absl::StatusOr<Batch> batch = FromBytes(bytes, 0, bytes.numel());
    if (!batch.ok()) {
      return Annotate(batch.status(),
                      absl::StrCat(Who(comm, "gather_batch"), ": from rank ",
                                   comm.global_ranks()[r]));
    }
    batches.push_back(*std::move(batch));
  }
  absl::StatusOr<Batch> merged = Batch::Concat(batches);
  if (!merged.ok()) return Annotate(merged.status(), Who(comm, "gather_batch"));
  return merged;
}

}  // namespace verl::parallel
