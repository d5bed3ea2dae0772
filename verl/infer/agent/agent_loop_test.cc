// File: verl/infer/agent/agent_loop_test.cc
//
// The agent loop against a scripted generator (exact ids, masks and
// log-probs of a two-tool trajectory; truncation; malformed and unknown
// calls; parallel calls; turn and length limits; interactions; a trajectory
// waiting for its tool does not hold back the others).
#include "verl/infer/agent/agent_loop.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "verl/core/file_util.h"
#include "verl/core/test_util.h"
#include "verl/models/tokenizer/tokenizer_builtin.h"

namespace verl::infer::agent {
namespace {

using core::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;

models::Tokenizer QwenToolTokenizer() {
  absl::StatusOr<std::string> tmpl = core::ReadFile(
      "verl/models/tokenizer/testdata/qwen2_5_chat_template.jinja");
  CHECK(tmpl.ok()) << tmpl.status();
  absl::StatusOr<models::Tokenizer> tok =
      models::Tokenizer::FromJson(models::BuiltinTokenizerJson(),
                                  models::BuiltinTokenizerConfigJson(), *tmpl);
  CHECK(tok.ok()) << tok.status();
  return *std::move(tok);
}

// Answers each turn with `script(decoded context)`; a turn takes
// `polls_per_turn` polls to finish. Log-prob of the k-th generated token is
// -(k+1)/100 so tests can tell model tokens apart.
class ScriptedGenerator : public TurnGenerator {
 public:
  ScriptedGenerator(const models::Tokenizer* tok,
                    std::function<std::string(const std::string&)> script)
      : tok_(tok), script_(std::move(script)) {}
  // Polls a turn takes (default 1) and a callback when one finishes, both by
  // decoded context.
  std::function<int(const std::string&)> polls_for;
  std::function<void(const std::string&)> on_done;

  absl::StatusOr<int64_t> Submit(std::vector<int64_t> ids,
                                 const SamplingParams& params) override {
    max_tokens_.push_back(params.max_tokens);
    const int polls = polls_for ? polls_for(tok_->Decode(ids)) : 1;
    pending_.push_back({next_, std::move(ids), polls});
    return next_++;
  }
  std::vector<std::pair<int64_t, TurnOutput>> Poll() override {
    std::vector<std::pair<int64_t, TurnOutput>> done;
    std::vector<Pending> keep;
    for (Pending& p : pending_) {
      if (--p.polls_left > 0) {
        keep.push_back(std::move(p));
        continue;
      }
      TurnOutput out;
      out.token_ids = tok_->Encode(script_(tok_->Decode(p.ids)));
      out.token_ids.push_back(tok_->eos_token_id());
      for (size_t k = 0; k < out.token_ids.size(); ++k) {
        out.logprobs.push_back(-static_cast<float>(k + 1) / 100.0f);
      }
      if (on_done) on_done(tok_->Decode(p.ids));
      contexts_.push_back(p.ids);
      done.emplace_back(p.ticket, std::move(out));
    }
    pending_ = std::move(keep);
    return done;
  }
  const std::vector<std::vector<int64_t>>& contexts() const {
    return contexts_;
  }
  const std::vector<int64_t>& max_tokens() const { return max_tokens_; }

 private:
  struct Pending {
    int64_t ticket;
    std::vector<int64_t> ids;
    int polls_left;
  };
  const models::Tokenizer* tok_;
  std::function<std::string(const std::string&)> script_;
  int64_t next_ = 0;
  std::vector<Pending> pending_;
  std::vector<std::vector<int64_t>> contexts_;
  std::vector<int64_t> max_tokens_;
};

// A tool computed in process: {"a", "b"} → "a+b"; reward 0.5 per call.
class AddTool : public Tool {
 public:
  explicit AddTool(std::string name = "add",
                   std::function<void()> during = nullptr)
      : Tool(Spec(name)), during_(std::move(during)) {}
  static ToolSpec Spec(const std::string& name) {
    ToolSpec s;
    s.class_name = "test";
    s.tool_schema = {{"type", "function"},
                     {"function",
                      {{"name", name},
                       {"description", "adds"},
                       {"parameters",
                        {{"type", "object"},
                         {"properties", {{"a", {{"type", "integer"}}}}}}}}}};
    return s;
  }
  absl::StatusOr<ToolExecution> Execute(const std::string&,
                                        const Json& p) override {
    if (during_) during_();
    ToolExecution e;
    e.text = std::to_string(p.value("a", 0) + p.value("b", 0));
    e.reward = 0.5;
    return e;
  }

