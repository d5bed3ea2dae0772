#include "verl/rl/workers/rollout.h"

#include <torch/types.h>

#include "gtest/gtest.h"
#include "verl/core/test_util.h"
#include "verl/models/presets.h"
#include "verl/models/tokenizer/chat_template.h"
#include "verl/models/tokenizer/tokenizer_builtin.h"
#include "verl/rl/workers/actor.h"

namespace verl::rl {
namespace {

using ::verl::core::testing::StatusIs;

core::Batch MakePrompts(int64_t vocab, const std::vector<int64_t>& lens,
                        int64_t P) {
  const int64_t B = lens.size();
  at::Tensor ids = torch::zeros({B, P}, torch::kLong);
  at::Tensor mask = torch::zeros({B, P}, torch::kLong);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = P - lens[b]; t < P; ++t) {
      ids[b][t] = 1 + (b * 7 + t * 3) % (vocab - 1);
      mask[b][t] = 1;
    }
  }
  return *core::Batch::FromColumns(
      {{"input_ids", ids},
       {"attention_mask", mask},
       {"position_ids", (mask.cumsum(1) - 1).clamp_min(0)}});
}

struct RolloutSetup {
  models::ModelConfig config;
  std::shared_ptr<models::CausalLM> policy;
  std::unique_ptr<Rollout> rollout;
};

RolloutSetup MakeSetup(int64_t n, bool greedy, uint64_t seed = 3) {
  RolloutSetup s;
  s.config = *models::MakePreset("tiny-qwen2");
  s.config.eos_token_ids = {2};
  s.policy = models::CreateModel(s.config, 9);
  RolloutOptions o;
  o.train_params.n = n;
  o.train_params.do_sample = !greedy;
  o.val_params.do_sample = false;
  o.response_length = 6;
  o.calculate_log_probs = true;
  o.seed = seed;
  infer::EngineOptions e;
  e.num_kv_blocks = 64;
  e.max_model_len = 64;
  auto r = Rollout::Create(models::CreateModel(s.config, 1234), e, o);
  EXPECT_TRUE(r.ok()) << r.status();
  s.rollout = *std::move(r);
  EXPECT_TRUE(s.rollout->SyncWeights(*s.policy).ok());
  return s;
}

TEST(RolloutTest, LayoutAndLogProbsMatchTrainingForward) {
  RolloutSetup s = MakeSetup(/*n=*/2, /*greedy=*/false);
  core::Batch prompts = MakePrompts(s.config.vocab_size, {3, 5, 1}, 5);
  auto out = s.rollout->Generate(prompts, 0, 1, false);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 6);
  const at::Tensor& ids = out->tensor("input_ids");
  ASSERT_EQ(ids.size(1), 11);
  // Prompts are repeated interleaved: rows 0,1 share prompt 0.
  EXPECT_TRUE(
      torch::equal(out->tensor("prompts")[0], prompts.tensor("input_ids")[0]));
  EXPECT_TRUE(
      torch::equal(out->tensor("prompts")[1], prompts.tensor("input_ids")[0]));
  // Response positions continue from the prompt's last real position.
  EXPECT_EQ(out->tensor("position_ids")[0][5].item<int64_t>(),
            3);  // prompt of 3 tokens
  EXPECT_EQ(out->tensor("position_ids")[2][5].item<int64_t>(),
            5);  // prompt of 5 tokens
  // Sampled-token log-probs equal the training model's recomputation.
  ActorOptions ao;
  ao.log_prob_micro.micro_batch_size = 6;
  Actor actor(s.policy, nullptr, ao, nullptr);
  auto lp = actor.ComputeLogProb(*out, false);
  ASSERT_TRUE(lp.ok());
  const at::Tensor mask = out->tensor("response_mask");
  EXPECT_LT(((lp->log_probs - out->tensor("rollout_log_probs")).abs() * mask)
                .max()
                .item<float>(),
            1e-4);
  // Response mask covers tokens up to and including EOS (id 2).
  for (int64_t r = 0; r < 6; ++r) {
    const int64_t len = mask[r].sum().item<float>();
    for (int64_t k = 0; k + 1 < len; ++k)
      EXPECT_NE(out->tensor("responses")[r][k].item<int64_t>(), 2);
  }
}

TEST(RolloutTest, SeedsDependOnGlobalIndexNotOnSharding) {
  RolloutSetup s = MakeSetup(2, false);
  core::Batch prompts = MakePrompts(s.config.vocab_size, {3, 5, 2, 4}, 5);
  auto whole = s.rollout->Generate(prompts, 0, 7, false);
  ASSERT_TRUE(whole.ok());
  auto halves = prompts.Chunk(2);
  auto a = s.rollout->Generate((*halves)[0], 0, 7, false);
  auto b = s.rollout->Generate((*halves)[1], 2, 7, false);
  auto joined = core::Batch::Concat(std::vector<core::Batch>{*a, *b});
  ASSERT_TRUE(joined.ok());
  EXPECT_TRUE(
      torch::equal(joined->tensor("responses"), whole->tensor("responses")));
  // A different step gives different samples.
  auto other = s.rollout->Generate(prompts, 0, 8, false);
  EXPECT_FALSE(
      torch::equal(other->tensor("responses"), whole->tensor("responses")));
}

