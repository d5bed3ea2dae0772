// File: verl/infer/serve/api.cc
#include "verl/infer/serve/api.h"

#include <functional>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "verl/core/status.h"
#include "verl/infer/agent/tool_call.h"

namespace verl::infer::serve {
namespace {

constexpr char kParamPayload[] = "openai.param";
constexpr char kCodePayload[] = "openai.code";

// The field's value, or nullptr when absent or null (OpenAI treats both as
// "use the default").
const Json* Field(const Json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::StatusOr<std::optional<int64_t>> IntField(const Json& body,
                                                const char* key, int64_t lo,
                                                int64_t hi) {
  const Json* v = Field(body, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) {
    return ParamError(key, absl::StrCat("'", key, "' must be an integer"));
  }
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) {
    return ParamError(key, absl::StrCat("'", key, "' must be in [", lo, ", ",
                                        hi, "], got ", x));
  }
  return x;
}

absl::StatusOr<std::optional<double>> NumberField(const Json& body,
                                                  const char* key) {
  const Json* v = Field(body, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) {
    return ParamError(key, absl::StrCat("'", key, "' must be a number"));
  }
  return v->get<double>();
}

absl::StatusOr<std::optional<bool>> BoolField(const Json& body,
                                              const char* key) {
  const Json* v = Field(body, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) {
    return ParamError(key, absl::StrCat("'", key, "' must be a boolean"));
  }
  return v->get<bool>();
}

absl::Status Unsupported(const char* key, absl::string_view what) {
  return ParamError(key, absl::StrCat("'", key, "': ", what,
                                      " is not supported by this server"));
}

absl::StatusOr<std::vector<int64_t>> TokenIds(const Json& v) {
  std::vector<int64_t> ids;
  for (const Json& t : v) {
    if (!t.is_number_integer()) {
      return ParamError("prompt", "token-id prompts must hold integers only");
    }
    ids.push_back(t.get<int64_t>());
  }
  return ids;
}

// `prompt`: a string, token ids, or a one-element array of either.
absl::Status ParsePrompt(const Json& body, ApiRequest* req) {
  const Json* p = Field(body, "prompt");
  if (p == nullptr) return ParamError("prompt", "'prompt' is required");
  if (p->is_array() && p->size() == 1 &&
      ((*p)[0].is_string() || (*p)[0].is_array())) {
    p = &(*p)[0];
  }
  if (p->is_string()) {
    req->prompt_text = p->get<std::string>();
    return absl::OkStatus();
  }
  if (p->is_array() && !p->empty() && (*p)[0].is_number_integer()) {
    VERL_ASSIGN_OR_RETURN(req->prompt_ids, TokenIds(*p));
    return absl::OkStatus();
  }
  if (p->is_array() && p->size() > 1) {
    return ParamError("prompt",
                      "one prompt per request is supported (send several "
                      "requests; they share the engine's batch)");
  }
  return ParamError("prompt",
                    "'prompt' must be a string or an array of token ids");
}

// An image_url part's data URL ("data:image/png;base64,..." or
// image/jpeg) as the image's bytes. Other URLs are refused: the server
// downloads nothing.
absl::StatusOr<std::string> DataUrlBytes(const Json& part,
                                         const std::string& param) {
  const Json* url = nullptr;
  if (part.contains("image_url")) {
    const Json& iu = part["image_url"];
    if (iu.is_string()) url = &iu;
    if (iu.is_object() && iu.contains("url") && iu["url"].is_string()) {
      url = &iu["url"];
    }
  }
  if (url == nullptr) {
    return ParamError(param,
                      "an image_url part needs {\"image_url\": {\"url\": "
                      "\"data:image/png;base64,...\"}}");
  }
  const std::string& u = url->get_ref<const std::string&>();
  if (!absl::StartsWith(u, "data:")) {
    return ParamError(param,
                      "only data: URLs (data:image/png;base64,... or "
                      "data:image/jpeg;base64,...) are accepted; the server "
                      "does not download http(s) URLs or read files");
  }
  const size_t comma = u.find(',');
  const std::string header =
      comma == std::string::npos ? u : u.substr(0, comma);
  if (comma == std::string::npos || (header != "data:image/png;base64" &&
                                     header != "data:image/jpeg;base64" &&
                                     header != "data:image/jpg;base64")) {
    return ParamError(param,
                      "malformed image data URL: expected "
                      "data:image/png;base64,<data> or "
                      "data:image/jpeg;base64,<data>");
  }
  std::string bytes;
  if (!absl::Base64Unescape(absl::string_view(u).substr(comma + 1), &bytes) ||
      bytes.empty()) {
    return ParamError(param, "malformed image data URL: invalid base64 data");
  }
  return bytes;
}

// Message content as chat templates read it: a string (null and text parts
// joined), or, with image_url parts, a list of {"type": "text", "text"} and
// {"type": "image"} items (the image bytes appended to `images`).
absl::StatusOr<Json> Content(const Json& content, size_t i,
                             std::vector<std::string>* images) {
  if (content.is_null()) return Json(std::string());
  if (content.is_string()) return content;
  const std::string param = absl::StrCat("messages[", i, "].content");
  if (!content.is_array()) {
    return ParamError(param, "content must be a string or an array of parts");
  }
  std::string text;
  Json items = Json::array();
  bool has_image = false;
  for (const Json& part : content) {
    const std::string type =
        part.is_object() ? part.value("type", "") : std::string();
    if (type == "image_url") {
      VERL_ASSIGN_OR_RETURN(std::string bytes, DataUrlBytes(part, param));
      images->push_back(std::move(bytes));
      items.push_back({{"type", "image"}});
      has_image = true;
      continue;
    }
    if (type != "text" || !part.contains("text") || !part["text"].is_string()) {
      return ParamError(param,
                        "only {\"type\": \"text\", \"text\": ...} and "
                        "{\"type\": \"image_url\", ...} content parts are "
                        "supported");
    }
    text += part["text"].get<std::string>();
    items.push_back({{"type", "text"}, {"text", part["text"]}});
  }
  if (has_image) return items;
  return Json(text);
}

// Messages as chat templates read them: content as text, tool-call
// arguments given as JSON text parsed to objects (as vLLM does).
absl::Status ParseMessages(const Json& body, ApiRequest* req) {
  const Json* m = Field(body, "messages");
  if (m == nullptr || !m->is_array() || m->empty()) {
    return ParamError("messages", "'messages' must be a non-empty array");
  }
  req->messages = Json::array();
  for (size_t i = 0; i < m->size(); ++i) {
    const Json& msg = (*m)[i];
    const std::string param = absl::StrCat("messages[", i, "]");
    if (!msg.is_object() || !msg.contains("role") || !msg["role"].is_string()) {
      return ParamError(param,
                        "each message must be an object with a "
                        "string 'role'");
    }
    Json out = msg;
    VERL_ASSIGN_OR_RETURN(
        Json content, Content(msg.value("content", Json()), i, &req->images));
    out["content"] = std::move(content);
    if (msg.contains("tool_calls") && msg["tool_calls"].is_array()) {
      for (Json& call : out["tool_calls"]) {
        if (!call.is_object() || !call.contains("function")) continue;
        Json& fn = call["function"];
        if (fn.is_object() && fn.contains("arguments") &&
            fn["arguments"].is_string()) {
          Json parsed = Json::parse(fn["arguments"].get<std::string>(), nullptr,
                                    /*allow_exceptions=*/false);
          if (!parsed.is_discarded()) fn["arguments"] = std::move(parsed);
        }
      }
    }
    req->messages.push_back(std::move(out));
  }
  return absl::OkStatus();
}

absl::Status ParseTools(const Json& body, ApiRequest* req) {
  const Json* tools = Field(body, "tools");
  if (tools != nullptr) {
    if (!tools->is_array()) {
      return ParamError("tools", "'tools' must be an array");
    }
    for (size_t i = 0; i < tools->size(); ++i) {
      const Json& t = (*tools)[i];
      if (!t.is_object() || t.value("type", "") != "function" ||
          !t.contains("function") || !t["function"].is_object() ||
          !t["function"].contains("name") ||
          !t["function"]["name"].is_string()) {
        return ParamError(absl::StrCat("tools[", i, "]"),
                          "each tool must be {\"type\": \"function\", "
                          "\"function\": {\"name\": ..., ...}}");
      }
    }
    req->tools = *tools;
  }
  bool choice_none = false;
  if (const Json* c = Field(body, "tool_choice")) {
    if (!c->is_string() || (*c != "auto" && *c != "none")) {
      return Unsupported("tool_choice", "a value other than \"auto\"/\"none\"");
    }
    choice_none = *c == "none";
  }
  req->parse_tool_calls = !req->tools.empty() && !choice_none;
  if (const Json* k = Field(body, "chat_template_kwargs")) {
    if (!k->is_object()) {
      return ParamError("chat_template_kwargs",
                        "'chat_template_kwargs' must be an object");
    }
    req->chat_template_kwargs = *k;
  }
  return absl::OkStatus();
}

absl::Status ParseStop(const Json& body, const ParseLimits& limits,
                       ApiRequest* req) {
  const Json* s = Field(body, "stop");
  if (s == nullptr) return absl::OkStatus();
  if (s->is_string()) {
    req->stop.push_back(s->get<std::string>());
  } else if (s->is_array()) {
    for (const Json& x : *s) {
      if (!x.is_string()) {
        return ParamError("stop", "'stop' must be a string or strings");
      }
      req->stop.push_back(x.get<std::string>());
    }
  } else {
    return ParamError("stop", "'stop' must be a string or an array of strings");
  }
  if (static_cast<int64_t>(req->stop.size()) > limits.max_stop_strings) {
    return ParamError("stop", absl::StrCat("at most ", limits.max_stop_strings,
                                           " stop strings"));
  }
  for (const std::string& x : req->stop) {
    if (x.empty()) return ParamError("stop", "stop strings must not be empty");
  }
  return absl::OkStatus();
}

absl::Status ParseSampling(const Json& body, const ParseLimits& limits,
                           ApiRequest* req) {
  SamplingParams& p = req->sampling;
  VERL_ASSIGN_OR_RETURN(auto n, IntField(body, "n", 1, limits.max_n));
  if (n) p.n = *n;
  VERL_ASSIGN_OR_RETURN(auto temperature, NumberField(body, "temperature"));
  if (temperature) {
    if (*temperature < 0 || *temperature > 2) {
      return ParamError("temperature", "'temperature' must be in [0, 2]");
    }
    p.temperature = *temperature;
  }
  VERL_ASSIGN_OR_RETURN(auto top_p, NumberField(body, "top_p"));
  if (top_p) {
    if (!(*top_p > 0 && *top_p <= 1)) {
      return ParamError("top_p", "'top_p' must be in (0, 1]");
    }
    p.top_p = *top_p;
  }
  VERL_ASSIGN_OR_RETURN(auto top_k, IntField(body, "top_k", -1, INT32_MAX));
  if (top_k) p.top_k = *top_k;
  VERL_ASSIGN_OR_RETURN(auto seed,
                        IntField(body, "seed", INT64_MIN, INT64_MAX));
  if (seed) p.seed = static_cast<uint64_t>(*seed);
  VERL_ASSIGN_OR_RETURN(auto rep, NumberField(body, "repetition_penalty"));
  if (rep) {
    if (!(*rep > 0)) {
      return ParamError("repetition_penalty",
                        "'repetition_penalty' must be > 0");
    }
    p.repetition_penalty = *rep;
  }
  VERL_ASSIGN_OR_RETURN(auto ignore_eos, BoolField(body, "ignore_eos"));
  p.ignore_eos = ignore_eos.value_or(false);
  if (const Json* stop_ids = Field(body, "stop_token_ids")) {
    if (!stop_ids->is_array()) {
      return ParamError("stop_token_ids",
                        "'stop_token_ids' must be an array of token ids");
    }
    for (const Json& id : *stop_ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0) {
        return ParamError("stop_token_ids",
                          "'stop_token_ids' must hold token ids (>= 0)");
      }
      p.stop_token_ids.push_back(id.get<int64_t>());
    }
  }
  VERL_ASSIGN_OR_RETURN(auto return_ids, BoolField(body, "return_token_ids"));
  req->return_token_ids = return_ids.value_or(false);
  for (const char* key : {"presence_penalty", "frequency_penalty"}) {
    VERL_ASSIGN_OR_RETURN(auto v, NumberField(body, key));
    if (v && *v != 0) return Unsupported(key, "a non-zero value");
  }
  if (const Json* bias = Field(body, "logit_bias");
      bias != nullptr && !(bias->is_object() && bias->empty())) {
    return Unsupported("logit_bias", "a non-empty map");
  }
  const bool chat = req->endpoint == Endpoint::kChat;
  const int64_t max_tokens_cap = INT32_MAX;
  VERL_ASSIGN_OR_RETURN(req->max_tokens,
                        IntField(body, "max_tokens", 1, max_tokens_cap));
  if (chat) {
    VERL_ASSIGN_OR_RETURN(
        auto mct, IntField(body, "max_completion_tokens", 1, max_tokens_cap));
    if (mct) req->max_tokens = mct;
  }
  VERL_ASSIGN_OR_RETURN(auto stream, BoolField(body, "stream"));
  req->stream = stream.value_or(false);
  if (const Json* so = Field(body, "stream_options")) {
    if (!req->stream) {
      return ParamError("stream_options",
                        "'stream_options' is only allowed with stream: true");
    }
    if (!so->is_object()) {
      return ParamError("stream_options", "'stream_options' must be an object");
    }
    VERL_ASSIGN_OR_RETURN(auto usage, BoolField(*so, "include_usage"));
    req->include_usage = usage.value_or(false);
  }
  if (chat) {
    VERL_ASSIGN_OR_RETURN(auto lp, BoolField(body, "logprobs"));
    req->logprobs = lp.value_or(false);
    // Only the chosen token's log-prob is computed; top_logprobs lists are
    // returned empty.
    VERL_ASSIGN_OR_RETURN(auto top, IntField(body, "top_logprobs", 0, 20));
    (void)top;
  } else {
    VERL_ASSIGN_OR_RETURN(auto lp, IntField(body, "logprobs", 0, 5));
    req->logprobs = lp.has_value();
    VERL_ASSIGN_OR_RETURN(auto echo, BoolField(body, "echo"));
    if (echo.value_or(false)) return Unsupported("echo", "true");
    VERL_ASSIGN_OR_RETURN(auto best_of, IntField(body, "best_of", 1, 1 << 20));
    if (best_of && *best_of != p.n) {
      return Unsupported("best_of", "a value other than n");
    }
    if (const Json* suffix = Field(body, "suffix");
        suffix != nullptr && !(suffix->is_string() && suffix->empty())) {
      return Unsupported("suffix", "a suffix");
    }
  }
  return ParseStop(body, limits, req);
}

std::string StatusPayload(const absl::Status& s, const char* key) {
  auto v = s.GetPayload(key);
  return v ? std::string(*v) : std::string();
}

Json LogprobsJson(const ResponseHeader& h, const Choice& c) {
  if (!h.logprobs) return nullptr;
  if (h.endpoint == Endpoint::kChat) {
    Json content = Json::array();
    for (size_t i = 0; i < c.tokens.size(); ++i) {
      Json bytes = Json::array();
      for (unsigned char b : c.tokens[i]) bytes.push_back(b);
      content.push_back({{"token", c.tokens[i]},
                         {"logprob", c.token_logprobs[i]},
                         {"bytes", bytes},
                         {"top_logprobs", Json::array()}});
    }
    return {{"content", content}};
  }
  Json offsets = Json::array();
  int64_t offset = 0;
  for (const std::string& t : c.tokens) {
    offsets.push_back(offset);
    offset += static_cast<int64_t>(t.size());
  }
  return {{"tokens", c.tokens},
          {"token_logprobs", c.token_logprobs},
          {"top_logprobs", nullptr},
          {"text_offset", offsets}};
}

Json ToolCallsJson(const std::vector<ToolCall>& calls, bool with_index) {
  Json out = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    Json call;
    if (with_index) call["index"] = i;
    call["id"] = calls[i].id;
    call["type"] = "function";
    call["function"] = {{"name", calls[i].name},
                        {"arguments", calls[i].arguments}};
    out.push_back(std::move(call));
  }
  return out;
}

