// File: tools/serve.cc
//
// An OpenAI-compatible HTTP server over the rollout engine:
//   serve --model_path=/path/to/hf_folder | --preset=tiny-qwen2
//         [--port=8000] [--host=127.0.0.1] [--served_model_name=NAME]
// Endpoints: POST /v1/completions, POST /v1/chat/completions (stream: true
// for server-sent events), GET /v1/models, GET /health. A vision-language
// model (Qwen2.5-VL / Qwen2-VL folder, --preset=tiny-qwen2.5-vl) takes
// chat image_url parts as PNG/JPEG data URLs. Prints
// "serve: listening on http://HOST:PORT" once ready (--port=0 picks a free
// port) and serves until SIGINT/SIGTERM. See docs/serve.md.
#include <glog/logging.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "tools/engine_flags.h"
#include "tools/model_loading.h"
#include "verl/core/main_guard.h"
#include "verl/core/malloc_tuning.h"
#include "verl/core/status.h"
#include "verl/infer/engine.h"
#include "verl/infer/serve/server.h"

ABSL_FLAG(std::string, model_path, "",
          "HF model folder (config.json, safetensors, tokenizer)");
ABSL_FLAG(std::string, preset, "",
          "built-in model preset (random weights, built-in tokenizer)");
ABSL_FLAG(std::string, tokenizer, "",
          "tokenizer folder (default: --model_path; built-in for --preset)");
ABSL_FLAG(uint64_t, model_seed, 0, "init seed for --preset weights");
ABSL_FLAG(std::string, served_model_name, "",
          "the `model` clients must name (default: the folder's or preset's "
          "name)");
ABSL_FLAG(std::string, host, "127.0.0.1",
          "address to listen on (loopback by default; 0.0.0.0 for all)");
ABSL_FLAG(int, port, 8000, "port (0: any free port, printed at start)");
ABSL_FLAG(int64_t, max_request_bytes, 1 << 20,
          "larger request bodies get HTTP 413");
ABSL_FLAG(int, max_concurrent_requests, 64,
          "generation requests in flight at once (more get HTTP 429)");
ABSL_FLAG(int64_t, max_n, 16, "largest `n` a request may ask for");
// Engine (the shared engine flags: tools/engine_flags.h).
ABSL_FLAG(uint64_t, seed, 0, "sampling seed of requests without `seed`");

namespace verl {
namespace {

std::atomic<infer::serve::Server*> g_server{nullptr};

absl::Status Run() {
  const std::string model_path = absl::GetFlag(FLAGS_model_path);
  const std::string preset = absl::GetFlag(FLAGS_preset);
  VERL_ASSIGN_OR_RETURN(
      tools::LoadedModel loaded,
      tools::LoadModel({model_path, preset, absl::GetFlag(FLAGS_tokenizer),
                        absl::GetFlag(FLAGS_model_seed)}));
  if (!loaded.tokenizer) {
    return absl::FailedPreconditionError(
        "the server needs a tokenizer: give --tokenizer or a --model_path "
        "with tokenizer.json");
  }
  infer::EngineOptions opt = tools::EngineOptionsFromFlags();
  opt.seed = absl::GetFlag(FLAGS_seed);
  VERL_ASSIGN_OR_RETURN(auto engine,
                        infer::LLMEngine::Create(loaded.model, opt));
  const int64_t max_model_len = engine->options().max_model_len;

  infer::serve::ServerOptions so;
  so.host = absl::GetFlag(FLAGS_host);
  so.port = absl::GetFlag(FLAGS_port);
  so.served_model_name = absl::GetFlag(FLAGS_served_model_name);
  if (so.served_model_name.empty()) {
    std::string path = model_path;
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    so.served_model_name =
        preset.empty() ? path.substr(path.find_last_of('/') + 1) : preset;
  }
  so.max_request_bytes = absl::GetFlag(FLAGS_max_request_bytes);
  so.max_concurrent_requests = absl::GetFlag(FLAGS_max_concurrent_requests);
  so.limits.max_n = absl::GetFlag(FLAGS_max_n);
  // A vision-language model takes image_url parts (data URLs) in chat.
  so.image_processor = loaded.image_processor;
  if (so.max_concurrent_requests < 1 || so.max_request_bytes < 1 ||
      so.limits.max_n < 1) {
    return absl::InvalidArgumentError(
        "--max_concurrent_requests, --max_request_bytes and --max_n must be "
        ">= 1");
  }
  infer::serve::Server server(std::move(engine), std::move(*loaded.tokenizer),
                              so);
  VERL_ASSIGN_OR_RETURN(int port, server.Bind());
  std::printf("serve: model %s on http://%s:%d (max_model_len %lld)\n",
              so.served_model_name.c_str(), so.host.c_str(), port,
              static_cast<long long>(max_model_len));
  std::printf("serve: listening on http://%s:%d\n", so.host.c_str(), port);
  std::fflush(stdout);
  g_server = &server;
  server.Serve();
  g_server = nullptr;
  std::printf("serve: stopped\n");
  return absl::OkStatus();
}

}  // namespace
}  // namespace verl

int main(int argc, char** argv) {
  // Freed tensors stay in the heap instead of being faulted in again every
  // step (core/malloc_tuning.h).
  verl::core::ReexecWithHeapRetainingMalloc(argv);
  return verl::core::RunToolMain(argc, argv, "serve", "", [] {
    // SIGINT/SIGTERM stop the server from a thread of its own (httplib's
    // stop() is not async-signal-safe).
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    std::thread([signals] {
      int sig = 0;
      sigwait(&signals, &sig);
      if (verl::infer::serve::Server* s = verl::g_server.load()) {
        s->Stop();
      } else {
        std::_Exit(128 + sig);
      }
    }).detach();
    return verl::Run();
  });
}
