// File: verl/infer/serve/api_test.cc
#include "verl/infer/serve/api.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "verl/core/test_util.h"

namespace verl::infer::serve {
namespace {

using core::testing::StatusIs;

TEST(ApiTest, ParsesCompletionRequest) {
  auto r = ParseRequest(R"({"model": "m", "prompt": "hi", "n": 2,
      "temperature": 0.5, "top_p": 0.9, "top_k": 5, "seed": 7,
      "max_tokens": 9, "stop": ["a", "bc"], "ignore_eos": true, "logprobs": 0, "stream": true,
      "stream_options": {"include_usage": true}, "user": "ignored"})",
                        Endpoint::kCompletions);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model, "m");
  EXPECT_EQ(r->prompt_text, "hi");
  EXPECT_EQ(r->sampling.n, 2);
  EXPECT_DOUBLE_EQ(r->sampling.temperature, 0.5);
  EXPECT_DOUBLE_EQ(r->sampling.top_p, 0.9);
  EXPECT_EQ(r->sampling.top_k, 5);
  EXPECT_EQ(r->sampling.seed, 7u);
  EXPECT_EQ(r->max_tokens, 9);
  EXPECT_TRUE(r->sampling.ignore_eos);
  EXPECT_EQ(r->stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_TRUE(r->logprobs);  // logprobs: 0 still asks for the chosen token
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
}

TEST(ApiTest, PromptForms) {
  auto ids = ParseRequest(R"({"model": "m", "prompt": [1, 2, 3]})",
                          Endpoint::kCompletions);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->prompt_ids, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_FALSE(ids->prompt_text.has_value());
  auto nested = ParseRequest(R"({"model": "m", "prompt": [[4, 5]]})",
                             Endpoint::kCompletions);
  ASSERT_TRUE(nested.ok());
  EXPECT_EQ(nested->prompt_ids, (std::vector<int64_t>{4, 5}));
  auto one = ParseRequest(R"({"model": "m", "prompt": ["x"], "stop": "s"})",
                          Endpoint::kCompletions);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->prompt_text, "x");
  EXPECT_EQ(one->stop, std::vector<std::string>{"s"});
  EXPECT_FALSE(one->logprobs);
  EXPECT_FALSE(one->max_tokens.has_value());
  // null means "default", as in OpenAI's API.
  auto nulls = ParseRequest(
      R"({"model": "m", "prompt": "p", "temperature": null, "n": null})",
      Endpoint::kCompletions);
  ASSERT_TRUE(nulls.ok());
  EXPECT_EQ(nulls->sampling.n, 1);
}

TEST(ApiTest, ParsesChatRequest) {
  auto r = ParseRequest(R"({"model": "m", "messages": [
      {"role": "system", "content": [{"type": "text", "text": "a"},
                                     {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c",
        "type": "function", "function": {"name": "f",
        "arguments": "{\"x\": 1}"}}]},
      {"role": "tool", "content": "3", "tool_call_id": "c"}],
      "tools": [{"type": "function", "function": {"name": "f"}}],
      "max_completion_tokens": 5, "logprobs": true, "top_logprobs": 2,
      "chat_template_kwargs": {"enable_thinking": false}})",
                        Endpoint::kChat);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->messages[0]["content"], "ab");
  EXPECT_EQ(r->messages[1]["content"], "");
  // Arguments become an object, as chat templates expect.
  EXPECT_EQ(r->messages[1]["tool_calls"][0]["function"]["arguments"]["x"], 1);
  EXPECT_EQ(r->tools.size(), 1u);
  EXPECT_TRUE(r->parse_tool_calls);
  EXPECT_EQ(r->max_tokens, 5);
  EXPECT_TRUE(r->logprobs);
  EXPECT_EQ(r->chat_template_kwargs["enable_thinking"], false);
  auto none = ParseRequest(R"({"model": "m", "messages": [{"role": "user",
      "content": "q"}], "tools": [{"type": "function", "function":
      {"name": "f"}}], "tool_choice": "none"})",
                           Endpoint::kChat);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->parse_tool_calls);
}

struct BadCase {
  const char* name;
  Endpoint endpoint;
  const char* body;
  const char* param;    // expected "param" of the error ("" for null)
  const char* message;  // substring of the message
};

TEST(ApiTest, ImagePartsBecomeTemplateItemsAndBytes) {
  // "iVBORw0KGgo=" is the PNG signature's base64.
  auto r = ParseRequest(
      R"({"model": "m", "messages": [
           {"role": "system", "content": [{"type": "text", "text": "s"}]},
           {"role": "user", "content": [
             {"type": "text", "text": "a"},
             {"type": "image_url",
              "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
             {"type": "image_url",
              "image_url": {"url": "data:image/jpeg;base64,/9j/"}},
             {"type": "text", "text": "b"}]}]})",
      Endpoint::kChat);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->messages[0]["content"], "s");  // text-only stays a string
  EXPECT_EQ(r->messages[1]["content"],
            Json::parse(R"([{"type": "text", "text": "a"}, {"type": "image"},
                            {"type": "image"}, {"type": "text", "text": "b"}])"));
  ASSERT_EQ(r->images.size(), 2u);
  EXPECT_EQ(r->images[0], std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(r->images[1], std::string("\xff\xd8\xff", 3));
}

