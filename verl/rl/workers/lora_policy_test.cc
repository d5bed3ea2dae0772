// LoRA actor: only adapters train, the reference (adapters off) is exactly
// the base model, and the engine fed merged weights generates what a fresh
// engine built from an in-place merged copy generates.
#include "verl/rl/workers/lora_policy.h"

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>

#include <cstdlib>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "verl/models/hf_checkpoint.h"
#include "verl/models/presets.h"
#include "verl/parallel/process_group.h"
#include "verl/rl/workers/actor.h"
#include "verl/rl/workers/rollout.h"
#include "verl/rl/workers/train_state.h"

namespace verl::rl {
namespace {

models::ModelConfig TinyConfig() {
  models::ModelConfig c = *models::MakePreset("tiny-qwen2");
  c.eos_token_ids = {2};
  return c;
}

models::LoraConfig TinyLora() {
  models::LoraConfig l;
  l.rank = 4;
  l.alpha = 8;
  return l;
}

void CopyByName(const torch::nn::Module& from, torch::nn::Module& to) {
  at::NoGradGuard no_grad;
  auto src = from.named_parameters();
  for (auto& item : to.named_parameters()) {
    if (const at::Tensor* s = src.find(item.key())) item.value().copy_(*s);
  }
}

std::map<std::string, at::Tensor> Snapshot(const torch::nn::Module& m) {
  std::map<std::string, at::Tensor> out;
  for (const auto& item : m.named_parameters())
    out[item.key()] = item.value().detach().clone();
  return out;
}

core::Batch Prompts(int64_t vocab) {
  const std::vector<int64_t> lens = {3, 5, 2, 4};
  const int64_t B = lens.size(), P = 5;
  at::Tensor ids = at::zeros({B, P}, at::kLong);
  at::Tensor mask = at::zeros({B, P}, at::kLong);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = P - lens[b]; t < P; ++t) {
      ids[b][t] = 3 + (b * 7 + t * 3) % (vocab - 3);
      mask[b][t] = 1;
    }
  }
  return *core::Batch::FromColumns(
      {{"input_ids", ids},
       {"attention_mask", mask},
       {"position_ids", (mask.cumsum(1) - 1).clamp_min(0)}});
}

