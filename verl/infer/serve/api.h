// File: verl/infer/serve/api.h
//
// The OpenAI wire format of //tools:serve, without HTTP, engine or tokenizer:
// request bodies of /v1/completions and /v1/chat/completions parsed and
// validated into ApiRequest (one message per problem, naming the field), the
// response, stream-chunk and error objects built as OpenAI's API returns
// them. Errors travel as absl::Status; ApiError() gives the HTTP status and
// the {"error": {"message", "type", "param", "code"}} body.
#ifndef VERL_INFER_SERVE_API_H_
#define VERL_INFER_SERVE_API_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "verl/infer/sampling_params.h"

namespace verl::infer::serve {

using Json = nlohmann::ordered_json;

enum class Endpoint { kCompletions, kChat };

// One generation request as parsed from the body.
struct ApiRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;
  // /v1/completions: the prompt as text, or as token ids (`prompt_ids`).
  std::optional<std::string> prompt_text;
  std::vector<int64_t> prompt_ids;
  // /v1/chat/completions: messages (text parts joined to text, assistant
  // tool-call arguments parsed to objects as chat templates expect), tools
  // (OpenAI function schemas; empty when none) and chat_template_kwargs.
  Json messages = Json::array();
  Json tools = Json::array();
  Json chat_template_kwargs = Json::object();
  bool parse_tool_calls = false;  // tools given and tool_choice != "none"
  // The bytes of the image_url parts' data URLs, in order of appearance; a
  // message with images keeps its content as a list of {"type": "text",
  // "text"} / {"type": "image"} items (what VLM chat templates read).
  std::vector<std::string> images;
  // Sampling (n, temperature, top_p, top_k, seed; vLLM's extensions
  // repetition_penalty and ignore_eos);
  // max_tokens is set from `max_tokens` below once the prompt is known.
  SamplingParams sampling;
  std::optional<int64_t> max_tokens;  // unset: the endpoint's default
  std::vector<std::string> stop;      // stop strings (cut from the text)
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // Log-probs of the chosen tokens: completions `logprobs` (an integer,
  // its value only enables them) or chat `logprobs: true`.
  bool logprobs = false;
  // vLLM's `return_token_ids`: each choice also lists its generated token
  // ids (token-in/token-out clients such as the agent loop's
  // HttpTurnGenerator).
  bool return_token_ids = false;
};

struct ParseLimits {
  int64_t max_n = 16;
  int64_t max_stop_strings = 4;
};

// Parses and validates a body. Errors are InvalidArgument with the field in
// the payload (see ApiError).
absl::StatusOr<ApiRequest> ParseRequest(absl::string_view body,
                                        Endpoint endpoint,
                                        const ParseLimits& limits = {});

// --- errors -----------------------------------------------------------------

// An invalid-request status naming `param` (and optionally an OpenAI error
// `code` such as "context_length_exceeded").
absl::Status ParamError(absl::string_view param, absl::string_view message,
                        absl::string_view code = "");
// NotFound for an unknown model (404, code "model_not_found").
absl::Status ModelNotFound(absl::string_view model);

struct HttpError {
  int status = 500;
  Json body;  // {"error": {"message", "type", "param", "code"}}
};
// Maps a status: InvalidArgument/FailedPrecondition/OutOfRange -> 400
// invalid_request_error, NotFound -> 404, ResourceExhausted -> 429,
// Unavailable -> 503, others -> 500 server_error.
HttpError ApiError(const absl::Status& status);
// The body for a plain HTTP status with a message (413, 404 route, ...).
HttpError HttpStatusError(int status, absl::string_view message);

// --- responses --------------------------------------------------------------

// A tool call in an answer (arguments: the JSON text of the arguments).
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;
};

// One finished (or, in a stream, partial) choice.
struct Choice {
  int64_t index = 0;
  std::string text;
  std::vector<ToolCall> tool_calls;
  std::optional<std::string> finish_reason;  // unset in stream deltas
  // Chosen-token log-probs: the token's text and its log-probability.
  std::vector<std::string> tokens;
  std::vector<float> token_logprobs;
  std::vector<int64_t> token_ids;  // with return_token_ids
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

// What every object of one response shares.
struct ResponseHeader {
  std::string id;  // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;
  std::string model;
  Endpoint endpoint = Endpoint::kCompletions;
  bool logprobs = false;
  bool return_token_ids = false;
};

Json UsageJson(const Usage& usage);
// The non-streaming response: text_completion or chat.completion.
Json ResponseJson(const ResponseHeader& header,
                  const std::vector<Choice>& choices, const Usage& usage);
// One stream chunk holding `choices` (text_completion or
// chat.completion.chunk). For chat, `first` adds role "assistant" to the
// delta; tool calls go in delta.tool_calls with their index.
Json ChunkJson(const ResponseHeader& header, const std::vector<Choice>& choices,
               bool first);
// The final usage-only chunk of stream_options.include_usage.
Json UsageChunkJson(const ResponseHeader& header, const Usage& usage);
// Compact JSON text; invalid UTF-8 in strings becomes U+FFFD (never throws).
std::string DumpJson(const Json& json);
// "data: <json>\n\n".
std::string SseEvent(const Json& json);
inline constexpr char kSseDone[] = "data: [DONE]\n\n";

// The answer's Hermes <tool_call> blocks as OpenAI tool calls: with at least
// one well-formed call, `choice` gets the calls (ids "call_<id_prefix>_<i>"),
// its text becomes the remaining content (trimmed) and finish_reason
// "tool_calls". Otherwise `choice` is unchanged.
void ExtractToolCalls(absl::string_view id_prefix, Choice* choice);

// GET /v1/models.
Json ModelsJson(const std::string& model, int64_t created,
                int64_t max_model_len);

}  // namespace verl::infer::serve

#endif  // VERL_INFER_SERVE_API_H_
