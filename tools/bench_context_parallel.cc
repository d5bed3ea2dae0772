// File: tools/bench_context_parallel.cc
//
// Peak memory per rank of Megatron context parallelism on one long
// sequence, cp = 1 against cp = 2, 4 (each cp run is a separate job of cp
// processes on this host). Two workloads, each measured as the rise of the
// process's peak resident set (VmHWM, reset through /proc/self/clear_refs)
// over its resident set just before one forward + backward:
//   model  MegatronGPTModel (--layers, --hidden, --heads, --vocab), a
//          log-prob loss over the whole sequence; at cp = 1 the model uses
//          the decoder's VarlenCausalAttention (softmax probabilities
//          [heads, T, T] kept for backward), at cp > 1 ring attention
//   ring   RingAttention alone on q/k/v [T/cp, heads, head_dim] (at cp = 1
//          the same op over a group of one: the flash-style baseline, so
//          the ratio shows what splitting the sequence saves)
// glibc's mmap threshold is pinned to 1 MiB so freed activations leave the
// resident set and the peak is the workload's own.
//
//   bazel run -c opt //tools:bench_context_parallel -- --tokens=4096
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "tools/size_list.h"
#include "verl/core/main_guard.h"
#include "verl/core/status.h"
#include "verl/models/megatron/megatron_gpt.h"
#include "verl/parallel/distributed.h"
#include "verl/parallel/launcher.h"
#include "verl/parallel/megatron/context_parallel.h"
#include "verl/parallel/megatron/parallel_state.h"
#include "verl/parallel/megatron/vocab_parallel.h"

ABSL_FLAG(std::string, cps, "1,2,4",
          "context parallel sizes to run (cp = 1 keeps [heads, T, T] softmax "
          "probabilities per layer: leave it out for long sequences)");
ABSL_FLAG(int64_t, tokens, 4096, "length of the one sequence");
ABSL_FLAG(int64_t, layers, 2, "decoder layers");
ABSL_FLAG(int64_t, hidden, 256, "hidden size");
ABSL_FLAG(int64_t, heads, 8, "attention heads (= KV heads)");
ABSL_FLAG(int64_t, vocab, 256, "vocabulary");
ABSL_FLAG(int, worker_cp, 0, "internal: run as a worker of this cp job");
ABSL_FLAG(std::string, out, "", "internal: worker result file prefix");

namespace verl {
namespace {

namespace mg = parallel::megatron;

int64_t StatusKb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      std::istringstream fields(line.substr(key.size() + 1));
      int64_t kb = 0;
      fields >> kb;
      return kb;
    }
  }
  return -1;
}

// Peak RSS growth (MiB) while `fn` runs.
template <typename Fn>
double PeakRiseMiB(Fn fn) {
  std::ofstream("/proc/self/clear_refs") << "5";  // reset VmHWM to VmRSS
  const int64_t before = StatusKb("VmRSS");
  fn();
  return (StatusKb("VmHWM") - before) / 1024.0;
}

absl::Status Worker(int cp_size) {
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  parallel::DistributedOptions dist_options;
  dist_options.intra_op_threads = 1;
  VERL_ASSIGN_OR_RETURN(parallel::DistributedContext dist,
                        parallel::InitDistributed(dist_options));
  mg::ModelParallelSizes sizes;
  sizes.cp = cp_size;
  VERL_ASSIGN_OR_RETURN(auto mpu,
                        mg::ParallelState::Initialize(dist.world, sizes));
  const int64_t t = absl::GetFlag(FLAGS_tokens);
  models::ModelConfig c;
  c.architecture = "Qwen2ForCausalLM";
  c.model_type = "qwen2";
  c.vocab_size = absl::GetFlag(FLAGS_vocab);
  c.hidden_size = absl::GetFlag(FLAGS_hidden);
  c.intermediate_size = 2 * c.hidden_size;
  c.num_hidden_layers = absl::GetFlag(FLAGS_layers);
  c.num_attention_heads = absl::GetFlag(FLAGS_heads);
  c.num_key_value_heads = c.num_attention_heads;
  c.head_dim = c.hidden_size / c.num_attention_heads;
  c.max_position_embeddings = t;
  models::MegatronModelOptions options;
  options.make_vocab_size_divisible_by = 1;
  VERL_RETURN_IF_ERROR(models::ValidateMegatronModel(c, options, sizes));
  models::MegatronGPTModel model(c, options, mpu);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(5);
  {
    at::NoGradGuard no_grad;
    for (at::Tensor& p : model.parameters()) {
      if (p.dim() > 1) p.normal_(0.0, 0.02, gen);
    }
  }
  at::Tensor ids = at::randint(c.vocab_size, {t}, gen, at::kLong);
  at::Tensor labels = at::roll(ids, -1);
  at::Tensor pos = at::arange(t, at::kLong);
  auto step = [&](int64_t n) {
    at::Tensor logits =
        model.Forward(ids.narrow(0, 0, n), pos.narrow(0, 0, n), {0, n});
    mg::VocabParallelLogProbsAndEntropy(logits, labels.narrow(0, 0, n),
                                        c.vocab_size, model.tp(), 1.0, false)
        .log_probs.mean()
        .backward();
    model.FinalizeGrads();
  };
  // A short warm-up step first: lazily created buffers (Gloo pairs, thread
  // pools, gradients) are not the long sequence's activations.
  step(std::min<int64_t>(t, 256));
  const double model_mib = PeakRiseMiB([&] { step(t); });
  // Ring attention alone on this rank's share.
  const mg::CommPtr& cp = mpu->group(mg::MpuGroup::kCp);
  VERL_ASSIGN_OR_RETURN(mg::CpLayout layout,
                        mg::CpLayout::Create({0, t}, cp->size(), cp->rank()));
  auto shared = std::make_shared<const mg::CpLayout>(std::move(layout));
  const int64_t n = shared->local_tokens(), h = c.num_attention_heads;
  at::Tensor q = at::randn({n, h, c.head_dim}, gen).requires_grad_(true);
  at::Tensor k = at::randn({n, h, c.head_dim}, gen).requires_grad_(true);
  at::Tensor v = at::randn({n, h, c.head_dim}, gen).requires_grad_(true);
  const double ring_mib = PeakRiseMiB(
      [&] { mg::RingAttention(q, k, v, shared, cp).sum().backward(); });
  std::ofstream(
      absl::StrFormat("%s.%d", absl::GetFlag(FLAGS_out), dist.world->rank()))
      << model_mib << " " << ring_mib << "\n";
  return absl::OkStatus();
}

