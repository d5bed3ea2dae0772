// File: verl/rl/trainer/testing/trainer_checkpoint_worker.cc
//
// SPMD worker for trainer_checkpoint_multiproc_test.
//   --mode=fsdp_state: an FsdpTrainState over the world (tiny decoder,
//     --fsdp_size for hybrid sharding) trains 2 steps and saves global_step_2
//     into --dir (with the full HF weights); a second state from another
//     init resumes from it. Every rank checks that its shards and AdamW
//     state equal the original bit for bit, before and after one more step
//     of both.
//   --mode=ppo: RunPpo on the tiny checkpoint config for --steps steps,
//     saving every --save_freq steps into --dir (resume_mode auto), with
//     hf_model in the actor's save_contents; --megatron_tp=T: every role
//     with strategy megatron at tp T (dist_ckpt/ checkpoints).
// Prints "worker OK" on rank 0 and exits 0, else exits 1.
#include <ATen/ATen.h>

#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "verl/core/main_guard.h"
#include "verl/core/status.h"
#include "verl/models/decoder.h"
#include "verl/models/presets.h"
#include "verl/parallel/distributed.h"
#include "verl/parallel/fsdp.h"
#include "verl/rl/trainer/ppo_trainer.h"
#include "verl/rl/trainer/testing/trainer_checkpoint_testutil.h"
#include "verl/rl/trainer/trainer_checkpoint.h"
#include "verl/rl/workers/fsdp_train_state.h"
#include "verl/rl/workers/train_state.h"

ABSL_FLAG(std::string, mode, "fsdp_state", "fsdp_state | ppo");
ABSL_FLAG(std::string, dir, "", "Checkpoint folder (default_local_dir).");
ABSL_FLAG(int64_t, fsdp_size, -1, "Hybrid shard group size.");
ABSL_FLAG(int64_t, steps, 2, "PPO steps (mode ppo).");
ABSL_FLAG(int64_t, save_freq, 2, "trainer.save_freq (mode ppo).");
ABSL_FLAG(std::string, experiment, "mp", "trainer.experiment_name.");
ABSL_FLAG(int64_t, megatron_tp, 0,
          "mode ppo: > 0 runs actor, reference and critic with strategy "
          "megatron at this tensor_model_parallel_size (checkpoints in "
          "dist_ckpt/).");
ABSL_FLAG(int64_t, keep, -1,
          "mode ppo: trainer.max_actor_ckpt_to_keep (< 0: unset).");

