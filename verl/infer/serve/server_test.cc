// File: verl/infer/serve/server_test.cc
//
// The server in-process on a free port with a tiny random model, driven over
// HTTP by cpp-httplib's client: concurrent greedy requests equal sequential
// ones, streams concatenate to the non-streamed answer, stop strings, n and
// seeds, error statuses (the server keeps serving), the in-flight limit and
// a client leaving mid-stream. A vision-language server (the sharp tiny VLM)
// takes image_url data URLs: greedy tokens and log-probs equal the engine's
// on the processor's inputs for the same "<image>" row, two images differ,
// and the image errors are 400s.
#include "verl/infer/serve/server.h"

#include <glog/logging.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "nlohmann/json.hpp"
#include "verl/infer/engine.h"
#include "verl/infer/serve/testing/test_server.h"
#include "verl/models/tokenizer/tokenizer.h"
#include "verl/models/vlm/image.h"
#include "verl/models/vlm/image_processor.h"
#include "verl/models/vlm/testing/sharp_tiny_vlm.h"
#include "verl/models/vlm/testing/test_images.h"
#include "verl/models/vlm/vlm_processor.h"

namespace verl::infer::serve {
namespace {

using Json = nlohmann::json;

using testing::TestServer;

TestServer& Shared() {
  static TestServer* s = new TestServer();
  return *s;
}

Json Completion(const std::string& prompt, int max_tokens) {
  return {{"model", "tiny"},
          {"prompt", prompt},
          {"max_tokens", max_tokens},
          {"temperature", 0}};
}

// The "data: " payloads of an SSE body, up to [DONE].
std::vector<Json> SseChunks(const std::string& body, bool* saw_done) {
  std::vector<Json> out;
  *saw_done = false;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    const std::string data = body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (data == "[DONE]") {
      *saw_done = true;
      break;
    }
    out.push_back(Json::parse(data));
  }
  return out;
}

TEST(ServerTest, HealthAndModels) {
  httplib::Client c = Shared().Client();
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  Json j = Json::parse(models->body);
  EXPECT_EQ(j["data"][0]["id"], "tiny");
  EXPECT_EQ(j["data"][0]["max_model_len"], 128);
}

TEST(ServerTest, ConcurrentGreedyEqualsSequential) {
  TestServer& s = Shared();
  constexpr int kClients = 16;
  std::vector<std::string> prompts;
  for (int i = 0; i < kClients; ++i) {
    prompts.push_back("Question " + std::to_string(i * 7) + ": what is " +
                      std::string(i % 5, 'x') + "?");
  }
  std::vector<Json> sequential;
  for (const std::string& p : prompts) {
    Json req = Completion(p, 12);
    req["logprobs"] = 0;
    auto [status, body] = s.Post("/v1/completions", req);
    ASSERT_EQ(status, 200) << body.dump();
    sequential.push_back(body["choices"][0]);
  }
  std::vector<Json> concurrent(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      Json req = Completion(prompts[i], 12);
      req["logprobs"] = 0;
      concurrent[i] = s.Post("/v1/completions", req).second["choices"][0];
    });
  }
  for (auto& t : threads) t.join();
  // The chosen tokens' log-probs depend on the prompt (a tiny random
  // model's greedy texts often do not): equal within float noise.
  std::set<std::string> first_logprobs;
  for (int i = 0; i < kClients; ++i) {
    EXPECT_EQ(concurrent[i]["text"], sequential[i]["text"]) << i;
    EXPECT_EQ(concurrent[i]["finish_reason"], sequential[i]["finish_reason"]);
    const Json& a = concurrent[i]["logprobs"]["token_logprobs"];
    const Json& b = sequential[i]["logprobs"]["token_logprobs"];
    ASSERT_EQ(a.size(), b.size());
    for (size_t t = 0; t < a.size(); ++t) {
      EXPECT_NEAR(a[t].get<double>(), b[t].get<double>(), 1e-4) << i;
    }
    first_logprobs.insert(std::to_string(b[0].get<double>()));
  }
  EXPECT_GT(first_logprobs.size(), kClients / 2);
}