 private:
  std::function<void()> during_;
};

std::string Call(const std::string& name, int a, int b) {
  return absl::StrCat("<tool_call>\n{\"name\": \"", name,
                      "\", \"arguments\": {\"a\": ", a, ", \"b\": ", b,
                      "}}\n</tool_call>");
}

AgentSample Sample(const std::string& question,
                   std::string agent = "tool_agent") {
  AgentSample s;
  s.agent_name = std::move(agent);
  s.messages = Json::array({{{"role", "user"}, {"content", question}}});
  return s;
}

std::unique_ptr<AgentLoop> MakeLoop(
    const models::Tokenizer* tok, AgentLoopOptions options,
    std::vector<std::unique_ptr<Tool>> tools = {},
    std::map<std::string, std::unique_ptr<Interaction>> interactions = {}) {
  if (tools.empty()) tools.push_back(std::make_unique<AddTool>());
  auto loop = AgentLoop::Create(std::move(options), tok, std::move(tools),
                                std::move(interactions));
  CHECK(loop.ok()) << loop.status();
  return *std::move(loop);
}

// Ids of chat-templated non-model messages as the loop appends them.
std::vector<int64_t> EnvIds(const models::Tokenizer& tok, const AgentLoop& loop,
                            const Json& messages) {
  models::ChatRequest req;
  req.messages_json = messages.dump();
  req.add_generation_prompt = true;
  auto text = models::ApplyChatTemplate(tok, req);
  CHECK(text.ok());
  std::vector<int64_t> ids = tok.Encode(*text);
  ids.erase(ids.begin(), ids.begin() + loop.system_prompt_ids().size());
  return ids;
}

TEST(AgentLoopTest, SystemPromptIsTheTemplatePrefix) {
  models::Tokenizer tok = QwenToolTokenizer();
  auto loop = MakeLoop(&tok, {});
  EXPECT_EQ(tok.Decode(loop->system_prompt_ids()),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You "
            "are a helpful assistant.<|im_end|>\n");
}

TEST(AgentLoopTest, TwoToolTrajectoryExactIdsMasksAndLogprobs) {
  models::Tokenizer tok = QwenToolTokenizer();
  AgentLoopOptions opt;
  opt.response_length = 400;
  auto loop = MakeLoop(&tok, opt);
  const std::string turn1 = "Let me add. " + Call("add", 2, 3);
  const std::string turn2 = Call("add", 5, 4);
  const std::string turn3 = "The answer is 9.";
  ScriptedGenerator gen(&tok, [&](const std::string& ctx) {
    if (absl::StrContains(ctx, "<tool_response>\n9")) return turn3;
    if (absl::StrContains(ctx, "<tool_response>\n5")) return turn2;
    return turn1;
  });
  auto results = loop->Run({Sample("2+3+4?")}, gen);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  const AgentOutput& out = *results[0];

  // The prompt: the template with the tool schemas.
  models::ChatRequest req;
  req.messages_json = Sample("2+3+4?").messages.dump();
  req.tools_json = loop->tool_schemas().dump();
  req.add_generation_prompt = true;
  EXPECT_EQ(out.prompt_ids, tok.Encode(*models::ApplyChatTemplate(tok, req)));
  EXPECT_THAT(tok.Decode(out.prompt_ids), HasSubstr("# Tools"));

  auto model = [&](const std::string& s) {
    std::vector<int64_t> ids = tok.Encode(s);
    ids.push_back(tok.eos_token_id());
    return ids;
  };
  const std::vector<int64_t> m1 = model(turn1), m2 = model(turn2),
                             m3 = model(turn3);
  const std::vector<int64_t> t1 =
      EnvIds(tok, *loop, Json::array({{{"role", "tool"}, {"content", "5"}}}));
  const std::vector<int64_t> t2 =
      EnvIds(tok, *loop, Json::array({{{"role", "tool"}, {"content", "9"}}}));
  EXPECT_EQ(tok.Decode(t1),
            "<|im_start|>user\n<tool_response>\n5\n</tool_response><|im_end|>"
            "\n<|im_start|>assistant\n");
  std::vector<int64_t> want_ids, want_mask;
  std::vector<float> want_lp;
  for (const auto* part : {&m1, &t1, &m2, &t2, &m3}) {
    const bool is_model = part == &m1 || part == &m2 || part == &m3;
    want_ids.insert(want_ids.end(), part->begin(), part->end());
    want_mask.insert(want_mask.end(), part->size(), is_model ? 1 : 0);
    for (size_t k = 0; k < part->size(); ++k) {
      want_lp.push_back(is_model ? -static_cast<float>(k + 1) / 100.0f : 0.0f);
    }
  }
  EXPECT_EQ(out.response_ids, want_ids);
  EXPECT_EQ(out.response_mask, want_mask);
  EXPECT_EQ(out.response_logprobs, want_lp);
  EXPECT_EQ(out.num_turns, 2 + 3 + 1);
  EXPECT_THAT(out.tool_rewards, ElementsAre(0.5, 0.5));
  EXPECT_EQ(out.tool_stats.at("add").calls, 2);
  EXPECT_EQ(out.tool_stats.at("add").failures, 0);
  // Each turn's context is the previous context + what was appended.
  ASSERT_EQ(gen.contexts().size(), 3u);
  std::vector<int64_t> ctx = out.prompt_ids;
  EXPECT_EQ(gen.contexts()[0], ctx);
  ctx.insert(ctx.end(), m1.begin(), m1.end());
  ctx.insert(ctx.end(), t1.begin(), t1.end());
  EXPECT_EQ(gen.contexts()[1], ctx);
  // The same trajectory written as messages lays out to the same ids and
  // mask (what a multi-turn warm start trains on).
  auto laid = loop->LayOutTrajectory(
      Json::array({{{"role", "assistant"}, {"content", turn1}},
                   {{"role", "tool"}, {"content", "5"}},
                   {{"role", "assistant"}, {"content", turn2}},
                   {{"role", "tool"}, {"content", "9"}},
                   {{"role", "assistant"}, {"content", turn3}}}));
  ASSERT_TRUE(laid.ok()) << laid.status();
  EXPECT_EQ(laid->ids, out.response_ids);
  EXPECT_EQ(laid->mask, out.response_mask);
  EXPECT_THAT(
      loop->LayOutTrajectory(Json::array({{{"role", "tool"}}})).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, "\"content\""));
  // The remaining budget is the turn's max_tokens.
  EXPECT_EQ(gen.max_tokens()[0], 400);
  EXPECT_EQ(gen.max_tokens()[1],
            400 - static_cast<int64_t>(m1.size() + t1.size()));
}

TEST(AgentLoopTest, SingleTurnAgentGeneratesOnceWithoutTools) {
  models::Tokenizer tok = QwenToolTokenizer();
  auto loop = MakeLoop(&tok, {});
  ScriptedGenerator gen(&tok,
                        [](const std::string&) { return Call("add", 1, 1); });
  auto results = loop->Run({Sample("hi", "single_turn_agent")}, gen);
  ASSERT_TRUE(results[0].ok());
  EXPECT_EQ(results[0]->num_turns, 2);
  EXPECT_THAT(tok.Decode(results[0]->prompt_ids),
              ::testing::Not(HasSubstr("# Tools")));
  EXPECT_EQ(gen.contexts().size(), 1u);
  for (int64_t m : results[0]->response_mask) EXPECT_EQ(m, 1);
}

TEST(AgentLoopTest, ToolResponseTruncatedOnTheConfiguredSide) {
  models::Tokenizer tok = QwenToolTokenizer();
  for (auto [side, want] : std::vector<std::pair<TruncateSide, std::string>>{
           // 12345678 + 900000223 = 912345901
           {TruncateSide::kLeft, "9123...(truncated)"},
           {TruncateSide::kRight, "(truncated)...5901"},
           {TruncateSide::kMiddle, "91...(truncated)...01"}}) {
    AgentLoopOptions opt;
    opt.max_tool_response_length = 4;
    opt.truncate_side = side;
    opt.max_assistant_turns = 2;
    auto loop = MakeLoop(&tok, opt);
    ScriptedGenerator gen(&tok, [](const std::string&) {
      return Call("add", 12345678, 900000223);
    });
    auto results = loop->Run({Sample("big")}, gen);
    ASSERT_TRUE(results[0].ok());
    EXPECT_THAT(tok.Decode(results[0]->response_ids),
                HasSubstr("<tool_response>\n" + want + "\n</tool_response>"));
  }
}

TEST(AgentLoopTest, MalformedAndUnknownCallsAnswerTheModel) {
  models::Tokenizer tok = QwenToolTokenizer();
  AgentLoopOptions opt;
  opt.max_assistant_turns = 2;
  opt.max_parallel_calls = 4;
  auto loop = MakeLoop(&tok, opt);
  ScriptedGenerator gen(&tok, [](const std::string&) {
    return "<tool_call>{not json</tool_call>" + Call("mul", 1, 2);
  });
  auto results = loop->Run({Sample("x")}, gen);
  ASSERT_TRUE(results[0].ok());
  const std::string text = tok.Decode(results[0]->response_ids);
  EXPECT_THAT(text,
              HasSubstr("Error when executing tool: no tool named 'mul'"));
  EXPECT_THAT(text, HasSubstr("Error when executing tool: "));
  EXPECT_EQ(results[0]->malformed_calls, 1);
  EXPECT_EQ(results[0]->tool_stats.at("mul").failures, 1);
  EXPECT_EQ(results[0]->num_turns, 2 + 1 + 1);
}

TEST(AgentLoopTest, ParallelCallsRunConcurrentlyUpToTheLimit) {
  models::Tokenizer tok = QwenToolTokenizer();
  // Each call waits (up to 5 s) until two calls are inside the tool at once:
  // sequential execution would be seen as `overlapped == false`.
  std::mutex mu;
  std::condition_variable cv;
  int inside = 0;
  std::atomic<bool> overlapped{false};
  std::atomic<int> executed{0};
  auto during = [&] {
    ++executed;
    std::unique_lock<std::mutex> lock(mu);
    ++inside;
    cv.notify_all();
    if (cv.wait_for(lock, std::chrono::seconds(5),
                    [&] { return inside >= 2; })) {
      overlapped = true;
    }
  };
  AgentLoopOptions opt;
  opt.max_parallel_calls = 2;
  opt.max_assistant_turns = 2;
  std::vector<std::unique_ptr<Tool>> tools;
  tools.push_back(std::make_unique<AddTool>("add", during));
  auto loop = MakeLoop(&tok, opt, std::move(tools));
  ScriptedGenerator gen(&tok, [](const std::string&) {
    return Call("add", 1, 1) + Call("add", 2, 2) + Call("add", 3, 3);
  });
  auto results = loop->Run({Sample("x")}, gen);
  ASSERT_TRUE(results[0].ok());
  EXPECT_TRUE(overlapped);
  EXPECT_EQ(executed.load(), 2);  // the third call is over the limit
  EXPECT_THAT(results[0]->tool_rewards, ElementsAre(0.5, 0.5));
}

TEST(AgentLoopTest, TurnLimitsEndTheTrajectory) {
  models::Tokenizer tok = QwenToolTokenizer();
  for (auto [assistant, user, want_gen] :
       std::vector<std::tuple<int, int, int>>{
           {1, 0, 1}, {3, 0, 3}, {0, 2, 3}}) {
    AgentLoopOptions opt;
    opt.max_assistant_turns = assistant;
    opt.max_user_turns = user;
    opt.response_length = 2000;
    auto loop = MakeLoop(&tok, opt);
    ScriptedGenerator gen(&tok,
                          [](const std::string&) { return Call("add", 1, 1); });
    auto results = loop->Run({Sample("loop")}, gen);
    ASSERT_TRUE(results[0].ok());
    EXPECT_EQ(static_cast<int>(gen.contexts().size()), want_gen)
        << assistant << " " << user;
  }
}

TEST(AgentLoopTest, ResponseLengthBudget) {
  models::Tokenizer tok = QwenToolTokenizer();
  AgentLoopOptions opt;
  opt.response_length = 60;
  auto loop = MakeLoop(&tok, opt);
  ScriptedGenerator gen(&tok,
                        [](const std::string&) { return Call("add", 1, 1); });
  auto results = loop->Run({Sample("loop")}, gen);
  ASSERT_TRUE(results[0].ok());
  EXPECT_LE(results[0]->response_ids.size(), 60u);
  EXPECT_EQ(results[0]->response_ids.size(), results[0]->response_mask.size());
  EXPECT_EQ(results[0]->response_ids.size(),
            results[0]->response_logprobs.size());
  // A tool answer that would cross the budget is not appended: the
  // trajectory ends on a model turn.
  EXPECT_EQ(results[0]->response_mask.back(), 1);
}

// Says "wrong" until the assistant's message contains "42".
class QuizInteraction : public Interaction {
 public:
  absl::StatusOr<std::string> Start(const Json& kwargs) override {
    std::lock_guard<std::mutex> lock(mu_);
    started_.push_back(kwargs.value("ground_truth", ""));
    return std::to_string(started_.size());
  }
  absl::StatusOr<InteractionTurn> Respond(const std::string&,
                                          const Json& messages) override {
    InteractionTurn t;
    const std::string last = messages.back()["content"];
    const bool right = absl::StrContains(last, "42");
    t.should_terminate = right;
    t.response = right ? "Your response is correct!" : "Try again.";
    t.reward = right ? 1.0 : 0.0;
    return t;
  }
  void Finalize(const std::string&) override { ++finalized; }
  std::atomic<int> finalized{0};

