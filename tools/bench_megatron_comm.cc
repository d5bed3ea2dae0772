// File: tools/bench_megatron_comm.cc
//
// Megatron training steps on a preset (tiny-qwen2 by default) at each tp in
// --tps, one job of tp x dp x pp processes per tp in one run (the
// micro-batches, one sequence each, through the 1F1B schedule), printing
// per step
// the bytes each Megatron group (tp, dp, cp, pp; "world" for the grad-norm
// sum) communicated by collective, against Megatron's analytic count, and
// the training throughput (tokens/s) of every tp.
//
// Bytes are counted where every collective goes through: the Communicator
// (process_group.cc) records each collective as a timeline span with its
// bytes and group; the workers read the spans back per step. The figure
// per collective is its full (unsharded) size, as nccl-tests report it: an
// all-reduce's tensor, an all-gather's gathered output, a reduce-scatter's
// input. A ring moves (n-1)/n of that per rank for the all-gather and the
// reduce-scatter and 2(n-1)/n for the all-reduce.
//
// The analytic Megatron count per step (T = tokens per dp rank, h hidden,
// L layers, e the parameters' element size, Pp the rank's parameters
// padded to a multiple of dp):
//   tp, sequence parallel: per layer an all-gather of [T, h] before
//     linear_qkv and linear_fc1 and a reduce-scatter of [T, h] after
//     linear_proj and linear_fc2 in forward, the conjugates (reduce-scatter
//     / all-gather) in backward; the embedding's reduce-scatter and the LM
//     head's all-gather of [T, h] and their conjugates: (4L + 2) [T, h] of
//     each kind. The vocab-parallel log-prob's all-reduces of [T] fp32: the
//     max, and the sum of exp, the target logit and the entropy's sum of
//     p*z stacked ([T, 3]; Megatron's cross-entropy has 3 of [T], the
//     entropy term rides along). The gradients of the sequence-parallel
//     norms (2L + 1 of [h]) and of q/k norms (2L of [head_dim]) summed over
//     tp, fp32.
//     Megatron-LM also re-gathers the sequence-parallel input of linear_qkv
//     and linear_fc1 in backward for their weight gradients (2L more
//     all-gathers of [T, h]); here autograd keeps the gathered input (more
//     activation memory, fewer bytes). The tool prints that count too.
//   tp without sequence parallel: an all-reduce of [T, h] after
//     linear_proj, linear_fc2 and the embedding in forward and after
//     linear_qkv, linear_fc1 and the LM head's input in backward, plus the
//     log-prob's and the q/k norms' all-reduces.
//   With pp > 1 the figures are rank 0's, on the first stage: its layers
//   only, no LM head or log-prob; pp: each micro-batch's activations
//   [T_mb/tp, h] sent forward and their gradient received; a tied
//   embedding's fp32 gradient summed with the last stage's copy (over the
//   embedding group, which is the pp group at pp 2).
//   dp, distributed optimizer: a reduce-scatter of the fp32 gradients
//     (Pp x 4 bytes) and an all-gather of the updated parameters (Pp x e).
//   world: the grad norm's one fp64 sum.
// Reductions of bf16 run in fp32 (Gloo has no bf16 sum): with bf16 the
// all-gathers of [T, h] are 2 bytes an element, the reductions 4.
//
// Expert parallelism (--ep > 1, an MoE preset such as tiny-qwen3-moe; tp 1,
// pp 1; the all-reduce optimizer): per MoE
// layer and micro-batch the dispatcher's all-to-alls over the ep group
// (verl/parallel/megatron/expert_parallel.h): the [E] int64 token counts,
// then the P (token, slot) rows this rank routes (kept ones with
// --capacity_factor) and the M rows its experts received, each way in
// forward and again in backward: E*8 + 2 (P + M) h e bytes. P and M come
// from the step's routing (the expert load, summed over the ep group after
// the step); "uniform" is the same with every expert equally loaded
// (P = M = T_mb k). With --etp > 1 (each expert split over the etp group)
// per MoE layer and micro-batch the etp group all-gathers the [El] int64
// per-expert row counts and the M rows (forward), then all-to-alls the
// partial outputs of all S rows the group's members received for these
// experts (S = sum of the members' M), and in backward the same two
// row exchanges mirrored: all_gather etp (El*8 + 2 M h e) bytes (the full
// collective, as the tool counts all-gathers), all_to_all 2 S h e. dp: one
// fp32 all-reduce of the dense gradients (Pp: the dense parameters;
// FinalizeGrads sums the experts' over edp); etp_ep (the etp x ep group, each
// expert shard once): the experts' squared grad norm (8 bytes). The tool also
// prints the all-to-all time per MoE layer and the expert load imbalance (max /
// mean tokens per expert) of every step.
//
//   bazel run -c opt //tools:bench_megatron_comm -- --tps=1,2 --dp=2
//   bazel run -c opt //tools:bench_megatron_comm -- --model=tiny-qwen3-moe
//     --tps=1 --dp=2 --ep=2 --steps=5   (or --dp=4 --ep=2 --etp=2)
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "tools/size_list.h"
#include "verl/core/main_guard.h"
#include "verl/core/status.h"
#include "verl/models/decoder.h"
#include "verl/models/megatron/megatron_gpt.h"
#include "verl/models/megatron/megatron_weights.h"
#include "verl/models/megatron/moe_layer.h"
#include "verl/models/presets.h"
#include "verl/parallel/distributed.h"
#include "verl/parallel/launcher.h"
#include "verl/parallel/megatron/mappings.h"
#include "verl/parallel/megatron/parallel_state.h"
#include "verl/parallel/megatron/pipeline_schedule.h"
#include "verl/parallel/megatron/vocab_parallel.h"
#include "verl/profiler/timeline.h"
#include "verl/rl/workers/megatron_train_state.h"

