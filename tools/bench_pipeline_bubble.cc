// File: tools/bench_pipeline_bubble.cc
//
// The pipeline bubble of the 1F1B schedule and of the interleaved one
// (//verl/parallel/megatron:pipeline_schedule), measured against
// Megatron's analytic fraction of a stage's time spent idle: (p - 1) /
// (m + p - 1) for 1F1B, (p - 1) / (v*m + p - 1) with v virtual stages (the
// paper's bubble time (p - 1) / (v*m) of the ideal time, as a fraction of
// the total). Each (p, v, m) is a job of p processes over loopback Gloo;
// every stage runs a synthetic layer whose forward takes --fwd_ms and
// backward 2x that (sleeps, so the 2-core host's load does not blur the
// schedule's own shape), split into v chunks of fwd_ms / v each with
// --vpps > 1, on a [--tokens, --hidden] activation sent between the stages.
// A stage's bubble is 1 - (its forward + backward time) / (the pipeline's
// time, the latest stage's end; the clocks start together after a
// barrier); the table shows the mean over stages and the ideal time
// (m + (p - 1) / v) * (f + b) of a schedule whose p2p costs nothing (the
// excess is send/recv, activation copies and sleep overshoot, which count
// as bubble; the interleaved schedule sends v times as many messages).
// Interleaving needs m to be a multiple of p (other rows are skipped).
// --trace writes the timelines (Chrome/Perfetto JSON, one process row per
// stage, F/B/S/R slices per micro-batch, X for an interleaved step's p2p)
// of the last job.
//
//   bazel run -c opt //tools:bench_pipeline_bubble --
//       --pps=2,4 --mbs=4,8 --vpps=1,2
#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "tools/size_list.h"
#include "verl/core/main_guard.h"
#include "verl/core/status.h"
#include "verl/parallel/distributed.h"
#include "verl/parallel/launcher.h"
#include "verl/parallel/megatron/parallel_state.h"
#include "verl/parallel/megatron/pipeline_schedule.h"

ABSL_FLAG(std::string, pps, "2,4", "pipeline sizes");
ABSL_FLAG(std::string, mbs, "1,2,4,8,16", "micro-batch counts");
ABSL_FLAG(std::string, vpps, "1,2",
          "virtual stages per stage (1: 1F1B; > 1: the interleaved "
          "schedule)");
ABSL_FLAG(double, fwd_ms, 20.0, "forward time of one stage (backward: 2x)");
ABSL_FLAG(int64_t, tokens, 256, "activation rows sent between stages");
ABSL_FLAG(int64_t, hidden, 256, "activation columns");
ABSL_FLAG(std::string, trace, "", "Chrome trace JSON of the last job");
ABSL_FLAG(int, worker_m, 0, "internal: run as a worker with m micro-batches");
ABSL_FLAG(int, worker_v, 1, "internal: the worker's virtual stages");
ABSL_FLAG(std::string, out, "", "internal: worker result file prefix");

namespace verl {
namespace {

namespace mg = parallel::megatron;

void SleepMs(double ms) {
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
}

// Identity whose forward takes fwd_ms and backward 2 * fwd_ms.
struct SlowLayer : torch::autograd::Function<SlowLayer> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx,
                            const at::Tensor& x, double fwd_ms) {
    ctx->saved_data["ms"] = fwd_ms;
    SleepMs(fwd_ms);
    return x.clone();
  }
  static torch::autograd::tensor_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::tensor_list grad) {
    SleepMs(2 * ctx->saved_data["ms"].toDouble());
    return {grad[0], at::Tensor()};
  }
};

absl::Status Worker(int64_t m, int64_t v) {
  VERL_ASSIGN_OR_RETURN(parallel::DistributedContext dist,
                        parallel::InitDistributed());
  mg::ModelParallelSizes sizes;
  sizes.pp = dist.world->size();
  sizes.vpp = v > 1 ? static_cast<int>(v) : 0;
  VERL_ASSIGN_OR_RETURN(auto mpu,
                        mg::ParallelState::Initialize(dist.world, sizes));
  const std::vector<int64_t> shape = {absl::GetFlag(FLAGS_tokens),
                                      absl::GetFlag(FLAGS_hidden)};
  const double fwd_ms = absl::GetFlag(FLAGS_fwd_ms);
  at::Tensor w = at::ones(shape).requires_grad_(true);
  mg::PipelineStageFns fns;
  fns.input_shape = [&](int64_t) { return shape; };
  fns.forward = [&](int64_t, const at::Tensor& in) {
    return SlowLayer::apply(in.defined() ? in : w * 1.0, fwd_ms);
  };
  // v chunks of fwd_ms / v each (chunk 0 of stage 0 starts from w).
  fns.num_chunks = v;
  fns.chunk_forward = [&](int64_t, int64_t, const at::Tensor& in) {
    return SlowLayer::apply(in.defined() ? in : w * 1.0, fwd_ms / v);
  };
  fns.loss = [](int64_t, const at::Tensor& out) { return out.sum(); };
  std::vector<mg::PipelineEvent> events;
  mg::PipelineOptions options;
  options.events = &events;
  parallel::Communicator& pp = *mpu->group(mg::MpuGroup::kPp);
  VERL_RETURN_IF_ERROR(pp.Barrier());
  mg::PipelineForwardBackward(fns, m, pp, options);
  std::ofstream out(
      absl::StrFormat("%s.%d", absl::GetFlag(FLAGS_out), pp.rank()));
  for (const mg::PipelineEvent& e : events) {
    out << e.kind << " " << e.mb << " " << e.start << " " << e.end << " "
        << e.chunk << "\n";
  }
  return absl::OkStatus();
}

