// File: verl/rl/data/seqlen_balancing_benchmark.cc
//
// Karmarkar–Karp balancing of a batch's sequence lengths over 8 ranks.
// Run: bazel run -c opt //verl/rl/data:seqlen_balancing_benchmark
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "verl/rl/data/seqlen_balancing.h"

namespace verl::rl {
namespace {

void BM_KarmarkarKarp(benchmark::State& state) {
  std::mt19937 rng(1);
  std::vector<int64_t> lens(state.range(0));
  for (auto& l : lens)
    l = std::uniform_int_distribution<int64_t>(64, 4096)(rng);
  for (auto _ : state) benchmark::DoNotOptimize(*BalanceBatch(lens, 8));
}
BENCHMARK(BM_KarmarkarKarp)->Arg(256)->Arg(1024);

}  // namespace
}  // namespace verl::rl