ABSL_FLAG(std::string, tps, "1,2", "tensor-parallel sizes to run");
ABSL_FLAG(int, dp, 2, "data-parallel size of every job");
ABSL_FLAG(int, pp, 1,
          "pipeline stages of every job (1F1B, one sequence per micro-batch)");
ABSL_FLAG(std::string, model, "tiny-qwen2", "model preset");
ABSL_FLAG(int64_t, seqs, 4, "sequences per dp rank per step");
ABSL_FLAG(int64_t, seq_len, 128, "tokens per sequence");
ABSL_FLAG(int, steps, 3, "training steps (the first one warms up)");
ABSL_FLAG(bool, sequence_parallel, true, "megatron.sequence_parallel");
ABSL_FLAG(std::string, dtype, "float32", "megatron.dtype");
ABSL_FLAG(int, ep, 1,
          "expert_model_parallel_size (MoE presets; needs --tps=1, pp 1)");
ABSL_FLAG(int, etp, 1,
          "expert_tensor_parallel_size (MoE presets; needs --tps=1, pp 1)");
ABSL_FLAG(double, capacity_factor, 0,
          "moe_expert_capacity_factor (0: null, no token dropped)");
ABSL_FLAG(int, worker_tp, 0, "internal: run as a worker of this tp job");
ABSL_FLAG(std::string, out, "", "internal: worker result file prefix");

