// File: verl/infer/agent/agent_loop.cc
#include "verl/infer/agent/agent_loop.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace verl::infer::agent {

using Json = nlohmann::ordered_json;

namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

// "a, b, c" of the registered loop names, for errors.
std::string LoopNames(const std::map<std::string, std::string>& loops) {
  std::vector<std::string> names;
  for (const auto& [name, builtin] : loops) names.push_back(name);
  return absl::StrJoin(names, ", ");
}

}  // namespace

// A fixed set of worker threads running queued jobs.
class AgentLoop::Pool {
 public:
  explicit Pool(int threads) {
    for (int i = 0; i < std::max(1, threads); ++i) {
      workers_.emplace_back([this] { Work(); });
    }
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& w : workers_) w.join();
  }
  void Schedule(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

 private:
  void Work() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

enum class AgentState { kGenerating, kProcessingTools, kInteracting, kDone };

struct AgentLoop::Trajectory {
  const AgentSample* sample = nullptr;
  bool tool_agent = false;
  AgentState state = AgentState::kGenerating;
  absl::Status error;
  Json messages;
  std::vector<int64_t> ids;  // prompt, then every turn appended
  int64_t prompt_len = 0;
  AgentOutput out;
  int64_t assistant_turns = 0;
  int64_t user_turns = 0;
  std::vector<FunctionCall> calls;
  std::vector<std::string> malformed;
  Interaction* interaction = nullptr;
  std::string interaction_id;
  std::chrono::steady_clock::time_point submitted;

  int64_t response_len() const {
    return static_cast<int64_t>(out.response_mask.size());
  }
};

absl::StatusOr<int64_t> EngineTurnGenerator::Submit(
    std::vector<int64_t> context_ids, const SamplingParams& params) {
  if (params.n != 1) {
    return absl::InvalidArgumentError("agent turns are generated with n = 1");
  }
  return engine_->AddRequest(std::move(context_ids), params);
}

std::vector<std::pair<int64_t, TurnOutput>> EngineTurnGenerator::Poll() {
  std::vector<std::pair<int64_t, TurnOutput>> done;
  for (RequestOutput& r : engine_->Step()) {
    CompletionOutput& c = r.outputs.at(0);
    TurnOutput turn;
    turn.token_ids = std::move(c.token_ids);
    turn.logprobs = std::move(c.logprobs);
    turn.num_preempted = c.num_preemptions;
    done.emplace_back(r.request_id, std::move(turn));
  }
  return done;
}

absl::StatusOr<std::unique_ptr<AgentLoop>> AgentLoop::Create(
    AgentLoopOptions options, const models::Tokenizer* tokenizer,
    std::vector<std::unique_ptr<Tool>> tools,
    std::map<std::string, std::unique_ptr<Interaction>> interactions) {
  for (const char* builtin : {"single_turn_agent", "tool_agent"}) {
    options.agent_loops.emplace(builtin, builtin);
  }
  for (const auto& [name, builtin] : options.agent_loops) {
    if (builtin != "single_turn_agent" && builtin != "tool_agent") {
      return absl::InvalidArgumentError(
          absl::StrCat("agent loop '", name, "': '", builtin,
                       "' is not a built-in loop (single_turn_agent, "
                       "tool_agent)"));
    }
  }
  if (!options.agent_loops.count(options.default_agent_loop)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rollout.agent.default_agent_loop: '", options.default_agent_loop,
        "' is not an agent loop here (", LoopNames(options.agent_loops), ")"));
  }
  if (options.response_length <= 0 || options.max_parallel_calls <= 0 ||
      options.max_tool_response_length <= 0) {
    return absl::InvalidArgumentError(
        "agent loop: response_length, max_parallel_calls and "
        "max_tool_response_length must be > 0");
  }
  if (!tokenizer->has_chat_template()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "agent loop: the tokenizer (", tokenizer->source(),
        ") has no chat template; multi-turn rollouts template every turn"));
  }
  std::map<std::string, std::unique_ptr<Tool>> by_name;
  for (auto& tool : tools) {
    const std::string name = tool->spec().name();
    if (by_name.count(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("agent loop: tool name '", name, "' appears twice"));
    }
    by_name[name] = std::move(tool);
  }
  std::unique_ptr<AgentLoop> loop(new AgentLoop(std::move(options), tokenizer,
                                                {}, std::move(interactions)));
  for (auto& [name, tool] : by_name) {
    loop->tool_schemas_.push_back(tool->spec().tool_schema);
  }
  loop->tools_ = std::move(by_name);
  // verl's initialize_system_prompt: template([user ""]) minus the part that
  // a second user message adds.
  Json one = Json::array({{{"role", "user"}, {"content", ""}}});
  Json two = Json::array({one[0], one[0]});
  models::ChatRequest req;
  req.kwargs_json = loop->options_.apply_chat_template_kwargs;
  req.messages_json = one.dump();
  absl::StatusOr<std::string> t1 = loop->formatter_.Apply(req);
  if (!t1.ok()) return t1.status();
  req.messages_json = two.dump();
  absl::StatusOr<std::string> t2 = loop->formatter_.Apply(req);
  if (!t2.ok()) return t2.status();
  const std::vector<int64_t> ids1 = tokenizer->Encode(*t1);
  const std::vector<int64_t> ids2 = tokenizer->Encode(*t2);
  const size_t per_message = ids2.size() - ids1.size();
  if (ids2.size() <= ids1.size() || per_message > ids1.size()) {
    return absl::InvalidArgumentError(
        "agent loop: the chat template's system prompt cannot be found "
        "(two user messages do not template longer than one)");
  }
  loop->system_prompt_ids_.assign(ids1.begin(), ids1.end() - per_message);
  return loop;
}