int Main() {
  std::vector<int> cps;
  std::string bad;
  if (!tools::ParseSizeList(absl::GetFlag(FLAGS_cps), &cps, &bad)) {
    std::cerr << "--cps: bad size '" << bad << "'\n";
    return 1;
  }
  std::printf(
      "one sequence of %ld tokens, %ld layers, hidden %ld, %ld heads, vocab "
      "%ld, fp32, 1 thread per rank\n",
      absl::GetFlag(FLAGS_tokens), absl::GetFlag(FLAGS_layers),
      absl::GetFlag(FLAGS_hidden), absl::GetFlag(FLAGS_heads),
      absl::GetFlag(FLAGS_vocab));
  std::printf("%4s %22s %12s %26s %12s\n", "cp", "model peak/rank (MiB)",
              "vs cp=1", "ring attn peak/rank (MiB)", "vs cp=1");
  double base_model = 0, base_ring = 0;
  for (int cp : cps) {
    const std::string out =
        absl::StrFormat("/tmp/bench_context_parallel_%d_%d", getpid(), cp);
    parallel::LaunchOptions launch;
    launch.nproc_per_node = cp;
    launch.master_port = 0;
    std::vector<std::string> args = {
        absl::StrFormat("--worker_cp=%d", cp),
        "--out=" + out,
        absl::StrFormat("--tokens=%d", absl::GetFlag(FLAGS_tokens)),
        absl::StrFormat("--layers=%d", absl::GetFlag(FLAGS_layers)),
        absl::StrFormat("--hidden=%d", absl::GetFlag(FLAGS_hidden)),
        absl::StrFormat("--heads=%d", absl::GetFlag(FLAGS_heads)),
        absl::StrFormat("--vocab=%d", absl::GetFlag(FLAGS_vocab))};
    absl::StatusOr<int> code =
        parallel::RunWorkers("/proc/self/exe", args, launch);
    if (!code.ok() || *code != 0) {
      std::cerr << "cp=" << cp << " job failed\n";
      return 1;
    }
    double model_mib = 0, ring_mib = 0;
    for (int r = 0; r < cp; ++r) {
      const std::string file = absl::StrFormat("%s.%d", out, r);
      std::ifstream in(file);
      double m = 0, g = 0;
      in >> m >> g;
      std::remove(file.c_str());
      model_mib = std::max(model_mib, m);
      ring_mib = std::max(ring_mib, g);
    }
    if (base_model == 0) {
      base_model = model_mib;
      base_ring = ring_mib;
    }
    std::printf("%4d %22.1f %12.3f %26.1f %12.3f\n", cp, model_mib,
                model_mib / base_model, ring_mib, ring_mib / base_ring);
  }
  return 0;
}

}  // namespace
}  // namespace verl

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int cp = absl::GetFlag(FLAGS_worker_cp);
  if (cp == 0) return verl::Main();
  return verl::core::StatusExitCode(verl::Worker(cp),
                                    "bench_context_parallel worker: ");
}