TEST(ApiTest, MalformedRequestsAreInvalidRequestErrors) {
  const BadCase cases[] = {
      {"bad json", Endpoint::kCompletions, "{\"model\": ", "",
       "not valid JSON"},
      {"not object", Endpoint::kCompletions, "[1]", "", "JSON object"},
      {"no model", Endpoint::kCompletions, R"({"prompt": "p"})", "model",
       "'model'"},
      {"model not string", Endpoint::kCompletions,
       R"({"model": 3, "prompt": "p"})", "model", "'model'"},
      {"no prompt", Endpoint::kCompletions, R"({"model": "m"})", "prompt",
       "'prompt' is required"},
      {"prompt number", Endpoint::kCompletions,
       R"({"model": "m", "prompt": 3})", "prompt", "string or an array"},
      {"batch prompt", Endpoint::kCompletions,
       R"({"model": "m", "prompt": ["a", "b"]})", "prompt",
       "one prompt per request"},
      {"mixed ids", Endpoint::kCompletions,
       R"({"model": "m", "prompt": [1, "a"]})", "prompt", "integers only"},
      {"n zero", Endpoint::kCompletions,
       R"({"model": "m", "prompt": "p", "n": 0})", "n", "'n' must be in"},
      {"n too big", Endpoint::kCompletions,
       R"({"model": "m", "prompt": "p", "n": 17})", "n", "[1, 16]"},
      {"n float", Endpoint::kCompletions,
       R"({"model": "m", "prompt": "p", "n": 1.5})", "n", "integer"},
      {"temperature string", Endpoint::kCompletions,
       R"({"model": "m", "prompt": "p", "temperature": "hot"})", "temperature",
       "number"},
      {"temperature high", Endpoint::kCompletions,
       R"({"model": "m", "prompt": "p", "temperature": 2.5})", "temperature",
       "[0, 2]"},
      {"top_p zero", Endpoint::kCompletions,
       R"({"model": "m", "prompt": "p", "top_p": 0})", "top_p", "(0, 1]"},
      {"top_k low", Endpoint::kCompletions,
       R"({"model": "m", "prompt": "p", "top_k": -2})", "top_k", "top_k"},
      {"max_tokens zero", Endpoint::kCompletions,
       R"({"model": "m", "prompt": "p", "max_tokens": 0})", "max_tokens",
       "max_tokens"},
      {"stop number", Endpoint::kCompletions,
       R"({"model": "m", "prompt": "p", "stop": 5})", "stop", "'stop'"},
      {"stop empty", Endpoint::kCompletions,
       R"({"model": "m", "prompt": "p", "stop": [""]})", "stop",
       "must not be empty"},
      {"too many stops", Endpoint::kCompletions,
       R"({"model": "m", "prompt": "p", "stop": ["a","b","c","d","e"]})",
       "stop", "at most 4"},
      {"stream not bool", Endpoint::kCompletions,
       R"({"model": "m", "prompt": "p", "stream": "yes"})", "stream",
       "boolean"},
      {"stream_options without stream", Endpoint::kCompletions,
       R"({"model": "m", "prompt": "p", "stream_options": {}})",
       "stream_options", "only allowed"},
      {"logprobs too many", Endpoint::kCompletions,
       R"({"model": "m", "prompt": "p", "logprobs": 6})", "logprobs", "[0, 5]"},
      {"echo", Endpoint::kCompletions,
       R"({"model": "m", "prompt": "p", "echo": true})", "echo",
       "not supported"},
      {"presence penalty", Endpoint::kCompletions,
       R"({"model": "m", "prompt": "p", "presence_penalty": 0.5})",
       "presence_penalty", "not supported"},
      {"logit bias", Endpoint::kCompletions,
       R"({"model": "m", "prompt": "p", "logit_bias": {"1": 2}})", "logit_bias",
       "not supported"},
      {"repetition penalty", Endpoint::kCompletions,
       R"({"model": "m", "prompt": "p", "repetition_penalty": 0})",
       "repetition_penalty", "> 0"},
      {"no messages", Endpoint::kChat, R"({"model": "m"})", "messages",
       "non-empty array"},
      {"empty messages", Endpoint::kChat, R"({"model": "m", "messages": []})",
       "messages", "non-empty array"},
      {"message without role", Endpoint::kChat,
       R"({"model": "m", "messages": [{"content": "x"}]})", "messages[0]",
       "'role'"},
      {"image part not a data URL", Endpoint::kChat,
       R"({"model": "m", "messages": [{"role": "user", "content":
          [{"type": "image_url", "image_url": {"url": "u"}}]}]})",
       "messages[0].content", "only data: URLs"},
      {"image http URL", Endpoint::kChat,
       R"({"model": "m", "messages": [{"role": "user", "content":
          [{"type": "image_url",
            "image_url": {"url": "https://example.com/a.png"}}]}]})",
       "messages[0].content", "does not download"},
      {"image data URL not png/jpeg", Endpoint::kChat,
       R"({"model": "m", "messages": [{"role": "user", "content":
          [{"type": "image_url",
            "image_url": {"url": "data:image/gif;base64,R0lG"}}]}]})",
       "messages[0].content", "malformed image data URL"},
      {"image data URL bad base64", Endpoint::kChat,
       R"({"model": "m", "messages": [{"role": "user", "content":
          [{"type": "image_url",
            "image_url": {"url": "data:image/png;base64,!!"}}]}]})",
       "messages[0].content", "invalid base64"},
      {"image part without url", Endpoint::kChat,
       R"({"model": "m", "messages": [{"role": "user", "content":
          [{"type": "image_url"}]}]})",
       "messages[0].content", "image_url part needs"},
      {"unknown part", Endpoint::kChat,
       R"({"model": "m", "messages": [{"role": "user", "content":
          [{"type": "audio", "audio": "x"}]}]})",
       "messages[0].content", "content parts are supported"},
      {"content number", Endpoint::kChat,
       R"({"model": "m", "messages": [{"role": "user", "content": 3}]})",
       "messages[0].content", "string or an array"},
      {"tools not array", Endpoint::kChat,
       R"({"model": "m", "messages": [{"role": "user", "content": "q"}],
          "tools": {}})",
       "tools", "array"},
      {"tool without name", Endpoint::kChat,
       R"({"model": "m", "messages": [{"role": "user", "content": "q"}],
          "tools": [{"type": "function", "function": {}}]})",
       "tools[0]", "\"name\""},
      {"tool_choice required", Endpoint::kChat,
       R"({"model": "m", "messages": [{"role": "user", "content": "q"}],
          "tool_choice": "required"})",
       "tool_choice", "not supported"},
      {"chat logprobs int", Endpoint::kChat,
       R"({"model": "m", "messages": [{"role": "user", "content": "q"}],
          "logprobs": 1})",
       "logprobs", "boolean"},
      {"kwargs not object", Endpoint::kChat,
       R"({"model": "m", "messages": [{"role": "user", "content": "q"}],
          "chat_template_kwargs": []})",
       "chat_template_kwargs", "object"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = ParseRequest(c.body, c.endpoint);
    ASSERT_THAT(r.status(),
                StatusIs(absl::StatusCode::kInvalidArgument, c.message));
    HttpError e = ApiError(r.status());
    EXPECT_EQ(e.status, 400);
    const Json& err = e.body["error"];
    EXPECT_EQ(err["type"], "invalid_request_error");
    EXPECT_EQ(err["message"], std::string(r.status().message()));
    if (std::string(c.param).empty()) {
      EXPECT_TRUE(err["param"].is_null());
    } else {
      EXPECT_EQ(err["param"], c.param);
    }
    EXPECT_TRUE(err.contains("code"));
  }
}