AgentLoop::AgentLoop(
    AgentLoopOptions options, const models::Tokenizer* tokenizer,
    std::vector<std::unique_ptr<Tool>>,
    std::map<std::string, std::unique_ptr<Interaction>> interactions)
    : options_(std::move(options)),
      tokenizer_(tokenizer),
      formatter_(*tokenizer),
      interactions_(std::move(interactions)),
      pool_(std::make_unique<Pool>(options_.num_workers)) {}

AgentLoop::~AgentLoop() = default;

absl::StatusOr<std::vector<int64_t>> AgentLoop::Template(
    const Json& messages, bool with_tools) const {
  models::ChatRequest req;
  req.messages_json = messages.dump();
  if (with_tools && !tool_schemas_.empty()) {
    req.tools_json = tool_schemas_.dump();
  }
  req.add_generation_prompt = true;
  req.kwargs_json = options_.apply_chat_template_kwargs;
  absl::StatusOr<std::string> text = formatter_.Apply(req);
  if (!text.ok()) return text.status();
  return tokenizer_->Encode(*text);
}

absl::Status AgentLoop::Start(Trajectory& t) {
  const AgentSample& s = *t.sample;
  const std::string& name =
      s.agent_name.empty() ? options_.default_agent_loop : s.agent_name;
  auto loop = options_.agent_loops.find(name);
  if (loop == options_.agent_loops.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("agent_name '", name, "' is not an agent loop here (",
                     LoopNames(options_.agent_loops), ")"));
  }
  t.tool_agent = loop->second == "tool_agent";
  if (!s.messages.is_array() || s.messages.empty()) {
    return absl::InvalidArgumentError(
        "the prompt must be a non-empty list of chat messages");
  }
  t.messages = s.messages;
  if (t.tool_agent && !interactions_.empty()) {
    const Json& kw = s.interaction_kwargs;
    if (!kw.is_object() || !kw.contains("name") || !kw["name"].is_string()) {
      return absl::InvalidArgumentError(
          "extra_info.interaction_kwargs.name is required when "
          "rollout.multi_turn.interaction_config_path is set");
    }
    auto it = interactions_.find(kw["name"].get<std::string>());
    if (it == interactions_.end()) {
      std::string known;
      for (const auto& [n, i] : interactions_) {
        absl::StrAppend(&known, known.empty() ? "" : ", ", n);
      }
      return absl::InvalidArgumentError(
          absl::StrCat("interaction '", kw["name"].get<std::string>(),
                       "' is not configured (configured: ", known, ")"));
    }
    t.interaction = it->second.get();
    absl::StatusOr<std::string> id = t.interaction->Start(kw);
    if (!id.ok()) return id.status();
    t.interaction_id = *id;
  }
  absl::StatusOr<std::vector<int64_t>> ids = Template(t.messages, t.tool_agent);
  if (!ids.ok()) return ids.status();
  t.ids = *std::move(ids);
  t.prompt_len = static_cast<int64_t>(t.ids.size());
  return absl::OkStatus();
}