 private:
  std::mutex mu_;
  std::vector<std::string> started_;
};

TEST(AgentLoopTest, InteractionFeedbackUntilCorrect) {
  models::Tokenizer tok = QwenToolTokenizer();
  auto quiz = std::make_unique<QuizInteraction>();
  QuizInteraction* q = quiz.get();
  std::map<std::string, std::unique_ptr<Interaction>> interactions;
  interactions["quiz"] = std::move(quiz);
  AgentLoopOptions opt;
  opt.response_length = 1000;
  auto loop = MakeLoop(&tok, opt, {}, std::move(interactions));
  ScriptedGenerator gen(&tok, [](const std::string& ctx) {
    return absl::StrContains(ctx, "Try again.") ? std::string("42")
                                                : std::string("41");
  });
  AgentSample s = Sample("6*7?");
  s.interaction_kwargs = {{"name", "quiz"}, {"ground_truth", "42"}};
  AgentSample bad = Sample("?");
  bad.interaction_kwargs = {{"name", "nope"}};
  auto results = loop->Run({s, bad}, gen);
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  EXPECT_THAT(results[0]->turn_scores, ElementsAre(0.0, 1.0));
  EXPECT_EQ(results[0]->num_turns, 2 + 2 + 1);
  EXPECT_THAT(tok.Decode(results[0]->response_ids),
              HasSubstr("<|im_start|>user\nTry again.<|im_end|>"));
  EXPECT_THAT(results[1].status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "interaction 'nope' is not configured"));
  EXPECT_EQ(q->finalized.load(), 1);
}

