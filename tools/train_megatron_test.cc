// File: tools/train_megatron_test.cc
//
// //tools:train end to end under strategy: megatron: the quickstart
// (examples/quickstart.flags: tiny-qwen2, SFT warm start, GRPO with the KL
// loss, so the actor and the reference policy run), shortened to 2 steps
// with a small batch, on 2 processes where the actor and the reference are
// Megatron models with tensor_model_parallel_size=2 (dp = 1, sequence
// parallel, distributed optimizer; the rollout engine, tensor-parallel too
// (rollout.tensor_model_parallel_size=2), gets the weights gathered layer
// by layer and keeps its shard), logs the same metrics as the single-process
// run (relative 1e-4; timing, throughput and per-rank global_seqlen/* excluded;
// validation score included) for every step whose rollout sampled the same
// responses, at least steps 1 and 2 (ExpectSameRuns; step 1 alone for plain
// tp=2 and cp=2, where fp32 rounding flips a sampled token at step 2 on some
// CPUs, and the rollout-vs-actor log-prob check covers the later syncs); with
// GAE, the critic runs under strategy=megatron as well; with FlowRL, the
// log-Z head reads the tp decoder's hidden states and is checkpointed and
// resumed; with context_parallel_size=2 (cp 2, tp 1) the same; pipeline
// stages with 1F1B and the interleaved schedule (pp 2, vpp 2; tp 2 x pp 2
// x vpp 2 on 4 processes); the critic at pp 2; a tiny Qwen3-MoE with
// expert_model_parallel_size=2 (and at tp 2 x etp 2, resumed from its
// step-1 checkpoint) and a tiny DeepSeek-V3
// (MLA, expert-bias update) at tp 2 x ep 2 against one process.
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "verl/rl/trainer/testing/train_compare_testutil.h"