void AgentLoop::AfterGeneration(Trajectory& t, TurnOutput turn) {
  t.out.generate_s += SecondsSince(t.submitted);
  t.out.num_preempted += turn.num_preempted;
  ++t.assistant_turns;
  const std::vector<int64_t> response = turn.token_ids;
  t.ids.insert(t.ids.end(), response.begin(), response.end());
  t.out.response_mask.insert(t.out.response_mask.end(), response.size(), 1);
  turn.logprobs.resize(response.size(), 0.0f);
  t.out.response_logprobs.insert(t.out.response_logprobs.end(),
                                 turn.logprobs.begin(), turn.logprobs.end());
  t.state = AgentState::kDone;
  if (!t.tool_agent || t.response_len() >= options_.response_length) return;
  if (options_.max_assistant_turns > 0 &&
      t.assistant_turns >= options_.max_assistant_turns) {
    return;
  }
  if (options_.max_user_turns > 0 && t.user_turns >= options_.max_user_turns) {
    return;
  }
  ParsedTurn parsed = ParseHermesToolCalls(tokenizer_->Decode(response));
  t.calls = std::move(parsed.calls);
  t.malformed = std::move(parsed.errors);
  if (t.interaction != nullptr) {
    t.messages.push_back(
        {{"role", "assistant"},
         {"content", tokenizer_->Decode(response, /*skip_special=*/true)}});
  }
  if (!t.calls.empty() || !t.malformed.empty()) {
    t.state = AgentState::kProcessingTools;
  } else if (t.interaction != nullptr) {
    t.state = AgentState::kInteracting;
  }
}

AgentLoop::ToolAnswer AgentLoop::CallTool(const Json& tools_kwargs,
                                          const FunctionCall& call) {
  const auto start = std::chrono::steady_clock::now();
  ToolAnswer answer;
  auto it = tools_.find(call.name);
  if (it == tools_.end()) {
    answer.text = absl::StrCat("Error when executing tool: no tool named '",
                               call.name, "'");
  } else {
    Tool& tool = *it->second;
    Json create_kwargs = Json::object();
    if (tools_kwargs.is_object() && tools_kwargs.contains(call.name) &&
        tools_kwargs[call.name].is_object() &&
        tools_kwargs[call.name].contains("create_kwargs")) {
      create_kwargs = tools_kwargs[call.name]["create_kwargs"];
    }
    absl::StatusOr<std::string> id = tool.Create(create_kwargs);
    absl::StatusOr<ToolExecution> r = absl::UnknownError("not run");
    if (id.ok()) {
      r = tool.Execute(*id, Json::parse(call.arguments, nullptr, false));
      tool.Release(*id);
    } else {
      r = id.status();
    }
    if (!r.ok()) {
      answer.text =
          absl::StrCat("Error when executing tool: ", r.status().message());
    } else {
      answer.text = std::move(r->text);
      answer.reward = r->reward;
      answer.failed = false;
    }
  }
  answer.text = TruncateToolResponse(
      answer.text, options_.max_tool_response_length, options_.truncate_side);
  answer.seconds = SecondsSince(start);
  return answer;
}

void AgentLoop::ProcessTools(Trajectory& t) {
  const auto start = std::chrono::steady_clock::now();
  // Well-formed calls first, then one error answer per malformed block;
  // at most max_parallel_calls of them, run concurrently.
  const size_t limit = static_cast<size_t>(options_.max_parallel_calls);
  const size_t n_calls = std::min(t.calls.size(), limit);
  const size_t n_errors = std::min(t.malformed.size(), limit - n_calls);
  std::vector<ToolAnswer> answers(n_calls);
  {
    std::vector<std::thread> extra;
    auto run = [&](size_t i) {
      answers[i] = CallTool(t.sample->tools_kwargs, t.calls[i]);
    };
    for (size_t i = 1; i < n_calls; ++i) extra.emplace_back(run, i);
    if (n_calls > 0) run(0);
    for (std::thread& th : extra) th.join();
  }
  Json messages = Json::array();
  for (size_t i = 0; i < n_calls; ++i) {
    ToolCallStats& stats = t.out.tool_stats[t.calls[i].name];
    ++stats.calls;
    stats.failures += answers[i].failed ? 1 : 0;
    stats.seconds += answers[i].seconds;
    messages.push_back({{"role", "tool"}, {"content", answers[i].text}});
    t.out.tool_rewards.push_back(answers[i].reward);
  }
  for (size_t i = 0; i < n_errors; ++i) {
    messages.push_back(
        {{"role", "tool"},
         {"content",
          TruncateToolResponse(
              absl::StrCat("Error when executing tool: ", t.malformed[i]),
              options_.max_tool_response_length, options_.truncate_side)}});
  }
  t.out.malformed_calls += static_cast<int64_t>(t.malformed.size());
  t.out.tool_calls_s += SecondsSince(start);
  for (const Json& m : messages) t.messages.push_back(m);
  if (!AppendEnvironmentTurn(t, messages, /*stop_when_over_budget=*/true)) {
    t.state = AgentState::kDone;
    return;
  }
  ++t.user_turns;
  t.state = AgentState::kGenerating;
}