TEST(AgentLoopTest, WaitingForAToolDoesNotBlockOtherTrajectories) {
  models::Tokenizer tok = QwenToolTokenizer();
  // "slow" calls a tool after its first turn (1 poll); the tool returns only
  // once "fast" (one turn of 3 polls) has finished, or after 5 s. Were the
  // loop to wait for the tool before polling again, fast could not finish.
  std::atomic<bool> fast_done{false};
  std::atomic<bool> saw_fast_done{false};
  auto during = [&] {
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!fast_done && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    saw_fast_done = fast_done.load();
  };
  std::vector<std::unique_ptr<Tool>> tools;
  tools.push_back(std::make_unique<AddTool>("add", during));
  AgentLoopOptions opt;
  opt.max_assistant_turns = 2;
  auto loop = MakeLoop(&tok, opt, std::move(tools));
  ScriptedGenerator gen(&tok, [](const std::string& ctx) -> std::string {
    return absl::StrContains(ctx, "fast") ? "done" : Call("add", 1, 1);
  });
  gen.polls_for = [](const std::string& ctx) {
    return absl::StrContains(ctx, "fast") ? 3 : 1;
  };
  gen.on_done = [&](const std::string& ctx) {
    if (absl::StrContains(ctx, "fast")) fast_done = true;
  };
  auto results =
      loop->Run({Sample("slow"), Sample("fast", "single_turn_agent")}, gen);
  ASSERT_TRUE(results[0].ok());
  ASSERT_TRUE(results[1].ok());
  EXPECT_TRUE(saw_fast_done);
}