Json FinishJson(const Choice& c) {
  return c.finish_reason ? Json(*c.finish_reason) : Json(nullptr);
}

const char* ObjectName(const ResponseHeader& h, bool chunk) {
  if (h.endpoint == Endpoint::kCompletions) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

Json HeaderJson(const ResponseHeader& h, bool chunk) {
  return {{"id", h.id},
          {"object", ObjectName(h, chunk)},
          {"created", h.created},
          {"model", h.model}};
}

}  // namespace

absl::StatusOr<ApiRequest> ParseRequest(absl::string_view body,
                                        Endpoint endpoint,
                                        const ParseLimits& limits) {
  Json json = Json::parse(body.begin(), body.end(), nullptr,
                          /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return ParamError("", "the request body is not valid JSON");
  }
  if (!json.is_object()) {
    return ParamError("", "the request body must be a JSON object");
  }
  ApiRequest req;
  req.endpoint = endpoint;
  const Json* model = Field(json, "model");
  if (model == nullptr || !model->is_string()) {
    return ParamError("model", "'model' (a string) is required");
  }
  req.model = model->get<std::string>();
  if (endpoint == Endpoint::kCompletions) {
    VERL_RETURN_IF_ERROR(ParsePrompt(json, &req));
  } else {
    VERL_RETURN_IF_ERROR(ParseMessages(json, &req));
    VERL_RETURN_IF_ERROR(ParseTools(json, &req));
  }
  VERL_RETURN_IF_ERROR(ParseSampling(json, limits, &req));
  return req;
}