void AgentLoop::Interact(Trajectory& t) {
  absl::StatusOr<InteractionTurn> turn =
      t.interaction->Respond(t.interaction_id, t.messages);
  if (!turn.ok()) {
    t.error = turn.status();
    t.state = AgentState::kDone;
    return;
  }
  ++t.user_turns;
  Json message = {{"role", "user"}, {"content", turn->response}};
  t.messages.push_back(message);
  if (turn->reward.has_value()) t.out.turn_scores.push_back(*turn->reward);
  AppendEnvironmentTurn(t, Json::array({message}),
                        /*stop_when_over_budget=*/false);
  t.state =
      turn->should_terminate ? AgentState::kDone : AgentState::kGenerating;
}

absl::StatusOr<std::vector<int64_t>> AgentLoop::EnvironmentTurnIds(
    const Json& messages) const {
  absl::StatusOr<std::vector<int64_t>> ids = Template(messages, false);
  if (!ids.ok()) return ids;
  std::vector<int64_t>& v = *ids;
  const size_t skip = std::min(v.size(), system_prompt_ids_.size());
  v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(skip));
  return ids;
}

absl::StatusOr<AgentLoop::LaidOut> AgentLoop::LayOutTrajectory(
    const Json& messages) const {
  if (!messages.is_array()) {
    return absl::InvalidArgumentError("a trajectory is a list of messages");
  }
  LaidOut out;
  Json pending = Json::array();
  auto flush = [&]() -> absl::Status {
    if (pending.empty()) return absl::OkStatus();
    absl::StatusOr<std::vector<int64_t>> env = EnvironmentTurnIds(pending);
    if (!env.ok()) return env.status();
    out.ids.insert(out.ids.end(), env->begin(), env->end());
    out.mask.insert(out.mask.end(), env->size(), 0);
    pending = Json::array();
    return absl::OkStatus();
  };
  for (const Json& m : messages) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
        !m.contains("content") || !m["content"].is_string()) {
      return absl::InvalidArgumentError(
          "every message needs a string \"role\" and \"content\"");
    }
    if (m["role"] != "assistant") {
      pending.push_back(m);
      continue;
    }
    absl::Status s = flush();
    if (!s.ok()) return s;
    std::vector<int64_t> turn =
        tokenizer_->Encode(m["content"].get<std::string>());
    turn.push_back(tokenizer_->eos_token_id());
    out.ids.insert(out.ids.end(), turn.begin(), turn.end());
    out.mask.insert(out.mask.end(), turn.size(), 1);
  }
  absl::Status s = flush();
  if (!s.ok()) return s;
  return out;
}

bool AgentLoop::AppendEnvironmentTurn(Trajectory& t, const Json& messages,
                                      bool stop_when_over_budget) {
  absl::StatusOr<std::vector<int64_t>> ids = EnvironmentTurnIds(messages);
  if (!ids.ok()) {
    t.error = ids.status();
    return false;
  }
  std::vector<int64_t>& v = *ids;
  if (stop_when_over_budget &&
      t.response_len() + static_cast<int64_t>(v.size()) >=
          options_.response_length) {
    return false;
  }
  t.ids.insert(t.ids.end(), v.begin(), v.end());
  t.out.response_mask.insert(t.out.response_mask.end(), v.size(), 0);
  t.out.response_logprobs.insert(t.out.response_logprobs.end(), v.size(), 0.0f);
  return true;
}

