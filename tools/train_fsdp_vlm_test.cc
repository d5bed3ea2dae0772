// File: tools/train_fsdp_vlm_test.cc
//
// //tools:train with a vision-language policy (tiny Qwen2.5-VL saved as an
// HF folder, the built-in geo_map task: one map image per prompt) under
// FSDP on 2 and 4 processes against the same run on 1 process. With more
// than one process the actor is an FsdpTrainState whose vision tower is one
// FSDP unit (sharded, gathered with the embeddings before the image
// features are computed, its gradients reduce-scattered at the step), the
// reference is FSDP-sharded forward-only, the multi_modal_inputs column
// travels with its rows to the data-parallel ranks, and each rank's rollout
// engine is synced from the gathered units (visual.* included). PPO with
// GAE: the critic (the policy with a value head, tower included) is an
// FsdpTrainState too. Greedy rollouts; an entropy bonus besides, so every
// actor parameter has a gradient whatever the advantages. Checked on 2
// processes:
//  - the 2 steps log the same metrics as on 1 process (KL to the
//    reference, grad norms, entropy of the old log-prob pass, policy and
//    value losses; 1e-4 relative, absolute below 1);
//  - on both steps the engine's log-probs equal the actor's recomputed old
//    log-probs (< 1e-5): holds only if every rank's actor sees its rows'
//    own images and, at step 2, the engine got the trained tower;
//  - the saved actor and critic after each step (the 2 ranks' shards
//    concatenated) equal the 1-process ones within kParamAtol /
//    kFarFraction for every tensor, tower and language model, and every
//    tower tensor of both moved from its initial value by more than
//    kTrainedMove (a frozen or disconnected tower fails);
//  - the huggingface/ folder rank 0 writes (hf_model) loads as a
//    Qwen2.5-VL policy with exactly the shards' weights;
//  - resuming from the step-1 checkpoint (model, optimizer, extra) and
//    training step 2 gives bit-equal step-2 files (actor and critic).
// On 4 processes with hybrid sharding (fsdp_size 2 for every role):
// the same metrics. Ulysses sp and a tensor-parallel rollout with images
// are refused with a line naming the key.
#include <ATen/ATen.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "verl/ckpt/checkpoint_manager.h"
#include "verl/ckpt/checkpoint_pt.h"
#include "verl/ckpt/safetensors.h"
#include "verl/models/tokenizer/tokenizer.h"
#include "verl/models/vlm/image_processor.h"
#include "verl/models/vlm/qwen2_vl.h"
#include "verl/models/vlm/testing/sharp_tiny_vlm.h"
#include "verl/models/vlm/vlm_checkpoint.h"
#include "verl/models/vlm/vlm_config.h"
#include "verl/models/vlm/vlm_processor.h"
#include "verl/rl/trainer/testing/ppo_trainer_testutil.h"
#include "verl/rl/trainer/testing/train_compare_testutil.h"

