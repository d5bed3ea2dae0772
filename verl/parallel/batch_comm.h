// File: verl/parallel/batch_comm.h
//
// Moving verl::core::Batch between ranks (verl's dispatch/collect): batches
// travel as their SerializeBatch() bytes in uint8 tensors of unequal sizes.
//
//   // Rank 0 loaded the batch; each rank gets its size()/n rows.
//   VERL_ASSIGN_OR_RETURN(Batch mine, ScatterBatch(*world, full, /*root=*/0));
//   ... compute on `mine` ...
//   VERL_ASSIGN_OR_RETURN(Batch all, GatherBatch(*world, mine));
#ifndef VERL_PARALLEL_BATCH_COMM_H_
#define VERL_PARALLEL_BATCH_COMM_H_

#include "absl/status/statusor.h"
#include "verl/core/batch.h"
#include "verl/parallel/process_group.h"

namespace verl::parallel {

// Collective: `root`'s batch is chunked into comm.size() equal parts
// (Batch::Chunk; size must be divisible, pad first with PadToDivisor) and
// part r is returned on rank r. Other ranks' `batch` is ignored. If the
// root cannot chunk, every rank returns an error (the root's names why).
absl::StatusOr<core::Batch> ScatterBatch(Communicator& comm,
                                         const core::Batch& batch,
                                         int root = 0);

// Local, no communication: this rank's chunk of a batch every rank holds
// identically (same data, same seed: the SPMD controller's case).
absl::StatusOr<core::Batch> LocalChunk(const Communicator& comm,
                                       const core::Batch& batch);

// Collective: every rank's batch (any sizes, same columns), concatenated in
// rank order (Batch::Concat rules, meta_info merged), returned on all ranks.
absl::StatusOr<core::Batch> GatherBatch(Communicator& comm,
                                        const core::Batch& local);

}  // namespace verl::parallel

#endif  // VERL_PARALLEL_BATCH_COMM_H_