TEST(ApiTest, ErrorStatusMapping) {
  EXPECT_EQ(ApiError(ModelNotFound("x")).status, 404);
  EXPECT_EQ(ApiError(ModelNotFound("x")).body["error"]["code"],
            "model_not_found");
  HttpError ctx =
      ApiError(ParamError("max_tokens", "too long", "context_length_exceeded"));
  EXPECT_EQ(ctx.status, 400);
  EXPECT_EQ(ctx.body["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(ApiError(absl::ResourceExhaustedError("busy")).status, 429);
  EXPECT_EQ(ApiError(absl::UnavailableError("down")).status, 503);
  EXPECT_EQ(ApiError(absl::InternalError("bug")).body["error"]["type"],
            "server_error");
  HttpError big = HttpStatusError(413, "too big");
  EXPECT_EQ(big.body["error"]["message"], "too big");
  EXPECT_TRUE(big.body["error"]["param"].is_null());
}

ResponseHeader Header(Endpoint e, bool logprobs = false) {
  ResponseHeader h;
  h.id = "id1";
  h.created = 123;
  h.model = "m";
  h.endpoint = e;
  h.logprobs = logprobs;
  return h;
}

TEST(ApiTest, CompletionResponseShape) {
  Choice c;
  c.text = "hello";
  c.finish_reason = "stop";
  c.tokens = {"he", "llo"};
  c.token_logprobs = {-0.5f, -1.0f};
  Json j = ResponseJson(Header(Endpoint::kCompletions, true), {c}, {3, 2});
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["id"], "id1");
  EXPECT_EQ(j["created"], 123);
  EXPECT_EQ(j["choices"][0]["text"], "hello");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][0]["logprobs"]["tokens"][1], "llo");
  EXPECT_EQ(j["choices"][0]["logprobs"]["text_offset"], Json({0, 2}));
  EXPECT_FLOAT_EQ(j["choices"][0]["logprobs"]["token_logprobs"][0].get<float>(),
                  -0.5f);
  EXPECT_EQ(j["usage"], Json({{"prompt_tokens", 3},
                              {"completion_tokens", 2},
                              {"total_tokens", 5}}));
  Json plain = ResponseJson(Header(Endpoint::kCompletions), {c}, {});
  EXPECT_TRUE(plain["choices"][0]["logprobs"].is_null());
}