TEST(AgentLoopTest, BadSamplesAreTheirOwnErrors) {
  models::Tokenizer tok = QwenToolTokenizer();
  auto loop = MakeLoop(&tok, {});
  ScriptedGenerator gen(&tok, [](const std::string&) { return "ok"; });
  AgentSample empty;
  empty.messages = Json::array();
  auto results =
      loop->Run({Sample("q", "react_agent"), empty, Sample("fine")}, gen);
  EXPECT_THAT(results[0].status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "agent_name 'react_agent' is not an agent loop"));
  EXPECT_THAT(results[1].status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "non-empty list"));
  EXPECT_TRUE(results[2].ok());
}

// Names from agent_loop_config_path pick the built-in loop they alias, per
// row and as the default; unregistered names stay errors naming the options.
TEST(AgentLoopTest, RegisteredLoopNamesAliasBuiltInLoops) {
  models::Tokenizer tok = QwenToolTokenizer();
  AgentLoopOptions opt;
  opt.agent_loops = {{"calc_agent", "tool_agent"},
                     {"plain", "single_turn_agent"}};
  opt.default_agent_loop = "calc_agent";
  std::vector<std::unique_ptr<Tool>> tools;
  tools.push_back(std::make_unique<AddTool>());
  absl::StatusOr<std::unique_ptr<AgentLoop>> loop =
      AgentLoop::Create(opt, &tok, std::move(tools), {});
  ASSERT_TRUE(loop.ok()) << loop.status();
  ScriptedGenerator gen(&tok, [](const std::string& context) {
    return context.find("<tool_response>") == std::string::npos
               ? Call("add", 1, 2)
               : "3";
  });
  auto results =
      (*loop)->Run({Sample("q", ""), Sample("q", "plain"),
                    Sample("q", "tool_agent"), Sample("q", "react_agent")},
                   gen);
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  EXPECT_EQ(results[0]->num_turns, 4);  // default: calc_agent = tool_agent
  ASSERT_TRUE(results[1].ok());
  EXPECT_EQ(results[1]->num_turns, 2);  // plain = single_turn_agent
  ASSERT_TRUE(results[2].ok());
  EXPECT_EQ(results[2]->num_turns, 4);  // built-in names stay registered
  EXPECT_THAT(results[3].status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "'react_agent' is not an agent loop here (calc_agent, "
                       "plain, single_turn_agent, tool_agent)"));
  opt.agent_loops = {{"x", "react"}};
  opt.default_agent_loop = "x";
  EXPECT_THAT(AgentLoop::Create(opt, &tok, {}, {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "'react' is not a built-in loop"));
}

TEST(AgentLoopTest, CreateRefusesBadOptions) {
  models::Tokenizer tok = QwenToolTokenizer();
  AgentLoopOptions opt;
  opt.default_agent_loop = "react";
  EXPECT_THAT(AgentLoop::Create(opt, &tok, {}, {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "rollout.agent.default_agent_loop"));
  std::vector<std::unique_ptr<Tool>> twice;
  twice.push_back(std::make_unique<AddTool>());
  twice.push_back(std::make_unique<AddTool>());
  EXPECT_THAT(AgentLoop::Create({}, &tok, std::move(twice), {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "appears twice"));
}

}  // namespace
}  // namespace verl::infer::agent