namespace verl::rl {
namespace {

// One AdamW step on a fixed per-rank batch: mean squared logits.
absl::Status TrainStep(models::CausalLM& model, TrainState& state, int rank,
                       int64_t vocab) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(100 + rank);
  at::Tensor ids = at::randint(0, vocab - 1, {6}, gen, at::kLong);
  at::Tensor pos = at::arange(3, at::kLong).repeat({2});  // two packed seqs
  state.ZeroGrad();
  models::ForwardOutput out = model.ForwardPacked(ids, pos, {0, 3, 6});
  out.logits.pow(2).mean().backward();
  VERL_RETURN_IF_ERROR(state.Step().status());
  state.StepSchedule();
  return absl::OkStatus();
}

bool SameShards(const TrainStateShard& a, const TrainStateShard& b,
                const std::string& what) {
  bool ok = a.model.size() == b.model.size() &&
            a.optimizer.size() == b.optimizer.size() &&
            a.schedule_step == b.schedule_step && !a.optimizer.empty();
  for (const auto& m : {&TrainStateShard::model, &TrainStateShard::optimizer}) {
    for (const auto& [k, v] : a.*m) {
      auto it = (b.*m).find(k);
      if (it == (b.*m).end() || !at::equal(v, it->second)) {
        std::cout << what << ": " << k << " differs\n";
        ok = false;
      }
    }
  }
  if (!ok) std::cout << what << ": MISMATCH\n";
  return ok;
}

absl::StatusOr<bool> FsdpState(const parallel::DistributedContext& dist) {
  const int rank = dist.world->rank();
  VERL_ASSIGN_OR_RETURN(models::ModelConfig cfg,
                        models::MakePreset("tiny-qwen2"));
  OptimizerOptions opt;
  opt.lr = 1e-2;
  opt.lr_scheduler_type = "cosine";
  opt.warmup_steps = 1;
  opt.total_steps = 5;
  // One set of groups for both states (group names are unique per job).
  VERL_ASSIGN_OR_RETURN(
      parallel::FsdpGroups groups,
      parallel::MakeFsdpGroups(dist.world, absl::GetFlag(FLAGS_fsdp_size)));
  auto make_state = [&](models::CausalLM& model) {
    return FsdpTrainState::Create(
        parallel::UnitsByLayer(NamedParameters(model)), opt, groups, {});
  };
  auto model_a = models::CreateModel(cfg, 7);
  VERL_ASSIGN_OR_RETURN(auto a, make_state(*model_a));
  for (int s = 0; s < 2; ++s) {
    VERL_RETURN_IF_ERROR(TrainStep(*model_a, *a, rank, cfg.vocab_size));
  }
  TrainerCheckpointOptions o;
  o.default_local_dir = absl::GetFlag(FLAGS_dir);
  CheckpointRole role;
  role.name = "actor";
  role.state = a.get();
  role.hf_config = {{"model_type", "qwen2"}};
  role.save_contents = {"model", "optimizer", "extra", "hf_model"};
  TrainerCheckpointer saver(o, dist.world);
  VERL_RETURN_IF_ERROR(saver.Save(2, {role}, {}));

  auto model_b = models::CreateModel(cfg, 8);
  VERL_ASSIGN_OR_RETURN(auto b, make_state(*model_b));
  role.state = b.get();
  TrainerProgress progress;
  TrainerCheckpointer loader(o, dist.world);
  VERL_ASSIGN_OR_RETURN(int64_t step, loader.Resume({role}, &progress));
  bool ok = step == 2;
  VERL_ASSIGN_OR_RETURN(TrainStateShard sa, a->SaveShard());
  VERL_ASSIGN_OR_RETURN(TrainStateShard sb, b->SaveShard());
  ok &= SameShards(sa, sb, absl::StrCat("rank ", rank, " after load"));
  VERL_RETURN_IF_ERROR(TrainStep(*model_a, *a, rank, cfg.vocab_size));
  VERL_RETURN_IF_ERROR(TrainStep(*model_b, *b, rank, cfg.vocab_size));
  VERL_ASSIGN_OR_RETURN(sa, a->SaveShard());
  VERL_ASSIGN_OR_RETURN(sb, b->SaveShard());
  ok &= SameShards(sa, sb, absl::StrCat("rank ", rank, " after a step"));
  // The compute copies the models run on agree too.
  auto pa = model_a->parameters(), pb = model_b->parameters();
  for (size_t i = 0; i < pa.size(); ++i) ok &= at::equal(pa[i], pb[i]);
  std::cout << "rank " << rank
            << " shard rows of embed: " << sa.model.begin()->second.size(0)
            << "\n";
  return ok;
}

absl::StatusOr<bool> Ppo(const parallel::DistributedContext& dist) {
  std::vector<std::string> extra;
  if (const int64_t tp = absl::GetFlag(FLAGS_megatron_tp); tp > 0) {
    for (const char* role :
         {"actor_rollout_ref.actor", "actor_rollout_ref.ref", "critic"}) {
      extra.push_back(absl::StrCat(role, ".strategy=megatron"));
      extra.push_back(
          absl::StrCat(role, ".megatron.tensor_model_parallel_size=", tp));
    }
  }
  if (const int64_t keep = absl::GetFlag(FLAGS_keep); keep >= 0) {
    extra.push_back(absl::StrCat("trainer.max_actor_ckpt_to_keep=", keep));
  }
  VERL_ASSIGN_OR_RETURN(PpoTrainerConfig config,
                        CheckpointTestConfig(absl::GetFlag(FLAGS_experiment),
                                             absl::GetFlag(FLAGS_steps),
                                             absl::GetFlag(FLAGS_save_freq),
                                             absl::GetFlag(FLAGS_dir),
                                             dist.world->size(), extra));
  config.mutable_actor_rollout_ref()
      ->mutable_actor()
      ->mutable_checkpoint()
      ->add_save_contents("hf_model");
  // Hybrid sharding for the actor and the critic (the reference keeps plain
  // FSDP): three sets of groups in one process must not clash.
  if (const int64_t n = absl::GetFlag(FLAGS_fsdp_size); n > 0) {
    config.mutable_actor_rollout_ref()
        ->mutable_actor()
        ->mutable_fsdp_config()
        ->set_fsdp_size(n);
    config.mutable_critic()
        ->mutable_model()
        ->mutable_fsdp_config()
        ->set_fsdp_size(n);
  }
  VERL_ASSIGN_OR_RETURN(FitResult result, RunPpo(config, dist.world));
  return result.steps == absl::GetFlag(FLAGS_steps);
}

absl::Status Run() {
  VERL_ASSIGN_OR_RETURN(parallel::DistributedContext dist,
                        parallel::InitDistributed({}));
  const std::string mode = absl::GetFlag(FLAGS_mode);
  absl::StatusOr<bool> ok = mode == "ppo" ? Ppo(dist) : FsdpState(dist);
  VERL_RETURN_IF_ERROR(ok.status());
  // Every rank's verdict.
  at::Tensor bad = at::full({1}, *ok ? 0.0 : 1.0, at::kFloat);
  VERL_RETURN_IF_ERROR(dist.world->AllReduce(bad, parallel::ReduceOp::kMax));
  if (bad.item<float>() > 0) return absl::InternalError("mismatch");
  if (dist.world->rank() == 0) std::cout << "worker OK\n";
  return absl::OkStatus();
}

}  // namespace
}  // namespace verl::rl

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return verl::core::StatusExitCode(verl::rl::Run(),
                                    "trainer_checkpoint_worker: ");
}