namespace verl {
namespace {

namespace mg = parallel::megatron;

// What rank 0 (tp rank 0 of the first pipeline stage) holds and moves.
struct Shape {
  int64_t tokens = 0, hidden = 0, layers = 0, qk_norm = 0;  // head_dim or 0
  int64_t params = 0, params_padded = 0, param_bytes = 4;
  int64_t microbatches = 1, stage_input = 0;  // numel of one mb's [T/tp, h]
  int64_t tied_embedding = 0;  // numel of the embedding shard when tied, pp>1
  int64_t emb_is_pp = 0;       // the embedding group is the pp group (pp 2)
  int tp = 1, dp = 1, pp = 1, ep = 1, etp = 1;
  bool sp = true;
  int64_t moe = 0;  // an MoE model (the all-reduce optimizer)
};

// Per step on rank 0 with expert parallelism: the all-to-all bytes the
// step's routing implies and the uniform-routing figure, the all-to-all
// time per MoE layer, and the expert load imbalance over the ep group.
struct MoeStep {
  double expected = 0, uniform = 0, a2a_ms_per_layer = 0;
  double etp_gather = 0, etp_a2a = 0;  // expected etp bytes (etp > 1)
  double imbalance_max = 0, imbalance_mean = 0;
};

// Megatron's expected per-step bytes per (group, op); see the file comment.
std::map<std::pair<std::string, std::string>, double> Expected(const Shape& s) {
  std::map<std::pair<std::string, std::string>, double> e;
  // Rank 0 is on the first stage; `layers` are its stage's, and the LM
  // head, the final norm and the log-prob are there only without stages.
  const bool last = s.pp == 1;
  const double th = static_cast<double>(s.tokens) * s.hidden;
  const double logprob = last ? 4.0 * s.tokens * 4 : 0;
  const double qk_norms = 2.0 * s.layers * s.qk_norm * 4;
  if (s.tp > 1) {
    // fwd: 2 per layer + the embedding / LM head; bwd: the conjugates.
    const double per_kind = 4.0 * s.layers + 1 + (last ? 1 : 0);
    if (s.sp) {
      e[{"tp", "all_gather"}] = per_kind * th * s.param_bytes;
      e[{"tp", "reduce_scatter"}] = per_kind * th * 4;
      e[{"tp", "all_reduce"}] =
          logprob + (2.0 * s.layers + (last ? 1 : 0)) * s.hidden * 4 + qk_norms;
    } else {
      e[{"tp", "all_reduce"}] = per_kind * th * 4 + logprob + qk_norms;
    }
  }
  if (s.pp > 1) {
    // The first stage sends each micro-batch's activations forward and
    // receives their gradient; the tied embedding's two copies (first and
    // last stage) sum their fp32 gradients.
    const double act = static_cast<double>(s.stage_input) * s.param_bytes;
    e[{"pp", "send"}] = s.microbatches * act;
    e[{"pp", "recv"}] = s.microbatches * act;
    if (s.tied_embedding > 0) {
      e[{s.emb_is_pp ? "pp" : "emb", "all_reduce"}] = s.tied_embedding * 4.0;
    }
  }
  if (s.moe) {  // the all-reduce optimizer; the ep all_to_all is per step
    if (s.dp > 1) e[{"dp", "all_reduce"}] = s.params * 4.0;
    if (s.ep * s.etp > 1) e[{"etp_ep", "all_reduce"}] = 8;
    return e;
  }
  if (s.dp > 1) {
    e[{"dp", "reduce_scatter"}] = s.params_padded * 4.0;
    e[{"dp", "all_gather"}] =
        static_cast<double>(s.params_padded) * s.param_bytes;
  }
  if (s.tp * s.dp * s.pp > 1) e[{"world", "all_reduce"}] = 8;
  return e;
}

absl::Status Worker(int tp) {
  parallel::DistributedOptions dist_options;
  dist_options.intra_op_threads = 1;
  VERL_ASSIGN_OR_RETURN(parallel::DistributedContext dist,
                        parallel::InitDistributed(dist_options));
  mg::ModelParallelSizes sizes;
  sizes.tp = tp;
  sizes.pp = absl::GetFlag(FLAGS_pp);
  sizes.ep = absl::GetFlag(FLAGS_ep);
  VERL_ASSIGN_OR_RETURN(models::ModelConfig c,
                        models::MakePreset(absl::GetFlag(FLAGS_model)));
  if (c.IsMoe()) sizes.etp = absl::GetFlag(FLAGS_etp);
  VERL_ASSIGN_OR_RETURN(auto mpu,
                        mg::ParallelState::Initialize(dist.world, sizes));
  models::MegatronModelOptions options;
  options.sequence_parallel = tp > 1 && absl::GetFlag(FLAGS_sequence_parallel);
  if (absl::GetFlag(FLAGS_capacity_factor) > 0) {
    options.moe_expert_capacity_factor = absl::GetFlag(FLAGS_capacity_factor);
  }
  VERL_RETURN_IF_ERROR(models::ValidateMegatronModel(c, options, sizes));
  auto model = std::make_shared<models::MegatronGPTModel>(c, options, mpu);
  {
    std::shared_ptr<models::CausalLM> hf = models::CreateModel(c, 1, 0.02);
    std::map<std::string, at::Tensor> weights;
    for (const auto& item : hf->named_parameters()) {
      weights[item.key()] = item.value().detach();
    }
    VERL_RETURN_IF_ERROR(models::LoadMegatronFromHf(
        models::HfSourceFromMap(weights), model.get()));
  }
  const std::string dtype = absl::GetFlag(FLAGS_dtype);
  if (dtype == "bfloat16") rl::CastMegatronParameters(*model, at::kBFloat16);
  rl::OptimizerOptions adam;
  adam.lr = 1e-4;
  // MoE models: the all-reduce optimizer (what the counts below model).
  VERL_ASSIGN_OR_RETURN(
      auto state, rl::MegatronTrainState::Create(model, mpu, adam,
                                                 /*distributed=*/!c.IsMoe()));
  const int64_t n = absl::GetFlag(FLAGS_seqs),
                len = absl::GetFlag(FLAGS_seq_len);
  at::Generator gen =
      at::make_generator<at::CPUGeneratorImpl>(7 + mpu->dp_rank());
  // One sequence per micro-batch, through the 1F1B schedule (a plain
  // loop at pp = 1).
  at::Tensor ids = at::randint(c.vocab_size, {n, len}, gen, at::kLong);
  at::Tensor labels = at::roll(ids, -1, 1);
  at::Tensor pos = at::arange(len, at::kLong);
  const std::vector<int64_t> cu = {0, len};
  mg::PipelineStageFns fns;
  fns.input_shape = [&](int64_t) { return model->StageHiddenShape(cu); };
  fns.forward = [&](int64_t mb, const at::Tensor& in) {
    return model->StageForward(ids[mb], pos, cu, in);
  };
  fns.loss = [&](int64_t mb, const at::Tensor& logits) {
    return -mg::VocabParallelLogProbsAndEntropy(
                logits, labels[mb], c.vocab_size, model->tp(), 1.0, false)
                .log_probs.mean() /
           n;
  };

  // Which Megatron group a communicator name is.
  std::map<std::string, std::string> role;
  const std::pair<mg::MpuGroup, const char*> groups[] = {
      {mg::MpuGroup::kTp, "tp"},       {mg::MpuGroup::kDp, "dp"},
      {mg::MpuGroup::kCp, "cp"},       {mg::MpuGroup::kPp, "pp"},
      {mg::MpuGroup::kEp, "ep"},       {mg::MpuGroup::kEtp, "etp"},
      {mg::MpuGroup::kEtpEp, "etp_ep"}};
  for (const auto& [g, r] : groups) role[mpu->group(g)->name()] = r;
  role[mpu->world()->name()] = "world";
  const bool emb_is_pp =
      mpu->embedding() &&
      mpu->embedding()->name() == mpu->group(mg::MpuGroup::kPp)->name();
  if (mpu->embedding() && !emb_is_pp) {
    role[mpu->embedding()->name()] = "emb";
  }

  std::ofstream out(
      absl::StrFormat("%s.%d", absl::GetFlag(FLAGS_out), dist.world->rank()));
  // The dense parameters (the dp buffers; experts' gradients are summed
  // over edp instead).
  int64_t params = 0;
  for (const at::Tensor& p : model->parameters()) {
    if (p.requires_grad()) params += p.numel();
  }
  for (const at::Tensor& p : model->ExpertParameters()) params -= p.numel();
  const int dp = mpu->dp()->size();
  int64_t stage_input = 1;
  for (int64_t d : model->StageHiddenShape(cu)) stage_input *= d;
  int64_t stage_layers = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    stage_layers += model->LocalLayer(l) ? 1 : 0;
  }
  const int64_t tied =
      mpu->embedding() && mpu->pp_size() > 1 && c.tie_word_embeddings
          ? model->word_embeddings->weight.numel()
          : 0;
  out << "shape " << n * len << " " << c.hidden_size << " " << stage_layers
      << " " << params << " " << (params + dp - 1) / dp * dp << " "
      << model->parameters()[0].element_size() << " "
      << (c.qk_norm ? c.head_dim : 0) << " " << n << " " << stage_input << " "
      << tied << " " << emb_is_pp << " " << c.IsMoe() << "\n";
  profiler::Timeline& timeline = profiler::Timeline::Global();
  timeline.Enable(dist.world->rank());
  for (int step = 0; step < absl::GetFlag(FLAGS_steps); ++step) {
    VERL_RETURN_IF_ERROR(dist.world->Barrier());
    timeline.Clear();
    const auto t0 = std::chrono::steady_clock::now();
    state->ZeroGrad();
    mg::PipelineForwardBackward(fns, n, *mpu->group(mg::MpuGroup::kPp));
    VERL_RETURN_IF_ERROR(state->Step().status());
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    std::map<std::pair<std::string, std::string>, double> bytes;
    double a2a_us = 0;  // the ep group's all-to-alls
    for (const profiler::TraceEvent& ev : timeline.Events()) {
      if (ev.category != "collective" || !ev.args.is_object()) continue;
      const std::string group = ev.args.value("group", "");
      auto r = role.find(group);
      double b = ev.args.value("bytes", 0.0);
      if (ev.name == "all_gather") b *= ev.args.value("group_size", 1);
      const std::string name = r == role.end() ? group : r->second;
      bytes[{name, ev.name}] += b;
      if (name == "ep" && ev.name == "all_to_all") a2a_us += ev.duration_us;
    }
    out << "step " << step << " " << secs << "\n";
    for (const auto& [key, b] : bytes) {
      out << "bytes " << step << " " << key.first << " " << key.second << " "
          << absl::StrFormat("%.0f", b) << "\n";
    }
    if (c.IsMoe()) {
      // After the count: the step's routing, this rank's pairs per expert
      // (P) and the ep group's (this rank's experts' rows M).
      const mg::CommPtr& ep = mpu->group(mg::MpuGroup::kEp);
      const int64_t el = c.num_experts / ep->size(), first = ep->rank() * el;
      const double row = static_cast<double>(c.hidden_size) *
                         model->parameters()[0].element_size();
      const double counts_bytes = n * c.num_experts * 8.0;
      MoeStep m;
      std::map<int64_t, std::vector<double>> group_load;
      const mg::CommPtr& etp = mpu->group(mg::MpuGroup::kEtp);
      const mg::CommPtr& etp_ep = mpu->group(mg::MpuGroup::kEtpEp);
      for (const auto& [layer, mine] : model->TakeExpertLoad()) {
        at::Tensor all =
            mg::AllReduceSum(at::tensor(mine, at::kDouble), *ep).contiguous();
        group_load[layer].assign(all.data_ptr<double>(),
                                 all.data_ptr<double>() + all.numel());
        const double p = at::tensor(mine, at::kDouble).sum().item<double>();
        const double rows = all.narrow(0, first, el).sum().item<double>();
        if (ep->size() > 1) {
          m.expected += counts_bytes + 2 * (p + rows) * row;
          m.uniform +=
              counts_bytes + 4.0 * n * len * c.num_experts_per_tok * row;
        }
        if (etp->size() > 1) {
          // S: every etp member's rows for these experts.
          const double group_rows =
              mg::AllReduceSum(at::tensor(mine, at::kDouble), *etp_ep)
                  .narrow(0, first, el)
                  .sum()
                  .item<double>();
          m.etp_gather += etp->size() * (n * el * 8.0 + 2 * rows * row);
          m.etp_a2a += 2 * group_rows * row;
        }
      }
      m.a2a_ms_per_layer =
          a2a_us / 1e3 / std::max<size_t>(1, group_load.size());
      std::map<std::string, double> metrics =
          models::ExpertLoadMetrics(group_load);
      out << "moe " << step << " " << absl::StrFormat("%.0f", m.expected) << " "
          << absl::StrFormat("%.0f", m.uniform) << " " << m.a2a_ms_per_layer
          << " " << metrics["moe/imbalance_max"] << " "
          << metrics["moe/imbalance_mean"] << " "
          << absl::StrFormat("%.0f", m.etp_gather) << " "
          << absl::StrFormat("%.0f", m.etp_a2a) << "\n";
    }
  }
  timeline.Disable();
  return absl::OkStatus();
}

struct JobResult {
  Shape shape;
  std::vector<double> secs;  // per step, the slowest rank
  // step -> (group, op) -> bytes on rank 0
  std::map<int, std::map<std::pair<std::string, std::string>, double>> bytes;
  std::map<int, MoeStep> moe;  // step -> rank 0's MoE figures
};

absl::StatusOr<JobResult> RunJob(int tp) {
  const int dp = absl::GetFlag(FLAGS_dp), pp = absl::GetFlag(FLAGS_pp);
  const std::string out =
      absl::StrFormat("/tmp/bench_megatron_comm_%d_%d", getpid(), tp);
  parallel::LaunchOptions launch;
  launch.nproc_per_node = tp * dp * pp;
  launch.master_port = 0;
  const std::vector<std::string> args = {
      absl::StrFormat("--worker_tp=%d", tp),
      "--out=" + out,
      "--model=" + absl::GetFlag(FLAGS_model),
      absl::StrFormat("--seqs=%d", absl::GetFlag(FLAGS_seqs)),
      absl::StrFormat("--seq_len=%d", absl::GetFlag(FLAGS_seq_len)),
      absl::StrFormat("--steps=%d", absl::GetFlag(FLAGS_steps)),
      absl::StrFormat("--pp=%d", pp),
      absl::StrFormat(
          "--sequence_parallel=%s",
          absl::GetFlag(FLAGS_sequence_parallel) ? "true" : "false"),
      "--dtype=" + absl::GetFlag(FLAGS_dtype),
      absl::StrFormat("--ep=%d", absl::GetFlag(FLAGS_ep)),
      absl::StrFormat("--etp=%d", absl::GetFlag(FLAGS_etp)),
      absl::StrFormat("--capacity_factor=%g",
                      absl::GetFlag(FLAGS_capacity_factor))};
  VERL_ASSIGN_OR_RETURN(int code,
                        parallel::RunWorkers("/proc/self/exe", args, launch));
  if (code != 0) {
    return absl::InternalError(absl::StrFormat("tp=%d job failed", tp));
  }
  JobResult r;
  r.shape.tp = tp;
  r.shape.dp = dp;
  r.shape.pp = pp;
  r.shape.sp = tp > 1 && absl::GetFlag(FLAGS_sequence_parallel);
  r.shape.ep = absl::GetFlag(FLAGS_ep);
  r.shape.etp = absl::GetFlag(FLAGS_etp);
  r.secs.assign(absl::GetFlag(FLAGS_steps), 0);
  for (int rank = 0; rank < tp * dp * pp; ++rank) {
    const std::string file = absl::StrFormat("%s.%d", out, rank);
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string kind;
      f >> kind;
      if (kind == "shape" && rank == 0) {
        f >> r.shape.tokens >> r.shape.hidden >> r.shape.layers >>
            r.shape.params >> r.shape.params_padded >> r.shape.param_bytes >>
            r.shape.qk_norm >> r.shape.microbatches >> r.shape.stage_input >>
            r.shape.tied_embedding >> r.shape.emb_is_pp >> r.shape.moe;
      } else if (kind == "step") {
        int step = 0;
        double secs = 0;
        f >> step >> secs;
        r.secs[step] = std::max(r.secs[step], secs);
      } else if (kind == "moe" && rank == 0) {
        int step = 0;
        MoeStep m;
        f >> step >> m.expected >> m.uniform >> m.a2a_ms_per_layer >>
            m.imbalance_max >> m.imbalance_mean >> m.etp_gather >> m.etp_a2a;
        r.moe[step] = m;
      } else if (kind == "bytes" && rank == 0) {
        int step = 0;
        std::string group, op;
        double b = 0;
        f >> step >> group >> op >> b;
        r.bytes[step][{group, op}] = b;
      }
    }
    std::remove(file.c_str());
  }
  return r;
}

