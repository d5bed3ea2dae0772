// File: verl/rl/workers/rollout_agent.cc
//
// The rollout role's multi-turn path (verl's AgentLoopWorker post-processing):
// B prompts × n samples run as agent-loop trajectories over the engine, then
// become verl's layout — the agent's prompt (chat template with tool schemas)
// left-padded to the batch's prompt width, the response (model, tool and user
// tokens) right-padded to response_length, response_mask = 1 on model tokens
// only, attention_mask = 1 on every real token, rollout_log_probs 0 on
// non-model tokens, and the non-tensor columns __num_turns__ and
// tool_call_counts.
#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "absl/strings/str_cat.h"
#include "verl/core/status.h"
#include "verl/rl/workers/rollout.h"

namespace verl::rl {
namespace {

using Json = nlohmann::json;
using OJson = nlohmann::ordered_json;

// min/max/mean of `values` under `prefix`.
void AddStats(const std::string& prefix, const std::vector<double>& values,
              std::map<std::string, double>& out) {
  if (values.empty()) return;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0;
  for (double v : values) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  out[prefix + "/min"] = lo;
  out[prefix + "/max"] = hi;
  out[prefix + "/mean"] = sum / static_cast<double>(values.size());
}

OJson FieldOf(const Json& extra_info, const char* key) {
  if (extra_info.is_object() && extra_info.contains(key) &&
      extra_info[key].is_object()) {
    return OJson::parse(extra_info[key].dump());
  }
  return OJson::object();
}

}  // namespace

absl::StatusOr<core::Batch> Rollout::GenerateWithAgentLoop(
    const core::Batch& prompts, int64_t first_global_index, int64_t step,
    bool validate) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!prompts.HasNonTensor("raw_prompt")) {
    return absl::InvalidArgumentError(
        "multi-turn rollout needs the prompts' chat messages (the raw_prompt "
        "column; data.return_raw_chat)");
  }
  const std::vector<Json>& raw = prompts.non_tensor("raw_prompt");
  VERL_ASSIGN_OR_RETURN(at::Tensor input_ids, prompts.GetTensor("input_ids"));
  const int64_t B = prompts.size();
  const int64_t P = input_ids.size(1);
  const int64_t R = options_.response_length;
  infer::SamplingParams params =
      validate ? options_.val_params : options_.train_params;
  const int64_t n = params.n;
  params.n = 1;

  std::vector<infer::agent::AgentSample> samples;
  samples.reserve(B * n);
  for (int64_t b = 0; b < B; ++b) {
    infer::agent::AgentSample s;
    if (prompts.HasNonTensor("agent_name")) {
      const Json& name = prompts.non_tensor("agent_name")[b];
      if (name.is_string()) s.agent_name = name.get<std::string>();
    }
    s.messages = OJson::parse(raw[b].dump());
    if (prompts.HasNonTensor("extra_info")) {
      const Json& extra = prompts.non_tensor("extra_info")[b];
      s.tools_kwargs = FieldOf(extra, "tools_kwargs");
      s.interaction_kwargs = FieldOf(extra, "interaction_kwargs");
    }
    const uint64_t prompt_seed =
        RolloutSeed(options_.seed, step, first_global_index + b);
    for (int64_t k = 0; k < n; ++k) {
      s.params = params;
      s.params.seed = RolloutSeed(prompt_seed, 0, k);
      samples.push_back(s);
    }
  }

  if (engine_->sleeping()) engine_->WakeUp();
  const infer::EngineStats before = engine_->stats();
  infer::agent::EngineTurnGenerator generator(engine_.get());
  std::vector<absl::StatusOr<infer::agent::AgentOutput>> results =
      options_.agent_loop->Run(samples, generator);
  if (options_.free_cache_engine) engine_->Sleep();

  const int64_t pad = options_.pad_token_id;
  at::Tensor prompt_ids = torch::full({B * n, P}, pad, torch::kLong);
  at::Tensor prompt_mask = torch::zeros({B * n, P}, torch::kLong);
  at::Tensor responses = torch::full({B * n, R}, pad, torch::kLong);
  at::Tensor response_attn = torch::zeros({B * n, R}, torch::kLong);
  at::Tensor response_mask = torch::zeros({B * n, R}, torch::kFloat);
  at::Tensor log_probs = torch::zeros({B * n, R}, torch::kFloat);
  auto pid = prompt_ids.accessor<int64_t, 2>();
  auto pmask = prompt_mask.accessor<int64_t, 2>();
  auto rid = responses.accessor<int64_t, 2>();
  auto rattn = response_attn.accessor<int64_t, 2>();
  auto rmask = response_mask.accessor<float, 2>();
  auto lp = log_probs.accessor<float, 2>();
  std::vector<Json> num_turns, tool_call_counts;
  std::vector<double> generate_s, tool_calls_s, preempted;
  std::map<std::string, infer::agent::ToolCallStats> tools;
  int64_t generated = 0;
  for (int64_t row = 0; row < B * n; ++row) {
    const int64_t global = first_global_index + row / n;
    if (!results[row].ok()) {
      return Annotate(results[row].status(),
                      absl::StrCat("rollout prompt ", global));
    }
    const infer::agent::AgentOutput& out = *results[row];
    const int64_t plen = static_cast<int64_t>(out.prompt_ids.size());
    if (plen > P) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rollout prompt ", global, ": the agent's prompt has ", plen,
          " tokens (chat template with the tool schemas), more than "
          "data.max_prompt_length=",
          P));
    }
    for (int64_t t = 0; t < plen; ++t) {
      pid[row][P - plen + t] = out.prompt_ids[t];
      pmask[row][P - plen + t] = 1;
    }
    const int64_t len =
        std::min<int64_t>(R, static_cast<int64_t>(out.response_ids.size()));
    for (int64_t t = 0; t < len; ++t) {
      rid[row][t] = out.response_ids[t];
      rattn[row][t] = 1;
      rmask[row][t] = static_cast<float>(out.response_mask[t]);
      lp[row][t] = out.response_logprobs[t];
      generated += out.response_mask[t];
    }
    num_turns.push_back(out.num_turns);
    int64_t calls = 0;
    for (const auto& [name, st] : out.tool_stats) {
      calls += st.calls;
      infer::agent::ToolCallStats& all = tools[name];
      all.calls += st.calls;
      all.failures += st.failures;
      all.seconds += st.seconds;
    }
    tool_call_counts.push_back(calls);
    generate_s.push_back(out.generate_s);
    tool_calls_s.push_back(out.tool_calls_s);
    preempted.push_back(static_cast<double>(out.num_preempted));
  }

  std::map<std::string, at::Tensor> tensors = TrajectoryTensors(
      prompt_ids, prompt_mask, responses, response_attn, response_mask,
      options_.calculate_log_probs ? log_probs : at::Tensor());
  VERL_ASSIGN_OR_RETURN(
      core::Batch result,
      core::Batch::FromColumns(
          std::move(tensors),
          {{"__num_turns__", std::move(num_turns)},
           {"tool_call_counts", std::move(tool_call_counts)}}));

  stats_ = RolloutStats();
  RecordEngineStats(t0, before, generated);
  AddStats("agent_loop/generate_sequences", generate_s, stats_.agent_metrics);
  AddStats("agent_loop/tool_calls", tool_calls_s, stats_.agent_metrics);
  AddStats("agent_loop/num_preempted", preempted, stats_.agent_metrics);
  for (const auto& [name, st] : tools) {
    const std::string p = absl::StrCat("tool_calls/", name);
    stats_.agent_metrics[p + "/count"] = static_cast<double>(st.calls);
    stats_.agent_metrics[p + "/failures"] = static_cast<double>(st.failures);
    stats_.agent_metrics[p + "/latency_s"] =
        st.calls > 0 ? st.seconds / static_cast<double>(st.calls) : 0.0;
  }
  return result;
}

}  // namespace verl::rl
