// File: verl/rl/workers/fsdp_train_state_test.cc
//
// Equivalence of FSDP training with the single-process replicated run:
// launches :fsdp_train_state_worker on 1, 2 and 4 ranks over loopback (the
// worker compares losses, grad norms, the gathered full state dict, the
// per-rank memory and the compute-time parameter peak against its
// in-process reference, then checks the unit-by-unit weight sync into a
// rollout engine by its greedy outputs, and exits non-zero on a mismatch):
// per-layer ZeRO-3 schedule and eager mode, offload, gradient
// checkpointing, forward prefetch, no reshard after forward, hybrid
// sharding.
#include "verl/rl/workers/fsdp_train_state.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "verl/core/test_util.h"
#include "verl/parallel/test_worker.h"

namespace verl::rl {
namespace {

using ::verl::core::testing::StatusIs;

int RunWorker(int nproc, const std::vector<std::string>& args) {
  return parallel::RunTestWorker(
      "verl/rl/workers/testing/fsdp_train_state_worker", nproc, args);
}

TEST(FsdpTrainStateTest, OneRankMatchesReplicated) {
  EXPECT_EQ(RunWorker(1, {}), 0);
}

TEST(FsdpTrainStateTest, TwoRanksMatchReplicated) {
  EXPECT_EQ(RunWorker(2, {}), 0);
}

TEST(FsdpTrainStateTest, TwoRanksEagerMatchReplicated) {
  EXPECT_EQ(RunWorker(2, {"--eager"}), 0);
}

TEST(FsdpTrainStateTest, TwoRanksOffloadCheckpointingPrefetch) {
  EXPECT_EQ(
      RunWorker(2, {"--offload", "--checkpointing", "--forward_prefetch"}), 0);
}

TEST(FsdpTrainStateTest, TwoRanksNoReshardAfterForward) {
  EXPECT_EQ(RunWorker(2, {"--noreshard_after_forward"}), 0);
}

TEST(FsdpTrainStateTest, FourRanksFullyShardedAndHybrid) {
  EXPECT_EQ(RunWorker(4, {}), 0);
  EXPECT_EQ(RunWorker(4, {"--fsdp_size=2", "--forward_prefetch"}), 0);
}

// Ulysses sequence parallelism: sp=2 alone (world 2), with gradient
// checkpointing (the recompute all-to-alls in backward), and dp=2 x sp=2
// (world 4) with forward prefetch and dynamic batch sizes.
TEST(FsdpTrainStateTest, UlyssesMatchesReplicated) {
  EXPECT_EQ(RunWorker(2, {"--sp=2"}), 0);
  EXPECT_EQ(RunWorker(2, {"--sp=2", "--checkpointing"}), 0);
  EXPECT_EQ(RunWorker(4, {"--sp=2", "--forward_prefetch", "--dynamic_bsz=12"}),
            0);
}

// Per-layer ZeRO-3 with token-budget micro-batches: a 12-token budget gives
// the two dp slices (11 and 15 tokens) 1 and 2 micro-batches of their own;
// both run 2, training and forward-only.
TEST(FsdpTrainStateTest, TwoRanksDynamicBatchSizePerLayer) {
  EXPECT_EQ(RunWorker(2, {"--dynamic_bsz=12"}), 0);
}

TEST(FsdpTrainStateTest, ForModuleMixedPrecisionKeepsFp32Masters) {
  torch::nn::Sequential net(torch::nn::Linear(4, 3), torch::nn::Linear(3, 2));
  const at::Tensor w0 = net->parameters()[0].detach().clone();
  parallel::FsdpConfig config;
  config.set_dtype("bfloat16");
  OptimizerOptions options;
  options.lr = 0.1;
  options.weight_decay = 0;
  options.grad_clip = 0;
  auto state = FsdpTrainState::ForModule(*net, config, options,
                                         parallel::SingleProcessCommunicator());
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_FALSE((*state)->per_layer());  // not a decoder: eager
  at::Tensor w = net->parameters()[0];
  EXPECT_EQ(w.scalar_type(), at::kBFloat16);  // gathered for compute
  (*state)->ZeroGrad();
  net->forward(torch::ones({2, 4}, at::kBFloat16)).sum().backward();
  ASSERT_TRUE((*state)->Step().ok());
  // AdamW's first step moves every weight with a non-zero gradient by lr in
  // the fp32 master; the compute copy is its bf16 rounding.
  at::Tensor master = (*state)->fsdp().shard_params()[0];
  EXPECT_EQ(master.scalar_type(), at::kFloat);
  EXPECT_NEAR((master - w0).abs().max().item<double>(), 0.1, 1e-4);
  EXPECT_TRUE(at::equal(w, master.detach().to(at::kBFloat16)));
  EXPECT_EQ(DtypeFromName("fp16").value(), at::kHalf);
  EXPECT_THAT(DtypeFromName("int8"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "fsdp_config.dtype: \"int8\""));
}

}  // namespace
}  // namespace verl::rl