TEST(ApiTest, ChatResponseAndChunks) {
  Choice c;
  c.text = "hi";
  c.finish_reason = "length";
  Json j = ResponseJson(Header(Endpoint::kChat, true), {c}, {1, 1});
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"],
            Json({{"role", "assistant"}, {"content", "hi"}}));
  EXPECT_EQ(j["choices"][0]["logprobs"]["content"], Json::array());
  Json first = ChunkJson(Header(Endpoint::kChat), {Choice{}}, true);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"],
            Json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  Json next = ChunkJson(Header(Endpoint::kChat), {c}, false);
  EXPECT_EQ(next["choices"][0]["delta"], Json({{"content", "hi"}}));
  EXPECT_EQ(next["choices"][0]["finish_reason"], "length");
  Json usage = UsageChunkJson(Header(Endpoint::kChat), {4, 2});
  EXPECT_EQ(usage["choices"], Json::array());
  EXPECT_EQ(usage["usage"]["total_tokens"], 6);
  EXPECT_EQ(SseEvent(Json{{"a", 1}}), "data: {\"a\":1}\n\n");
  // Invalid UTF-8 never throws.
  EXPECT_EQ(DumpJson(Json("a\xff")), "\"a\xEF\xBF\xBD\"");
}

TEST(ApiTest, ToolCallsFromHermesBlocks) {
  Choice c;
  c.text =
      "Let me compute.\n<tool_call>\n{\"name\": \"calc\", \"arguments\": "
      "{\"expr\": \"1+2\"}}\n</tool_call>\n<tool_call>{\"name\": \"now\", "
      "\"arguments\": {}}</tool_call>";
  c.finish_reason = "stop";
  ExtractToolCalls("x", &c);
  ASSERT_EQ(c.tool_calls.size(), 2u);
  EXPECT_EQ(c.tool_calls[0].id, "call_x_0");
  EXPECT_EQ(c.tool_calls[0].name, "calc");
  EXPECT_EQ(c.tool_calls[0].arguments, "{\"expr\": \"1+2\"}");
  EXPECT_EQ(c.tool_calls[1].name, "now");
  EXPECT_EQ(c.tool_calls[1].arguments, "{}");
  EXPECT_EQ(c.text, "Let me compute.");
  EXPECT_EQ(c.finish_reason, "tool_calls");
  Json j = ResponseJson(Header(Endpoint::kChat), {c}, {});
  const Json& call = j["choices"][0]["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "calc");
  EXPECT_FALSE(call.contains("index"));
  Json chunk = ChunkJson(Header(Endpoint::kChat), {c}, false);
  EXPECT_EQ(chunk["choices"][0]["delta"]["tool_calls"][1]["index"], 1);
  // Only calls: content is null.
  Choice only;
  only.text = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
  ExtractToolCalls("y", &only);
  EXPECT_TRUE(ResponseJson(Header(Endpoint::kChat), {only},
                           {})["choices"][0]["message"]["content"]
                  .is_null());
  // Malformed or absent blocks leave the answer as text.
  for (const char* text : {"no calls here", "<tool_call>{not json}</tool_call>",
                           "<tool_call>{\"name\": \"f\"}</tool_call>"}) {
    Choice m;
    m.text = text;
    m.finish_reason = "stop";
    ExtractToolCalls("z", &m);
    EXPECT_TRUE(m.tool_calls.empty()) << text;
    EXPECT_EQ(m.text, text);
    EXPECT_EQ(m.finish_reason, "stop");
  }
}

TEST(ApiTest, ModelsList) {
  Json j = ModelsJson("m", 5, 256);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["data"][0]["id"], "m");
  EXPECT_EQ(j["data"][0]["object"], "model");
  EXPECT_EQ(j["data"][0]["max_model_len"], 256);
}

}  // namespace
}  // namespace verl::infer::serve
