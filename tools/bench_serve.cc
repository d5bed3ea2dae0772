// File: tools/bench_serve.cc
//
// Throughput of //tools:serve against the in-process engine on the same
// requests: for each concurrency C (--concurrency=1,8,32), the engine is fed
// with at most C requests in flight (a new one as one finishes), then the
// server (in-process, on a free loopback port) is driven by C streaming HTTP
// clients. Requests are token-id prompts, greedy, ignore_eos, fixed
// max_tokens, so both sides do identical work. Prints generated tokens/s of
// each, the ratio server/engine and the server's mean time to first token.
//   bench_serve --preset=qwen2-30m --requests=64 --prompt_len=64
//               --max_tokens=64 --concurrency=1,8,32 --threads=1
#include <glog/logging.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tools/model_loading.h"
#include "verl/core/main_guard.h"
#include "verl/core/status.h"
#include "verl/infer/engine.h"
#include "verl/infer/serve/server.h"

ABSL_FLAG(std::string, model_path, "", "HF model folder");
ABSL_FLAG(std::string, preset, "qwen2-30m", "built-in preset (random weights)");
ABSL_FLAG(int64_t, requests, 64, "requests per run");
ABSL_FLAG(int64_t, prompt_len, 64, "prompt tokens per request");
ABSL_FLAG(int64_t, max_tokens, 64, "generated tokens per request");
ABSL_FLAG(std::string, concurrency, "1,8,32", "comma-separated client counts");
ABSL_FLAG(int64_t, kv_cache_mb, 512, "KV cache budget of each engine (MiB)");
// Two engines run here (this thread's and the server's engine thread), each
// with its own OpenMP team: more than one thread each oversubscribes small
// machines (on 2 loaded cores --threads=2 crawled), so 1 by default.
ABSL_FLAG(int, threads, 1, "LibTorch threads per engine (0: default)");

namespace verl {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

infer::SamplingParams Params() {
  infer::SamplingParams p;
  p.do_sample = false;
  p.ignore_eos = true;
  p.max_tokens = absl::GetFlag(FLAGS_max_tokens);
  return p;
}

absl::StatusOr<std::unique_ptr<infer::LLMEngine>> MakeEngine(
    std::shared_ptr<models::CausalLM> model) {
  infer::EngineOptions o;
  o.kv_cache_bytes = absl::GetFlag(FLAGS_kv_cache_mb) << 20;
  o.max_model_len =
      absl::GetFlag(FLAGS_prompt_len) + absl::GetFlag(FLAGS_max_tokens) + 16;
  // Both sides see every prompt again at each level: no prefix cache.
  o.enable_prefix_caching = false;
  return infer::LLMEngine::Create(std::move(model), o);
}

// The in-process engine with at most `concurrency` requests in flight.
// Returns generated tokens/s.
double RunEngine(infer::LLMEngine& engine,
                 const std::vector<std::vector<int64_t>>& prompts,
                 int concurrency) {
  const infer::SamplingParams params = Params();
  size_t next = 0;
  int64_t in_flight = 0, tokens = 0;
  const auto t0 = Clock::now();
  while (next < prompts.size() || in_flight > 0) {
    while (in_flight < concurrency && next < prompts.size()) {
      CHECK(engine.AddRequest(prompts[next++], params).ok());
      ++in_flight;
    }
    for (const infer::RequestOutput& out : engine.Step()) {
      tokens += static_cast<int64_t>(out.outputs[0].token_ids.size());
      --in_flight;
    }
  }
  return tokens / Seconds(t0);
}

struct ServerRun {
  double tokens_per_s = 0;
  double mean_ttft_ms = 0;
};

// `concurrency` streaming clients over all prompts.
ServerRun RunServer(int port, const std::vector<std::vector<int64_t>>& prompts,
                    int concurrency) {
  std::atomic<size_t> next{0};
  std::atomic<int64_t> tokens{0};
  std::mutex mu;
  double ttft_sum = 0;
  const auto t0 = Clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < concurrency; ++c) {
    clients.emplace_back([&] {
      httplib::Client client("127.0.0.1", port);
      client.set_read_timeout(600);
      for (size_t i; (i = next.fetch_add(1)) < prompts.size();) {
        Json body = {{"model", "bench"},
                     {"prompt", prompts[i]},
                     {"max_tokens", absl::GetFlag(FLAGS_max_tokens)},
                     {"temperature", 0},
                     {"ignore_eos", true},
                     {"stream", true},
                     {"stream_options", {{"include_usage", true}}}};
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/completions";
        req.body = body.dump();
        req.set_header("Content-Type", "application/json");
        std::string data;
        const auto start = Clock::now();
        double ttft = -1;
        req.content_receiver = [&](const char* p, size_t n, uint64_t,
                                   uint64_t) {
          if (ttft < 0) ttft = Seconds(start);
          data.append(p, n);
          return true;
        };
        auto res = client.send(req);
        CHECK(res && res->status == 200) << "request " << i << " failed";
        // The usage chunk is the last before [DONE].
        const size_t at = data.rfind("data: {");
        const Json usage = Json::parse(
            data.substr(at + 6, data.find("\n\n", at) - at - 6))["usage"];
        tokens += usage["completion_tokens"].get<int64_t>();
        std::lock_guard<std::mutex> lock(mu);
        ttft_sum += ttft;
      }
    });
  }
  for (auto& t : clients) t.join();
  ServerRun r;
  r.tokens_per_s = tokens.load() / Seconds(t0);
  r.mean_ttft_ms = 1000 * ttft_sum / prompts.size();
  return r;
}

