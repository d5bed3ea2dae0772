// File: verl/parallel/process_group.h
//
// The collective API the rest of verl-cpp uses, over LibTorch's c10d:
// `Communicator` wraps one c10d process group (Gloo on CPU; NCCL only in
// `--config=cuda` builds against a CUDA LibTorch) joined through a TCPStore
// rendezvous that rank 0 hosts at MASTER_ADDR:MASTER_PORT.
//
//   VERL_ASSIGN_OR_RETURN(DistEnv env, DistEnvFromProcessEnv());
//   VERL_ASSIGN_OR_RETURN(auto world, InitProcessGroup(env, {}));
//   VERL_RETURN_IF_ERROR(world->AllReduce(grad, ReduceOp::kAvg));
//
// Every call returns absl::Status: a collective that runs past the group's
// timeout is DeadlineExceeded, a vanished peer is Unavailable, and both name
// this process's global rank, the group and the op. After such an error the
// group is unusable; the caller should exit non-zero (the launcher then stops
// the other ranks). A world of size 1 needs no store and no network.
//
// Calls are blocking and must be made in the same order on every member of a
// group (SPMD). One thread at a time per Communicator.
#ifndef VERL_PARALLEL_PROCESS_GROUP_H_
#define VERL_PARALLEL_PROCESS_GROUP_H_

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "verl/parallel/dist_env.h"

namespace verl::parallel {

enum class ReduceOp { kSum, kAvg, kMax, kMin };
enum class Backend { kGloo, kNccl };

const char* ReduceOpName(ReduceOp op);

struct ProcessGroupOptions {
  Backend backend = Backend::kGloo;
  // Limit for any one collective (torch.distributed's default is 30 min).
  std::chrono::milliseconds timeout = std::chrono::minutes(30);
  // Limit for the rendezvous: every member must join the store by then.
  std::chrono::milliseconds init_timeout = std::chrono::minutes(5);
};

class Communicator {
 public:
  // Opaque backend state (process group, store); defined in the .cc.
  struct Impl;
  explicit Communicator(std::unique_ptr<Impl> impl);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;         // Rank within this group.
  int size() const;         // Number of members.
  int global_rank() const;  // This process's rank in the world group.
  // Global ranks of the members, in group-rank order.
  const std::vector<int>& global_ranks() const;
  const std::string& name() const;  // "world" or the NewGroup name.
  std::chrono::milliseconds timeout() const;

  // In place on `tensor` (any layout; CPU). kAvg needs a floating dtype.
  absl::Status AllReduce(at::Tensor& tensor, ReduceOp op = ReduceOp::kSum);

  // Every member's tensor, in rank order. Sizes along dim 0 may differ;
  // dtype and the other dims must agree (InvalidArgument naming the rank
  // otherwise). `tensor` needs at least one dimension.
  absl::StatusOr<std::vector<at::Tensor>> AllGather(const at::Tensor& tensor);
  // AllGather concatenated along dim 0.
  absl::StatusOr<at::Tensor> AllGatherCat(const at::Tensor& tensor);

  // Reduces `input` (dim 0 divisible by size()) over all members and
  // returns this rank's slice of rows [rank*n/size, (rank+1)*n/size).
  // Gloo has no reduce_scatter in LibTorch 1.13: implemented as an
  // all-to-all of the slices plus a local reduction (same traffic).
  absl::StatusOr<at::Tensor> ReduceScatter(const at::Tensor& input,
                                           ReduceOp op = ReduceOp::kSum);

  // Copies root's `tensor` into every member's `tensor` (same shape/dtype).
  absl::Status Broadcast(at::Tensor& tensor, int root);

  // Sends rows [offset_j, offset_j + send_splits[j]) of `input` to member j
  // and returns what every member sent here, concatenated in rank order.
  // Empty `send_splits`: dim 0 is split evenly. `recv_splits`, if given,
  // receives how many rows came from each member.
  absl::StatusOr<at::Tensor> AllToAll(
      const at::Tensor& input, const std::vector<int64_t>& send_splits = {},
      std::vector<int64_t>* recv_splits = nullptr);

  // Point to point. `tensor` for Recv must be contiguous with the sender's
  // shape and dtype.
  absl::Status Send(const at::Tensor& tensor, int dst, int tag = 0);
  absl::Status Recv(at::Tensor& tensor, int src, int tag = 0);

  absl::Status Barrier();

  // Creates a group of the given group ranks (of this communicator), in that
  // order. Only the members call it, all with the same `ranks` and `name`;
  // `name` must be unique in the job (it keys the rendezvous).
  absl::StatusOr<std::shared_ptr<Communicator>> NewGroup(
      const std::vector<int>& ranks, const std::string& name);

 private:
  std::unique_ptr<Impl> impl_;
};

// Joins the world group described by `env` (world_size 1: no store, no
// network). Errors name the rank and the rendezvous address.
absl::StatusOr<std::shared_ptr<Communicator>> InitProcessGroup(
    const DistEnv& env, const ProcessGroupOptions& options = {});

// A world of one process; every collective is the identity.
std::shared_ptr<Communicator> SingleProcessCommunicator();

}  // namespace verl::parallel

#endif  // VERL_PARALLEL_PROCESS_GROUP_H_
