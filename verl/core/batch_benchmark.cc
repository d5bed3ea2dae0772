// File: verl/core/batch_benchmark.cc
//
// Batch hot paths at a PPO-step scale (256 rows, 2k prompt+response tokens):
// the SerializeBatch/DeserializeBatch pair that every scatter/gather across
// ranks pays, and the row operations the trainer runs per step.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/randperm.h>
#include <benchmark/benchmark.h>

#include "verl/core/batch.h"
#include "verl/core/batch_wire.h"

namespace verl {
namespace core {
namespace {

Batch MakePpoBatch(int64_t rows) {
  constexpr int64_t kPrompt = 1024, kResponse = 1024;
  std::vector<Batch::Json> uid, rm;
  for (int64_t r = 0; r < rows; ++r) {
    uid.push_back("a3c1e0f2-uid-" + std::to_string(r / 8));
    rm.push_back({{"ground_truth", std::to_string(r)}, {"style", "rule"}});
  }
  auto b = Batch::FromColumns(
      {{"input_ids", at::randint(0, 150000, {rows, kPrompt + kResponse})},
       {"attention_mask", at::ones({rows, kPrompt + kResponse}, at::kLong)},
       {"position_ids",
        at::arange(kPrompt + kResponse).expand({rows, kPrompt + kResponse})},
       {"responses", at::randint(0, 150000, {rows, kResponse})},
       {"old_log_probs", at::randn({rows, kResponse})},
       {"advantages", at::randn({rows, kResponse})}},
      {{"uid", uid}, {"reward_model", rm}}, {{"temperature", 1.0}});
  CHECK(b.ok()) << b.status();
  return *b;
}

int64_t TensorBytes(const Batch& b) {
  int64_t n = 0;
  for (const auto& kv : b.tensors()) n += kv.second.nbytes();
  return n;
}

void BM_Serialize(benchmark::State& state) {
  Batch b = MakePpoBatch(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(SerializeBatch(b));
  state.SetBytesProcessed(state.iterations() * TensorBytes(b));
}
BENCHMARK(BM_Serialize)->Arg(256)->Unit(benchmark::kMillisecond);

void BM_Deserialize(benchmark::State& state) {
  Batch b = MakePpoBatch(state.range(0));
  const std::string bytes = SerializeBatch(b);
  for (auto _ : state) {
    auto back = DeserializeBatch(bytes);
    CHECK(back.ok());
    benchmark::DoNotOptimize(back);
  }
  state.SetBytesProcessed(state.iterations() * bytes.size());
}
BENCHMARK(BM_Deserialize)->Arg(256)->Unit(benchmark::kMillisecond);

void BM_ChunkConcat(benchmark::State& state) {
  Batch b = MakePpoBatch(state.range(0));
  for (auto _ : state) {
    auto parts = b.Chunk(8);
    CHECK(parts.ok());
    benchmark::DoNotOptimize(Batch::Concat(*parts));
  }
  state.SetBytesProcessed(state.iterations() * TensorBytes(b));
}
BENCHMARK(BM_ChunkConcat)->Arg(256)->Unit(benchmark::kMillisecond);

void BM_RepeatInterleave(benchmark::State& state) {
  Batch b = MakePpoBatch(state.range(0) / 8);
  for (auto _ : state) benchmark::DoNotOptimize(b.Repeat(8, true));
  state.SetBytesProcessed(state.iterations() * TensorBytes(b) * 8);
}
BENCHMARK(BM_RepeatInterleave)->Arg(256)->Unit(benchmark::kMillisecond);

void BM_IndexPermutation(benchmark::State& state) {
  Batch b = MakePpoBatch(state.range(0));
  at::Tensor perm = at::randperm(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(b.Index(perm));
  state.SetBytesProcessed(state.iterations() * TensorBytes(b));
}
BENCHMARK(BM_IndexPermutation)->Arg(256)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace core
}  // namespace verl