absl::Status Run() {
  if (absl::GetFlag(FLAGS_threads) > 0) {
    infer::SetIntraOpThreads(absl::GetFlag(FLAGS_threads));
  }
  std::vector<int> levels;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_concurrency),
                                            ',', absl::SkipEmpty())) {
    int c;
    if (!absl::SimpleAtoi(s, &c) || c < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--concurrency: '", s, "' is not a positive integer"));
    }
    levels.push_back(c);
  }
  const std::string path = absl::GetFlag(FLAGS_model_path);
  VERL_ASSIGN_OR_RETURN(
      tools::LoadedModel loaded,
      tools::LoadModel(
          {path, path.empty() ? absl::GetFlag(FLAGS_preset) : "", "", 0}));
  if (!loaded.tokenizer) {
    return absl::FailedPreconditionError("the model folder has no tokenizer");
  }
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int64_t> token(
      0, std::min<int64_t>(loaded.model->config().vocab_size, 255) - 1);
  std::vector<std::vector<int64_t>> prompts(absl::GetFlag(FLAGS_requests));
  for (auto& p : prompts) {
    for (int64_t t = 0; t < absl::GetFlag(FLAGS_prompt_len); ++t) {
      p.push_back(token(rng));
    }
  }
  VERL_ASSIGN_OR_RETURN(auto engine, MakeEngine(loaded.model));
  VERL_ASSIGN_OR_RETURN(auto served, MakeEngine(loaded.model));
  infer::serve::ServerOptions so;
  so.port = 0;
  so.served_model_name = "bench";
  infer::serve::Server server(std::move(served), *loaded.tokenizer, so);
  VERL_ASSIGN_OR_RETURN(int port, server.Bind());
  std::thread serving([&] { server.Serve(); });

  std::printf(
      "bench_serve: %zu requests x (%lld prompt + %lld generated) "
      "tokens, greedy\n",
      prompts.size(), static_cast<long long>(absl::GetFlag(FLAGS_prompt_len)),
      static_cast<long long>(absl::GetFlag(FLAGS_max_tokens)));
  std::printf("%8s %14s %14s %7s %14s\n", "clients", "engine_tok/s",
              "server_tok/s", "ratio", "server_ttft_ms");
  // Warm-up (first-call allocations) on both.
  RunEngine(*engine, {prompts[0]}, 1);
  RunServer(port, {prompts[0]}, 1);
  for (int c : levels) {
    const double e = RunEngine(*engine, prompts, c);
    const ServerRun s = RunServer(port, prompts, c);
    std::printf("%8d %14.1f %14.1f %7.3f %14.1f\n", c, e, s.tokens_per_s,
                s.tokens_per_s / e, s.mean_ttft_ms);
    std::fflush(stdout);
  }
  server.Stop();
  serving.join();
  return absl::OkStatus();
}

}  // namespace
}  // namespace verl

int main(int argc, char** argv) {
  return verl::core::RunToolMain(argc, argv, "bench_serve", "", verl::Run);
}
