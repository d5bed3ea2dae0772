// File: verl/parallel/megatron/megatron_worker.cc
//
// Test worker for megatron_test, started as N ranks by the launcher. Each
// rank runs one scenario and compares against a single-process reference
// computed in the same process from the same seed:
// the ParallelState groups for --tp/--pp/--cp/--ep/--etp (members and an
// all-reduce over each, against MegatronLayout), then, over its tp group,
// the tp mappings, Column/RowParallelLinear (with and without
//           sequence parallelism), VocabParallelEmbedding and the
//           vocab-parallel log-prob/entropy/cross-entropy: outputs and every
// gradient against plain ATen + autograd.
// Prints "rank R: OK (max rel err E at NAME)" or "rank R FAILED: ..." and
// exits non-zero on failure.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/autograd.h>

#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "verl/core/status.h"
#include "verl/parallel/distributed.h"
#include "verl/parallel/megatron/mappings.h"
#include "verl/parallel/megatron/parallel_state.h"
#include "verl/parallel/megatron/test_compare.h"
#include "verl/parallel/megatron/tp_layers.h"
#include "verl/parallel/megatron/vocab_parallel.h"
#include "verl/parallel/test_worker.h"

ABSL_FLAG(int, tp, 2, "tensor_model_parallel_size");
ABSL_FLAG(int, pp, 1, "pipeline_model_parallel_size");
ABSL_FLAG(int, cp, 1, "context_parallel_size");
ABSL_FLAG(int, ep, 1, "expert_model_parallel_size");
ABSL_FLAG(int, etp, 0, "expert_tensor_parallel_size (0: tp)");

