// File: tools/bench_fsdp.cc
//
// Sharded data-parallel training throughput on this machine, measured in one
// run: the same global batch (default 8 sequences x 128 tokens, qwen2-30m)
// trained for a few AdamW steps by
//   replicated  1 process, ReplicatedTrainState (the single-GPU baseline),
//               with all intra-op threads and (replicated_1t) with one
//   fsdp        2 processes, FsdpTrainState with the per-layer ZeRO-3
//               schedule (gather before each layer, free after, re-gather in
//               backward, per-layer reduce-scatter; forward prefetch)
//   fsdp_eager  2 processes, FsdpTrainState keeping every unit gathered
//   fsdp_sp     2 processes, Ulysses sp=2 (dp=1): both ranks hold every
//               sequence and each runs half of every token stream, with
//               all-to-alls around attention (loss through the actor's
//               ForwardResponses), per-layer FSDP over both ranks
//   fsdp_offload  fsdp + param_offload + optimizer_offload (on CPU builds
//               host and device are the same RAM: this measures the cost
//               of the copies, not a memory saving)
// Each mode runs in fresh worker processes (the launcher), the intra-op
// threads split over the processes. Printed per mode: training tokens/s,
// collective bytes per step against the parameter bytes (ZeRO-3 expects
// ~3x: forward gather, backward re-gather, reduce-scatter), the fraction of
// communication time that overlapped compute, and the peak of full
// parameters live at once; then ratios against the replicated run.
#include <ATen/ATen.h>
#include <torch/nn/functional.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "verl/core/main_guard.h"
#include "verl/core/status.h"
#include "verl/models/decoder.h"
#include "verl/models/presets.h"
#include "verl/parallel/distributed.h"
#include "verl/parallel/fsdp.h"
#include "verl/parallel/launcher.h"
#include "verl/parallel/ulysses.h"
#include "verl/rl/workers/fsdp_train_state.h"
#include "verl/rl/workers/model_forward.h"
#include "verl/rl/workers/train_state.h"

ABSL_FLAG(std::string, preset, "qwen2-30m", "model preset");
ABSL_FLAG(int, num_seqs, 8, "sequences in the global batch");
ABSL_FLAG(int, seq_len, 128, "tokens per sequence");
ABSL_FLAG(int, steps, 3, "timed steps (after one warm-up step)");
ABSL_FLAG(int, nproc, 2, "processes of the sharded modes");
ABSL_FLAG(std::string, mode, "", "internal: the worker's mode");
ABSL_FLAG(std::string, out, "", "internal: where rank 0 writes its result");

