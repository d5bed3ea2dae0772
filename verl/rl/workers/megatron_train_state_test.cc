// File: verl/rl/workers/megatron_train_state_test.cc
//
// MegatronTrainState against single-process AdamW (ReplicatedTrainState):
// runs :megatron_train_state_worker over loopback, which checks 3 steps of
// grad norms (clipping active) and parameters to 1e-5 relative, the
// distributed optimizer's per-rank state size, and exact resume from a
// saved shard; see the worker for details.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "verl/core/test_util.h"
#include "verl/parallel/test_worker.h"

namespace verl::rl {
namespace {

int RunWorker(int nproc, const std::vector<std::string>& args) {
  return parallel::RunTestWorker(
      "verl/rl/workers/testing/megatron_train_state_worker", nproc, args);
}

TEST(MegatronTrainStateTest, DistributedOptimizerDp2Tp2MatchesOneProcess) {
  EXPECT_EQ(RunWorker(4, {"--tp=2", "--distributed=true"}), 0);
}

TEST(MegatronTrainStateTest, ReplicatedOptimizerTp2MatchesOneProcess) {
  EXPECT_EQ(RunWorker(2, {"--tp=2", "--distributed=false"}), 0);
}

// megatron.dtype bfloat16 (fp32 gradients and masters): 3 steps track the
// fp32 run within 2e-2 (loss, grad norm), the masters stay fp32, and a
// dist_ckpt resume is bit for bit; dp 2 x tp 2 with the distributed
// optimizer, tp 2 with the plain one.
TEST(MegatronTrainStateTest, Bf16TracksFp32WithFp32Masters) {
  const std::string dir = core::testing::FreshTestDir("megatron_bf16");
  EXPECT_EQ(RunWorker(4, {"--tp=2", "--distributed=true", "--mode=half",
                          "--dist_ckpt_dir=" + dir + "/distopt"}),
            0);
  EXPECT_EQ(RunWorker(2, {"--tp=2", "--distributed=false", "--mode=half",
                          "--dist_ckpt_dir=" + dir + "/ddp"}),
            0);
}

// param_offload / grad_offload / optimizer_offload: bit for bit with the
// no-offload run over 3 steps, the offloaded bytes in host memory between
// steps (fp32 with the distributed optimizer; bf16 with per-parameter fp32
// masters).
TEST(MegatronTrainStateTest, OffloadIsBitExactAndMovesBytesToHost) {
  EXPECT_EQ(RunWorker(4, {"--tp=2", "--distributed=true", "--mode=offload"}),
            0);
  EXPECT_EQ(RunWorker(2, {"--tp=2", "--distributed=false", "--mode=offload",
                          "--dtype=bfloat16"}),
            0);
}

// dist_ckpt: saved at tp 2 (its 0-step and 2-step merges equal the input /
// the gathered state dict bit for bit), resumed at tp 2 (steps 3 and 4
// bit for bit), at tp 1, tp 4 (2 KV heads < tp) and at dp 2 x tp 2 with the
// distributed optimizer (the same losses and norms within 1e-6); with
// pipeline stages and virtual stages as below.
TEST(MegatronTrainStateTest, DistCkptResumesExactlyAndReshards) {
  const std::string dir = core::testing::FreshTestDir("megatron_dist_ckpt");
  const std::string ckpt = "--dist_ckpt_dir=" + dir;
  ASSERT_EQ(RunWorker(2, {"--tp=2", "--distributed=false", ckpt,
                          "--dist_ckpt_phase=save"}),
            0);
  EXPECT_EQ(RunWorker(2, {"--tp=2", "--distributed=false", ckpt,
                          "--dist_ckpt_phase=resume", "--exact"}),
            0);
  EXPECT_EQ(RunWorker(1, {"--tp=1", "--distributed=false", ckpt,
                          "--dist_ckpt_phase=resume"}),
            0);
  EXPECT_EQ(RunWorker(4, {"--tp=4", "--distributed=false", ckpt,
                          "--dist_ckpt_phase=resume"}),
            0);
  EXPECT_EQ(RunWorker(4, {"--tp=2", "--distributed=true", ckpt,
                          "--dist_ckpt_phase=resume"}),
            0);
  // Pipeline stages (2 layers split 1 + 1): the tp 2 checkpoint resumed at
  // pp 2; saved at pp 2 (each stage writes its layers' boxes under their
  // global names; the merges equal the input / the gathered state dict)
  // and resumed at pp 2 bit for bit and at tp 2.
  EXPECT_EQ(RunWorker(2, {"--tp=1", "--pp=2", "--distributed=false", ckpt,
                          "--dist_ckpt_phase=resume"}),
            0);
  const std::string pp_ckpt =
      "--dist_ckpt_dir=" + core::testing::FreshTestDir("megatron_dist_ckpt_pp");
  ASSERT_EQ(RunWorker(2, {"--tp=1", "--pp=2", "--distributed=true", pp_ckpt,
                          "--dist_ckpt_phase=save"}),
            0);
  EXPECT_EQ(RunWorker(2, {"--tp=1", "--pp=2", "--distributed=true", pp_ckpt,
                          "--dist_ckpt_phase=resume", "--exact"}),
            0);
  EXPECT_EQ(RunWorker(2, {"--tp=2", "--distributed=false", pp_ckpt,
                          "--dist_ckpt_phase=resume"}),
            0);
  // Virtual stages (4 layers over pp 2 x vpp 2: stage 0 holds layers 0 and
  // 2, the batch in 2 micro-batches through the interleaved schedule):
  // saved under the global layer names (the merges equal the input / the
  // gathered state dict), resumed at vpp 2 bit for bit and resharded to
  // vpp 1 (stage 0 then holds layers 0-1) within 1e-6.
  const std::string vpp_ckpt =
      "--dist_ckpt_dir=" + core::testing::FreshTestDir("megatron_dist_vpp");
  ASSERT_EQ(
      RunWorker(2, {"--tp=1", "--pp=2", "--vpp=2", "--layers=4",
                    "--distributed=true", vpp_ckpt, "--dist_ckpt_phase=save"}),
      0);
  EXPECT_EQ(RunWorker(2, {"--tp=1", "--pp=2", "--vpp=2", "--layers=4",
                          "--distributed=true", vpp_ckpt,
                          "--dist_ckpt_phase=resume", "--exact"}),
            0);
  EXPECT_EQ(
      RunWorker(2, {"--tp=1", "--pp=2", "--layers=4", "--distributed=true",
                    vpp_ckpt, "--dist_ckpt_phase=resume"}),
      0);
  // The tp x pp grid: saved at tp 2 x pp 2 (4 layers), resumed there bit for
  // bit, and resharded to tp 1 x pp 4 and to tp 4 x pp 1 within 1e-6.
  const std::string grid_ckpt =
      "--dist_ckpt_dir=" + core::testing::FreshTestDir("megatron_dist_grid");
  const auto grid = [&](const char* tp, const char* pp, const char* phase,
                        bool exact) {
    std::vector<std::string> args = {
        tp, pp, "--layers=4", "--distributed=true", grid_ckpt, phase};
    if (exact) args.push_back("--exact");
    return RunWorker(4, args);
  };
  ASSERT_EQ(grid("--tp=2", "--pp=2", "--dist_ckpt_phase=save", false), 0);
  EXPECT_EQ(grid("--tp=2", "--pp=2", "--dist_ckpt_phase=resume", true), 0);
  EXPECT_EQ(grid("--tp=1", "--pp=4", "--dist_ckpt_phase=resume", false), 0);
  EXPECT_EQ(grid("--tp=4", "--pp=1", "--dist_ckpt_phase=resume", false), 0);
}

// MoE with the distributed optimizer (dense state over dp, the experts'
// over edp): 3 steps at tp 2 x ep 2 x etp 2 (dp 2, edp 1) and at etp 1 (dp
// 2, edp 2) with and without it equal the single-process reference (grad
// norms, parameters) and each other. MoE checkpoints with expert tensor
// parallelism: saved at etp 2 after a step, merged to HF (bit for bit),
// loaded at etp 1 (bit for bit) and saved again there (every tensor,
// optimizer state included, bit for bit); the next step's loss, grad norm
// and parameters equal the etp 2 run's.
TEST(MegatronTrainStateTest, MoeDistCkptMergesAndReshardsEtp) {
  EXPECT_EQ(RunWorker(4, {"--tp=2", "--ep=2", "--etp=2", "--distributed=true",
                          "--mode=moe_dist_ckpt",
                          "--dist_ckpt_dir=" + core::testing::FreshTestDir(
                                                   "megatron_moe_dist_ckpt")}),
            0);
}

}  // namespace
}  // namespace verl::rl
