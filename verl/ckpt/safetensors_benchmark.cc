// Read/write throughput of safetensors files: memory-mapped views (no copy)
// against owned copies, each followed by a pass that reads every byte, and
// the atomic writer. Run: bazel run -c opt //verl/ckpt:safetensors_benchmark
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/rand.h>
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "verl/ckpt/safetensors.h"

namespace verl::ckpt {
namespace {

constexpr int64_t kTensors = 16;

// A file of `mib` MiB of fp32 tensors in /tmp, written once per size.
const std::string& BenchFile(int64_t mib) {
  static std::map<int64_t, std::string> files;
  auto it = files.find(mib);
  if (it != files.end()) return it->second;
  TensorMap m;
  const int64_t per = mib * 1024 * 1024 / 4 / kTensors;
  for (int64_t i = 0; i < kTensors; ++i) {
    m["layer." + std::to_string(i) + ".weight"] = at::rand({per});
  }
  std::string path = "/tmp/verl_st_bench_" + std::to_string(::getpid()) + "_" +
                     std::to_string(mib) + ".safetensors";
  if (!SaveSafetensors(path, m).ok()) std::abort();
  return files[mib] = path;
}

double ReadEverything(const TensorMap& m) {
  double s = 0;
  for (const auto& [name, t] : m) s += t.sum().item<double>();
  return s;
}

void Load(benchmark::State& state, bool copy, bool read) {
  const std::string& path = BenchFile(state.range(0));
  for (auto _ : state) {
    auto reader = SafetensorsReader::Open(path);
    auto all = reader->GetAll(copy);
    if (!all.ok()) std::abort();
    if (read) benchmark::DoNotOptimize(ReadEverything(*all));
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * 1024 * 1024);
}

void BM_OpenViews(benchmark::State& s) { Load(s, false, false); }
void BM_OpenCopy(benchmark::State& s) { Load(s, true, false); }
void BM_ViewsAndRead(benchmark::State& s) { Load(s, false, true); }
void BM_CopyAndRead(benchmark::State& s) { Load(s, true, true); }
BENCHMARK(BM_OpenViews)
    ->Arg(64)
    ->Arg(256)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_OpenCopy)
    ->Arg(64)
    ->Arg(256)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_ViewsAndRead)
    ->Arg(64)
    ->Arg(256)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_CopyAndRead)
    ->Arg(64)
    ->Arg(256)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_Save(benchmark::State& state) {
  auto reader = SafetensorsReader::Open(BenchFile(state.range(0)));
  TensorMap m = *reader->GetAll(/*copy=*/true);
  const std::string out =
      "/tmp/verl_st_bench_out_" + std::to_string(::getpid()) + ".safetensors";
  for (auto _ : state) {
    if (!SaveSafetensors(out, m).ok()) std::abort();
  }
  std::remove(out.c_str());
  state.SetBytesProcessed(state.iterations() * state.range(0) * 1024 * 1024);
}
BENCHMARK(BM_Save)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace verl::ckpt