TEST(RolloutTest, ValidationIsGreedyAndWeightSyncTakesEffect) {
  RolloutSetup s = MakeSetup(1, false);
  core::Batch prompts = MakePrompts(s.config.vocab_size, {4, 2}, 4);
  auto v1 = s.rollout->Generate(prompts, 0, 1, true);
  auto v2 = s.rollout->Generate(prompts, 0, 2, true);
  ASSERT_TRUE(v1.ok() && v2.ok());
  EXPECT_TRUE(torch::equal(v1->tensor("responses"), v2->tensor("responses")));
  // After syncing different weights the greedy output is that of the new
  // policy.
  auto other = models::CreateModel(s.config, 77);
  ASSERT_TRUE(s.rollout->SyncWeights(*other).ok());
  auto v3 = s.rollout->Generate(prompts, 0, 1, true);
  RolloutSetup fresh = MakeSetup(1, false);
  ASSERT_TRUE(fresh.rollout->SyncWeights(*other).ok());
  auto v4 = fresh.rollout->Generate(prompts, 0, 1, true);
  EXPECT_TRUE(torch::equal(v3->tensor("responses"), v4->tensor("responses")));
  EXPECT_TRUE(s.rollout->engine().sleeping());  // free_cache_engine
}

TEST(RolloutTest, BadPromptIsAnError) {
  RolloutSetup s = MakeSetup(1, true);
  core::Batch prompts =
      MakePrompts(s.config.vocab_size, {0, 2}, 3);  // empty prompt
  auto out = s.rollout->Generate(prompts, 10, 1, false);
  ASSERT_THAT(out, StatusIs(absl::StatusCode::kInvalidArgument,
                            "rollout prompt 10: empty prompt"));
  EXPECT_NE(out.status().message().find("rollout prompt 10"), std::string::npos)
      << out.status();
  // The engine still serves later requests.
  EXPECT_TRUE(
      s.rollout->Generate(MakePrompts(s.config.vocab_size, {2}, 3), 0, 1, false)
          .ok());
}

// The agent-loop path with the single-turn agent: greedy trajectories equal
// the plain path's, in the same layout, with __num_turns__ = 2; a missing
// raw_prompt column and an over-long agent prompt are errors.
TEST(RolloutTest, AgentLoopSingleTurnEqualsThePlainPathWhenGreedy) {
  models::Tokenizer tok = models::MakeBuiltinTokenizer();
  std::vector<std::string> questions = {"1+2=?", "10+20+30=?", "7*8=?"};
  const int64_t P = 40;
  at::Tensor ids = torch::zeros({3, P}, torch::kLong);
  at::Tensor mask = torch::zeros({3, P}, torch::kLong);
  std::vector<nlohmann::json> raw;
  for (int64_t b = 0; b < 3; ++b) {
    nlohmann::json messages =
        nlohmann::json::array({{{"role", "user"}, {"content", questions[b]}}});
    raw.push_back(messages);
    models::ChatRequest req;
    req.messages_json = messages.dump();
    req.add_generation_prompt = true;
    std::vector<int64_t> p = tok.Encode(*models::ApplyChatTemplate(tok, req));
    ASSERT_LE(static_cast<int64_t>(p.size()), P);
    for (size_t t = 0; t < p.size(); ++t) {
      ids[b][P - p.size() + t] = p[t];
      mask[b][P - p.size() + t] = 1;
    }
  }
  core::Batch prompts = *core::Batch::FromColumns(
      {{"input_ids", ids},
       {"attention_mask", mask},
       {"position_ids", (mask.cumsum(1) - 1).clamp_min(0)}},
      {{"raw_prompt", raw}});

  RolloutSetup plain = MakeSetup(/*n=*/1, /*greedy=*/true);
  RolloutSetup agent = MakeSetup(/*n=*/1, /*greedy=*/true);
  infer::agent::AgentLoopOptions lo;
  lo.response_length = 6;
  auto loop = infer::agent::AgentLoop::Create(lo, &tok, {}, {});
  ASSERT_TRUE(loop.ok()) << loop.status();
  RolloutOptions ro = agent.rollout->options();
  ro.agent_loop = std::shared_ptr<infer::agent::AgentLoop>(*std::move(loop));
  infer::EngineOptions e;
  e.num_kv_blocks = 64;
  e.max_model_len = 64;
  auto r = Rollout::Create(models::CreateModel(agent.config, 1234), e, ro);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE((*r)->SyncWeights(*plain.policy).ok());

  auto want = plain.rollout->Generate(prompts, 0, 1, /*validate=*/true);
  auto got = (*r)->Generate(prompts, 0, 1, /*validate=*/true);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  for (const char* key : {"prompts", "responses", "input_ids", "attention_mask",
                          "position_ids", "response_mask"}) {
    EXPECT_TRUE(torch::equal(got->tensor(key), want->tensor(key))) << key;
  }
  EXPECT_TRUE(torch::allclose(got->tensor("rollout_log_probs"),
                              want->tensor("rollout_log_probs"), 1e-5, 1e-6));
  EXPECT_EQ(got->non_tensor("__num_turns__")[2], 2);
  EXPECT_EQ(got->non_tensor("tool_call_counts")[0], 0);
  EXPECT_EQ((*r)->last_stats().agent_metrics.count(
                "agent_loop/generate_sequences/max"),
            1u);

  core::Batch no_raw = *prompts.Select(
      std::vector<std::string>{"input_ids", "attention_mask", "position_ids"},
      std::vector<std::string>{});
  EXPECT_THAT((*r)->Generate(no_raw, 0, 1, true).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "raw_prompt"));
  core::Batch narrow =
      *core::Batch::FromColumns({{"input_ids", ids.narrow(1, P - 4, 4)},
                                 {"attention_mask", mask.narrow(1, P - 4, 4)},
                                 {"position_ids", mask.narrow(1, P - 4, 4)}},
                                {{"raw_prompt", raw}});
  EXPECT_THAT((*r)->Generate(narrow, 5, 1, true).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "rollout prompt 5: the agent's prompt has"));
}

}  // namespace
}  // namespace verl::rl