std::vector<int> Sizes(const std::string& flag, const char* name) {
  std::vector<int> out;
  std::string bad;
  if (!tools::ParseSizeList(flag, &out, &bad)) {
    std::cerr << name << ": bad value '" << bad << "'\n";
    std::exit(1);
  }
  return out;
}

int Main() {
  const double fwd_ms = absl::GetFlag(FLAGS_fwd_ms);
  std::printf(
      "1F1B and interleaved 1F1B, synthetic stage: forward %.1f ms, backward "
      "%.1f ms (split over v chunks), activations [%ld, %ld] fp32 over "
      "loopback Gloo\n",
      fwd_ms, 2 * fwd_ms, absl::GetFlag(FLAGS_tokens),
      absl::GetFlag(FLAGS_hidden));
  std::printf("%3s %3s %4s %10s %10s %16s %18s %8s\n", "p", "v", "m",
              "time (ms)", "ideal (ms)", "bubble measured", "(p-1)/(v*m+p-1)",
              "diff");
  std::string trace;
  for (int p : Sizes(absl::GetFlag(FLAGS_pps), "--pps")) {
    for (int m : Sizes(absl::GetFlag(FLAGS_mbs), "--mbs")) {
      for (int v : Sizes(absl::GetFlag(FLAGS_vpps), "--vpps")) {
        if (v > 1 && (p == 1 || m % p != 0)) continue;  // not schedulable
        const std::string out = absl::StrFormat(
            "/tmp/bench_pipeline_bubble_%d_%d_%d_%d", getpid(), p, m, v);
        parallel::LaunchOptions launch;
        launch.nproc_per_node = p;
        launch.master_port = 0;
        std::vector<std::string> args = {
            absl::StrFormat("--worker_m=%d", m),
            absl::StrFormat("--worker_v=%d", v),
            "--out=" + out,
            absl::StrFormat("--fwd_ms=%f", fwd_ms),
            absl::StrFormat("--tokens=%d", absl::GetFlag(FLAGS_tokens)),
            absl::StrFormat("--hidden=%d", absl::GetFlag(FLAGS_hidden))};
        absl::StatusOr<int> code =
            parallel::RunWorkers("/proc/self/exe", args, launch);
        if (!code.ok() || *code != 0) {
          std::cerr << "p=" << p << " v=" << v << " m=" << m << " job failed\n";
          return 1;
        }
        // Every stage's busy time and last event (the clocks start together
        // after a barrier); the pipeline's time is the latest stage's.
        std::vector<double> busy(p, 0.0);
        double total = 0;
        trace = "[";
        for (int s = 0; s < p; ++s) {
          const std::string file = absl::StrFormat("%s.%d", out, s);
          std::ifstream in(file);
          char kind;
          int64_t mb, chunk;
          double start, end;
          while (in >> kind >> mb >> start >> end >> chunk) {
            if (kind == 'F' || kind == 'B') busy[s] += end - start;
            total = std::max(total, end);
            absl::StrAppendFormat(
                &trace,
                "%s{\"name\":\"%c%d%s\",\"ph\":\"X\",\"pid\":%d,"
                "\"tid\":0,\"ts\":%.1f,\"dur\":%.1f}",
                trace.size() > 1 ? "," : "", kind, mb,
                v > 1 ? absl::StrFormat(".%d", chunk) : "", s, start * 1e6,
                (end - start) * 1e6);
          }
          std::remove(file.c_str());
        }
        trace += "]";
        double bubble = 0;
        for (double b : busy) bubble += (1 - b / total) / p;
        const double analytic = (p - 1.0) / (v * m + p - 1.0);
        const double ideal = (m + (p - 1.0) / v) * 3 * fwd_ms;
        std::printf("%3d %3d %4d %10.1f %10.1f %16.3f %18.3f %+8.3f\n", p, v, m,
                    total * 1e3, ideal, bubble, analytic, bubble - analytic);
      }
    }
  }
  const std::string path = absl::GetFlag(FLAGS_trace);
  if (!path.empty()) std::ofstream(path) << trace;
  return 0;
}

}  // namespace
}  // namespace verl

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int m = absl::GetFlag(FLAGS_worker_m);
  if (m == 0) return verl::Main();
  return verl::core::StatusExitCode(
      verl::Worker(m, absl::GetFlag(FLAGS_worker_v)),
      "bench_pipeline_bubble worker: ");
}