namespace verl::parallel::megatron {
namespace {

constexpr double kTol = 1e-5;

at::Tensor Randn(at::IntArrayRef shape, at::Generator& gen) {
  return at::randn(shape, gen, at::kFloat);
}

// Input-gradient of sum(out * weight) w.r.t. `inputs` (weights differ per
// output so every element matters).
std::vector<at::Tensor> Grads(const at::Tensor& loss,
                              const std::vector<at::Tensor>& inputs) {
  return torch::autograd::grad({loss}, inputs, {}, /*retain_graph=*/false,
                               /*create_graph=*/false, /*allow_unused=*/true);
}

absl::Status CheckState(const ParallelState& mpu) {
  const ParallelState* state = &mpu;
  const std::shared_ptr<Communicator>& world = state->world();
  const MegatronLayout& layout = state->layout();
  for (int g = 0; g <= static_cast<int>(MpuGroup::kEdp); ++g) {
    const auto group = static_cast<MpuGroup>(g);
    const std::vector<int> ranks = layout.GroupRanks(group, world->rank());
    const auto& comm = state->group(group);
    if (comm->global_ranks() != ranks) {
      return absl::InternalError(
          absl::StrCat("group ", MpuGroupName(group), " members differ"));
    }
    at::Tensor t = at::full({1}, static_cast<double>(world->rank()), at::kLong);
    VERL_RETURN_IF_ERROR(comm->AllReduce(t));
    int64_t want = 0;
    for (int r : ranks) want += r;
    if (t.item<int64_t>() != want) {
      return absl::InternalError(absl::StrCat("all-reduce over ",
                                              MpuGroupName(group), ": ",
                                              t.item<int64_t>(), " != ", want));
    }
  }
  if (state->tp_rank() != layout.Coordinate("tp", world->rank()) ||
      state->dp_rank() != layout.Coordinate("dp", world->rank()) ||
      state->pp_rank() != layout.Coordinate("pp", world->rank())) {
    return absl::InternalError("coordinates differ from the layout");
  }
  return absl::OkStatus();
}

// Scatter/gather of the feature dim round-trip; the all-gather-last-dim
// backward sums every rank's use of this rank's slice.
absl::Status CheckMappings(const CommPtr& tp, Comparer& cmp) {
  const int n = tp->size(), r = tp->rank();
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(7);
  at::Tensor x = Randn({3, 4 * n}, gen).requires_grad_(true);
  at::Tensor c = Randn({3, 4 * n}, gen);
  at::Tensor y =
      GatherFromTensorParallelRegion(ScatterToTensorParallelRegion(x, tp), tp);
  VERL_RETURN_IF_ERROR(cmp.Expect("scatter+gather", y, x));
  VERL_RETURN_IF_ERROR(
      cmp.Expect("scatter+gather grad", Grads((y * c).sum(), {x})[0], c));
  // Rank r's slice s_r; each rank q weighs the gathered tensor by c*(q+1).
  at::Tensor s = x.detach().narrow(1, 4 * r, 4).clone().requires_grad_(true);
  at::Tensor g = AllGatherLastDimFromTensorParallelRegion(s, tp);
  VERL_RETURN_IF_ERROR(cmp.Expect("all-gather last dim", g, x));
  at::Tensor gs = Grads((g * c * (r + 1.0)).sum(), {s})[0];
  VERL_RETURN_IF_ERROR(cmp.Expect("all-gather last dim grad", gs,
                                  c.narrow(1, 4 * r, 4) * (n * (n + 1) / 2.0)));
  return absl::OkStatus();
}

// A column -> gelu -> row MLP against the dense one.
absl::Status CheckLinears(const CommPtr& tp, bool sp, Comparer& cmp) {
  const int n = tp->size(), r = tp->rank();
  const int64_t t = 4 * n, in = 6, mid = 4 * n, out = 5;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(11);
  at::Tensor x = Randn({t, in}, gen).requires_grad_(true);
  at::Tensor w1 = Randn({mid, in}, gen).requires_grad_(true);
  at::Tensor b1 = Randn({mid}, gen).requires_grad_(true);
  at::Tensor w2 = Randn({out, mid}, gen).requires_grad_(true);
  at::Tensor b2 = Randn({out}, gen).requires_grad_(true);
  at::Tensor c = Randn({t, out}, gen);
  at::Tensor ref = at::linear(at::gelu(at::linear(x, w1, b1)), w2, b2);
  auto ref_grads = Grads((ref * c).sum(), {x, w1, b1, w2, b2});

  ColumnParallelLinear col(in, mid, true, false, sp, tp);
  RowParallelLinear row(mid, out, true, true, sp, tp);
  {
    at::NoGradGuard no_grad;
    col.weight.copy_(w1.narrow(0, r * mid / n, mid / n));
    col.bias.copy_(b1.narrow(0, r * mid / n, mid / n));
    row.weight.copy_(w2.narrow(1, r * mid / n, mid / n));
    row.bias.copy_(b2);
  }
  const int64_t rows = sp ? t / n : t, first = sp ? r * rows : 0;
  at::Tensor xs =
      x.detach().narrow(0, first, rows).clone().requires_grad_(true);
  at::Tensor y = row.Forward(at::gelu(col.Forward(xs)));
  const std::string tag = sp ? "sp " : "";
  VERL_RETURN_IF_ERROR(
      cmp.Expect(tag + "mlp out", y, ref.narrow(0, first, rows)));
  (y * c.narrow(0, first, rows)).sum().backward();
  if (sp) SumGradsOverTensorParallel({row.bias}, *tp);
  VERL_RETURN_IF_ERROR(cmp.Expect(tag + "x grad", xs.grad(),
                                  ref_grads[0].narrow(0, first, rows)));
  VERL_RETURN_IF_ERROR(
      cmp.Expect(tag + "col weight grad", col.weight.grad(),
                 ref_grads[1].narrow(0, r * mid / n, mid / n)));
  VERL_RETURN_IF_ERROR(
      cmp.Expect(tag + "col bias grad", col.bias.grad(),
                 ref_grads[2].narrow(0, r * mid / n, mid / n)));
  VERL_RETURN_IF_ERROR(
      cmp.Expect(tag + "row weight grad", row.weight.grad(),
                 ref_grads[3].narrow(1, r * mid / n, mid / n)));
  VERL_RETURN_IF_ERROR(
      cmp.Expect(tag + "row bias grad", row.bias.grad(), ref_grads[4]));
  // gather_output: every rank sees the full output.
  ColumnParallelLinear full(in, mid, false, true, false, tp);
  {
    at::NoGradGuard no_grad;
    full.weight.copy_(w1.narrow(0, r * mid / n, mid / n));
  }
  return cmp.Expect("gather_output", full.Forward(x.detach()),
                    at::linear(x.detach(), w1.detach()));
}

// Vocabulary 11, not divisible by tp: padded as Megatron does.
constexpr int64_t kVocab = 11;

absl::Status CheckEmbedding(const CommPtr& tp, bool sp, Comparer& cmp) {
  const int n = tp->size(), r = tp->rank();
  const int64_t padded = PaddedVocabSize(kVocab, 1, n), t = 4 * n, h = 3;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(5);
  at::Tensor table = Randn({padded, h}, gen);
  table.narrow(0, kVocab, padded - kVocab).zero_();
  table.requires_grad_(true);
  at::Tensor ids = at::randint(kVocab, {t}, gen, at::kLong);
  at::Tensor c = Randn({t, h}, gen);
  at::Tensor ref = at::embedding(table, ids);
  at::Tensor ref_grad = Grads((ref * c).sum(), {table})[0];
  VocabParallelEmbedding emb(padded, h, sp, tp);
  const int64_t per = padded / n;
  {
    at::NoGradGuard no_grad;
    emb.weight.copy_(table.narrow(0, r * per, per));
  }
  const int64_t rows = sp ? t / n : t, first = sp ? r * rows : 0;
  at::Tensor y = emb.Forward(ids);
  const std::string tag = sp ? "sp " : "";
  VERL_RETURN_IF_ERROR(
      cmp.Expect(tag + "embedding", y, ref.narrow(0, first, rows)));
  (y * c.narrow(0, first, rows)).sum().backward();
  return cmp.Expect(tag + "embedding grad", emb.weight.grad(),
                    ref_grad.narrow(0, r * per, per));
}

absl::Status CheckVocabParallelLoss(const CommPtr& tp, Comparer& cmp) {
  const int n = tp->size(), r = tp->rank();
  const int64_t padded = PaddedVocabSize(kVocab, 1, n), t = 6;
  const double temperature = 0.7;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(3);
  at::Tensor logits = Randn({2, t / 2, padded}, gen) * 3.0;
  logits.narrow(-1, kVocab, padded - kVocab).fill_(50.0);  // must not count
  logits.requires_grad_(true);
  at::Tensor labels = at::randint(kVocab, {2, t / 2}, gen, at::kLong);
  at::Tensor a = Randn({2, t / 2}, gen), b = Randn({2, t / 2}, gen);
  at::Tensor z = logits.narrow(-1, 0, kVocab) / temperature;
  at::Tensor logp_all = at::log_softmax(z, -1);
  at::Tensor ref_logp = logp_all.gather(-1, labels.unsqueeze(-1)).squeeze(-1);
  at::Tensor ref_ent = -(logp_all.exp() * logp_all).sum(-1);
  at::Tensor ref_grad = Grads((ref_logp * a + ref_ent * b).sum(), {logits})[0];

  const int64_t per = padded / n;
  at::Tensor shard =
      logits.detach().narrow(-1, r * per, per).clone().requires_grad_(true);
  VocabParallelOutput out =
      VocabParallelLogProbsAndEntropy(shard, labels, kVocab, tp, temperature);
  VERL_RETURN_IF_ERROR(
      cmp.Expect("vocab-parallel log-prob", out.log_probs, ref_logp));
  VERL_RETURN_IF_ERROR(
      cmp.Expect("vocab-parallel entropy", out.entropy, ref_ent));
  at::Tensor g = Grads((out.log_probs * a + out.entropy * b).sum(), {shard})[0];
  VERL_RETURN_IF_ERROR(cmp.Expect("vocab-parallel logits grad", g,
                                  ref_grad.narrow(-1, r * per, per)));
  // Cross-entropy (temperature 1) and its gradient alone.
  at::Tensor logits1 = logits.detach().clone().requires_grad_(true);
  at::Tensor ref_ce = -at::log_softmax(logits1.narrow(-1, 0, kVocab), -1)
                           .gather(-1, labels.unsqueeze(-1))
                           .squeeze(-1);
  at::Tensor ref_ce_grad = Grads((ref_ce * a).sum(), {logits1})[0];
  at::Tensor shard1 =
      logits1.detach().narrow(-1, r * per, per).clone().requires_grad_(true);
  at::Tensor ce = VocabParallelCrossEntropy(shard1, labels, kVocab, tp);
  VERL_RETURN_IF_ERROR(cmp.Expect("cross-entropy", ce, ref_ce));
  VERL_RETURN_IF_ERROR(cmp.Expect("cross-entropy grad",
                                  Grads((ce * a).sum(), {shard1})[0],
                                  ref_ce_grad.narrow(-1, r * per, per)));
  return cmp.Expect("gathered logits",
                    GatherVocabParallelLogits(shard.detach(), kVocab, tp),
                    logits.detach().narrow(-1, 0, kVocab));
}

absl::Status CheckAll(const std::shared_ptr<Communicator>& world,
                      Comparer& cmp) {
  ModelParallelSizes sizes;
  sizes.tp = absl::GetFlag(FLAGS_tp);
  sizes.pp = absl::GetFlag(FLAGS_pp);
  sizes.cp = absl::GetFlag(FLAGS_cp);
  sizes.ep = absl::GetFlag(FLAGS_ep);
  sizes.etp = absl::GetFlag(FLAGS_etp);
  VERL_ASSIGN_OR_RETURN(auto state, ParallelState::Initialize(world, sizes));
  VERL_RETURN_IF_ERROR(CheckState(*state));
  const CommPtr& tp = state->tp();
  VERL_RETURN_IF_ERROR(CheckMappings(tp, cmp));
  for (bool sp : {false, true}) {
    VERL_RETURN_IF_ERROR(CheckLinears(tp, sp, cmp));
    VERL_RETURN_IF_ERROR(CheckEmbedding(tp, sp, cmp));
  }
  return CheckVocabParallelLoss(tp, cmp);
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  parallel::DistributedContext dist = parallel::JoinTestJob();
  const int rank = dist.env.rank;
  Comparer cmp(kTol);
  return RankResult(rank, CheckAll(dist.world, cmp), cmp);
}

}  // namespace
}  // namespace verl::parallel::megatron

int main(int argc, char** argv) {
  return verl::parallel::megatron::Main(argc, argv);
}
