// File: verl/infer/serve/server.h
//
// The OpenAI-compatible HTTP server over the rollout engine (//tools:serve):
// POST /v1/completions and /v1/chat/completions (JSON or, with
// `stream: true`, server-sent events), GET /v1/models and GET /health, on
// cpp-httplib. Handler threads parse and tokenize; one EngineWorker thread
// runs the engine, so concurrent requests share its continuous batch.
// Every failure is an OpenAI error object with its HTTP status; the server
// keeps serving.
#ifndef VERL_INFER_SERVE_SERVER_H_
#define VERL_INFER_SERVE_SERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "verl/infer/engine.h"
#include "verl/infer/serve/api.h"
#include "verl/infer/serve/engine_worker.h"
#include "verl/models/tokenizer/chat_template.h"
#include "verl/models/tokenizer/tokenizer.h"
#include "verl/models/vlm/image_processor.h"
#include "verl/models/vlm/vlm_processor.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace verl::infer::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port (see Bind)
  std::string served_model_name = "verl-cpp";
  // Larger bodies get 413.
  int64_t max_request_bytes = 1 << 20;
  // Generation requests in flight at once (more get 429); also sizes the
  // handler thread pool.
  int max_concurrent_requests = 64;
  ParseLimits limits;
  // Set for a vision-language model (its preprocessor_config.json): chat
  // messages may then carry image_url parts (data URLs), processed as HF's
  // Qwen2-VL processor does with the tokenizer's chat template.
  std::optional<models::vlm::ImageProcessorConfig> image_processor;
};

class Server {
 public:
  Server(std::unique_ptr<LLMEngine> engine, models::Tokenizer tokenizer,
         ServerOptions options);
  ~Server();

  // Binds host:port; returns the port (the chosen one for port 0).
  absl::StatusOr<int> Bind();
  // Serves until Stop() (from another thread or a signal handler thread);
  // a Stop() before or while Serve() starts also ends it.
  void Serve();
  void Stop();

  EngineStats engine_stats() const { return worker_.stats(); }

 private:
  class Generation;
  void Route();
  // Parses, tokenizes and submits a request; the error is the HTTP answer.
  absl::StatusOr<std::shared_ptr<Generation>> Start(const std::string& body,
                                                    Endpoint endpoint);
  // `mm` gets the pixel values of a request with images.
  absl::StatusOr<std::vector<int64_t>> PromptIds(const ApiRequest& request,
                                                 MultiModalInput* mm);

  const models::Tokenizer tokenizer_;
  const models::ChatFormatter formatter_;
  const ServerOptions options_;
  std::optional<models::vlm::VlmProcessor> vlm_;  // with image_processor
  const int64_t created_;
  EngineWorker worker_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<int> in_flight_{0};
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> serving_{false};
  std::atomic<uint64_t> next_id_{0};
};

}  // namespace verl::infer::serve

#endif  // VERL_INFER_SERVE_SERVER_H_