namespace {

namespace fs = std::filesystem;
using verl::rl::testing::RunTrain;

// |2-process - 1-process| of a saved fp32 parameter after each step (lr
// 1e-3, two AdamW updates per step): every element within kParamAtol, and
// at most kFarFraction of them above 1e-6. The runs differ by the order of
// fp32 sums (gradients summed over 2 ranks, other GEMM shapes); AdamW's
// normalised update lr * m / (sqrt(v) + eps) turns that rounding into up
// to a few percent of lr for elements whose gradient is near zero (k_proj
// biases: pure rounding noise). Measured with GAE over two runs: max
// 1.1e-5 actor, 9.6e-6 critic; at most 59 of 1.25 M elements above 1e-6. A rank
// that trains on the wrong images, or a gradient not reduced over the ranks,
// moves most elements by ~lr.
constexpr double kParamAtol = 1e-4;
constexpr double kFarFraction = 1e-3;
// Every tower tensor must move by more than this from its initial value:
// AdamW moves an element with a real gradient by ~lr per update, one with
// none (frozen or disconnected tower) not at all, and one with a gradient
// of rounding noise (|g| << eps = 1e-8) by ~lr * |g| / eps.
constexpr double kTrainedMove = 1e-4;

std::string Tmp() { return std::getenv("TEST_TMPDIR"); }

// The policy folder: the tiny preset with attention sharp enough that the
// images move the log-probs (as ppo_trainer_test's vision-language case).
std::map<std::string, at::Tensor> SaveTinyVlm(const std::string& dir) {
  namespace vlm = verl::models::vlm;
  auto init = vlm::testing::MakeSharpTinyVlm(/*seed=*/11);
  const vlm::VlmConfig& preset = init->vlm_config();
  std::map<std::string, at::Tensor> weights;
  for (auto& item : init->named_parameters()) {
    weights[item.key()] = item.value().detach().clone();
  }
  const verl::models::Tokenizer tok = *vlm::MakeVlmTokenizer(preset);
  vlm::VlmSaveOptions save;
  save.tokenizer = &tok;
  EXPECT_TRUE(
      vlm::SaveVlmCheckpoint(dir, *init, vlm::ImageProcessorConfig(), {}, save)
          .ok());
  return weights;
}

std::vector<std::string> VlmArgs(int nproc, const std::string& policy,
                                 const std::string& ckpt_dir,
                                 const std::vector<std::string>& extra) {
  std::vector<std::string> args = verl::rl::testing::WithOverrides(
      verl::rl::testing::TinyTaskOverrides(),
      {
          "data.train_files=[builtin:geo_map/train?rows=8]",
          "data.val_files=[]",
          "data.max_prompt_length=192",
          "actor_rollout_ref.model.path=" + policy,
          // Micro-batch sizes that divide every rank's rows up to 4 ranks
          // (a mini-batch is 4 trajectories, the batch 8).
          "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
          "actor_rollout_ref.actor.use_kl_loss=true",
          // The entropy bonus gives every parameter, the tower's included, a
          // gradient whatever the advantages (greedy samples of a prompt are
          // alike); without weight decay a tensor moves only by its
          // gradient.
          "actor_rollout_ref.actor.entropy_coeff=0.01",
          "actor_rollout_ref.actor.optim.weight_decay=0",
          "actor_rollout_ref.actor.strategy=fsdp",
          "actor_rollout_ref.actor.fsdp_config.dtype=float32",
          "actor_rollout_ref.ref.fsdp_config.dtype=float32",
          "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
          "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
          "actor_rollout_ref.rollout.dtype=float32",
          "actor_rollout_ref.rollout.calculate_log_probs=true",
          // Greedy: last-bit differences cannot flip a sampled token.
          "actor_rollout_ref.rollout.do_sample=false",
          // GAE: a critic (the policy with a value head, tower included)
          // trains under FSDP next to the actor.
          "algorithm.adv_estimator=gae",
          "critic.strategy=fsdp",
          "critic.model.fsdp_config.dtype=float32",
          "critic.ppo_micro_batch_size_per_gpu=1",
          "critic.optim.lr=1e-3",
          "trainer.total_training_steps=2",
          "trainer.save_freq=1",
          "trainer.default_local_dir=" + ckpt_dir,
          absl::StrCat("trainer.n_gpus_per_node=", nproc),
      });
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// The role saved at `step` under `dir` by `world` ranks, the rank chunks
// (dim-0 slices) concatenated back into full tensors.
std::map<std::string, at::Tensor> SavedRole(const std::string& dir,
                                            const std::string& role,
                                            int64_t step, int world) {
  std::vector<std::map<std::string, at::Tensor>> ranks;
  for (int r = 0; r < world; ++r) {
    const std::string path =
        absl::StrCat(dir, "/global_step_", step, "/", role, "/",
                     verl::ckpt::RankFileName("model", r, world));
    auto loaded = verl::ckpt::LoadPtTensorDict(path);
    EXPECT_TRUE(loaded.ok()) << path << ": " << loaded.status();
    if (!loaded.ok()) return {};
    ranks.emplace_back(loaded->begin(), loaded->end());
  }
  std::map<std::string, at::Tensor> full;
  for (const auto& [name, chunk] : ranks[0]) {
    std::vector<at::Tensor> chunks;
    for (const auto& r : ranks) chunks.push_back(r.at(name));
    full[name] = at::cat(chunks, 0);
  }
  return full;
}

TEST(TrainFsdpVlmTest, TwoRanksReproduceOneRankWithImages) {
  const std::string policy = Tmp() + "/tiny_vl";
  const std::map<std::string, at::Tensor> init = SaveTinyVlm(policy);
  const std::string dir1 = Tmp() + "/vlm_ckpt1", dir2 = Tmp() + "/vlm_ckpt2";
  fs::remove_all(dir1);
  fs::remove_all(dir2);
  const auto one = RunTrain("vlm1", VlmArgs(1, policy, dir1, {}));
  // hf_model: rank 0 writes the gathered full weights as a Qwen2.5-VL
  // folder.
  const auto two = RunTrain(
      "vlm2", VlmArgs(2, policy, dir2,
                      {"actor_rollout_ref.actor.checkpoint.save_contents=["
                       "model,optimizer,extra,hf_model]"}));
  verl::rl::testing::ExpectSameRuns(
      one, "vlm1", two, "vlm2", "vision-language PPO on 2 ranks", 2,
      {"actor/pg_loss", "actor/kl_loss", "actor/grad_norm", "actor/entropy",
       "critic/score/mean", "critic/vf_loss", "critic/grad_norm"});
  for (const auto* run : {&one, &two}) {
    for (const auto& line : *run) {
      const auto& data = line["data"];
      ASSERT_TRUE(data.contains("training/rollout_probs_diff_max"));
      EXPECT_LT(data["training/rollout_probs_diff_max"].get<double>(), 1e-5)
          << "step " << data["training/global_step"]
          << ": the engine's log-probs differ from the actor's";
      EXPECT_GT(data["actor/grad_norm"].get<double>(), 0.0);
      EXPECT_GT(data["prompt_length/mean"].get<double>(), 100.0);
    }
  }

  for (int64_t step : {1, 2}) {
    const auto a = SavedRole(dir1, "actor", step, 1);
    const auto b = SavedRole(dir2, "actor", step, 2);
    ASSERT_EQ(a.size(), init.size());
    ASSERT_EQ(b.size(), init.size());
    double max_diff = 0;
    int64_t far = 0, elements = 0;
    int tower = 0, tower_moved = 0, text_moved = 0;
    for (const auto& [name, w0] : init) {
      ASSERT_TRUE(a.count(name) && b.count(name)) << name;
      ASSERT_EQ(a.at(name).sizes(), w0.sizes()) << name;
      ASSERT_EQ(b.at(name).sizes(), w0.sizes()) << name;
      const double d = (a.at(name) - b.at(name)).abs().max().item<double>();
      EXPECT_LE(d, kParamAtol) << "step " << step << " " << name;
      far += (a.at(name) - b.at(name)).abs().gt(1e-6).sum().item<int64_t>();
      elements += w0.numel();
      max_diff = std::max(max_diff, d);
      const double move = (b.at(name) - w0).abs().max().item<double>();
      const bool moved = move > kTrainedMove;
      if (name.rfind("visual.", 0) == 0) {
        ++tower;
        tower_moved += moved;
        EXPECT_TRUE(moved) << "step " << step << ": tower tensor " << name
                           << " did not train (max move " << move << ")";
      } else {
        text_moved += moved;
      }
    }
    std::cout << "step " << step << ": max |2 ranks - 1 rank| " << max_diff
              << ", " << far << " of " << elements << " elements above 1e-6, "
              << init.size() << " tensors (" << tower << " of the tower, "
              << tower_moved << " moved; " << text_moved
              << " language-model tensors moved)\n";
    EXPECT_GT(tower, 40);
    EXPECT_GT(text_moved, 10);
    EXPECT_LE(far, kFarFraction * elements) << "step " << step;
    // The 2-process huggingface/ folder holds the same weights as the
    // shards (gathered unit by unit, the tower's included).
    auto hf = verl::models::vlm::LoadVlmCheckpoint(
        absl::StrCat(dir2, "/global_step_", step, "/actor/huggingface"));
    ASSERT_TRUE(hf.ok()) << hf.status();
    int hf_tensors = 0;
    for (const auto& item : hf->model->named_parameters()) {
      ASSERT_TRUE(b.count(item.key())) << item.key();
      EXPECT_TRUE(item.value().equal(b.at(item.key())))
          << "step " << step << " huggingface/ " << item.key();
      ++hf_tensors;
    }
    EXPECT_EQ(hf_tensors, static_cast<int>(init.size()));

    // The critic: every tensor (tower, language model, value head) within
    // kParamAtol of the 1-process critic, and its tower trained.
    const auto ca = SavedRole(dir1, "critic", step, 1);
    const auto cb = SavedRole(dir2, "critic", step, 2);
    ASSERT_FALSE(ca.empty());
    ASSERT_EQ(ca.size(), cb.size());
    double critic_diff = 0;
    int critic_tower_moved = 0;
    int64_t critic_far = 0, critic_elements = 0;
    for (const auto& [name, t] : ca) {
      ASSERT_TRUE(cb.count(name)) << name;
      const double d = (t - cb.at(name)).abs().max().item<double>();
      EXPECT_LE(d, kParamAtol) << "step " << step << " critic " << name;
      critic_diff = std::max(critic_diff, d);
      critic_far += (t - cb.at(name)).abs().gt(1e-6).sum().item<int64_t>();
      critic_elements += t.numel();
      if (name.rfind("visual.", 0) == 0 && init.count(name)) {
        critic_tower_moved +=
            (cb.at(name) - init.at(name)).abs().max().item<double>() >
            kTrainedMove;
      }
    }
    std::cout << "step " << step << ": critic max |2 ranks - 1 rank| "
              << critic_diff << ", " << critic_far << " of " << critic_elements
              << " elements above 1e-6, " << ca.size() << " tensors, "
              << critic_tower_moved << " tower tensors moved\n";
    EXPECT_GT(critic_tower_moved, 40);
    EXPECT_LE(critic_far, kFarFraction * critic_elements) << "step " << step;
  }

  // Resume the 2-process run from its step-1 checkpoint (sharded model,
  // optimizer and extra of every unit, the tower's included): step 2's
  // files equal the straight run's bit for bit.
  const std::string dir3 = Tmp() + "/vlm_ckpt3";
  fs::remove_all(dir3);
  RunTrain("vlm2_resumed",
           VlmArgs(2, policy, dir3,
                   {"trainer.resume_mode=resume_path",
                    "trainer.resume_from_path=" + dir2 + "/global_step_1"}));
  for (int r = 0; r < 2; ++r) {
    for (const auto& [role, kind] :
         std::vector<std::pair<std::string, std::string>>{
             {"actor", "model"},
             {"actor", "optim"},
             {"critic", "model"},
             {"critic", "optim"}}) {
      const std::string f = absl::StrCat("/global_step_2/", role, "/",
                                         verl::ckpt::RankFileName(kind, r, 2));
      auto load = [&](const std::string& path) {
        return kind == "model" ? verl::ckpt::LoadPtTensorDict(path)
                               : verl::ckpt::LoadPtOptimizer(path);
      };
      auto straight = load(dir2 + f);
      auto resumed = load(dir3 + f);
      ASSERT_TRUE(straight.ok() && resumed.ok()) << f;
      ASSERT_EQ(straight->size(), resumed->size()) << f;
      int tower = 0;
      for (const auto& [k, v] : *straight) {
        ASSERT_TRUE(resumed->count(k)) << f << " " << k;
        EXPECT_TRUE(at::equal(v, resumed->at(k))) << f << " " << k;
        tower += k.find("visual.") != std::string::npos;
      }
      EXPECT_GT(tower, 40) << f;
    }
  }
}

// Hybrid sharding: 4 processes, actor, reference and critic sharded over pairs
// (fsdp_size 2) and replicated across them, reproduce the 1-process run.
TEST(TrainFsdpVlmTest, HybridShardingReproducesOneRank) {
  const std::string policy = Tmp() + "/tiny_vl";
  SaveTinyVlm(policy);
  const std::string dir1 = Tmp() + "/vlm_ckpt1", dir4 = Tmp() + "/vlm_ckpt4";
  const auto one = RunTrain("vlm1", VlmArgs(1, policy, dir1, {}));
  const auto four = RunTrain(
      "vlm4", VlmArgs(4, policy, dir4,
                      {"actor_rollout_ref.actor.fsdp_config.fsdp_size=2",
                       "actor_rollout_ref.ref.fsdp_config.fsdp_size=2",
                       "critic.model.fsdp_config.fsdp_size=2"}));
  verl::rl::testing::ExpectSameRuns(
      one, "vlm1", four, "vlm4", "vision-language PPO, hybrid 2 x 2", 2,
      {"actor/pg_loss", "actor/kl_loss", "actor/grad_norm", "actor/entropy",
       "critic/vf_loss", "critic/grad_norm"});
  for (const auto& line : four) {
    EXPECT_LT(line["data"]["training/rollout_probs_diff_max"].get<double>(),
              1e-5);
  }
}

// A LoRA actor (all-linear: adapters on both towers) on 2 processes: GRPO
// with the base as reference reproduces the 1-process run, metrics and the
// saved PEFT adapters (written from the FSDP-gathered adapters).
TEST(TrainFsdpVlmTest, LoraActorTwoRanksReproduceOneRank) {
  const std::string policy = Tmp() + "/tiny_vl";
  SaveTinyVlm(policy);
  const std::vector<std::string> lora = {
      "algorithm.adv_estimator=grpo", "actor_rollout_ref.model.lora_rank=4",
      "actor_rollout_ref.model.lora_alpha=8",
      "actor_rollout_ref.actor.optim.lr=1e-2", "trainer.save_freq=2"};
  const std::string dir1 = Tmp() + "/lora1", dir2 = Tmp() + "/lora2";
  const auto one = RunTrain("lora1", VlmArgs(1, policy, dir1, lora));
  const auto two = RunTrain("lora2", VlmArgs(2, policy, dir2, lora));
  verl::rl::testing::ExpectSameRuns(
      one, "lora1", two, "lora2", "vision-language LoRA GRPO, 2 ranks", 2,
      {"actor/pg_loss", "actor/kl_loss", "actor/grad_norm", "actor/entropy"});
  const std::string adapter =
      "/global_step_2/actor/lora_adapter/adapter_model.safetensors";
  auto a1 = verl::ckpt::LoadSafetensors(dir1 + adapter);
  auto a2 = verl::ckpt::LoadSafetensors(dir2 + adapter);
  ASSERT_TRUE(a1.ok() && a2.ok()) << a1.status() << a2.status();
  ASSERT_EQ(a1->size(), a2->size());
  int visual_moved = 0;
  for (const auto& [name, t] : *a1) {
    ASSERT_TRUE(a2->count(name)) << name;
    EXPECT_LT((t - a2->at(name)).abs().max().item<double>(), 1e-5) << name;
    visual_moved += name.find(".visual.") != std::string::npos &&
                    name.find("lora_B") != std::string::npos &&
                    a2->at(name).abs().max().item<double>() > 0;
  }
  EXPECT_GT(visual_moved, 10);
}

// What does not shard with images yet is refused on 2 processes, with a
// line naming the key.
TEST(TrainFsdpVlmTest, RefusesUlyssesAndRolloutTensorParallel) {
  const std::string policy = Tmp() + "/tiny_vl";
  SaveTinyVlm(policy);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"actor_rollout_ref.actor.ulysses_sequence_parallel_size=2",
       "ulysses_sequence_parallel_size > 1"},
      {"actor_rollout_ref.rollout.tensor_model_parallel_size=2",
       "tensor_model_parallel_size > 1"}};
  for (const auto& [key, message] : cases) {
    const std::string log = Tmp() + "/refused.log";
    const std::string cmd = absl::StrCat(
        "tools/train ",
        absl::StrJoin(VlmArgs(2, policy, Tmp() + "/refused", {key}), " "), " >",
        log, " 2>&1");
    EXPECT_NE(std::system(cmd.c_str()), 0) << key;
    std::ifstream in(log);
    const std::string text((std::istreambuf_iterator<char>(in)),
                           std::istreambuf_iterator<char>());
    EXPECT_NE(text.find(message), std::string::npos) << key << "\n" << text;
    EXPECT_NE(text.find("vision-language model"), std::string::npos) << text;
  }
}

}  // namespace