namespace verl {
namespace {

using Clock = std::chrono::steady_clock;

struct Result {
  double tokens_per_s = 0;
  double bytes_per_step = 0;
  double param_bytes = 0;
  double overlap = 0;
  double peak_gathered = 0;
};

// Next-token cross-entropy over the packed local sequences, normalised by
// the global token count (so gradients average to the global batch's).
at::Tensor Loss(models::CausalLM& model, const std::vector<at::Tensor>& seqs,
                double global_tokens) {
  std::vector<at::Tensor> pos;
  std::vector<int64_t> cu = {0};
  for (const at::Tensor& s : seqs) {
    pos.push_back(at::arange(s.numel(), at::kLong));
    cu.push_back(cu.back() + s.numel());
  }
  at::Tensor ids = at::cat(seqs);
  at::Tensor logits = model.ForwardPacked(ids, at::cat(pos), cu).logits;
  // Targets: the next token; the last token of each sequence is masked.
  at::Tensor target = at::roll(ids, -1);
  at::Tensor mask = at::ones_like(ids, at::kFloat);
  for (size_t i = 1; i < cu.size(); ++i) mask[cu[i] - 1] = 0;
  at::Tensor nll = torch::nn::functional::cross_entropy(
      logits, target,
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  return (nll * mask).sum() / global_tokens;
}

// The same loss through the actor's ForwardResponses (a one-token prompt,
// the rest as response) with Ulysses over `sp`; `keep` holds the attention
// backend until backward.
at::Tensor SpLoss(models::CausalLM& model, const std::vector<at::Tensor>& seqs,
                  double global_tokens,
                  std::shared_ptr<parallel::Communicator> sp,
                  std::shared_ptr<void>* keep) {
  at::Tensor ids = at::stack(seqs);
  at::Tensor mask = at::ones_like(ids);
  at::Tensor pos =
      at::arange(ids.size(1), at::kLong).expand_as(ids).contiguous();
  rl::ResponseForward f =
      rl::ForwardResponses(model, ids, mask, pos, ids.size(1) - 1, 1.0, false,
                           rl::SequenceParallel{std::move(sp)});
  *keep = f.attention;
  return -f.log_probs.sum() / global_tokens;
}

absl::Status Worker(const std::string& mode) {
  parallel::DistributedOptions dist_options;
  if (mode == "replicated_1t") dist_options.intra_op_threads = 1;
  VERL_ASSIGN_OR_RETURN(parallel::DistributedContext dist,
                        parallel::InitDistributed(dist_options));
  const int world = dist.world->size(), rank = dist.world->rank();
  VERL_ASSIGN_OR_RETURN(models::ModelConfig cfg,
                        models::MakePreset(absl::GetFlag(FLAGS_preset)));
  const int n = absl::GetFlag(FLAGS_num_seqs),
            len = absl::GetFlag(FLAGS_seq_len);
  const bool sp_mode = mode == "fsdp_sp";
  VERL_ASSIGN_OR_RETURN(
      parallel::UlyssesGroups mesh,
      parallel::MakeUlyssesGroups(dist.world, sp_mode ? world : 1));
  const int dp = mesh.dp->size(), dp_rank = mesh.dp->rank();
  if (n % dp != 0) return absl::InvalidArgumentError("num_seqs % dp");
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1234);
  std::vector<at::Tensor> local;
  for (int i = 0; i < n; ++i) {
    at::Tensor s = at::randint(0, cfg.vocab_size - 1, {len}, gen, at::kLong);
    if (i / (n / dp) == dp_rank) local.push_back(s);
  }
  const double global_tokens = static_cast<double>(n) * (len - 1);

  auto model = models::CreateModel(cfg, 7);
  int64_t param_bytes = 0;
  for (const at::Tensor& p : model->parameters())
    param_bytes += p.numel() * p.element_size();
  rl::OptimizerOptions opt;
  opt.lr = 1e-4;
  std::unique_ptr<rl::TrainState> state;
  parallel::FsdpModule* fsdp = nullptr;
  if (mode.rfind("replicated", 0) == 0) {
    state = std::make_unique<rl::ReplicatedTrainState>(model->parameters(), opt,
                                                       dist.world);
  } else {
    parallel::FsdpConfig fc;
    fc.set_dtype("float32");
    fc.set_forward_prefetch(true);
    fc.set_param_offload(mode == "fsdp_offload");
    fc.set_optimizer_offload(mode == "fsdp_offload");
    VERL_ASSIGN_OR_RETURN(auto s, rl::FsdpTrainState::ForModule(
                                      *model, fc, opt, dist.world,
                                      /*per_layer=*/mode != "fsdp_eager"));
    fsdp = &s->fsdp();
    state = std::move(s);
  }
  auto step = [&]() -> absl::Status {
    state->ZeroGrad();
    std::shared_ptr<void> keep;
    (sp_mode ? SpLoss(*model, local, global_tokens, mesh.sp, &keep)
             : Loss(*model, local, global_tokens))
        .backward();
    return state->Step().status();
  };
  VERL_RETURN_IF_ERROR(step());  // warm-up
  const int steps = absl::GetFlag(FLAGS_steps);
  const int64_t bytes0 = fsdp ? fsdp->bytes_communicated() : 0;
  const parallel::FsdpCommStats comm0 =
      fsdp ? fsdp->comm_stats() : parallel::FsdpCommStats{};
  if (fsdp) fsdp->ResetPeak();
  VERL_RETURN_IF_ERROR(dist.world->Barrier());
  const auto t0 = Clock::now();
  for (int s = 0; s < steps; ++s) VERL_RETURN_IF_ERROR(step());
  VERL_RETURN_IF_ERROR(dist.world->Barrier());
  const double elapsed =
      std::chrono::duration<double>(Clock::now() - t0).count();
  Result r;
  r.tokens_per_s = n * len * steps / elapsed;
  r.param_bytes = param_bytes;
  if (fsdp) {
    r.bytes_per_step =
        static_cast<double>(fsdp->bytes_communicated() - bytes0) / steps;
    parallel::FsdpCommStats c = fsdp->comm_stats();
    c.comm_seconds -= comm0.comm_seconds;
    c.wait_seconds -= comm0.wait_seconds;
    r.overlap = c.OverlapFraction();
    r.peak_gathered = fsdp->Memory().peak_gathered_bytes;
  } else {
    // A ring all-reduce moves ~2x the gradient bytes per rank.
    r.bytes_per_step = world > 1 ? 2.0 * param_bytes : 0.0;
    r.peak_gathered = param_bytes;
  }
  if (rank == 0) {
    std::ofstream out(absl::GetFlag(FLAGS_out));
    out << r.tokens_per_s << " " << r.bytes_per_step << " " << r.param_bytes
        << " " << r.overlap << " " << r.peak_gathered << "\n";
  }
  return absl::OkStatus();
}

absl::StatusOr<Result> RunMode(const std::string& mode, int nproc) {
  const std::string out =
      absl::StrFormat("/tmp/bench_fsdp_%d_%s.txt", getpid(), mode);
  std::vector<std::string> args = {
      "--mode=" + mode,
      "--out=" + out,
      "--preset=" + absl::GetFlag(FLAGS_preset),
      absl::StrFormat("--num_seqs=%d", absl::GetFlag(FLAGS_num_seqs)),
      absl::StrFormat("--seq_len=%d", absl::GetFlag(FLAGS_seq_len)),
      absl::StrFormat("--steps=%d", absl::GetFlag(FLAGS_steps)),
  };
  parallel::LaunchOptions launch;
  launch.nproc_per_node = nproc;
  launch.master_port = 0;
  VERL_ASSIGN_OR_RETURN(int code,
                        parallel::RunWorkers("/proc/self/exe", args, launch));
  if (code != 0) {
    return absl::InternalError(
        absl::StrFormat("mode %s exited with %d", mode, code));
  }
  Result r;
  std::ifstream in(out);
  in >> r.tokens_per_s >> r.bytes_per_step >> r.param_bytes >> r.overlap >>
      r.peak_gathered;
  std::remove(out.c_str());
  if (!in) return absl::InternalError("no result from mode " + mode);
  return r;
}

int Main() {
  const int nproc = absl::GetFlag(FLAGS_nproc);
  struct Mode {
    const char* name;
    int nproc;
  };
  const std::vector<Mode> modes = {{"replicated", 1},  {"replicated_1t", 1},
                                   {"fsdp", nproc},    {"fsdp_eager", nproc},
                                   {"fsdp_sp", nproc}, {"fsdp_offload", nproc}};
  std::vector<Result> results;
  std::printf("%-12s %5s %10s %14s %9s %14s\n", "mode", "procs", "tokens/s",
              "comm/step", "overlap", "peak params");
  for (const Mode& m : modes) {
    absl::StatusOr<Result> r = RunMode(m.name, m.nproc);
    if (!r.ok()) {
      std::cerr << "bench_fsdp: " << r.status().message() << std::endl;
      return 1;
    }
    std::printf("%-12s %5d %10.0f %13.2fx %9.2f %13.2fx\n", m.name, m.nproc,
                r->tokens_per_s, r->bytes_per_step / r->param_bytes, r->overlap,
                r->peak_gathered / r->param_bytes);
    results.push_back(*r);
  }
  const Result& base = results[0];
  std::printf(
      "summary: %d-rank fsdp / 1-rank tokens/s = %.2f (vs 1 thread %.2f; "
      "eager %.2f); fsdp "
      "bytes/step = %.2fx params (ZeRO-3 expectation ~3x), %.0f%% of "
      "communication overlapped; peak full params %.2fx (eager %.2fx)\n",
      nproc, results[2].tokens_per_s / base.tokens_per_s,
      results[2].tokens_per_s / results[1].tokens_per_s,
      results[3].tokens_per_s / base.tokens_per_s,
      results[2].bytes_per_step / results[2].param_bytes,
      100 * results[2].overlap,
      results[2].peak_gathered / results[2].param_bytes,
      results[3].peak_gathered / results[3].param_bytes);
  std::printf(
      "summary: Ulysses sp=%d / fsdp tokens/s = %.2f; offload / fsdp "
      "tokens/s = %.2f (CPU: host and device are the same RAM)\n",
      nproc, results[4].tokens_per_s / results[2].tokens_per_s,
      results[5].tokens_per_s / results[2].tokens_per_s);
  return 0;
}

}  // namespace
}  // namespace verl

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode.empty()) return verl::Main();
  return verl::core::StatusExitCode(verl::Worker(mode), "bench_fsdp worker: ");
}