std::unique_ptr<Rollout> MakeRollout(std::shared_ptr<models::CausalLM> m,
                                     int64_t n, bool sample) {
  RolloutOptions o;
  o.train_params.n = n;
  o.train_params.do_sample = sample;
  o.val_params.do_sample = false;
  o.response_length = 6;
  o.seed = 11;
  infer::EngineOptions e;
  e.num_kv_blocks = 64;
  e.max_model_len = 64;
  auto r = Rollout::Create(std::move(m), e, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return *std::move(r);
}

TEST(LoraPolicyTest, OnlyAdaptersTrainAndTheReferenceIsTheBaseModel) {
  const models::ModelConfig config = TinyConfig();
  auto base = models::CreateModel(config, 9);
  auto policy = models::CreateModel(config, 9);
  CopyByName(*base, *policy);
  ASSERT_TRUE(models::ApplyLora(*policy, TinyLora(), 1).ok());
  NamedTensorList trainable = TrainableParameters(*policy);
  ASSERT_FALSE(trainable.empty());
  for (const auto& [name, t] : trainable)
    EXPECT_NE(name.find(".lora_"), std::string::npos) << name;

  // Trajectories sampled from the base model.
  auto sampler = MakeRollout(models::CreateModel(config, 9), 2, true);
  ASSERT_TRUE(sampler->SyncWeights(*base).ok());
  auto gen = sampler->Generate(Prompts(config.vocab_size), 0, 1, false);
  ASSERT_TRUE(gen.ok()) << gen.status();
  core::Batch batch = *gen;

  ActorOptions ao;
  ao.log_prob_micro.micro_batch_size = 8;
  ao.update_micro.micro_batch_size = 4;
  ao.mini_batch_size = 8;
  Actor base_actor(base, nullptr, ao, nullptr);
  auto base_lp = base_actor.ComputeLogProb(batch, false);
  ASSERT_TRUE(base_lp.ok());
  ASSERT_TRUE(batch.SetTensor("old_log_probs", base_lp->log_probs).ok());
  at::manual_seed(4);
  ASSERT_TRUE(batch
                  .SetTensor("advantages", at::randn({batch.size(), 6}) *
                                               batch.tensor("response_mask"))
                  .ok());

  OptimizerOptions opt;
  opt.lr = 1e-2;
  auto comm = parallel::SingleProcessCommunicator();
  Actor actor(policy,
              std::make_unique<ReplicatedTrainState>(trainable, opt, comm), ao,
              comm);
  auto before = Snapshot(*policy);
  for (int step = 0; step < 2; ++step) {
    auto m = actor.UpdatePolicy(batch);
    ASSERT_TRUE(m.ok()) << m.status();
  }
  int changed_adapters = 0;
  for (const auto& [name, t] : Snapshot(*policy)) {
    const bool same = at::equal(t, before.at(name));
    if (name.find(".lora_") == std::string::npos) {
      EXPECT_TRUE(same) << "base parameter changed: " << name;
    } else if (!same) {
      ++changed_adapters;
    }
  }
  EXPECT_EQ(changed_adapters, static_cast<int>(trainable.size()));

  // The reference shares the model: adapters off == the base model exactly.
  ActorOptions ref_options = ao;
  ref_options.disable_lora = true;
  Actor ref(policy, nullptr, ref_options, nullptr);
  auto ref_lp = ref.ComputeLogProb(batch, false);
  ASSERT_TRUE(ref_lp.ok());
  EXPECT_TRUE(at::equal(ref_lp->log_probs, base_lp->log_probs));
  // ...while the actor itself (adapters on) has moved away from it.
  auto actor_lp = actor.ComputeLogProb(batch, false);
  ASSERT_TRUE(actor_lp.ok());
  EXPECT_GT(
      (actor_lp->log_probs - base_lp->log_probs).abs().max().item<float>(),
      1e-4);
}

TEST(LoraPolicyTest, MergedSyncMatchesAFreshEngineWithMergedWeights) {
  const models::ModelConfig config = TinyConfig();
  auto policy = models::CreateModel(config, 9);
  ASSERT_TRUE(models::ApplyLora(*policy, TinyLora(), 1).ok());
  {
    // Trained-looking adapters: B away from its zero init.
    at::NoGradGuard no_grad;
    at::manual_seed(7);
    for (auto& item : policy->named_parameters()) {
      if (item.key().find(".lora_B.") != std::string::npos)
        item.value().normal_(0.0, 0.3);
    }
  }
  auto synced = MakeRollout(models::CreateModel(config, 1234), 1, false);
  ASSERT_TRUE(ForEachMergedLoraWeight(*policy, [&](const std::string& name,
                                                   const at::Tensor& w) {
                return synced->engine().UpdateWeights({{name, w}});
              }).ok());

  // Independent path: an in-place merged copy saved as an HF folder and
  // loaded into a fresh engine.
  auto merged = models::CreateModel(config, 9);
  ASSERT_TRUE(models::ApplyLora(*merged, TinyLora(), 1).ok());
  CopyByName(*policy, *merged);
  ASSERT_TRUE(models::MergeLora(*merged).ok());
  models::HfCheckpoint ckpt;
  ckpt.config = config;
  for (const auto& item : merged->named_parameters()) {
    if (item.key().find(".lora_") == std::string::npos)
      ckpt.tensors[item.key()] = item.value().detach();
  }
  const std::string dir =
      std::string(std::getenv("TEST_TMPDIR")) + "/merged_policy";
  ASSERT_TRUE(models::SaveHfCheckpoint(dir, ckpt).ok());
  auto fresh_model = models::CreateModel(config, 555);
  std::map<std::string, at::Tensor> dst;
  for (auto& item : fresh_model->named_parameters())
    dst[item.key()] = item.value();
  ASSERT_TRUE(models::LoadHfWeightsInto(dir, &dst).ok());
  auto fresh = MakeRollout(fresh_model, 1, false);
  for (const auto& [name, w] : MergedLoraWeights(*policy)) {
    EXPECT_TRUE(at::equal(w, fresh_model->named_parameters()[name])) << name;
  }

  auto base_only = MakeRollout(models::CreateModel(config, 9), 1, false);
  const core::Batch prompts = Prompts(config.vocab_size);
  auto a = synced->Generate(prompts, 0, 1, /*validate=*/true);
  auto b = fresh->Generate(prompts, 0, 1, /*validate=*/true);
  auto c = base_only->Generate(prompts, 0, 1, /*validate=*/true);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_TRUE(at::equal(a->tensor("responses"), b->tensor("responses")))
      << a->tensor("responses") << "\n"
      << b->tensor("responses");
  // The adapters matter: the base model answers differently.
  EXPECT_FALSE(at::equal(a->tensor("responses"), c->tensor("responses")));
}

}  // namespace
}  // namespace verl::rl
