// File: verl/rl/workers/testing/megatron_train_state_worker.cc
//
// Test worker for megatron_train_state_test, started as N ranks with
// --tp=T (dp = N / T). Every rank builds the same single-process CausalLM
// (tiny Qwen2 with q/k/v bias, KV heads < heads) and trains it for 3 AdamW
// steps with ReplicatedTrainState on one process (the reference: loss =
// mean -log p of all tokens of a fixed packed batch, grad_clip low enough
// that clipping acts). The ranks then train MegatronTrainState (sequence
// parallel, distributed optimizer on or off per --distributed) on the same
// batch, dp rank r taking its share of the sequences, and check:
//   * the grad norm of each step equals the reference's (<= 1e-5 rel),
//   * the parameters after each step, gathered to HF tensors, equal the
//     reference's (<= 1e-5 rel),
//   * the distributed optimizer holds 3 fp32 words (master, exp_avg,
//     exp_avg_sq) per element of its dp range only: ceil(local/dp),
//   * exact resume: the shard saved after step 2 loaded into a fresh state
//     (model from the initial weights) gives, after step 3, the same
//     parameters bit for bit as the uninterrupted state.
// --mode=half (megatron.dtype bfloat16): 3 steps of the bf16 state track
// the fp32 state's losses and grad norms within kHalfTol; the masters are
// fp32 and hold values bf16 cannot (not re-rounded each step), the gradient
// buffers fp32, the parameters bf16 at half the bytes; a dist_ckpt saved
// after step 2 and loaded into a fresh bf16 state gives step 3 bit for bit
// (the fp32 masters are kept).
// --mode=offload (--dtype float32 or bfloat16): with param_offload,
// grad_offload and optimizer_offload each, 3 steps (LoadToDevice, forward,
// backward, Step, OffloadToHost) give the no-offload run's norms and
// parameters bit for bit, and between steps the device-resident bytes
// (Memory()) drop by the offloaded buffers' bytes, which sit in host memory;
// a forward-only model's parameters (the reference's param_offload) moved to
// host and back give the same log-probs bit for bit.
// --mode=moe_dist_ckpt (--ep, --etp, --distributed): two tiny MoE models
// (Qwen2-MoE: softmax router, gated shared expert; Qwen3-MoE-shaped with
// the sigmoid router and its expert_bias, no shared expert). With
// --distributed, first 3 steps at (tp, ep, etp) and at etp 1, each with the
// distributed optimizer and without side by side: grad norms and
// parameters equal the single-process reference's and each other's (<=
// 1e-5 rel), the distributed optimizer's state is its dp range of the
// dense parameters plus its edp range of the experts. Then each model is
// trained one step at (tp, ep, etp), saved as dist_ckpt (experts keyed by
// global index, boxes the etp shards), merged by the Megatron merger (rank
// 0: equal to the gathered HF tensors bit for bit, every tensor once),
// loaded into a model of another init at etp 1 (its HF tensors equal the
// saved ones bit for bit, expert_bias included) and saved again there (the
// same checkpoint bit for bit, optimizer state included), and a second
// step on both layouts gives the same loss, grad norm and parameters (<=
// 1e-5 rel); in bf16 one
// forward-backward at etp 2 and etp 1 agree (loss and expert gradients
// within 2e-2).
// Prints "rank R: OK ..." or "rank R FAILED: ..." and exits non-zero on a
// failure.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "verl/ckpt/checkpoint_pt.h"
#include "verl/ckpt/dist_ckpt.h"
#include "verl/ckpt/merger/checkpoint_merger.h"
#include "verl/ckpt/safetensors_sharded.h"
#include "verl/core/file_util.h"
#include "verl/core/status.h"
#include "verl/models/decoder.h"
#include "verl/models/hf_config.h"
#include "verl/models/logprob.h"
#include "verl/models/megatron/megatron_gpt.h"
#include "verl/models/megatron/megatron_merger.h"
#include "verl/models/megatron/megatron_weights.h"
#include "verl/parallel/distributed.h"
#include "verl/parallel/megatron/parallel_state.h"
#include "verl/parallel/megatron/pipeline_schedule.h"
#include "verl/parallel/megatron/test_compare.h"
#include "verl/parallel/megatron/vocab_parallel.h"
#include "verl/parallel/test_worker.h"
#include "verl/rl/workers/megatron_train_state.h"
#include "verl/rl/workers/train_state.h"

ABSL_FLAG(int, tp, 2, "tensor-parallel size");
ABSL_FLAG(int, pp, 1, "pipeline stages (dist_ckpt mode)");
ABSL_FLAG(int, vpp, 0,
          "virtual pipeline stages (dist_ckpt mode; the batch then goes "
          "through the interleaved schedule as 2 micro-batches)");
ABSL_FLAG(int, layers, 2, "num_hidden_layers");
ABSL_FLAG(bool, distributed, true, "use_distributed_optimizer");
ABSL_FLAG(std::string, dist_ckpt_dir, "",
          "dist_ckpt mode: the folder the save phase writes and the resume "
          "phase reads");
ABSL_FLAG(std::string, dist_ckpt_phase, "", "save | resume");
ABSL_FLAG(std::string, mode, "",
          "half | offload | moe_dist_ckpt (see the file comment)");
ABSL_FLAG(int, ep, 1, "expert_model_parallel_size (moe_dist_ckpt mode)");
ABSL_FLAG(int, etp, 0, "expert_tensor_parallel_size (moe_dist_ckpt; 0: tp)");
ABSL_FLAG(std::string, dtype, "float32", "offload mode: parameter dtype");
ABSL_FLAG(bool, exact, false,
          "resume: steps 3 and 4 must equal the saving run's bit for bit "
          "(same tp, dp and optimizer); else within 1e-6");

