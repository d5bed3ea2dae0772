// File: verl/infer/serve/testing/test_server.cc
#include "verl/infer/serve/testing/test_server.h"

#include "glog/logging.h"
#include "verl/models/decoder.h"
#include "verl/models/presets.h"
#include "verl/models/tokenizer/tokenizer_builtin.h"

namespace verl::infer::serve::testing {

std::unique_ptr<LLMEngine> MakeTinyEngine(int64_t max_model_len) {
  models::Tokenizer tok = models::MakeBuiltinTokenizer();
  auto cfg = models::MakePreset("tiny-qwen2", tok.vocab_size());
  CHECK(cfg.ok()) << cfg.status();
  cfg->eos_token_ids = {tok.eos_token_id()};
  EngineOptions eo;
  eo.max_model_len = max_model_len;
  eo.kv_cache_bytes = 16 << 20;
  eo.block_size = 8;
  auto engine = LLMEngine::Create(models::CreateModel(*cfg, 3), eo);
  CHECK(engine.ok()) << engine.status();
  return *std::move(engine);
}

TestServer::TestServer(int max_concurrent, int64_t max_model_len) {
  ServerOptions so;
  so.port = 0;
  so.served_model_name = kTinyModel;
  so.max_request_bytes = 4096;
  so.max_concurrent_requests = max_concurrent;
  server_ = std::make_unique<Server>(MakeTinyEngine(max_model_len),
                                     models::MakeBuiltinTokenizer(), so);
  auto port = server_->Bind();
  CHECK(port.ok()) << port.status();
  port_ = *port;
  thread_ = std::thread([this] { server_->Serve(); });
}

TestServer::~TestServer() {
  server_->Stop();
  thread_.join();
}

httplib::Client TestServer::Client() const {
  httplib::Client c("127.0.0.1", port_);
  c.set_read_timeout(60);
  return c;
}

std::pair<int, nlohmann::json> TestServer::Post(
    const std::string& path, const nlohmann::json& body) const {
  return PostRaw(path, body.dump());
}

std::pair<int, nlohmann::json> TestServer::PostRaw(
    const std::string& path, const std::string& body) const {
  httplib::Client c = Client();
  auto res = c.Post(path, body, "application/json");
  CHECK(res) << "no response from " << path;
  return {res->status, nlohmann::json::parse(res->body)};
}

}  // namespace verl::infer::serve::testing
