// File: verl/infer/serve/server_test.cc
//
// The server in-process on a free port with a tiny random model, driven over
// HTTP by cpp-httplib's client: concurrent greedy requests equal sequential
// ones, streams concatenate to the non-streamed answer, stop strings, n and
// seeds, error statuses (the server keeps serving), the in-flight limit and
// a client leaving mid-stream.
#include "verl/infer/serve/server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "verl/infer/serve/testing/test_server.h"

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

}  // namespace
}  // namespace verl::infer::serve