namespace verl::rl {
namespace {

namespace mg = parallel::megatron;

constexpr double kTol = 1e-5;
constexpr int kSteps = 3;

models::ModelConfig TinyConfig() {
  models::ModelConfig c;
  c.architecture = "Qwen2ForCausalLM";
  c.model_type = "qwen2";
  c.vocab_size = 37;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = absl::GetFlag(FLAGS_layers);
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.attention_bias = true;
  c.rope_theta = 10000.0;
  return c;
}

OptimizerOptions Adam() {
  OptimizerOptions o;
  o.lr = 1e-2;
  o.weight_decay = 0.1;
  o.grad_clip = 0.5;  // below the norms: every step clips
  // The k_proj bias gradient is zero up to rounding (softmax ignores a
  // shift of every key); with AdamW's default eps its update would be
  // lr * sign(rounding noise), with eps 1e-4 still lr * noise / 1e-4 (the
  // fused training ops' rounding put that at 1.2e-5 relative). eps 1e-3
  // keeps such updates negligible.
  o.eps = 1e-3;
  return o;
}

// A packed batch of 4 sequences; dp rank r of d takes sequences
// [r*4/d, (r+1)*4/d).
struct Packed {
  at::Tensor ids, pos, labels;
  std::vector<int64_t> cu;
};

Packed Sequences(int rank, int world, const models::ModelConfig& config) {
  const std::vector<int64_t> lens = {5, 7, 6, 4};
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(3);
  std::vector<at::Tensor> ids, labels, pos;
  Packed p;
  p.cu = {0};
  const int per = static_cast<int>(lens.size()) / world;
  for (size_t s = 0; s < lens.size(); ++s) {
    at::Tensor i = at::randint(config.vocab_size, {lens[s]}, gen, at::kLong);
    at::Tensor l = at::randint(config.vocab_size, {lens[s]}, gen, at::kLong);
    if (static_cast<int>(s) / per != rank) continue;
    ids.push_back(i);
    labels.push_back(l);
    pos.push_back(at::arange(lens[s], at::kLong));
    p.cu.push_back(p.cu.back() + lens[s]);
  }
  p.ids = at::cat(ids);
  p.labels = at::cat(labels);
  p.pos = at::cat(pos);
  return p;
}

constexpr int64_t kTotalTokens = 5 + 7 + 6 + 4;

std::map<std::string, at::Tensor> Params(const torch::nn::Module& m) {
  std::map<std::string, at::Tensor> out;
  for (const auto& item : m.named_parameters()) {
    out[item.key()] = item.value().detach().clone();
  }
  return out;
}

// This dp rank's rows as `parts` micro-batches of whole sequences.
std::vector<Packed> MicroBatches(const Packed& data, int parts) {
  const int64_t n = static_cast<int64_t>(data.cu.size()) - 1;
  std::vector<Packed> out;
  for (int i = 0; i < parts; ++i) {
    const int64_t s0 = n * i / parts, s1 = n * (i + 1) / parts;
    const int64_t t0 = data.cu[s0], t1 = data.cu[s1];
    Packed p;
    p.ids = data.ids.narrow(0, t0, t1 - t0);
    p.pos = data.pos.narrow(0, t0, t1 - t0);
    p.labels = data.labels.narrow(0, t0, t1 - t0);
    for (int64_t s = s0; s <= s1; ++s) p.cu.push_back(data.cu[s] - t0);
    out.push_back(std::move(p));
  }
  return out;
}

// One training step of the megatron model on this dp rank's rows: the
// loss is the global token mean (x dp, as gradients are dp-averaged).
// `loss` (optional) gets the global mean loss (summed over dp).
absl::StatusOr<double> MegatronStep(models::MegatronGPTModel& model,
                                    MegatronTrainState& state,
                                    const Packed& data, int dp,
                                    double* loss = nullptr) {
  state.ZeroGrad();
  // The rows through the 1F1B schedule (a plain forward-backward at pp =
  // 1) as one micro-batch, or two through the interleaved one; the loss on
  // the last stage, broadcast over pp.
  const std::vector<Packed> mbs =
      MicroBatches(data, model.num_chunks() > 1 ? 2 : 1);
  std::vector<at::Tensor> log_probs;
  for (const Packed& mb : mbs) log_probs.push_back(at::zeros({mb.ids.size(0)}));
  mg::PipelineStageFns fns = models::StageFns(model, [&mbs](int64_t m) {
    return models::StageMicroBatch{mbs[m].ids, mbs[m].pos, &mbs[m].cu};
  });
  fns.loss = [&](int64_t m, const at::Tensor& logits) {
    mg::VocabParallelOutput out = mg::VocabParallelLogProbsAndEntropy(
        logits, mbs[m].labels, model.config().vocab_size, model.tp(), 1.0,
        /*with_entropy=*/false);
    log_probs[m] = out.log_probs.detach();
    return -out.log_probs.sum() * dp / kTotalTokens;
  };
  parallel::Communicator& pp = *model.mpu()->group(mg::MpuGroup::kPp);
  mg::PipelineForwardBackward(fns, static_cast<int64_t>(mbs.size()), pp);
  at::Tensor all = at::cat(log_probs);
  mg::BroadcastFromLastStage(all, pp);
  if (loss != nullptr) {
    at::Tensor l = (-all.sum() / kTotalTokens).to(at::kDouble).reshape({1});
    VERL_RETURN_IF_ERROR(
        model.mpu()->dp()->AllReduce(l, parallel::ReduceOp::kSum));
    *loss = l.item<double>();
  }
  return state.Step();
}

absl::Status Compare(const models::MegatronGPTModel& model,
                     const std::map<std::string, at::Tensor>& want,
                     const std::string& tag, mg::Comparer& cmp) {
  for (int64_t l = models::kMegatronRootStage;
       l < model.config().num_hidden_layers; ++l) {
    for (const auto& [name, t] : models::GatherHfTensorsAllStages(model, l)) {
      VERL_RETURN_IF_ERROR(cmp.Expect(tag + name, t, want.at(name)));
    }
  }
  return absl::OkStatus();
}

// The single-process reference: kSteps AdamW steps (ReplicatedTrainState)
// of the CausalLM of `config` from `initial` on the whole batch; each
// step's grad norm and parameters.
struct Reference {
  std::vector<double> norms;
  std::vector<std::map<std::string, at::Tensor>> params;
};

absl::StatusOr<Reference> RunReference(
    const models::ModelConfig& config,
    const std::map<std::string, at::Tensor>& initial) {
  std::shared_ptr<models::CausalLM> ref =
      models::CreateModel(config, /*seed=*/1, 0.1);
  {
    at::NoGradGuard no_grad;
    for (auto& item : ref->named_parameters()) {
      item.value().copy_(initial.at(item.key()));
    }
  }
  const Packed all = Sequences(0, 1, config);
  ReplicatedTrainState state(NamedParameters(*ref), Adam(), nullptr);
  Reference out;
  for (int s = 0; s < kSteps; ++s) {
    state.ZeroGrad();
    models::ForwardOutput f = ref->ForwardPacked(all.ids, all.pos, all.cu);
    models::LogProbEntropy lp =
        models::LogProbsAndEntropy(f.logits, all.labels, 1.0, false);
    (-lp.log_probs.sum() / kTotalTokens).backward();
    VERL_ASSIGN_OR_RETURN(out.norms.emplace_back(), state.Step());
    out.params.push_back(Params(*ref));
  }
  return out;
}

absl::Status Run(const std::shared_ptr<mg::ParallelState>& mpu,
                 bool distributed, mg::Comparer& cmp) {
  const models::ModelConfig config = TinyConfig();
  const std::map<std::string, at::Tensor> initial =
      Params(*models::CreateModel(config, /*seed=*/1, 0.1));
  VERL_ASSIGN_OR_RETURN(const Reference ref, RunReference(config, initial));
  const std::vector<double>& ref_norms = ref.norms;
  const std::vector<std::map<std::string, at::Tensor>>& ref_params = ref.params;
  if (!(ref_norms[0] > Adam().grad_clip)) {
    return absl::InternalError("reference norm too small to clip");
  }

  models::MegatronModelOptions options;
  options.sequence_parallel = mpu->tp_size() > 1;
  options.make_vocab_size_divisible_by = 4;
  auto build = [&]()
      -> absl::StatusOr<std::pair<std::shared_ptr<models::MegatronGPTModel>,
                                  std::unique_ptr<MegatronTrainState>>> {
    auto model =
        std::make_shared<models::MegatronGPTModel>(config, options, mpu);
    VERL_RETURN_IF_ERROR(models::LoadMegatronFromHf(
        models::HfSourceFromMap(initial), model.get()));
    VERL_ASSIGN_OR_RETURN(auto state, MegatronTrainState::Create(
                                          model, mpu, Adam(), distributed));
    return std::make_pair(model, std::move(state));
  };
  VERL_ASSIGN_OR_RETURN(auto run, build());
  models::MegatronGPTModel& model = *run.first;
  MegatronTrainState& state = *run.second;
  const int dp = mpu->dp()->size();
  const Packed mine = Sequences(mpu->dp_rank(), dp, config);
  const std::string mode = distributed ? "distopt " : "ddp ";
  TrainStateShard saved;
  for (int s = 0; s < kSteps; ++s) {
    VERL_ASSIGN_OR_RETURN(double norm, MegatronStep(model, state, mine, dp));
    const std::string tag = absl::StrCat(mode, "step ", s + 1, " ");
    VERL_RETURN_IF_ERROR(cmp.Expect(tag + "grad norm",
                                    at::scalar_tensor(norm, at::kDouble),
                                    at::scalar_tensor(ref_norms[s])));
    VERL_RETURN_IF_ERROR(Compare(model, ref_params[s], tag, cmp));
    if (s == 1) {
      VERL_ASSIGN_OR_RETURN(saved, state.SaveShard());
    }
  }

  // The distributed optimizer's state is this rank's dp range only.
  int64_t local = 0;
  for (const auto& p : model.parameters()) local += p.numel();
  const int64_t range = (local + dp - 1) / dp;
  const int64_t want_bytes = (distributed ? 3 * range : 2 * local) * 4;
  if (state.OptimizerStateBytes() != want_bytes) {
    return absl::InternalError(absl::StrCat(
        mode, "optimizer bytes ", state.OptimizerStateBytes(), ", expected ",
        want_bytes, " (", local, " local parameters, dp ", dp, ")"));
  }

  // Exact resume from the step-2 shard.
  VERL_ASSIGN_OR_RETURN(auto resumed, build());
  VERL_RETURN_IF_ERROR(resumed.second->LoadShard(saved, TrainStateLoadParts{}));
  if (resumed.second->schedule_step() != state.schedule_step()) {
    return absl::InternalError("resumed schedule step differs");
  }
  // Replay step 3 on the resumed state; the original already took it.
  VERL_ASSIGN_OR_RETURN(
      double norm, MegatronStep(*resumed.first, *resumed.second, mine, dp));
  VERL_RETURN_IF_ERROR(cmp.Expect(mode + "resumed grad norm",
                                  at::scalar_tensor(norm, at::kDouble),
                                  at::scalar_tensor(ref_norms[2])));
  auto a = model.named_parameters();
  for (const auto& item : resumed.first->named_parameters()) {
    if (!at::equal(item.value(), a[item.key()])) {
      return absl::InternalError(
          absl::StrCat(mode, "resumed run differs at ", item.key()));
    }
  }
  return absl::OkStatus();
}

// ---- dist_ckpt: save at one layout, resume at another -------------------
//
// save (tp 2): a 0-step checkpoint merged by the Megatron merger equals the
// initial HF tensors bit for bit; after 2 steps a checkpoint whose merge
// equals the gathered state dict bit for bit; steps 3 and 4 (loss, grad
// norm) written to losses.txt. resume (any tp / dp / optimizer): loads the
// step-2 checkpoint, runs steps 3 and 4 and compares their losses and norms
// with losses.txt (bit for bit with --exact, else <= 1e-6 relative) and the
// parameters with the single-process reference (<= 1e-5).

constexpr char kLossFile[] = "losses.txt";

absl::Status SaveDist(MegatronTrainState& state, const mg::ParallelState& mpu,
                      const std::string& role_dir,
                      const models::ModelConfig& config) {
  TrainStateLoadParts parts;
  VERL_RETURN_IF_ERROR(state.SaveDistCheckpoint(
      role_dir, parts, {{"cpu", ckpt::CpuRngState()}}));
  VERL_RETURN_IF_ERROR(mpu.world()->Barrier());
  if (mpu.world()->rank() == 0) {
    VERL_RETURN_IF_ERROR(ckpt::FinalizeDistCkpt(
        role_dir + "/" + ckpt::kDistCkptSubdir, mpu.world()->size()));
    VERL_RETURN_IF_ERROR(core::MakeDirs(role_dir + "/huggingface"));
    VERL_RETURN_IF_ERROR(
        models::WriteHfConfig(role_dir + "/huggingface/config.json", config));
  }
  return mpu.world()->Barrier();
}

// Rank 0: merges role_dir (fp32) and checks it equals `want` bit for bit.
absl::Status MergeEquals(const std::string& role_dir,
                         const std::map<std::string, at::Tensor>& want,
                         const std::string& what) {
  ckpt::MergeOptions o;
  o.local_dir = role_dir;
  o.target_dir = role_dir + "_merged";
  o.dtype = at::kFloat;
  VERL_RETURN_IF_ERROR(models::MergeMegatronCheckpoint(o).status());
  VERL_ASSIGN_OR_RETURN(ckpt::TensorMap got,
                        ckpt::LoadSafetensorsFolder(o.target_dir));
  if (got.size() != want.size()) {
    return absl::InternalError(absl::StrCat(
        what, ": merged ", got.size(), " tensors, expected ", want.size()));
  }
  for (const auto& [name, t] : want) {
    auto it = got.find(name);
    if (it == got.end() || !at::equal(it->second, t)) {
      return absl::InternalError(
          absl::StrCat(what, ": merged '", name, "' differs or is missing"));
    }
  }
  return absl::OkStatus();
}

// ---- megatron.dtype bfloat16 and offload ------------------------------

// bf16 parameters vs fp32 over 3 steps: relative tolerance of the losses
// and grad norms (bf16 keeps 8 bits of mantissa: ~4e-3 per rounding; the
// measured worst is printed).
constexpr double kHalfTol = 2e-2;

struct Built {
  std::shared_ptr<models::MegatronGPTModel> model;
  std::unique_ptr<MegatronTrainState> state;
};

absl::StatusOr<Built> BuildState(
    const std::shared_ptr<mg::ParallelState>& mpu,
    const std::map<std::string, at::Tensor>& init, at::ScalarType dtype,
    const MegatronStateOptions& so,
    const models::ModelConfig& config = TinyConfig()) {
  models::MegatronModelOptions options;
  options.sequence_parallel = mpu->tp_size() > 1;
  options.make_vocab_size_divisible_by = 4;
  Built b;
  b.model = std::make_shared<models::MegatronGPTModel>(config, options, mpu);
  VERL_RETURN_IF_ERROR(
      models::LoadMegatronFromHf(models::HfSourceFromMap(init), b.model.get()));
  if (dtype != at::kFloat) CastMegatronParameters(*b.model, dtype);
  VERL_ASSIGN_OR_RETURN(b.state,
                        MegatronTrainState::Create(b.model, mpu, Adam(), so));
  return b;
}

absl::Status RunHalf(const std::shared_ptr<mg::ParallelState>& mpu,
                     bool distributed) {
  const models::ModelConfig config = TinyConfig();
  const std::map<std::string, at::Tensor> initial =
      Params(*models::CreateModel(config, /*seed=*/1, 0.1));
  const int dp = mpu->dp()->size();
  const Packed mine = Sequences(mpu->dp_rank(), dp, config);
  MegatronStateOptions so;
  so.distributed_optimizer = distributed;
  VERL_ASSIGN_OR_RETURN(Built fp32, BuildState(mpu, initial, at::kFloat, so));
  VERL_ASSIGN_OR_RETURN(Built bf16,
                        BuildState(mpu, initial, at::kBFloat16, so));
  if (bf16.state->ParameterBytes() * 2 != fp32.state->ParameterBytes()) {
    return absl::InternalError(
        absl::StrCat("bf16 parameter bytes ", bf16.state->ParameterBytes(),
                     " are not half of fp32's ", fp32.state->ParameterBytes()));
  }
  const std::string dir = absl::GetFlag(FLAGS_dist_ckpt_dir);
  double worst = 0;
  for (int s = 0; s < kSteps; ++s) {
    double loss32 = 0, loss16 = 0;
    VERL_ASSIGN_OR_RETURN(
        double n32, MegatronStep(*fp32.model, *fp32.state, mine, dp, &loss32));
    VERL_ASSIGN_OR_RETURN(
        double n16, MegatronStep(*bf16.model, *bf16.state, mine, dp, &loss16));
    for (const auto& [what, got, want] :
         {std::tuple<const char*, double, double>{"loss", loss16, loss32},
          {"grad norm", n16, n32}}) {
      const double rel = std::abs(got - want) / std::abs(want);
      worst = std::max(worst, rel);
      std::cout << "rank " << mpu->world()->rank() << ": step " << s + 1
                << " bf16 " << what << " " << absl::StrFormat("%.6f", got)
                << " vs fp32 " << absl::StrFormat("%.6f", want) << " (rel "
                << absl::StrFormat("%.2e", rel) << ")" << std::endl;
      if (!(rel <= kHalfTol)) {
        return absl::InternalError(
            absl::StrCat("step ", s + 1, " bf16 ", what, " ", got, " vs fp32 ",
                         want, ": rel ", rel, " > ", kHalfTol));
      }
    }
    if (s == 1 && !dir.empty()) {
      VERL_RETURN_IF_ERROR(SaveDist(*bf16.state, *mpu, dir + "/actor", config));
    }
  }
  // The masters are fp32 and keep what bf16 cannot hold; the parameters
  // are bf16 and their gradient buffers fp32.
  bool finer = false;
  for (const at::Tensor& m : bf16.state->MasterParams()) {
    if (m.scalar_type() != at::kFloat) {
      return absl::InternalError("a master weight is not fp32");
    }
    finer = finer || !at::equal(m, m.to(at::kBFloat16).to(at::kFloat));
  }
  if (!finer) {
    return absl::InternalError(
        "every master weight is bf16-representable: masters are rounded");
  }
  for (const at::Tensor& p : bf16.model->parameters()) {
    if (p.scalar_type() != at::kBFloat16 || !p.grad().defined() ||
        p.grad().scalar_type() != at::kFloat) {
      return absl::InternalError(
          "a bf16 parameter is not bf16 or its gradient buffer not fp32");
    }
  }
  if (!dir.empty()) {
    // Resume from the step-2 dist_ckpt: step 3 bit for bit.
    VERL_ASSIGN_OR_RETURN(Built resumed,
                          BuildState(mpu, initial, at::kBFloat16, so));
    VERL_RETURN_IF_ERROR(
        resumed.state->LoadDistCheckpoint(dir + "/actor", TrainStateLoadParts{})
            .status());
    VERL_RETURN_IF_ERROR(
        MegatronStep(*resumed.model, *resumed.state, mine, dp).status());
    auto want = bf16.model->named_parameters();
    for (const auto& item : resumed.model->named_parameters()) {
      if (!at::equal(item.value(), want[item.key()])) {
        return absl::InternalError(absl::StrCat(
            "bf16 resumed from dist_ckpt differs at ", item.key()));
      }
    }
    const std::vector<at::Tensor> a = resumed.state->MasterParams();
    const std::vector<at::Tensor> b = bf16.state->MasterParams();
    for (size_t i = 0; i < a.size(); ++i) {
      if (!at::equal(a[i], b[i])) {
        return absl::InternalError("bf16 resumed fp32 masters differ");
      }
    }
  }
  std::cout << "rank " << mpu->world()->rank()
            << ": bf16 vs fp32 worst rel diff over " << kSteps
            << " steps (loss, grad norm) " << absl::StrFormat("%.2e", worst)
            << std::endl;
  return absl::OkStatus();
}

absl::Status RunOffload(const std::shared_ptr<mg::ParallelState>& mpu,
                        bool distributed) {
  const models::ModelConfig config = TinyConfig();
  const std::map<std::string, at::Tensor> initial =
      Params(*models::CreateModel(config, /*seed=*/1, 0.1));
  const at::ScalarType dtype =
      absl::GetFlag(FLAGS_dtype) == "bfloat16" ? at::kBFloat16 : at::kFloat;
  const int dp = mpu->dp()->size();
  const Packed mine = Sequences(mpu->dp_rank(), dp, config);
  struct Run {
    std::vector<double> norms;
    std::vector<std::map<std::string, at::Tensor>> params;
    std::vector<parallel::FsdpMemory> between;  // after each step
    bool params_moved = true;  // a separate host buffer after each pass
    int64_t param_bytes = 0, optimizer_bytes = 0;
  };
  auto run = [&](const MegatronStateOptions& so) -> absl::StatusOr<Run> {
    VERL_ASSIGN_OR_RETURN(Built b, BuildState(mpu, initial, dtype, so));
    Run r;
    for (int s = 0; s < kSteps; ++s) {
      VERL_RETURN_IF_ERROR(b.state->LoadToDevice());
      const void* used = b.model->parameters()[0].data_ptr();
      VERL_ASSIGN_OR_RETURN(double norm,
                            MegatronStep(*b.model, *b.state, mine, dp));
      VERL_RETURN_IF_ERROR(b.state->OffloadToHost());
      r.params_moved =
          r.params_moved && b.model->parameters()[0].data_ptr() != used;
      r.norms.push_back(norm);
      r.params.push_back(Params(*b.model));
      r.between.push_back(b.state->Memory());
    }
    r.param_bytes = b.state->ParameterBytes();
    r.optimizer_bytes = b.state->OptimizerStateBytes();
    return r;
  };
  MegatronStateOptions none;
  none.distributed_optimizer = distributed;
  VERL_ASSIGN_OR_RETURN(Run base, run(none));
  const parallel::FsdpMemory& m0 = base.between.back();
  if (m0.host_bytes != 0 ||
      m0.device_bytes !=
          base.param_bytes + m0.grad_shard_bytes + base.optimizer_bytes ||
      m0.grad_shard_bytes <= 0 || base.optimizer_bytes <= 0) {
    return absl::InternalError(
        absl::StrCat("no-offload memory: device ", m0.device_bytes, " host ",
                     m0.host_bytes, " params ", base.param_bytes, " grads ",
                     m0.grad_shard_bytes, " optimizer ", base.optimizer_bytes));
  }
  const char* names[] = {"param_offload", "grad_offload", "optimizer_offload"};
  const int64_t moved[] = {base.param_bytes, m0.grad_shard_bytes,
                           base.optimizer_bytes};
  for (int k = 0; k < 3; ++k) {
    MegatronStateOptions so = none;
    (k == 0   ? so.param_offload
     : k == 1 ? so.grad_offload
              : so.optimizer_offload) = true;
    VERL_ASSIGN_OR_RETURN(Run got, run(so));
    if (got.params_moved != (k == 0)) {
      return absl::InternalError(absl::StrCat(
          names[k], ": the parameters ", got.params_moved ? "" : "not ",
          "moved to a separate host buffer after each pass"));
    }
    for (int s = 0; s < kSteps; ++s) {
      if (got.norms[s] != base.norms[s]) {
        return absl::InternalError(
            absl::StrCat(names[k], ": step ", s + 1, " grad norm ",
                         got.norms[s], " != no-offload ", base.norms[s]));
      }
      for (const auto& [name, t] : got.params[s]) {
        if (!at::equal(t, base.params[s].at(name))) {
          return absl::InternalError(absl::StrCat(
              names[k], ": step ", s + 1, " parameter ", name, " differs"));
        }
      }
      const parallel::FsdpMemory& m = got.between[s];
      const parallel::FsdpMemory& b = base.between[s];
      if (m.device_bytes != b.device_bytes - moved[k] ||
          m.host_bytes != moved[k]) {
        return absl::InternalError(absl::StrCat(
            names[k], ": step ", s + 1, " device bytes ", m.device_bytes,
            " (no offload ", b.device_bytes, "), host ", m.host_bytes,
            ", expected ", moved[k], " moved"));
      }
    }
    std::cout << "rank " << mpu->world()->rank() << ": " << names[k]
              << " bit-identical over " << kSteps << " steps; device bytes "
              << "between steps " << got.between.back().device_bytes << " vs "
              << m0.device_bytes << " (" << moved[k] << " in host memory)"
              << std::endl;
  }
  // The forward-only reference (MoveModuleParameters, no train state): a
  // pass after a host round trip gives the same log-probs bit for bit, and
  // between passes the parameters live in a separate host buffer.
  VERL_ASSIGN_OR_RETURN(Built ref, BuildState(mpu, initial, dtype, none));
  auto log_probs = [&] {
    at::NoGradGuard no_grad;
    return mg::VocabParallelLogProbsAndEntropy(
               ref.model->Forward(mine.ids, mine.pos, mine.cu), mine.labels,
               config.vocab_size, ref.model->tp(), 1.0, false)
        .log_probs;
  };
  const at::Tensor before = log_probs();
  const void* on_device = ref.model->parameters()[0].data_ptr();
  MoveModuleParameters(*ref.model, parallel::MemoryLocation::kHost, c10::kCPU);
  const void* on_host = ref.model->parameters()[0].data_ptr();
  MoveModuleParameters(*ref.model, parallel::MemoryLocation::kDevice,
                       c10::kCPU);
  if (on_host == on_device || !at::equal(log_probs(), before)) {
    return absl::InternalError(
        "reference param offload: not moved, or the log-probs changed");
  }
  return absl::OkStatus();
}

absl::Status RunDistCkpt(const std::shared_ptr<mg::ParallelState>& mpu,
                         bool distributed, mg::Comparer& cmp) {
  const std::string dir = absl::GetFlag(FLAGS_dist_ckpt_dir);
  const std::string phase = absl::GetFlag(FLAGS_dist_ckpt_phase);
  const models::ModelConfig config = TinyConfig();
  std::shared_ptr<models::CausalLM> ref =
      models::CreateModel(config, /*seed=*/1, 0.1);
  const std::map<std::string, at::Tensor> initial = Params(*ref);
  // The single-process reference after 4 steps.
  const Packed all = Sequences(0, 1, config);
  ReplicatedTrainState ref_state(NamedParameters(*ref), Adam(), nullptr);
  for (int s = 0; s < 4; ++s) {
    ref_state.ZeroGrad();
    models::ForwardOutput f = ref->ForwardPacked(all.ids, all.pos, all.cu);
    (-models::LogProbsAndEntropy(f.logits, all.labels, 1.0, false)
          .log_probs.sum() /
     kTotalTokens)
        .backward();
    VERL_RETURN_IF_ERROR(ref_state.Step().status());
  }
  const std::map<std::string, at::Tensor> ref_after4 = Params(*ref);

  models::MegatronModelOptions options;
  options.sequence_parallel = mpu->tp_size() > 1;
  options.make_vocab_size_divisible_by = 4;
  auto model = std::make_shared<models::MegatronGPTModel>(config, options, mpu);
  VERL_RETURN_IF_ERROR(models::LoadMegatronFromHf(
      models::HfSourceFromMap(initial), model.get()));
  VERL_ASSIGN_OR_RETURN(
      auto state, MegatronTrainState::Create(model, mpu, Adam(), distributed));
  const int dp = mpu->dp()->size();
  const bool root = mpu->world()->rank() == 0;
  const Packed mine = Sequences(mpu->dp_rank(), dp, config);
  if (phase == "save") {
    VERL_RETURN_IF_ERROR(SaveDist(*state, *mpu, dir + "/step0/actor", config));
    if (root) {
      VERL_RETURN_IF_ERROR(
          MergeEquals(dir + "/step0/actor", initial, "0-step round trip"));
    }
    for (int s = 0; s < 2; ++s) {
      VERL_RETURN_IF_ERROR(MegatronStep(*model, *state, mine, dp).status());
    }
    VERL_RETURN_IF_ERROR(SaveDist(*state, *mpu, dir + "/actor", config));
    VERL_ASSIGN_OR_RETURN(NamedParams gathered, state->FullStateDict());
    if (root) {
      std::map<std::string, at::Tensor> want(gathered.begin(), gathered.end());
      VERL_RETURN_IF_ERROR(
          MergeEquals(dir + "/actor", want, "merge after 2 steps"));
    }
  } else {
    TrainStateLoadParts parts;
    VERL_ASSIGN_OR_RETURN(auto rng,
                          state->LoadDistCheckpoint(dir + "/actor", parts));
    if (!rng.count("cpu") || rng.at("cpu").numel() == 0) {
      return absl::InternalError("no CPU RNG state restored");
    }
  }
  std::vector<double> got;
  for (int s = 0; s < 2; ++s) {
    double loss = 0;
    VERL_ASSIGN_OR_RETURN(double norm,
                          MegatronStep(*model, *state, mine, dp, &loss));
    got.push_back(loss);
    got.push_back(norm);
  }
  VERL_RETURN_IF_ERROR(Compare(*model, ref_after4, phase + " step 4 ", cmp));
  const std::string loss_file = dir + "/" + kLossFile;
  if (phase == "save") {
    if (root) {
      VERL_RETURN_IF_ERROR(core::WriteFileAtomic(
          loss_file, absl::StrFormat("%.17g %.17g %.17g %.17g\n", got[0],
                                     got[1], got[2], got[3])));
    }
    return absl::OkStatus();
  }
  VERL_ASSIGN_OR_RETURN(std::string text, core::ReadFile(loss_file));
  std::vector<std::string> words =
      absl::StrSplit(text, ' ', absl::SkipWhitespace());
  const char* what[] = {"step 3 loss", "step 3 grad norm", "step 4 loss",
                        "step 4 grad norm"};
  for (int i = 0; i < 4; ++i) {
    double want = 0;
    if (i >= static_cast<int>(words.size()) ||
        !absl::SimpleAtod(absl::StripAsciiWhitespace(words[i]), &want)) {
      return absl::InternalError(absl::StrCat(loss_file, ": malformed"));
    }
    const double rel = std::abs(got[i] - want) / std::max(1.0, std::abs(want));
    std::cout << "rank " << mpu->world()->rank() << ": resumed " << what[i]
              << " " << absl::StrFormat("%.17g", got[i]) << " vs saved run "
              << absl::StrFormat("%.17g", want) << " (rel " << rel << ")"
              << std::endl;
    if (absl::GetFlag(FLAGS_exact) ? got[i] != want : !(rel <= 1e-6)) {
      return absl::InternalError(absl::StrCat(
          "resumed ", what[i], " ", got[i], " differs from the saved run's ",
          want, absl::GetFlag(FLAGS_exact) ? " (exact expected)" : ""));
    }
  }
  return absl::OkStatus();
}

// ---- MoE dist_ckpt: expert shards by global index, over ep and etp -----

// The HF tensors of `model` (collective), on every rank.
std::map<std::string, at::Tensor> HfTensors(
    const models::MegatronGPTModel& model) {
  std::map<std::string, at::Tensor> out;
  for (int64_t l = models::kMegatronRootStage;
       l < model.config().num_hidden_layers; ++l) {
    out.merge(models::GatherHfTensorsAllStages(model, l));
  }
  return out;
}

models::ModelConfig MoeConfig(bool sigmoid) {
  models::ModelConfig c = TinyConfig();
  c.architecture = sigmoid ? "Qwen3MoeForCausalLM" : "Qwen2MoeForCausalLM";
  c.model_type = sigmoid ? "qwen3_moe" : "qwen2_moe";
  c.num_experts = 4;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 16;
  if (sigmoid) {       // DeepSeek-V3's router on a config the merger reads back
    c.qk_norm = true;  // Qwen3's attention
    c.attention_bias = false;
    c.scoring_func = "sigmoid";
    c.n_group = 2;
    c.topk_group = 2;
    c.norm_topk_prob = true;
  } else {
    c.shared_expert_intermediate_size = 24;
  }
  return c;
}

// bf16 through the etp exchanges (the rows travel as 16-bit words): one
// forward-backward of `hf` at `mpu`'s etp and at etp 1 (`mpu1`) in bf16 on
// the same batch: the losses and the expert gradients (gathered to HF)
// agree to bf16 precision (2e-2 relative, norm-wise).
absl::Status Bf16EtpAgrees(const models::ModelConfig& config,
                           const models::MegatronModelOptions& options,
                           const std::map<std::string, at::Tensor>& hf,
                           const std::shared_ptr<mg::ParallelState>& mpu,
                           const std::shared_ptr<mg::ParallelState>& mpu1,
                           const std::string& tag) {
  std::vector<double> losses;
  std::vector<std::map<std::string, at::Tensor>> grads;
  for (const auto& m : {mpu, mpu1}) {
    models::MegatronGPTModel model(config, options, m);
    VERL_RETURN_IF_ERROR(
        models::LoadMegatronFromHf(models::HfSourceFromMap(hf), &model));
    CastMegatronParameters(model, at::kBFloat16);
    const Packed mine = Sequences(m->dp_rank(), m->dp()->size(), config);
    at::Tensor loss = -mg::VocabParallelLogProbsAndEntropy(
                           model.Forward(mine.ids, mine.pos, mine.cu),
                           mine.labels, config.vocab_size, model.tp(), 1.0,
                           /*with_entropy=*/false)
                           .log_probs.to(at::kFloat)
                           .sum();
    loss.backward();
    model.FinalizeGrads();
    losses.push_back(loss.item<double>());
    const models::ParamTensorFn grad = [](const at::Tensor& p) {
      return (p.grad().defined() ? p.grad() : at::zeros_like(p)).to(at::kFloat);
    };
    std::map<std::string, at::Tensor> g;
    for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
      for (auto& [name, t] : models::GatherHfTensors(model, l, grad)) {
        if (name.find(".mlp.experts.") != std::string::npos) g[name] = t;
      }
    }
    grads.push_back(std::move(g));
  }
  if (!(std::abs(losses[0] - losses[1]) <= 2e-2 * std::abs(losses[1]))) {
    return absl::InternalError(
        absl::StrCat(tag, "bf16 loss ", losses[0], " at etp 2 vs ", losses[1]));
  }
  for (const auto& [name, want] : grads[1]) {
    const at::Tensor& got = grads[0].at(name);
    const double den = std::max(want.norm().item<double>(), 1e-6);
    if (!((got - want).norm().item<double>() <= 2e-2 * den)) {
      return absl::InternalError(
          absl::StrCat(tag, "bf16 grad of ", name, " differs at etp 2"));
    }
  }
  if (grads[1].empty()) return absl::InternalError(tag + "no expert grads");
  return absl::OkStatus();
}

// `config`'s model at `mpu` from HF tensors, fp32, with the distributed
// optimizer or without.
absl::StatusOr<Built> BuildMoe(const models::ModelConfig& config,
                               const std::shared_ptr<mg::ParallelState>& mpu,
                               const std::map<std::string, at::Tensor>& from,
                               bool distributed) {
  MegatronStateOptions so;
  so.distributed_optimizer = distributed;
  return BuildState(mpu, from, at::kFloat, so, config);
}

// kSteps steps at `mpu` with the distributed optimizer (dense state over
// dp, experts' over edp) and without, side by side: every step's grad norm
// and the parameters equal the single-process reference's and each other's
// (<= 1e-5 rel); the distributed optimizer holds 3 fp32 words per element
// of its dp range of the dense parameters plus its edp range of the
// experts.
absl::Status MoeStepsMatchReference(
    const models::ModelConfig& config,
    const std::map<std::string, at::Tensor>& initial, const Reference& ref,
    const std::shared_ptr<mg::ParallelState>& mpu, const std::string& tag,
    mg::Comparer& cmp) {
  VERL_ASSIGN_OR_RETURN(Built dist, BuildMoe(config, mpu, initial, true));
  VERL_ASSIGN_OR_RETURN(Built ddp, BuildMoe(config, mpu, initial, false));
  const int dp = mpu->dp()->size();
  const Packed mine = Sequences(mpu->dp_rank(), dp, config);
  for (int s = 0; s < kSteps; ++s) {
    const std::string at = absl::StrCat(tag, "step ", s + 1, " ");
    VERL_ASSIGN_OR_RETURN(double nd,
                          MegatronStep(*dist.model, *dist.state, mine, dp));
    VERL_ASSIGN_OR_RETURN(double nr,
                          MegatronStep(*ddp.model, *ddp.state, mine, dp));
    const at::Tensor want = at::scalar_tensor(ref.norms[s], at::kDouble);
    VERL_RETURN_IF_ERROR(cmp.Expect(at + "distopt grad norm",
                                    at::scalar_tensor(nd, at::kDouble), want));
    VERL_RETURN_IF_ERROR(cmp.Expect(at + "ddp grad norm",
                                    at::scalar_tensor(nr, at::kDouble), want));
    VERL_RETURN_IF_ERROR(cmp.Expect(at + "distopt vs ddp grad norm",
                                    at::scalar_tensor(nd, at::kDouble),
                                    at::scalar_tensor(nr, at::kDouble)));
    VERL_RETURN_IF_ERROR(
        Compare(*dist.model, ref.params[s], at + "distopt ", cmp));
    VERL_RETURN_IF_ERROR(Compare(*ddp.model, ref.params[s], at + "ddp ", cmp));
    VERL_RETURN_IF_ERROR(Compare(*dist.model, HfTensors(*ddp.model),
                                 at + "distopt vs ddp ", cmp));
  }
  int64_t expert = 0, dense = 0;
  for (const at::Tensor& p : dist.model->ExpertParameters()) {
    expert += p.numel();
  }
  for (const at::Tensor& p : dist.model->parameters()) {
    if (p.requires_grad()) dense += p.numel();
  }
  dense -= expert;
  const int64_t edp = mpu->group(mg::MpuGroup::kEdp)->size();
  const int64_t want_bytes =
      3 * 4 * ((dense + dp - 1) / dp + (expert + edp - 1) / edp);
  if (expert == 0 || dist.state->OptimizerStateBytes() != want_bytes) {
    return absl::InternalError(absl::StrCat(
        tag, "distopt optimizer bytes ", dist.state->OptimizerStateBytes(),
        ", expected ", want_bytes, " (", dense, " dense / dp ", dp, ", ",
        expert, " expert / edp ", edp, ")"));
  }
  std::cout << "rank " << mpu->world()->rank() << ": " << tag << kSteps
            << " steps with and without the distributed optimizer (dp " << dp
            << ", edp " << edp << ") equal the reference; step " << kSteps
            << " grad norm " << ref.norms.back() << std::endl;
  return absl::OkStatus();
}

// Rank 0: the dist_ckpt folders `a` and `b` hold the same tensors (rng
// states aside) bit for bit, optimizer state included.
absl::Status SameDistCkpt(const std::string& a, const std::string& b,
                          const std::string& tag) {
  VERL_ASSIGN_OR_RETURN(
      auto ra, ckpt::DistCkptReader::Open(a + "/" + ckpt::kDistCkptSubdir));
  VERL_ASSIGN_OR_RETURN(
      auto rb, ckpt::DistCkptReader::Open(b + "/" + ckpt::kDistCkptSubdir));
  int n = 0, optimizer = 0;
  for (const auto& [key, meta] : ra->metadata().tensors) {
    if (absl::StartsWith(key, "rng_state.")) continue;
    if (!rb->Has(key)) {
      return absl::InternalError(absl::StrCat(tag, b, " lacks '", key, "'"));
    }
    VERL_ASSIGN_OR_RETURN(at::Tensor ta, ra->ReadFull(key));
    VERL_ASSIGN_OR_RETURN(at::Tensor tb, rb->ReadFull(key));
    if (!at::equal(ta, tb)) {
      return absl::InternalError(
          absl::StrCat(tag, "re-saved '", key, "' differs"));
    }
    ++n;
    optimizer += absl::StartsWith(key, "optimizer.") ? 1 : 0;
  }
  if (rb->metadata().tensors.size() != ra->metadata().tensors.size() ||
      optimizer == 0) {
    return absl::InternalError(absl::StrCat(
        tag, "re-saved checkpoint has ", rb->metadata().tensors.size(),
        " tensors vs ", ra->metadata().tensors.size(), " (", optimizer,
        " optimizer)"));
  }
  std::cout << tag << "re-saved checkpoint equals the loaded one: " << n
            << " tensors (" << optimizer << " optimizer state) bit for bit"
            << std::endl;
  return absl::OkStatus();
}

absl::Status RunMoeDistCkpt(const std::shared_ptr<mg::ParallelState>& mpu,
                            bool distributed, mg::Comparer& cmp) {
  const std::string dir = absl::GetFlag(FLAGS_dist_ckpt_dir);
  const bool root = mpu->world()->rank() == 0;
  mg::ModelParallelSizes sizes = mpu->layout().sizes();
  sizes.etp = 1;
  VERL_ASSIGN_OR_RETURN(
      std::shared_ptr<mg::ParallelState> mpu1,
      mg::ParallelState::Initialize(mpu->world(), sizes, "mpu_etp1"));
  for (const bool sigmoid : {false, true}) {
    const models::ModelConfig config = MoeConfig(sigmoid);
    const std::string tag = sigmoid ? "sigmoid: " : "softmax: ";
    std::map<std::string, at::Tensor> initial =
        Params(*models::CreateModel(config, /*seed=*/1, 0.1));
    for (auto& [name, t] : initial) {  // a bias worth restoring
      if (absl::EndsWith(name, "e_score_correction_bias")) {
        t = at::arange(t.numel(), at::kFloat) * 0.01;
      }
    }
    models::MegatronModelOptions options;
    options.sequence_parallel = mpu->tp_size() > 1;
    options.make_vocab_size_divisible_by = 4;
    if (distributed) {
      // Training at both layouts (edp differs) against the reference.
      VERL_ASSIGN_OR_RETURN(const Reference ref, RunReference(config, initial));
      VERL_RETURN_IF_ERROR(
          MoeStepsMatchReference(config, initial, ref, mpu, tag, cmp));
      VERL_RETURN_IF_ERROR(MoeStepsMatchReference(config, initial, ref, mpu1,
                                                  tag + "etp 1: ", cmp));
    }
    VERL_ASSIGN_OR_RETURN(Built a, BuildMoe(config, mpu, initial, distributed));
    const int dp = mpu->dp()->size();
    const Packed mine = Sequences(mpu->dp_rank(), dp, config);
    VERL_RETURN_IF_ERROR(MegatronStep(*a.model, *a.state, mine, dp).status());
    const std::string role = dir + (sigmoid ? "/sigmoid" : "/softmax");
    VERL_RETURN_IF_ERROR(SaveDist(*a.state, *mpu, role, config));
    const std::map<std::string, at::Tensor> saved = HfTensors(*a.model);
    if (root) {
      VERL_RETURN_IF_ERROR(MergeEquals(role, saved, tag + "merge"));
    }
    // Another init at etp 1, then the checkpoint.
    VERL_ASSIGN_OR_RETURN(
        Built b, BuildMoe(config, mpu1,
                          Params(*models::CreateModel(config, /*seed=*/2, 0.1)),
                          distributed));
    VERL_RETURN_IF_ERROR(
        b.state->LoadDistCheckpoint(role, TrainStateLoadParts()).status());
    for (const auto& [name, t] : HfTensors(*b.model)) {
      if (!at::equal(t, saved.at(name))) {
        return absl::InternalError(
            absl::StrCat(tag, "loaded at etp 1: '", name, "' differs"));
      }
    }
    // Saved again at etp 1 (its optimizer state resharded: the experts'
    // over another edp): the same checkpoint bit for bit.
    VERL_RETURN_IF_ERROR(SaveDist(*b.state, *mpu1, role + "_etp1", config));
    if (root) {
      VERL_RETURN_IF_ERROR(SameDistCkpt(role, role + "_etp1", tag));
    }
    const Packed mine1 = Sequences(mpu1->dp_rank(), dp, config);
    double loss_a = 0, loss_b = 0;
    VERL_ASSIGN_OR_RETURN(double norm_a,
                          MegatronStep(*a.model, *a.state, mine, dp, &loss_a));
    VERL_ASSIGN_OR_RETURN(double norm_b,
                          MegatronStep(*b.model, *b.state, mine1, dp, &loss_b));
    VERL_RETURN_IF_ERROR(cmp.Expect(tag + "step 2 loss",
                                    at::tensor({loss_b}, at::kDouble),
                                    at::tensor({loss_a}, at::kDouble)));
    VERL_RETURN_IF_ERROR(cmp.Expect(tag + "step 2 grad norm",
                                    at::tensor({norm_b}, at::kDouble),
                                    at::tensor({norm_a}, at::kDouble)));
    VERL_RETURN_IF_ERROR(
        Compare(*b.model, HfTensors(*a.model), tag + "step 2 at etp 1 ", cmp));
    VERL_RETURN_IF_ERROR(Bf16EtpAgrees(config, options, saved, mpu, mpu1, tag));
    std::cout << "rank " << mpu->world()->rank() << ": " << tag
              << "merged and resharded; step 2 grad norm " << norm_a << " vs "
              << norm_b << " at etp 1; bf16 agrees" << std::endl;
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  parallel::DistributedContext dist = parallel::JoinTestJob();
  const int rank = dist.env.rank;
  mg::ModelParallelSizes sizes;
  sizes.tp = absl::GetFlag(FLAGS_tp);
  sizes.pp = absl::GetFlag(FLAGS_pp);
  sizes.vpp = absl::GetFlag(FLAGS_vpp);
  sizes.ep = absl::GetFlag(FLAGS_ep);
  sizes.etp = absl::GetFlag(FLAGS_etp);
  absl::StatusOr<std::shared_ptr<mg::ParallelState>> mpu =
      mg::ParallelState::Initialize(dist.world, sizes);
  if (!mpu.ok()) return mg::RankFailed(rank, mpu.status());
  mg::Comparer cmp(kTol);
  const std::string mode = absl::GetFlag(FLAGS_mode);
  const bool distributed = absl::GetFlag(FLAGS_distributed);
  absl::Status s = mode == "half"      ? RunHalf(*mpu, distributed)
                   : mode == "offload" ? RunOffload(*mpu, distributed)
                   : mode == "moe_dist_ckpt"
                       ? RunMoeDistCkpt(*mpu, distributed, cmp)
                   : absl::GetFlag(FLAGS_dist_ckpt_phase).empty()
                       ? Run(*mpu, distributed, cmp)
                       : RunDistCkpt(*mpu, distributed, cmp);
  if (!s.ok()) return mg::RankFailed(rank, s);
  std::cout << "rank " << rank << ": OK (tp " << (*mpu)->tp_size() << ", dp "
            << (*mpu)->dp()->size() << ", max rel err " << cmp.worst()
            << " at '" << cmp.worst_name() << "')" << std::endl;
  return 0;
}

}  // namespace
}  // namespace verl::rl

int main(int argc, char** argv) { return verl::rl::Main(argc, argv); }