absl::Status ParamError(absl::string_view param, absl::string_view message,
                        absl::string_view code) {
  absl::Status s = absl::InvalidArgumentError(message);
  if (!param.empty()) s.SetPayload(kParamPayload, absl::Cord(param));
  if (!code.empty()) s.SetPayload(kCodePayload, absl::Cord(code));
  return s;
}

absl::Status ModelNotFound(absl::string_view model) {
  absl::Status s = absl::NotFoundError(
      absl::StrCat("The model `", model, "` does not exist."));
  s.SetPayload(kParamPayload, absl::Cord("model"));
  s.SetPayload(kCodePayload, absl::Cord("model_not_found"));
  return s;
}

HttpError ApiError(const absl::Status& status) {
  HttpError e;
  std::string type = "invalid_request_error";
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      e.status = 400;
      break;
    case absl::StatusCode::kNotFound:
      e.status = 404;
      break;
    case absl::StatusCode::kResourceExhausted:
      e.status = 429;
      type = "rate_limit_error";
      break;
    case absl::StatusCode::kUnavailable:
      e.status = 503;
      type = "server_error";
      break;
    default:
      e.status = 500;
      type = "server_error";
  }
  const std::string param = StatusPayload(status, kParamPayload);
  const std::string code = StatusPayload(status, kCodePayload);
  e.body = {{"error",
             {{"message", std::string(status.message())},
              {"type", type},
              {"param", param.empty() ? Json(nullptr) : Json(param)},
              {"code", code.empty() ? Json(nullptr) : Json(code)}}}};
  return e;
}

