#include "verl/rl/workers/dp_dispatch.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "verl/core/status.h"
#include "verl/parallel/batch_comm.h"

namespace verl::rl {

using core::Batch;

absl::StatusOr<Batch> ShardedCall(
    parallel::Communicator& comm, const Batch& batch,
    const std::function<absl::StatusOr<Batch>(const Batch&)>& fn) {
  if (comm.size() == 1) return fn(batch);
  VERL_ASSIGN_OR_RETURN(auto padded, batch.PadToDivisor(comm.size()));
  VERL_ASSIGN_OR_RETURN(Batch local, parallel::LocalChunk(comm, padded.first));
  VERL_ASSIGN_OR_RETURN(Batch out, fn(local));
  VERL_ASSIGN_OR_RETURN(Batch gathered, parallel::GatherBatch(comm, out));
  return gathered.Unpad(padded.second);
}

absl::StatusOr<Batch> UpdateShard(const parallel::Communicator& comm,
                                  const Batch& batch, int64_t global_mini) {
  const int64_t dp = comm.size();
  if (global_mini <= 0 || global_mini % dp != 0 ||
      batch.size() % global_mini != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mini-batch of ", global_mini, " trajectories does not split over ", dp,
        " ranks / a batch of ", batch.size()));
  }
  std::vector<Batch> parts;
  for (int64_t start = 0; start < batch.size(); start += global_mini) {
    VERL_ASSIGN_OR_RETURN(Batch mini, batch.Slice(start, start + global_mini));
    VERL_ASSIGN_OR_RETURN(auto chunks, mini.Chunk(dp));
    parts.push_back(chunks[comm.rank()]);
  }
  return Batch::Concat(parts);
}

}  // namespace verl::rl