int Main() {
  std::vector<int> tps;
  std::string bad;
  if (!tools::ParseSizeList(absl::GetFlag(FLAGS_tps), &tps, &bad)) {
    std::cerr << "--tps: bad size '" << bad << "'\n";
    return 1;
  }
  const int dp = absl::GetFlag(FLAGS_dp), pp = absl::GetFlag(FLAGS_pp);
  const int ep = absl::GetFlag(FLAGS_ep);
  absl::StatusOr<models::ModelConfig> preset =
      models::MakePreset(absl::GetFlag(FLAGS_model));
  if (!preset.ok()) {
    std::cerr << preset.status() << "\n";
    return 1;
  }
  const bool moe = preset->IsMoe();
  if (moe && (tps != std::vector<int>{1} || pp != 1)) {
    std::cerr << absl::GetFlag(FLAGS_model)
              << ": MoE presets need --tps=1 and --pp=1 (the tp and pp "
                 "traffic of MoE layers is not modelled)\n";
    return 1;
  }
  const int etp = absl::GetFlag(FLAGS_etp);
  if (etp > 1 && !moe) {
    std::cerr << "--etp=" << etp << ": needs an MoE preset\n";
    return 1;
  }
  if (ep * etp > 1 && (tps != std::vector<int>{1} || pp != 1)) {
    std::cerr << "--ep=" << ep << " --etp=" << etp
              << ": needs --tps=1 and --pp=1 (the tp and pp traffic of MoE "
                 "layers is not modelled)\n";
    return 1;
  }
  std::printf(
      "%s, dp %d, pp %d, ep %d, etp %d, %ld sequences (micro-batches) x %ld "
      "tokens per dp rank, %s, %s optimizer, sequence_parallel %s, 1 thread "
      "per rank\n",
      absl::GetFlag(FLAGS_model).c_str(), dp, pp, ep, etp,
      absl::GetFlag(FLAGS_seqs), absl::GetFlag(FLAGS_seq_len),
      absl::GetFlag(FLAGS_dtype).c_str(), moe ? "all-reduce" : "distributed",
      absl::GetFlag(FLAGS_sequence_parallel) ? "true" : "false");
  std::vector<std::pair<int, double>> throughput;
  bool all_match = true;
  for (int tp : tps) {
    absl::StatusOr<JobResult> r = RunJob(tp);
    if (!r.ok()) {
      std::cerr << r.status() << "\n";
      return 1;
    }
    const auto base = Expected(r->shape);
    std::printf(
        "\ntp=%d (world %d): bytes per step on rank 0 (full collective "
        "size), measured vs Megatron's count\n",
        tp, tp * dp * pp);
    std::printf("%5s %6s %-15s %14s %14s %8s\n", "step", "group", "op",
                "measured", "expected", "ratio");
    for (const auto& [step, bytes] : r->bytes) {
      auto expected = base;
      if (r->shape.ep > 1) {
        expected[{"ep", "all_to_all"}] = r->moe[step].expected;
      }
      if (r->shape.etp > 1) {
        expected[{"etp", "all_gather"}] = r->moe[step].etp_gather;
        expected[{"etp", "all_to_all"}] = r->moe[step].etp_a2a;
      }
      auto keys = bytes;
      for (const auto& [k, v] : expected) keys.emplace(k, 0.0);
      for (const auto& [key, unused] : keys) {
        auto m = bytes.find(key);
        auto e = expected.find(key);
        const double got = m == bytes.end() ? 0 : m->second;
        const double want = e == expected.end() ? 0 : e->second;
        all_match = all_match && got == want;
        std::printf(
            "%5d %6s %-15s %14.0f %14.0f %8s\n", step + 1, key.first.c_str(),
            key.second.c_str(), got, want,
            want > 0 ? absl::StrFormat("%.3f", got / want).c_str() : "-");
      }
    }
    for (const char* g : {"cp", "pp"}) {
      if (std::string(g) == "pp" && pp > 1) continue;
      double b = 0;
      for (const auto& [step, bytes] : r->bytes) {
        for (const auto& [key, v] : bytes) {
          if (key.first == g) b += v;
        }
      }
      all_match = all_match && b == 0;
      std::printf("%12s size 1: %.0f bytes measured, 0 expected\n", g, b);
    }
    if (r->shape.moe) {
      std::printf(
          "\nMoE: rank 0's ep all_to_all bytes per step (fwd + bwd, every "
          "MoE layer) vs the routing's count and uniform routing; time per "
          "MoE layer; expert load imbalance (max / mean) over the ep group\n");
      std::printf("%5s %14s %14s %14s %8s %12s %10s %10s\n", "step", "measured",
                  "expected", "uniform", "/unif", "a2a ms/layer", "imb max",
                  "imb mean");
      for (const auto& [step, m] : r->moe) {
        auto b = r->bytes[step].find({"ep", "all_to_all"});
        const double got = b == r->bytes[step].end() ? 0 : b->second;
        std::printf("%5d %14.0f %14.0f %14.0f %8s %12.3f %10.3f %10.3f\n",
                    step + 1, got, m.expected, m.uniform,
                    m.uniform > 0
                        ? absl::StrFormat("%.3f", got / m.uniform).c_str()
                        : "-",
                    m.a2a_ms_per_layer, m.imbalance_max, m.imbalance_mean);
      }
    }
    if (r->shape.sp) {
      std::printf(
          "      Megatron-LM's tp all_gather adds the backward re-gather of "
          "linear_qkv / linear_fc1 inputs: %.0f (kept by autograd here)\n",
          base.at({"tp", "all_gather"}) +
              2.0 * r->shape.layers * r->shape.tokens * r->shape.hidden *
                  r->shape.param_bytes);
    }
    double secs = 0;
    for (size_t s = 1; s < r->secs.size(); ++s) secs += r->secs[s];
    const int timed = std::max<int>(1, static_cast<int>(r->secs.size()) - 1);
    if (r->secs.size() == 1) secs = r->secs[0];
    const double tokens = static_cast<double>(r->shape.tokens) * dp * timed;
    throughput.emplace_back(tp, tokens / secs);
  }
  std::printf("\n%4s %8s %14s %10s\n", "tp", "world", "tokens/s", "vs first");
  for (const auto& [tp, tps_] : throughput) {
    std::printf("%4d %8d %14.1f %10.3f\n", tp, tp * dp * pp, tps_,
                tps_ / throughput.front().second);
  }
  std::printf("\nmeasured bytes %s Megatron's count\n",
              all_match ? "equal" : "DIFFER from");
  return all_match ? 0 : 2;
}

}  // namespace
}  // namespace verl

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int tp = absl::GetFlag(FLAGS_worker_tp);
  if (tp == 0) return verl::Main();
  return verl::core::StatusExitCode(verl::Worker(tp),
                                    "bench_megatron_comm worker: ");
}