HttpError HttpStatusError(int status, absl::string_view message) {
  HttpError e;
  e.status = status;
  e.body = {
      {"error",
       {{"message", std::string(message)},
        {"type", status >= 500 ? "server_error" : "invalid_request_error"},
        {"param", nullptr},
        {"code", nullptr}}}};
  return e;
}

Json UsageJson(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

namespace {

// The "choices" array of a response or a chunk: index, the chat part
// (`chat_part` fills message or delta) or the completion's text, logprobs,
// token ids and the finish reason.
Json ChoicesJson(const ResponseHeader& h, const std::vector<Choice>& choices,
                 const std::function<void(const Choice&, Json*)>& chat_part) {
  Json list = Json::array();
  for (const Choice& c : choices) {
    Json choice = {{"index", c.index}};
    if (h.endpoint == Endpoint::kChat) {
      chat_part(c, &choice);
    } else {
      choice["text"] = c.text;
    }
    choice["logprobs"] = LogprobsJson(h, c);
    if (h.return_token_ids) choice["token_ids"] = c.token_ids;
    choice["finish_reason"] = FinishJson(c);
    list.push_back(std::move(choice));
  }
  return list;
}

}  // namespace

Json ResponseJson(const ResponseHeader& h, const std::vector<Choice>& choices,
                  const Usage& usage) {
  Json out = HeaderJson(h, /*chunk=*/false);
  out["choices"] = ChoicesJson(h, choices, [](const Choice& c, Json* choice) {
    Json message = {{"role", "assistant"}};
    message["content"] =
        c.text.empty() && !c.tool_calls.empty() ? Json(nullptr) : Json(c.text);
    if (!c.tool_calls.empty()) {
      message["tool_calls"] = ToolCallsJson(c.tool_calls, false);
    }
    (*choice)["message"] = std::move(message);
  });
  out["usage"] = UsageJson(usage);
  return out;
}

Json ChunkJson(const ResponseHeader& h, const std::vector<Choice>& choices,
               bool first) {
  Json out = HeaderJson(h, /*chunk=*/true);
  out["choices"] =
      ChoicesJson(h, choices, [first](const Choice& c, Json* choice) {
        Json delta = Json::object();
        if (first) delta["role"] = "assistant";
        if (!c.text.empty() || first) delta["content"] = c.text;
        if (!c.tool_calls.empty()) {
          delta["tool_calls"] = ToolCallsJson(c.tool_calls, true);
        }
        (*choice)["delta"] = std::move(delta);
      });
  return out;
}

Json UsageChunkJson(const ResponseHeader& h, const Usage& usage) {
  Json out = HeaderJson(h, /*chunk=*/true);
  out["choices"] = Json::array();
  out["usage"] = UsageJson(usage);
  return out;
}

std::string DumpJson(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string SseEvent(const Json& json) {
  return absl::StrCat("data: ", DumpJson(json), "\n\n");
}

void ExtractToolCalls(absl::string_view id_prefix, Choice* choice) {
  agent::ParsedTurn parsed = agent::ParseHermesToolCalls(choice->text);
  if (parsed.calls.empty()) return;
  for (size_t i = 0; i < parsed.calls.size(); ++i) {
    choice->tool_calls.push_back({absl::StrCat("call_", id_prefix, "_", i),
                                  parsed.calls[i].name,
                                  parsed.calls[i].arguments});
  }
  choice->text = std::string(absl::StripAsciiWhitespace(parsed.content));
  choice->finish_reason = "tool_calls";
}

Json ModelsJson(const std::string& model, int64_t created,
                int64_t max_model_len) {
  return {{"object", "list"},
          {"data", Json::array({{{"id", model},
                                 {"object", "model"},
                                 {"created", created},
                                 {"owned_by", "verl-cpp"},
                                 {"max_model_len", max_model_len}}})}};
}

}  // namespace verl::infer::serve