std::vector<absl::StatusOr<AgentOutput>> AgentLoop::Run(
    const std::vector<AgentSample>& samples, TurnGenerator& generator) {
  std::vector<Trajectory> trajs(samples.size());
  std::map<int64_t, size_t> in_flight;  // generator ticket → trajectory
  std::mutex mu;
  std::condition_variable cv;
  std::vector<size_t> ready;  // back from the pool
  size_t in_pool = 0;

  // Queues trajectory i's next turn, or ends it.
  auto submit = [&](size_t i) {
    Trajectory& t = trajs[i];
    const int64_t budget = options_.response_length - t.response_len();
    if (budget <= 0) {
      t.state = AgentState::kDone;
      return;
    }
    SamplingParams params = t.sample->params;
    params.max_tokens = budget;
    if (params.seed.has_value()) {
      params.seed = *params.seed + 0x9e3779b97f4a7c15ULL *
                                       static_cast<uint64_t>(t.assistant_turns);
    }
    t.submitted = std::chrono::steady_clock::now();
    absl::StatusOr<int64_t> ticket = generator.Submit(t.ids, params);
    if (!ticket.ok()) {
      // The first turn's refusal is the sample's error; a later one means
      // the context outgrew the engine (the trajectory ends there).
      if (t.assistant_turns == 0) t.error = ticket.status();
      t.state = AgentState::kDone;
      return;
    }
    in_flight[*ticket] = i;
  };

  for (size_t i = 0; i < samples.size(); ++i) {
    trajs[i].sample = &samples[i];
    absl::Status s = Start(trajs[i]);
    if (!s.ok()) {
      trajs[i].error = s;
      trajs[i].state = AgentState::kDone;
      continue;
    }
    submit(i);
  }
  while (!in_flight.empty() || in_pool > 0) {
    if (!in_flight.empty()) {
      for (auto& [ticket, turn] : generator.Poll()) {
        auto it = in_flight.find(ticket);
        if (it == in_flight.end()) continue;
        const size_t i = it->second;
        in_flight.erase(it);
        Trajectory& t = trajs[i];
        if (!turn.error.ok()) {
          t.error = std::move(turn.error);
          t.state = AgentState::kDone;
          continue;
        }
        AfterGeneration(t, std::move(turn));
        if (t.state == AgentState::kDone) continue;
        std::lock_guard<std::mutex> lock(mu);
        ++in_pool;
        pool_->Schedule([this, &t, &mu, &cv, &ready, i] {
          if (t.state == AgentState::kProcessingTools) {
            ProcessTools(t);
          } else {
            Interact(t);
          }
          std::lock_guard<std::mutex> lock(mu);
          ready.push_back(i);
          cv.notify_one();
        });
      }
    }
    std::vector<size_t> back;
    {
      std::unique_lock<std::mutex> lock(mu);
      if (in_flight.empty() && in_pool > 0) {
        cv.wait(lock, [&] { return !ready.empty(); });
      }
      back.swap(ready);
      in_pool -= back.size();
    }
    for (size_t i : back) {
      if (trajs[i].state == AgentState::kGenerating) submit(i);
    }
  }

  std::vector<absl::StatusOr<AgentOutput>> results;
  results.reserve(trajs.size());
  for (Trajectory& t : trajs) {
    if (t.interaction != nullptr && !t.interaction_id.empty()) {
      t.interaction->Finalize(t.interaction_id);
    }
    if (!t.error.ok()) {
      results.push_back(t.error);
      continue;
    }
    AgentOutput& out = t.out;
    out.prompt_ids.assign(t.ids.begin(), t.ids.begin() + t.prompt_len);
    out.response_ids.assign(t.ids.begin() + t.prompt_len, t.ids.end());
    const size_t keep = static_cast<size_t>(
        std::min<int64_t>(options_.response_length,
                          static_cast<int64_t>(out.response_ids.size())));
    out.response_ids.resize(keep);
    out.response_mask.resize(keep);
    out.response_logprobs.resize(keep);
    out.num_turns = t.tool_agent ? t.user_turns + t.assistant_turns + 1 : 2;
    results.push_back(std::move(out));
  }
  return results;
}

}  // namespace verl::infer::agent
