// File: verl/infer/agent/http_turn_generator.cc
#include "verl/infer/agent/http_turn_generator.h"

#include <httplib.h>

#include <chrono>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace verl::infer::agent {

using Json = nlohmann::json;

Json CompletionRequestBody(const std::string& model,
                           const std::vector<int64_t>& context_ids,
                           const SamplingParams& params) {
  Json body = {{"model", model},
               {"prompt", context_ids},
               {"max_tokens", params.max_tokens},
               {"temperature", params.greedy() ? 0.0 : params.temperature},
               {"top_p", params.top_p},
               {"top_k", params.top_k},
               {"logprobs", 1},
               {"return_token_ids", true}};
  if (params.seed.has_value()) {
    body["seed"] = static_cast<int64_t>(*params.seed);
  }
  if (!params.stop_token_ids.empty()) {
    body["stop_token_ids"] = params.stop_token_ids;
  }
  if (params.ignore_eos) body["ignore_eos"] = true;
  if (params.repetition_penalty != 1.0) {
    body["repetition_penalty"] = params.repetition_penalty;
  }
  return body;
}

absl::StatusOr<TurnOutput> ParseCompletionResponse(int http_status,
                                                   const std::string& body) {
  const Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (http_status != 200) {
    std::string message = body.substr(0, 200);
    if (j.is_object() && j.contains("error") && j["error"].is_object() &&
        j["error"].value("message", Json()).is_string()) {
      message = j["error"]["message"].get<std::string>();
    }
    return absl::UnavailableError(absl::StrCat(
        "agent turn: the server answered HTTP ", http_status, ": ", message));
  }
  const Json* choice = nullptr;
  if (j.is_object() && j.contains("choices") && j["choices"].is_array() &&
      j["choices"].size() == 1 && j["choices"][0].is_object()) {
    choice = &j["choices"][0];
  }
  if (choice == nullptr || !choice->contains("token_ids") ||
      !(*choice)["token_ids"].is_array()) {
    return absl::DataLossError(
        "agent turn: the server's answer has no choices[0].token_ids (it "
        "must support vLLM's return_token_ids)");
  }
  TurnOutput turn;
  for (const Json& id : (*choice)["token_ids"]) {
    if (!id.is_number_integer()) {
      return absl::DataLossError("agent turn: a token id is not an integer");
    }
    turn.token_ids.push_back(id.get<int64_t>());
  }
  const Json& lp = choice->value("logprobs", Json());
  if (lp.is_object() && lp.contains("token_logprobs") &&
      lp["token_logprobs"].is_array()) {
    for (const Json& v : lp["token_logprobs"]) {
      turn.logprobs.push_back(v.is_number() ? v.get<float>() : 0.0f);
    }
  }
  if (turn.logprobs.size() != turn.token_ids.size()) {
    return absl::DataLossError(
        absl::StrCat("agent turn: the server returned ", turn.token_ids.size(),
                     " token ids but ", turn.logprobs.size(), " log-probs"));
  }
  return turn;
}

HttpTurnGenerator::HttpTurnGenerator(HttpTurnGeneratorOptions options)
    : options_(std::move(options)) {
  for (int i = 0; i < std::max(1, options_.max_in_flight); ++i) {
    workers_.emplace_back([this] { Work(); });
  }
}

HttpTurnGenerator::~HttpTurnGenerator() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

absl::StatusOr<int64_t> HttpTurnGenerator::Submit(
    std::vector<int64_t> context_ids, const SamplingParams& params) {
  if (params.n != 1) {
    return absl::InvalidArgumentError("agent turns are generated with n = 1");
  }
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t ticket = next_ticket_++;
  queue_.push_back(
      {ticket, CompletionRequestBody(options_.model, context_ids, params)});
  work_cv_.notify_one();
  return ticket;
}

std::vector<std::pair<int64_t, TurnOutput>> HttpTurnGenerator::Poll() {
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait_for(lock, std::chrono::milliseconds(20),
                    [&] { return !done_.empty(); });
  std::vector<std::pair<int64_t, TurnOutput>> out;
  out.swap(done_);
  return out;
}

void HttpTurnGenerator::Work() {
  httplib::Client client(options_.host, options_.port);
  client.set_connection_timeout(options_.timeout_s);
  client.set_read_timeout(options_.timeout_s);
  client.set_write_timeout(options_.timeout_s);
  for (;;) {
    Pending job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    absl::StatusOr<TurnOutput> turn;
    httplib::Result res =
        client.Post("/v1/completions", job.body.dump(), "application/json");
    if (!res) {
      turn = absl::UnavailableError(
          absl::StrCat("agent turn: no answer from http://", options_.host, ":",
                       options_.port, "/v1/completions (",
                       httplib::to_string(res.error()), ")"));
    } else {
      turn = ParseCompletionResponse(res->status, res->body);
    }
    TurnOutput out;
    if (turn.ok()) {
      out = *std::move(turn);
    } else {
      out.error = turn.status();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_.emplace_back(job.ticket, std::move(out));
    }
    done_cv_.notify_all();
  }
}

}  // namespace verl::infer::agent