TEST(ServerTest, StreamConcatenatesToTheAnswer) {
  TestServer& s = Shared();
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    SCOPED_TRACE(path);
    const bool chat = std::string(path) == "/v1/chat/completions";
    Json req = {{"model", "tiny"},
                {"max_tokens", 20},
                {"temperature", 0},
                {"logprobs", chat ? Json(true) : Json(0)}};
    if (chat) {
      req["messages"] = {{{"role", "user"}, {"content", "Say something."}}};
    } else {
      req["prompt"] = "Say something.";
    }
    auto [status, whole] = s.Post(path, req);
    ASSERT_EQ(status, 200) << whole.dump();
    req["stream"] = true;
    req["stream_options"] = {{"include_usage", true}};
    httplib::Client c = s.Client();
    auto res = c.Post(path, req.dump(), "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
    bool done = false;
    std::vector<Json> chunks = SseChunks(res->body, &done);
    EXPECT_TRUE(done);
    ASSERT_GE(chunks.size(), 2u);
    std::string text;
    size_t logprobs = 0;
    Json finish;
    for (size_t i = 0; i + 1 < chunks.size(); ++i) {
      const Json& choice = chunks[i]["choices"][0];
      EXPECT_EQ(chunks[i]["object"],
                chat ? "chat.completion.chunk" : "text_completion");
      text += chat ? choice["delta"].value("content", "")
                   : choice["text"].get<std::string>();
      if (!choice["logprobs"].is_null()) {
        logprobs += chat ? choice["logprobs"]["content"].size()
                         : choice["logprobs"]["tokens"].size();
      }
      if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    }
    if (chat) {
      EXPECT_EQ(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    }
    const Json& answer = whole["choices"][0];
    EXPECT_EQ(text, chat ? answer["message"]["content"] : answer["text"]);
    EXPECT_EQ(finish, answer["finish_reason"]);
    // The last chunk carries only usage, equal to the whole answer's.
    EXPECT_EQ(chunks.back()["choices"], Json::array());
    EXPECT_EQ(chunks.back()["usage"], whole["usage"]);
    EXPECT_EQ(logprobs, whole["usage"]["completion_tokens"].get<size_t>());
  }
}

TEST(ServerTest, StopStringsCutTheText) {
  TestServer& s = Shared();
  // A seeded answer with an ASCII pair in its second half: the stop string.
  Json req = Completion("The total of 7 and 8 is", 24);
  req["temperature"] = 1.0;
  req["ignore_eos"] = true;
  std::string text, stop;
  for (int seed = 0; seed < 50 && stop.empty(); ++seed) {
    req["seed"] = seed;
    auto [status, free] = s.Post("/v1/completions", req);
    ASSERT_EQ(status, 200);
    text = free["choices"][0]["text"];
    for (size_t i = text.size() / 2; i + 1 < text.size(); ++i) {
      if (std::isalnum(static_cast<unsigned char>(text[i])) &&
          std::isalnum(static_cast<unsigned char>(text[i + 1]))) {
        stop = text.substr(i, 2);
        break;
      }
    }
  }
  ASSERT_FALSE(stop.empty());
  const size_t first = text.find(stop);
  req["stop"] = {"never-appears", stop};
  for (bool stream : {false, true}) {
    req["stream"] = stream;
    std::string got;
    Json finish;
    if (!stream) {
      auto [st, cut] = s.Post("/v1/completions", req);
      ASSERT_EQ(st, 200);
      got = cut["choices"][0]["text"];
      finish = cut["choices"][0]["finish_reason"];
      EXPECT_LT(cut["usage"]["completion_tokens"].get<int>(), 24);
    } else {
      httplib::Client c = s.Client();
      auto res = c.Post("/v1/completions", req.dump(), "application/json");
      ASSERT_TRUE(res);
      bool done = false;
      for (const Json& chunk : SseChunks(res->body, &done)) {
        got += chunk["choices"][0]["text"].get<std::string>();
        if (!chunk["choices"][0]["finish_reason"].is_null()) {
          finish = chunk["choices"][0]["finish_reason"];
        }
      }
      EXPECT_TRUE(done);
    }
    EXPECT_EQ(got, text.substr(0, first)) << "stream " << stream;
    EXPECT_EQ(finish, "stop");
  }
}

TEST(ServerTest, SamplesAndSeeds) {
  TestServer& s = Shared();
  Json req = Completion("Pick a number", 10);
  req["temperature"] = 1.0;
  req["n"] = 3;
  req["seed"] = 4;
  auto [s1, a] = s.Post("/v1/completions", req);
  auto [s2, b] = s.Post("/v1/completions", req);
  ASSERT_EQ(s1, 200);
  ASSERT_EQ(a["choices"].size(), 3u);
  EXPECT_EQ(a["choices"], b["choices"]);  // same seed, same samples
  EXPECT_NE(a["choices"][0]["text"], a["choices"][1]["text"]);
  req["seed"] = 5;
  EXPECT_NE(s.Post("/v1/completions", req).second["choices"], a["choices"]);
  // Token-id prompts.
  auto [s3, ids] =
      s.Post("/v1/completions",
             {{"model", "tiny"}, {"prompt", {72, 105}}, {"max_tokens", 3}});
  EXPECT_EQ(s3, 200);
  EXPECT_EQ(ids["usage"]["prompt_tokens"], 2);
}

TEST(ServerTest, ErrorsHaveStatusesAndTheServerKeepsServing) {
  TestServer& s = Shared();
  struct Case {
    const char* path;
    std::string body;
    int status;
    const char* code;  // "" for null
  };
  const std::string long_prompt(400, 'q');  // 400 byte tokens > 128
  const std::vector<Case> cases = {
      {"/v1/completions", "{not json", 400, ""},
      {"/v1/completions", R"({"model": "gpt-4", "prompt": "x"})", 404,
       "model_not_found"},
      {"/v1/completions",
       Json{{"model", "tiny"}, {"prompt", long_prompt}}.dump(), 400,
       "context_length_exceeded"},
      {"/v1/completions",
       R"({"model": "tiny", "prompt": "x", "max_tokens": 500})", 400,
       "context_length_exceeded"},
      {"/v1/completions", R"({"model": "tiny", "prompt": [1, 99999]})", 400,
       ""},
      {"/v1/completions", R"({"model": "tiny", "prompt": "x", "top_p": 7})",
       400, ""},
      {"/v1/chat/completions", R"({"model": "tiny", "messages": "hi"})", 400,
       ""},
      {"/v1/completions", std::string(5000, ' '), 413, ""},
      {"/v1/nothing", "{}", 404, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body.substr(0, 60));
    auto [status, body] = s.PostRaw(c.path, c.body);
    EXPECT_EQ(status, c.status);
    ASSERT_TRUE(body.contains("error")) << body.dump();
    EXPECT_TRUE(body["error"]["message"].is_string());
    EXPECT_TRUE(body["error"].contains("type"));
    EXPECT_TRUE(body["error"].contains("param"));
    if (*c.code) {
      EXPECT_EQ(body["error"]["code"], c.code);
    }
  }
  // A stream request that fails validation gets the status, not a stream.
  Json bad = Completion("x", 500);
  bad["stream"] = true;
  EXPECT_EQ(s.Post("/v1/completions", bad).first, 400);
  EXPECT_EQ(s.Post("/v1/completions", Completion("still here", 2)).first, 200);
}

TEST(ServerTest, InFlightLimitAndClientLeavingMidStream) {
  // Long enough (4000 tokens) to be running while the rest happens.
  TestServer s(/*max_concurrent=*/1, /*max_model_len=*/4096);
  Json req = Completion("a long one", 4000);
  req["stream"] = true;
  std::atomic<int> chunks{0};
  std::atomic<bool> leave{false};
  std::thread streamer([&] {
    httplib::Client c = s.Client();
    httplib::Request r;
    r.method = "POST";
    r.path = "/v1/completions";
    r.body = req.dump();
    r.set_header("Content-Type", "application/json");
    r.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
      ++chunks;
      return !leave.load();  // false: hang up mid-stream
    };
    c.send(r);
  });
  while (chunks.load() == 0) std::this_thread::yield();
  // The one slot is taken: 429 with a rate-limit error.
  auto [status, body] = s.Post("/v1/completions", Completion("x", 2));
  EXPECT_EQ(status, 429);
  EXPECT_EQ(body["error"]["type"], "rate_limit_error");
  leave = true;
  streamer.join();
  // The slot comes back once the server sees the client gone.
  int st = 0;
  for (int i = 0; i < 200 && st != 200; ++i) {
    st = s.Post("/v1/completions", Completion("x", 2)).first;
    if (st != 200) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(st, 200);
}

using ::verl::models::vlm::testing::MakeRampImage;

std::unique_ptr<LLMEngine> VlmEngine(std::shared_ptr<models::CausalLM> model) {
  EngineOptions eo;
  eo.max_model_len = 256;
  eo.kv_cache_bytes = 16 << 20;
  eo.block_size = 8;
  auto engine = LLMEngine::Create(std::move(model), eo);
  CHECK(engine.ok()) << engine.status();
  return *std::move(engine);
}

TEST(ServerTest, ImagesThroughChatOnAVisionLanguageModel) {
  auto model = models::vlm::testing::MakeSharpTinyVlm(/*seed=*/3);
  auto tok = models::vlm::MakeVlmTokenizer(model->vlm_config());
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::string pngs[2] = {*models::vlm::EncodePng(MakeRampImage(false)),
                               *models::vlm::EncodePng(MakeRampImage(true))};
  constexpr int kMaxTokens = 6;
  constexpr char kQuestion[] = "Which region is darker?";

  // The engine directly on the processor's inputs for verl's "<image>" row.
  models::vlm::VlmProcessor processor(*tok,
                                      models::vlm::ImageProcessorConfig());
  std::vector<int64_t> want_prompt[2];
  std::vector<infer::RequestOutput> direct;
  {
    auto engine = VlmEngine(model);
    SamplingParams params;
    params.do_sample = false;
    params.temperature = 0;
    params.max_tokens = kMaxTokens;
    params.ignore_eos = true;
    const Json row = Json::array(
        {{{"role", "user"}, {"content", std::string("<image>") + kQuestion}}});
    for (int i = 0; i < 2; ++i) {
      auto image = models::vlm::DecodeImage(pngs[i], "png");
      ASSERT_TRUE(image.ok()) << image.status();
      auto p = processor.ProcessMessages(row, {*image});
      ASSERT_TRUE(p.ok()) << p.status();
      want_prompt[i] = p->input_ids;
      ASSERT_TRUE(engine
                      ->AddRequest(p->input_ids, params,
                                   {p->pixel_values, p->image_grid_thw})
                      .ok());
    }
    direct = engine->RunUntilDone();
    std::sort(direct.begin(), direct.end(), [](const auto& a, const auto& b) {
      return a.request_id < b.request_id;
    });
    ASSERT_EQ(direct.size(), 2u);
  }

  ServerOptions so;
  so.port = 0;
  so.served_model_name = "tiny-vl";
  so.image_processor = models::vlm::ImageProcessorConfig();
  Server server(VlmEngine(model), *tok, so);
  auto port = server.Bind();
  ASSERT_TRUE(port.ok()) << port.status();
  std::thread serving([&] { server.Serve(); });
  struct StopAndJoin {  // also when an ASSERT returns early
    Server* s;
    std::thread* t;
    ~StopAndJoin() {
      s->Stop();
      t->join();
    }
  } stop_and_join{&server, &serving};
  httplib::Client c("127.0.0.1", *port);
  c.set_read_timeout(120);
  auto post = [&](const Json& content) {
    Json body = {{"model", "tiny-vl"},
                 {"messages", {{{"role", "user"}, {"content", content}}}},
                 {"max_tokens", kMaxTokens},
                 {"temperature", 0},
                 {"ignore_eos", true},
                 {"logprobs", true},
                 {"return_token_ids", true}};
    auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
    EXPECT_TRUE(res);
    return res ? std::make_pair(res->status, Json::parse(res->body))
               : std::make_pair(0, Json());
  };
  auto image_part = [](const std::string& url) {
    return Json{{"type", "image_url"}, {"image_url", {{"url", url}}}};
  };
  auto png_url = [&](int i) {
    return "data:image/png;base64," + absl::Base64Escape(pngs[i]);
  };

  float first_logprob[2];
  for (int i = 0; i < 2; ++i) {
    auto [st, j] = post(Json::array(
        {image_part(png_url(i)), {{"type", "text"}, {"text", kQuestion}}}));
    ASSERT_EQ(st, 200) << j.dump();
    const Json& choice = j["choices"][0];
    EXPECT_EQ(j["usage"]["prompt_tokens"].get<int64_t>(),
              static_cast<int64_t>(want_prompt[i].size()));
    const infer::CompletionOutput& d = direct[i].outputs[0];
    EXPECT_EQ(choice["token_ids"].get<std::vector<int64_t>>(), d.token_ids);
    const Json& lps = choice["logprobs"]["content"];
    ASSERT_EQ(lps.size(), d.logprobs.size());
    for (size_t t = 0; t < lps.size(); ++t) {
      EXPECT_NEAR(lps[t]["logprob"].get<float>(), d.logprobs[t], 1e-5) << t;
    }
    first_logprob[i] = lps[0]["logprob"].get<float>();
  }
  // The image is used: the two images move the first token's log-prob.
  LOG(INFO) << "first-token log-probs: " << first_logprob[0] << " vs "
            << first_logprob[1];
  EXPECT_GT(std::abs(first_logprob[0] - first_logprob[1]), 1e-4);

  // Errors: 400 with a one-line message; the server keeps serving.
  auto expect_400 = [&](const Json& content, const std::string& needle) {
    auto [st, j] = post(content);
    EXPECT_EQ(st, 400) << j.dump();
    const std::string msg = j["error"]["message"].get<std::string>();
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  };
  expect_400(Json::array({image_part("https://example.com/a.png")}),
             "does not download");
  expect_400(Json::array({image_part("/tmp/a.png")}), "only data: URLs");
  expect_400(Json::array({image_part("data:image/png;base64,@@")}),
             "invalid base64");
  expect_400(Json::array({image_part("data:image/png;base64," +
                                     absl::Base64Escape("not an image"))}),
             "image 0");
  auto [st, j] = post(Json::array({{{"type", "text"}, {"text", "hello"}}}));
  EXPECT_EQ(st, 200) << j.dump();
}

TEST(ServerTest, TextOnlyModelRefusesImages) {
  models::vlm::Image small;  // 8x8 grey: fits the 4 KiB body limit
  small.width = small.height = 8;
  small.rgb.assign(8 * 8 * 3, 128);
  std::string png = *models::vlm::EncodePng(small);
  auto [st, j] = Shared().Post(
      "/v1/chat/completions",
      {{"model", "tiny"},
       {"messages",
        {{{"role", "user"},
          {"content",
           {{{"type", "image_url"},
             {"image_url",
              {{"url", "data:image/png;base64," + absl::Base64Escape(png)}}}},
            {{"type", "text"}, {"text", "what?"}}}}}}}});
  EXPECT_EQ(st, 400) << j.dump();
  EXPECT_NE(j["error"]["message"].get<std::string>().find("vision-language"),
            std::string::npos)
      << j.dump();
}

}  // namespace
}  // namespace verl::infer::serve
