#include "verl/rl/workers/actor.h"

#include <torch/types.h>

#include "gtest/gtest.h"
#include "verl/models/presets.h"
#include "verl/rl/workers/model_forward.h"
#include "verl/rl/workers/testing/batch_testutil.h"

namespace verl::rl {
namespace {

struct Fixture {
  models::ModelConfig config;
  core::Batch batch;
};

Fixture MakeFixture() {
  Fixture f;
  f.config = *models::MakePreset("tiny-qwen2");
  f.batch = testing::MakeRolloutBatch(
      f.config.vocab_size, 5, 4, {5, 2, 3, 4, 1, 5, 2, 3},
      {4, 1, 3, 2, 4, 0, 2, 3}, /*seed=*/7, /*group=*/2);
  return f;
}

std::unique_ptr<Actor> MakeActor(const models::ModelConfig& config,
                                 ActorOptions options, double grad_clip = 1.0) {
  auto model = models::CreateModel(config, 11);
  OptimizerOptions o;
  o.lr = 1e-3;
  o.grad_clip = grad_clip;
  auto state =
      std::make_unique<ReplicatedTrainState>(model->parameters(), o, nullptr);
  return std::make_unique<Actor>(model, std::move(state), std::move(options),
                                 nullptr);
}

void AddAdvantages(Actor& actor, core::Batch& batch) {
  auto lp = actor.ComputeLogProb(batch, false);
  ASSERT_TRUE(lp.ok());
  ASSERT_TRUE(batch.SetTensor("old_log_probs", lp->log_probs).ok());
  ASSERT_TRUE(batch.SetTensor("ref_log_prob", lp->log_probs - 0.05).ok());
  at::Tensor adv = torch::linspace(-1, 1, batch.size())
                       .unsqueeze(1)
                       .expand({-1, 4})
                       .contiguous();
  ASSERT_TRUE(
      batch.SetTensor("advantages", adv * batch.tensor("response_mask")).ok());
}

TEST(ActorTest, ComputeLogProbMatchesWholeBatchForward) {
  Fixture f = MakeFixture();
  ActorOptions o;
  o.temperature = 0.9;
  o.log_prob_micro.micro_batch_size = 3;
  auto actor = MakeActor(f.config, o);
  auto lp = actor->ComputeLogProb(f.batch, true);
  ASSERT_TRUE(lp.ok()) << lp.status();
  ResponseForward ref =
      ForwardResponses(actor->model(), f.batch.tensor("input_ids"),
                       f.batch.tensor("attention_mask"),
                       f.batch.tensor("position_ids"), 4, 0.9, true);
  EXPECT_TRUE(
      torch::allclose(lp->log_probs, ref.log_probs.detach(), 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(lp->entropy, ref.entropy.detach(), 1e-5, 1e-5));
  // Dynamic (token-budget) micro-batches give the same values.
  ActorOptions dyn = o;
  dyn.log_prob_micro.use_dynamic_bsz = true;
  dyn.log_prob_micro.max_token_len = 12;
  auto actor2 = MakeActor(f.config, dyn);
  auto lp2 = actor2->ComputeLogProb(f.batch, false);
  ASSERT_TRUE(lp2.ok()) << lp2.status();
  EXPECT_TRUE(torch::allclose(lp2->log_probs, lp->log_probs, 1e-5, 1e-5));
}

// Global normalisation: the update (gradients and logged losses) must not
// depend on how a mini-batch is cut into micro-batches.
TEST(ActorTest, UpdateIsInvariantToMicroBatching) {
  Fixture f = MakeFixture();
  for (int64_t mini : {4, 8}) {
    std::vector<std::map<std::string, double>> metrics;
    std::vector<std::vector<at::Tensor>> grads;
    for (int64_t micro : {1, 3, 8}) {
      for (bool dynamic : {false, true}) {
        ActorOptions o;
        o.mini_batch_size = mini;
        o.update_micro.micro_batch_size = micro;
        o.update_micro.use_dynamic_bsz = dynamic;
        o.update_micro.max_token_len = 9 + micro;
        o.use_kl_loss = true;
        o.entropy_coeff = 0.01;
        auto actor = MakeActor(f.config, o, /*grad_clip=*/0);
        core::Batch batch = f.batch;
        AddAdvantages(*actor, batch);
        auto m = actor->UpdatePolicy(batch);
        ASSERT_TRUE(m.ok()) << m.status();
        metrics.push_back(*m);
        // Gradients of the last mini-batch (Adam's first steps amplify
        // rounding in near-zero gradients, so compare gradients, not weights).
        std::vector<at::Tensor> g;
        for (const auto& t : actor->model().parameters())
          g.push_back(t.grad().clone());
        grads.push_back(g);
      }
    }
    for (size_t i = 1; i < metrics.size(); ++i) {
      for (const char* key :
           {"actor/pg_loss", "actor/kl_loss", "actor/entropy",
            "actor/pg_clipfrac", "actor/ppo_kl", "actor/grad_norm"}) {
        ASSERT_TRUE(metrics[i].count(key)) << key;
        EXPECT_NEAR(metrics[i][key], metrics[0][key], 1e-5)
            << key << " variant " << i;
      }
      if (mini != 8)
        continue;  // with 2 mini-batches the 2nd starts from different weights
      for (size_t k = 0; k < grads[0].size(); ++k) {
        EXPECT_TRUE(torch::allclose(grads[i][k], grads[0][k], 1e-4, 1e-7))
            << "param " << k;
      }
    }
  }
}

// verl's on-policy shortcut for the first mini-batch: the update's own
// log-probs and entropy of its rows equal the old-log-prob pass's, and the
// update (metrics, weights) equals the one given the recomputed old
// log-probs; those rows' old log-probs, poisoned with 123, are not read.
TEST(ActorTest, OnPolicyFirstMiniBatchCapturesTheOldLogProbPass) {
  Fixture f = MakeFixture();
  ActorOptions o;
  o.temperature = 0.9;
  o.mini_batch_size = 4;  // two mini-batches
  o.update_micro.micro_batch_size = 3;
  o.log_prob_micro.micro_batch_size = 8;
  o.use_kl_loss = true;
  auto plain = MakeActor(f.config, o, /*grad_clip=*/0);
  auto shortcut = MakeActor(f.config, o, /*grad_clip=*/0);
  core::Batch batch = f.batch;
  AddAdvantages(*plain, batch);
  auto old = plain->ComputeLogProb(batch, true);
  ASSERT_TRUE(old.ok()) << old.status();
  auto m_plain = plain->UpdatePolicy(batch);
  ASSERT_TRUE(m_plain.ok()) << m_plain.status();

  core::Batch poisoned = batch;
  at::Tensor old_lp = batch.tensor("old_log_probs").clone();
  old_lp.narrow(0, 0, 4).fill_(123.0);  // must not be read
  ASSERT_TRUE(poisoned.SetTensor("old_log_probs", old_lp).ok());
  OnPolicyCapture capture;
  capture.rows = 4;
  auto m_short = shortcut->UpdatePolicy(poisoned, &capture);
  ASSERT_TRUE(m_short.ok()) << m_short.status();
  EXPECT_FALSE(poisoned.HasTensor("update_row_index"));
  EXPECT_LT((capture.log_probs - old->log_probs.narrow(0, 0, 4))
                .abs()
                .max()
                .item<double>(),
            1e-6);
  EXPECT_LT((capture.entropy - old->entropy.narrow(0, 0, 4))
                .abs()
                .max()
                .item<double>(),
            1e-6);
  ASSERT_EQ(m_plain->size(), m_short->size());
  for (const auto& [k, v] : *m_plain) {
    EXPECT_NEAR(m_short->at(k), v, 1e-6) << k;
  }
  auto p1 = plain->model().parameters(), p2 = shortcut->model().parameters();
  for (size_t k = 0; k < p1.size(); ++k) {
    EXPECT_LT((p1[k] - p2[k]).abs().max().item<double>(), 1e-6) << k;
  }
  // Not for more than one epoch (the first mini-batch's second pass is off
  // policy) or another row count.
  ActorOptions two = o;
  two.ppo_epochs = 2;
  OnPolicyCapture bad;
  bad.rows = 4;
  EXPECT_FALSE(MakeActor(f.config, two)->UpdatePolicy(batch, &bad).ok());
  bad.rows = 3;
  EXPECT_FALSE(MakeActor(f.config, o)->UpdatePolicy(batch, &bad).ok());
}

TEST(ActorTest, PositiveAdvantageRaisesLogProb) {
  Fixture f = MakeFixture();
  ActorOptions o;
  o.mini_batch_size = 8;
  o.update_micro.micro_batch_size = 8;
  o.ppo_epochs = 3;
  auto actor = MakeActor(f.config, o);
  core::Batch batch = f.batch;
  auto before = actor->ComputeLogProb(batch, false);
  ASSERT_TRUE(batch.SetTensor("old_log_probs", before->log_probs).ok());
  ASSERT_TRUE(
      batch.SetTensor("advantages", batch.tensor("response_mask").clone())
          .ok());
  ASSERT_TRUE(actor->UpdatePolicy(batch).ok());
  auto after = actor->ComputeLogProb(batch, false);
  const at::Tensor mask = batch.tensor("response_mask");
  EXPECT_GT((after->log_probs * mask).sum().item<double>(),
            (before->log_probs * mask).sum().item<double>());
}

TEST(ActorTest, BadBatchesAreErrors) {
  Fixture f = MakeFixture();
  ActorOptions o;
  o.mini_batch_size = 3;  // 8 rows do not split into mini-batches of 3
  auto actor = MakeActor(f.config, o);
  core::Batch batch = f.batch;
  EXPECT_NE(actor->UpdatePolicy(batch).status().message().find("old_log_probs"),
            std::string::npos);
  AddAdvantages(*actor, batch);
  EXPECT_NE(actor->UpdatePolicy(batch).status().message().find("mini-batch"),
            std::string::npos);
  Actor ref(models::CreateModel(f.config, 1), nullptr, o, nullptr);
  EXPECT_EQ(ref.UpdatePolicy(batch).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace verl::rl