namespace {

using verl::rl::testing::ExpectSameRuns;
using verl::rl::testing::RunTrain;

std::vector<std::string> Quickstart(int nproc,
                                    const std::vector<std::string>& extra) {
  std::vector<std::string> args = {
      "--flagfile=examples/quickstart.flags",
      "trainer.n_gpus_per_node=" + std::to_string(nproc),
      "trainer.total_training_steps=2",
      "trainer.val_before_train=false",
      "trainer.test_freq=2",
      "trainer.logger=[file]",
      "data.train_batch_size=8",
      "data.val_max_samples=8",
      "actor_rollout_ref.sft_warmup.steps=30",
      "actor_rollout_ref.actor.ppo_mini_batch_size=4",
      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16",
      "actor_rollout_ref.rollout.n=4",
      // The engine's fp32 log-probs (the rollout default is bf16), compared
      // with the actor's every step.
      "actor_rollout_ref.rollout.calculate_log_probs=true",
      "actor_rollout_ref.rollout.dtype=float32",
  };
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(TrainMegatronTest, Tp2ReproducesOneProcess) {
  const auto one = RunTrain("one", Quickstart(1, {}));
  const auto tp2 = RunTrain(
      "tp2", Quickstart(2, {"actor_rollout_ref.actor.strategy=megatron",
                            "actor_rollout_ref.actor.megatron."
                            "tensor_model_parallel_size=2",
                            "actor_rollout_ref.ref.strategy=megatron",
                            "actor_rollout_ref.ref.megatron."
                            "tensor_model_parallel_size=2",
                            "actor_rollout_ref.rollout."
                            "tensor_model_parallel_size=2"}));
  ExpectSameRuns(one, "one", tp2, "tp2", "megatron tp=2, rollout tp=2", 2,
                 {"actor/pg_loss", "actor/grad_norm", "actor/kl_loss",
                  "actor/entropy", "critic/score/mean"},
                 /*min_same_steps=*/1);
  ASSERT_EQ(tp2.size(), 2u);
  EXPECT_TRUE(tp2[1]["data"].contains("val-core/arithmetic/reward/mean@1"));
}

// Context parallelism: actor and reference with context_parallel_size=2 on
// 2 processes (tp 1, dp 1): every sequence split over the two ranks, ring
// attention, log-probs gathered, gradients summed over cp. Step 1 (rollout,
// old/ref log-probs, two mini-batch updates) must match; measured: every
// step-1 metric within 6e-8 relative. At step 2, 2 of the 32 sampled
// responses flip one token (the updated weights differ by fp32 rounding of
// another summation order) and the runs diverge from there, so only step 1
// is required to sample the same responses.
TEST(TrainMegatronTest, Cp2ReproducesOneProcess) {
  const auto one = RunTrain("one", Quickstart(1, {}));
  const auto cp2 = RunTrain(
      "cp2",
      Quickstart(2,
                 {"actor_rollout_ref.actor.strategy=megatron",
                  "actor_rollout_ref.actor.megatron.context_parallel_size=2",
                  "actor_rollout_ref.ref.strategy=megatron",
                  "actor_rollout_ref.ref.megatron.context_parallel_size=2"}));
  ExpectSameRuns(one, "one", cp2, "cp2", "megatron cp=2", 2,
                 {"actor/pg_loss", "actor/grad_norm", "actor/kl_loss",
                  "actor/entropy", "critic/score/mean"},
                 /*min_same_steps=*/1);
}

// `args` with actor and reference at tensor_model_parallel_size=2 (sequence
// parallel) and the given expert_model_parallel_size /
// expert_tensor_parallel_size.
std::vector<std::string> Tp2Experts(std::vector<std::string> args, int ep,
                                    int etp) {
  for (const std::string role : {"actor", "ref"}) {
    const std::string m = "actor_rollout_ref." + role + ".megatron.";
    args.push_back(m + "tensor_model_parallel_size=2");
    args.push_back(m + "expert_tensor_parallel_size=" + std::to_string(etp));
    args.push_back(m + "expert_model_parallel_size=" + std::to_string(ep));
  }
  return args;
}

std::vector<std::string> Tp2Ep2(std::vector<std::string> args) {
  return Tp2Experts(std::move(args), /*ep=*/2, /*etp=*/1);
}

// Expert parallelism: the tiny Qwen3-MoE preset with actor and reference
// under strategy=megatron in both runs (the distributed optimizer on, its
// default: dense state over dp, the experts' over edp), the second on 2
// processes with tensor_model_parallel_size=2 (sequence parallel),
// expert_tensor_parallel_size=1 and expert_model_parallel_size=2: dp 1, so
// both runs sample the same rollouts; each rank routes its half of the
// tokens and holds 4 of the 8 experts, tokens exchanged by all-to-all; the
// rollout is one tensor-parallel replica over both ranks (every expert split
// along its intermediate size, the router replicated), synced from the
// expert-parallel actor. 3 steps (rollout, old/ref log-probs, two
// mini-batch updates each, the grad norm over dense + expert gradients, the
// actor/moe/* expert load) match the 1-process run: step 1 within 1e-4,
// later steps that sampled the same responses within 1e-3 — once updated
// weights differ by fp32 rounding, a router near-tie may send one token to
// another expert (measured, 3 steps at data.seed 1 / 2 / 3: max rel diff
// 2e-6 / 5.7e-5 from such a flip at step 2 / 8e-7, the same responses
// every step). As for tp 2, only step 1 is required to sample the same
// responses: another CPU's rounding may flip a sampled token later (those
// steps then check the rollout's log-probs against the actor's). A third
// run takes ep 1 and expert_tensor_parallel_size=2: every expert split over
// the tp pair (rows all-gathered, partial outputs reduce-scattered; the grad
// norm counts each shard once) logs the same steps 1 and 2; it saves each
// step (dist_ckpt/ with the expert shards and the optimizer state;
// transformer_config.json names the experts and etp), and a run resumed from
// its step-1 checkpoint reproduces its step 2 (every metric within 1e-5).
// (With tp 1, ep 2 is dp 2: two rollout replicas sample other streams than
// one process, as in verl, so the comparison needs dp 1.)
TEST(TrainMegatronTest, MoeEp2ReproducesOneProcess) {
  const std::vector<std::string> moe = {
      "actor_rollout_ref.model.preset=tiny-qwen3-moe",
      "actor_rollout_ref.actor.strategy=megatron",
      "actor_rollout_ref.ref.strategy=megatron"};
  const std::vector<std::string> required = {
      "actor/pg_loss", "actor/grad_norm", "actor/kl_loss",
      "actor/moe/imbalance_max", "actor/moe/layer_0/imbalance"};
  std::vector<std::string> three = moe;
  three.push_back("trainer.total_training_steps=3");
  std::vector<std::string> ep2 = Tp2Ep2(three);
  ep2.push_back("actor_rollout_ref.rollout.tensor_model_parallel_size=2");
  const auto one = RunTrain("moe_one", Quickstart(1, three));
  const auto two = RunTrain("moe_ep2", Quickstart(2, ep2));
  ASSERT_EQ(one.size(), 3u);
  ASSERT_EQ(two.size(), 3u);
  ExpectSameRuns({one[0]}, "moe_one", {two[0]}, "moe_ep2",
                 "megatron tp=2 ep=2, rollout tp=2", 1, required,
                 /*min_same_steps=*/1);
  ExpectSameRuns(one, "moe_one", two, "moe_ep2",
                 "megatron tp=2 ep=2, rollout tp=2, steps 1-3", 3, required,
                 /*min_same_steps=*/1, /*tol=*/1e-3);
  const std::string tmp = std::getenv("TEST_TMPDIR");
  std::vector<std::string> etp2 = Tp2Experts(moe, /*ep=*/1, /*etp=*/2);
  etp2.push_back("actor_rollout_ref.rollout.tensor_model_parallel_size=2");
  etp2.push_back("trainer.save_freq=1");
  etp2.push_back("trainer.default_local_dir=" + tmp + "/moe_etp2");
  const auto split = RunTrain("moe_etp2", Quickstart(2, etp2));
  ASSERT_EQ(split.size(), 2u);
  ExpectSameRuns({one[0]}, "moe_one", {split[0]}, "moe_etp2",
                 "megatron tp=2 etp=2, rollout tp=2", 1, required,
                 /*min_same_steps=*/1);
  ExpectSameRuns({one[0], one[1]}, "moe_one", split, "moe_etp2",
                 "megatron tp=2 etp=2, rollout tp=2, steps 1-2", 2, required,
                 /*min_same_steps=*/1, /*tol=*/1e-3);
  etp2.push_back("trainer.resume_mode=resume_path");
  etp2.push_back("trainer.resume_from_path=" + tmp + "/moe_etp2/global_step_1");
  const auto resumed = RunTrain("moe_etp2_resumed", Quickstart(2, etp2));
  verl::rl::testing::ExpectSameMetrics({split[1]}, resumed,
                                       "MoE etp=2 resumed at step 1", 1,
                                       required, /*tol=*/1e-5);
  const std::string actor = tmp + "/moe_etp2/global_step_1/actor/";
  EXPECT_TRUE(std::ifstream(actor + "dist_ckpt/.metadata").good());
  std::ifstream config(actor + "transformer_config.json");
  ASSERT_TRUE(config.good()) << actor;
  const nlohmann::json tc = nlohmann::json::parse(config);
  EXPECT_EQ(tc.value("num_moe_experts", 0), 8);
  EXPECT_EQ(tc.value("expert_tensor_parallel_size", 0), 2);
}

// The DeepSeek-V3 architecture: tiny-deepseek-v3 (multi-head latent
// attention with YaRN, a dense first layer, sigmoid-routed experts with a
// shared expert) with aux-loss-free balancing on
// (override_transformer_config.moe_router_enable_expert_bias), actor and
// reference at tp 2 x ep 2 on 2 processes against one process, 2 steps,
// rolled out at tp 2 (MLA heads and experts split over the pair). The bias
// moves after every optimizer step, so from the second mini-batch of step 1 on
// the routing depends on it (without the key step 1's actor/moe/imbalance_mean
// is 2.945, with it 2.935): the runs agree only if the 2-process update (the
// expert load summed over tp) equals the one-process one. Megatron's
// per-sequence load-balancing loss (coefficient 0.1) and z-loss are in the
// training loss (each tp rank's part over its tokens, counts summed over
// tp; scaled 1 / micro-batches, through 1F1B at pp 2) and their values in
// the metrics. Measured: every metric of both steps within 1e-4.
TEST(TrainMegatronTest, DeepSeekV3ExpertBiasEp2AndPp2ReproduceOneProcess) {
  const std::vector<std::string> dsv3 = {
      "actor_rollout_ref.model.preset=tiny-deepseek-v3",
      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
      "actor_rollout_ref.actor.strategy=megatron",
      "actor_rollout_ref.actor.megatron.use_distributed_optimizer=false",
      "actor_rollout_ref.ref.strategy=megatron",
      "+actor_rollout_ref.actor.megatron.override_transformer_config."
      "moe_router_enable_expert_bias=true",
      "+actor_rollout_ref.actor.megatron.override_transformer_config."
      "moe_router_load_balancing_type=seq_aux_loss",
      "+actor_rollout_ref.actor.megatron.override_transformer_config."
      "moe_aux_loss_coeff=0.1",
      "+actor_rollout_ref.actor.megatron.override_transformer_config."
      "moe_z_loss_coeff=0.01"};
  const auto one = RunTrain("dsv3_one", Quickstart(1, dsv3));
  std::vector<std::string> ep2 = Tp2Ep2(dsv3);
  ep2.push_back("actor_rollout_ref.rollout.tensor_model_parallel_size=2");
  const auto two = RunTrain("dsv3_ep2", Quickstart(2, ep2));
  const std::vector<std::string> required = {
      "actor/pg_loss",
      "actor/grad_norm",
      "actor/kl_loss",
      "actor/moe/imbalance_mean",
      "actor/moe/layer_3/imbalance",
      "actor/moe/seq_load_balancing_loss",
      "actor/moe/z_loss"};
  ExpectSameRuns(one, "dsv3_one", two, "dsv3_ep2",
                 "deepseek-v3 megatron tp=2 ep=2, expert bias, rollout tp=2", 2,
                 required);
  // The MoE layers over 2 pipeline stages (layer 0 dense and 1 MoE on the
  // first, 2-3 MoE on the last; micro-batches through 1F1B): the expert
  // load of both stages in the metrics, the experts' grad norm summed over
  // the stages.
  std::vector<std::string> pp2 = dsv3;
  for (const std::string role : {"actor", "ref"}) {
    pp2.push_back("actor_rollout_ref." + role +
                  ".megatron.pipeline_model_parallel_size=2");
  }
  const auto stages = RunTrain("dsv3_pp2", Quickstart(2, pp2));
  ExpectSameRuns(one, "dsv3_one", stages, "dsv3_pp2",
                 "deepseek-v3 megatron pp=2, expert bias", 2, required);
}

// Pipeline parallelism: actor and reference with
// pipeline_model_parallel_size=2 on 2 processes (tp 1, dp 1; the tiny
// model's 4 layers split 2 + 2, its tied embedding copied to the last
// stage): old/ref log-probs through the forward-only schedule and broadcast
// from the last stage, the two mini-batch updates through 1F1B (several
// micro-batches), metrics broadcast from the last stage, the grad norm over
// both stages, the rollout synced stage by stage. Step 1 must match the
// 1-process run (later steps may sample different tokens, as with cp).
TEST(TrainMegatronTest, Pp2ReproducesOneProcess) {
  const std::string micro =
      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4";
  const auto one = RunTrain("one_pp", Quickstart(1, {micro}));
  const auto pp2 = RunTrain(
      "pp2", Quickstart(2, {micro, "actor_rollout_ref.actor.strategy=megatron",
                            "actor_rollout_ref.actor.megatron."
                            "pipeline_model_parallel_size=2",
                            "actor_rollout_ref.ref.strategy=megatron",
                            "actor_rollout_ref.ref.megatron."
                            "pipeline_model_parallel_size=2"}));
  ExpectSameRuns(one, "one_pp", pp2, "pp2", "megatron pp=2", 2,
                 {"actor/pg_loss", "actor/grad_norm", "actor/kl_loss",
                  "actor/entropy", "critic/score/mean"},
                 /*min_same_steps=*/1);
}

// Virtual pipeline stages: the same run with
// virtual_pipeline_model_parallel_size=2 (the 4 layers as 4 virtual stages,
// stage 0 holding layers 0 and 2), the mini-batch updates (4 micro-batches)
// and the old/ref log-probs (2 micro-batches of 16) through the interleaved
// schedule; step 1 matches the same 1-process baseline (the log-prob
// micro-batch size changes only the packing).
TEST(TrainMegatronTest, Pp2Vpp2ReproducesOneProcess) {
  const std::string micro =
      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4";
  const auto one = RunTrain("one_pp", Quickstart(1, {micro}));
  std::vector<std::string> vpp = {
      micro, "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16",
      "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16"};
  for (const std::string role : {"actor", "ref"}) {
    const std::string m = "actor_rollout_ref." + role + ".megatron.";
    vpp.push_back("actor_rollout_ref." + role + ".strategy=megatron");
    vpp.push_back(m + "pipeline_model_parallel_size=2");
    vpp.push_back(m + "virtual_pipeline_model_parallel_size=2");
  }
  const auto pp2 = RunTrain("pp2_vpp2", Quickstart(2, vpp));
  ExpectSameRuns(one, "one_pp", pp2, "pp2_vpp2", "megatron pp=2 vpp=2", 2,
                 {"actor/pg_loss", "actor/grad_norm", "actor/kl_loss",
                  "actor/entropy", "critic/score/mean"},
                 /*min_same_steps=*/1);
}

// GAE: the critic (a value model) under strategy=megatron too, with the
// replicated-gradient optimizer (use_distributed_optimizer=false) and
// without sequence parallelism.
TEST(TrainMegatronTest, CriticTp2ReproducesOneProcess) {
  const std::vector<std::string> gae = {
      "algorithm.adv_estimator=gae", "critic.ppo_micro_batch_size_per_gpu=16",
      "critic.model.fsdp_config.dtype=float32", "trainer.test_freq=-1"};
  std::vector<std::string> tp2 = gae;
  for (const char* key :
       {"actor_rollout_ref.actor.strategy=megatron",
        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
        "actor_rollout_ref.ref.strategy=megatron",
        "actor_rollout_ref.ref.megatron.tensor_model_parallel_size=2",
        "critic.strategy=megatron",
        "critic.megatron.tensor_model_parallel_size=2",
        "critic.megatron.use_distributed_optimizer=false",
        "critic.megatron.sequence_parallel=false"}) {
    tp2.push_back(key);
  }
  ExpectSameRuns(RunTrain("gae_one", Quickstart(1, gae)), "gae_one",
                 RunTrain("gae_tp2", Quickstart(2, tp2)), "gae_tp2",
                 "megatron tp=2 with a critic", 2,
                 {"actor/pg_loss", "critic/vf_loss", "critic/grad_norm",
                  "critic/values/mean"});
}

// tp x pp x vpp: actor and reference with tensor_model_parallel_size=2,
// pipeline_model_parallel_size=2 and virtual_pipeline_model_parallel_size=2
// on 4 processes (sequence parallel; each stage's tp pair exchanges its
// sequence shards with the other stage's through the interleaved
// schedule; the grad norm over tp x pp; the rollout synced layer by layer
// over tp then pp), one step against step 1 of the same 1-process baseline
// (measured: every metric within 3.5e-7). By hand, tp 2 x pp 2 with 1F1B
// for 3 steps: every metric of every step within 2.4e-6.
TEST(TrainMegatronTest, Tp2Pp2Vpp2ReproducesOneProcessStep1) {
  const std::string micro =
      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4";
  const auto one = RunTrain("one_pp", Quickstart(1, {micro}));
  std::vector<std::string> grid = {
      micro, "trainer.total_training_steps=1",
      "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16",
      "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16"};
  for (const std::string role : {"actor", "ref"}) {
    const std::string m = "actor_rollout_ref." + role + ".megatron.";
    grid.push_back("actor_rollout_ref." + role + ".strategy=megatron");
    grid.push_back(m + "tensor_model_parallel_size=2");
    grid.push_back(m + "pipeline_model_parallel_size=2");
    grid.push_back(m + "virtual_pipeline_model_parallel_size=2");
  }
  const auto run = RunTrain("tp2_pp2_vpp2", Quickstart(4, grid));
  ASSERT_FALSE(one.empty());
  verl::rl::testing::ExpectSameMetrics(
      {one[0]}, run, "megatron tp=2 pp=2 vpp=2", 1,
      {"actor/pg_loss", "actor/grad_norm", "actor/kl_loss", "actor/entropy"});
}

// The critic at pp 2: GAE with actor, reference and critic under
// strategy=megatron with pipeline_model_parallel_size=2 (the value head on
// the last stage, values through the forward-only schedule and broadcast,
// the critic update through 1F1B) against the same 1-process baseline.
TEST(TrainMegatronTest, CriticPp2ReproducesOneProcess) {
  const std::vector<std::string> gae = {
      "algorithm.adv_estimator=gae", "critic.ppo_micro_batch_size_per_gpu=16",
      "critic.model.fsdp_config.dtype=float32", "trainer.test_freq=-1"};
  std::vector<std::string> pp2 = gae;
  for (const char* key :
       {"actor_rollout_ref.actor.strategy=megatron",
        "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2",
        "actor_rollout_ref.ref.strategy=megatron",
        "actor_rollout_ref.ref.megatron.pipeline_model_parallel_size=2",
        "critic.strategy=megatron",
        "critic.megatron.pipeline_model_parallel_size=2"}) {
    pp2.push_back(key);
  }
  ExpectSameRuns(RunTrain("gae_one", Quickstart(1, gae)), "gae_one",
                 RunTrain("gae_pp2", Quickstart(2, pp2)), "gae_pp2",
                 "megatron pp=2 with a critic", 2,
                 {"actor/pg_loss", "critic/vf_loss", "critic/grad_norm",
                  "critic/values/mean"},
                 /*min_same_steps=*/1);
}

// FlowRL (verl's recipe): the log-Z head takes the prompt's mean final
// hidden state from the tp=2 decoder (gathered along the sequence under
// sequence parallelism), steps its own AdamW (gradients averaged over dp) and
// backpropagates into the sharded decoder; log Z, the balance residual and
// every other metric match the single-process run for 2 steps (the second
// after an update of the policy and the head). FlowRL's gradients are large
// (norm ~10 before clipping) and fp32 rounding, amplified by AdamW on the few
// near-zero gradient entries (~1e-5 in a weight), flipped sampled tokens at
// step 2 with β = 15 and at step 3 with β = 1 here; β = 1 and 2 steps keep
// the rollouts identical. The head is saved in
// global_step_N/actor_log_z/ chunked over the world as FSDP saves it, and a
// run resumed from step 1 reproduces step 2 (the head's parameters, AdamW
// moments and dropout seeds restored; the actor from its dist_ckpt/).
TEST(TrainMegatronTest, FlowRlTp2ReproducesOneProcess) {
  const std::string tmp = std::getenv("TEST_TMPDIR");
  const std::vector<std::string> flowrl = {
      "algorithm.adv_estimator=flowrl",
      "actor_rollout_ref.actor.policy_loss.loss_mode=flowrl",
      "actor_rollout_ref.actor.use_kl_loss=false",
      "algorithm.tb_coef=1",
      "trainer.total_training_steps=2",
      "trainer.test_freq=2"};
  std::vector<std::string> tp2 = flowrl;
  for (const std::string& key : std::vector<std::string>{
           "actor_rollout_ref.actor.strategy=megatron",
           "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
           "actor_rollout_ref.ref.strategy=megatron",
           "actor_rollout_ref.ref.megatron.tensor_model_parallel_size=2",
           "trainer.save_freq=1",
           "trainer.default_local_dir=" + tmp + "/flowrl_tp2"}) {
    tp2.push_back(key);
  }
  const auto tp2_run = RunTrain("flowrl_tp2", Quickstart(2, tp2));
  ExpectSameRuns(RunTrain("flowrl_one", Quickstart(1, flowrl)), "flowrl_one",
                 tp2_run, "flowrl_tp2", "megatron tp=2 FlowRL", 2,
                 {"actor/log_z", "actor/tb_residual", "actor/tb_residual_abs",
                  "actor/log_z_grad_norm", "actor/grad_norm", "actor/pg_loss"});
  const std::string head = tmp + "/flowrl_tp2/global_step_1/actor_log_z/";
  for (const char* file :
       {"model_world_size_2_rank_0.pt", "model_world_size_2_rank_1.pt",
        "optim_world_size_2_rank_1.pt", "fsdp_config.json"}) {
    EXPECT_TRUE(std::ifstream(head + file).good()) << head << file;
  }
  // The megatron actor's checkpoint is Megatron's dist_ckpt/ (verl's
  // MegatronCheckpointManager layout), not world-size .pt files.
  const std::string actor = tmp + "/flowrl_tp2/global_step_1/actor/";
  for (const char* file :
       {"dist_ckpt/.metadata", "dist_ckpt/metadata.json",
        "dist_ckpt/__0_0.distcp", "dist_ckpt/__1_0.distcp",
        "transformer_config.json", "huggingface/config.json"}) {
    EXPECT_TRUE(std::ifstream(actor + file).good()) << actor << file;
  }
  EXPECT_FALSE(std::ifstream(actor + "model_world_size_2_rank_0.pt").good());
  tp2.push_back("trainer.resume_mode=resume_path");
  tp2.push_back("trainer.resume_from_path=" + tmp +
                "/flowrl_tp2/global_step_1");
  const auto resumed = RunTrain("flowrl_resumed", Quickstart(2, tp2));
  ASSERT_EQ(tp2_run.size(), 2u);
  verl::rl::testing::ExpectSameMetrics({tp2_run[1]}, resumed,
                                       "FlowRL resumed at step 1", 1,
                                       {"actor/log_z", "actor/tb_residual"});
}

}  // namespace
