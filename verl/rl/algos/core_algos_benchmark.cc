// File: verl/rl/algos/core_algos_benchmark.cc
//
// Hot paths of one RL step on a realistic batch: outcome advantages grouped
// by uid, the vanilla PPO loss (forward + backward) and loss aggregation.
// Run: bazel run -c opt //verl/rl/algos:core_algos_benchmark
#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "verl/rl/algos/advantage.h"
#include "verl/rl/algos/agg_loss.h"
#include "verl/rl/algos/policy_loss.h"

namespace verl::rl {
namespace {

std::vector<std::string> Uids(int64_t batch, int64_t group) {
  std::vector<std::string> uids;
  for (int64_t i = 0; i < batch; ++i) uids.push_back(std::to_string(i / group));
  return uids;
}

void BM_GrpoAdvantage(benchmark::State& state) {
  const int64_t B = state.range(0), T = 512;
  at::manual_seed(0);
  at::Tensor r = at::rand({B, T});
  at::Tensor m = at::ones({B, T});
  std::vector<std::string> uids = Uids(B, 8);
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        ComputeGrpoOutcomeAdvantage(r, m, uids, true).advantages);
  }
  state.SetItemsProcessed(state.iterations() * B);
}
BENCHMARK(BM_GrpoAdvantage)->Arg(256)->Arg(1024);

void BM_GaeAdvantage(benchmark::State& state) {
  const int64_t B = state.range(0), T = 512;
  at::Tensor r = at::rand({B, T}), v = at::rand({B, T}), m = at::ones({B, T});
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        ComputeGaeAdvantageReturn(r, v, m, 1.0, 0.95)->advantages);
  }
  state.SetItemsProcessed(state.iterations() * B * T);
}
BENCHMARK(BM_GaeAdvantage)->Arg(256);

void BM_VanillaLossForwardBackward(benchmark::State& state) {
  const int64_t B = state.range(0), T = 512;
  PolicyLossInputs in;
  in.old_log_prob = -at::rand({B, T});
  in.advantages = at::randn({B, T});
  in.response_mask = at::ones({B, T});
  PolicyLossConfig cfg;
  for (auto _ : state) {
    in.log_prob = (in.old_log_prob + 0.1 * at::randn({B, T})).requires_grad_();
    PolicyLossOutput out = *ComputePolicyLossVanilla(in, cfg);
    out.loss.backward();
  }
  state.SetItemsProcessed(state.iterations() * B * T);
}
BENCHMARK(BM_VanillaLossForwardBackward)->Arg(64);

void BM_AggLoss(benchmark::State& state) {
  at::Tensor l = at::randn({256, 512}), m = at::ones({256, 512});
  const std::string mode = state.range(0) == 0 ? kTokenMean : kSeqMeanTokenMean;
  for (auto _ : state) benchmark::DoNotOptimize(*AggLoss(l, m, mode));
}
BENCHMARK(BM_AggLoss)->Arg(0)->Arg(1);

}  // namespace
}  // namespace verl::rl
