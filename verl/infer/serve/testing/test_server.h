// File: verl/infer/serve/testing/test_server.h
//
// The server in-process on a free port with the tiny random model
// (tiny-qwen2, init seed 3, the built-in tokenizer) for tests that drive it
// over HTTP, and the same engine for in-process comparisons.
#ifndef VERL_INFER_SERVE_TESTING_TEST_SERVER_H_
#define VERL_INFER_SERVE_TESTING_TEST_SERVER_H_

#include <httplib.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "nlohmann/json.hpp"
#include "verl/infer/engine.h"
#include "verl/infer/serve/server.h"

namespace verl::infer::serve::testing {

// The served model name.
inline constexpr char kTinyModel[] = "tiny";

// The engine every TestServer serves: tiny-qwen2 (init seed 3) over the
// built-in tokenizer, EOS = the tokenizer's.
std::unique_ptr<LLMEngine> MakeTinyEngine(int64_t max_model_len = 128);

// A running server on a free port; stopped by the destructor.
class TestServer {
 public:
  explicit TestServer(int max_concurrent = 64, int64_t max_model_len = 128);
  ~TestServer();

  int port() const { return port_; }
  httplib::Client Client() const;
  // POST `body` (a JSON object) to `path`; returns {status, parsed body}.
  std::pair<int, nlohmann::json> Post(const std::string& path,
                                      const nlohmann::json& body) const;
  std::pair<int, nlohmann::json> PostRaw(const std::string& path,
                                         const std::string& body) const;

 private:
  std::unique_ptr<Server> server_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace verl::infer::serve::testing

#endif  // VERL_INFER_SERVE_TESTING_TEST_SERVER_H_
