// File: verl/models/model_bench.cc
//
// Training throughput of the decoder: forward+backward tokens/s of the
// qwen2-30m preset (fp32 and bf16, packed layout, log-prob loss), forward
// only, one layer's attention (fused vs ATen), and chunked
// log-prob/entropy. Each result carries the model FLOP
// rate (verl's FLOPs counter) and MFU against the fp32 GEMM rate measured in
// this process (2048^3 matmul); the BLAS library in use is printed in the
// context header. Threads: VERL_BENCH_THREADS, else all cores.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "verl/models/attention.h"
#include "verl/models/decoder.h"
#include "verl/models/flops_dims.h"
#include "verl/models/logprob.h"
#include "verl/models/presets.h"
#include "verl/profiler/flops_counter.h"
#include "verl/profiler/gemm_peak.h"

namespace verl::models {
namespace {

int Threads() {
  const char* env = std::getenv("VERL_BENCH_THREADS");
  if (env != nullptr && std::atoi(env) > 0) return std::atoi(env);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// fp32 GEMM GFLOP/s of an n x n x n matmul (best of a few runs).
double MeasureGemmGflops(int64_t n) {
  at::set_num_threads(Threads());
  at::manual_seed(0);
  return profiler::MeasureGemmFlops(n) / 1e9;
}

double GemmGflops() {
  static const double rate = MeasureGemmGflops(2048);
  return rate;
}

// Context lines printed in the benchmark header.
const bool kContext = [] {
  benchmark::AddCustomContext("blas", profiler::BlasLibrary());
  benchmark::AddCustomContext("intra_op_threads", std::to_string(Threads()));
  return true;
}();

// Sets tokens/s, model GFLOP/s and MFU (= model rate / measured fp32 GEMM
// rate) from the wall time of the timed loop.
void ReportRates(benchmark::State& state, double seconds, double flops_per_iter,
                 int64_t tokens_per_iter) {
  const double iters = static_cast<double>(state.iterations());
  const double gflops = flops_per_iter * iters / seconds / 1e9;
  state.counters["tokens/s"] = tokens_per_iter * iters / seconds;
  state.counters["model_GFLOP/s"] = gflops;
  state.counters["gemm_fp32_GFLOP/s"] = GemmGflops();
  state.counters["MFU"] = gflops / GemmGflops();
}

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

// Packed batch of `seqs` sequences of `len` tokens.
struct Batch {
  at::Tensor ids, pos, labels;
  std::vector<int64_t> cu, lens;
};

Batch MakeBatch(int64_t vocab, int64_t seqs, int64_t len) {
  at::manual_seed(1);
  Batch b;
  b.ids = at::randint(0, vocab, {seqs * len}, at::kLong);
  b.labels = at::roll(b.ids, -1);
  b.pos = at::arange(len, at::kLong).repeat({seqs});
  for (int64_t s = 0; s <= seqs; ++s) b.cu.push_back(s * len);
  b.lens.assign(seqs, len);
  return b;
}

std::shared_ptr<CausalLM> Model30m(at::ScalarType dtype) {
  ModelConfig c = *MakePreset("qwen2-30m");
  auto m = CreateModel(c, 0);
  m->to(dtype);
  return m;
}

// Args: {bf16 (0/1), sequences, sequence length}.
void BM_ForwardBackward(benchmark::State& state) {
  at::set_num_threads(Threads());
  GemmGflops();
  const at::ScalarType dtype = state.range(0) ? at::kBFloat16 : at::kFloat;
  auto model = Model30m(dtype);
  Batch b =
      MakeBatch(model->config().vocab_size, state.range(1), state.range(2));
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    // The actor's step (verl/rl/workers/model_forward.cc): packed forward,
    // the LM head fused with the label log-prob, gradients set to none
    // before it as FSDP's zero_grad does.
    model->zero_grad(/*set_to_none=*/true);
    VarlenCausalAttention attention(b.cu, model->LayerWindows());
    at::Tensor hidden = model->Forward(b.ids, b.pos, attention);
    at::Tensor loss =
        -model->LabelLogProbs(hidden, b.labels, 1.0, false).log_probs.mean();
    loss.backward();
    benchmark::DoNotOptimize(loss.item<float>());
  }
  ReportRates(state, Since(t0),
              profiler::TrainingFlops(FlopsDims(model->config()), b.lens),
              b.ids.numel());
  state.counters["params_M"] = NumParameters(*model) / 1e6;
}
BENCHMARK(BM_ForwardBackward)
    ->ArgNames({"bf16", "seqs", "len"})
    ->Args({0, 2, 256})
    ->Args({1, 2, 256})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();

void BM_Forward(benchmark::State& state) {
  at::set_num_threads(Threads());
  GemmGflops();
  const at::ScalarType dtype = state.range(0) ? at::kBFloat16 : at::kFloat;
  auto model = Model30m(dtype);
  Batch b =
      MakeBatch(model->config().vocab_size, state.range(1), state.range(2));
  torch::NoGradGuard no_grad;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    at::Tensor logits = model->ForwardPacked(b.ids, b.pos, b.cu).logits;
    benchmark::DoNotOptimize(logits.data_ptr());
  }
  ReportRates(state, Since(t0),
              profiler::ForwardFlops(FlopsDims(model->config()), b.lens),
              b.ids.numel());
}
BENCHMARK(BM_Forward)
    ->ArgNames({"bf16", "seqs", "len"})
    ->Args({0, 2, 256})
    ->Args({1, 2, 256})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();

// Args: {fused (0/1), sequences, sequence length}. The attention of one
// qwen2-30m layer (8 query heads, 2 kv heads, head_dim 64), fp32, forward
// + backward: FusedVarlenAttention against the ATen graph; causal FLOPs
// (QK^T and PV over the lower triangle: 2 forward, 5 backward matmuls).
void BM_VarlenAttention(benchmark::State& state) {
  at::set_num_threads(Threads());
  const bool fused = state.range(0) != 0;
  const int64_t seqs = state.range(1), len = state.range(2);
  const int64_t t = seqs * len, heads = 8, kv = 2, d = 64;
  at::manual_seed(3);
  at::Tensor q = at::randn({t, heads, d}).requires_grad_(true);
  at::Tensor k = at::randn({t, kv, d}).requires_grad_(true);
  at::Tensor v = at::randn({t, kv, d}).requires_grad_(true);
  at::Tensor gy = at::randn({t, heads, d});
  std::vector<int64_t> cu;
  for (int64_t s = 0; s <= seqs; ++s) cu.push_back(s * len);
  VarlenCausalAttention attention(cu, {}, fused);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    for (at::Tensor* x : {&q, &k, &v}) x->mutable_grad() = at::Tensor();
    (attention.Attend(0, q, k, v) * gy).sum().backward();
    benchmark::DoNotOptimize(q.grad().data_ptr());
  }
  const double secs = Since(t0), iters = state.iterations();
  const double flops = 7.0 * 2.0 * seqs * (len * (len + 1) / 2.0) * heads * d;
  state.counters["GFLOP/s"] = flops * iters / secs / 1e9;
  state.counters["ms/layer"] = secs / iters * 1e3;
}
BENCHMARK(BM_VarlenAttention)
    ->ArgNames({"fused", "seqs", "len"})
    ->Args({0, 2, 256})
    ->Args({1, 2, 256})
    ->Args({0, 2, 1024})
    ->Args({1, 2, 1024})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(20)
    ->UseRealTime();

// Args: {rows, vocab}. Forward + backward of log-prob and entropy.
void BM_LogProbEntropy(benchmark::State& state) {
  at::set_num_threads(Threads());
  const int64_t rows = state.range(0), vocab = state.range(1);
  at::manual_seed(2);
  at::Tensor logits = at::randn({rows, vocab}).requires_grad_(true);
  at::Tensor labels = at::randint(0, vocab, {rows}, at::kLong);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    logits.mutable_grad() = at::Tensor();
    LogProbEntropy r = LogProbsAndEntropy(logits, labels, 0.9, true);
    (r.log_probs.sum() + r.entropy.sum()).backward();
    benchmark::DoNotOptimize(logits.grad().data_ptr());
  }
  const double secs = Since(t0), iters = state.iterations();
  state.counters["rows/s"] = rows * iters / secs;
  state.counters["logits_GB/s"] = rows * vocab * 4.0 * iters / secs / 1e9;
}
BENCHMARK(BM_LogProbEntropy)
    ->ArgNames({"rows", "vocab"})
    ->Args({4096, 16384})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5)
    ->UseRealTime();

}  // namespace
}  // namespace verl::models
