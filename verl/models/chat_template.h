// File: verl/models/chat_template.h
//
// Chat templates as HuggingFace models ship them: Jinja source in
// tokenizer_config.json (or chat_template.jinja), rendered the way
// transformers' `apply_chat_template` renders it (Jinja2 with trim_blocks and
// lstrip_blocks on, loop controls, a `tojson` filter equal to Python's
// `json.dumps(ensure_ascii=False)`, and the globals `raise_exception`,
// `strftime_now`, `namespace`, `range`).
//
// The renderer implements the Jinja subset real chat templates use (Qwen2.5,
// Qwen3 with tools and reasoning, Llama 3.x, ChatML): if/elif/else, for with
// loop.* and `else`, set (also `ns.attr` and block set), macro, break and
// continue, slicing (`messages[::-1]`), filters (length, trim, tojson, join,
// items, default, select/reject, ...), tests (defined, none, string, mapping,
// ...), Python string/dict methods (startswith, split, strip, items, get, ...)
// and Python's str() for printed values.
//
// Example:
//   VERL_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::Parse(source));
//   ChatRequest req;
//   req.messages_json = R"([{"role": "user", "content": "2+2?"}])";
//   req.add_generation_prompt = true;
//   VERL_ASSIGN_OR_RETURN(std::string prompt, ApplyChatTemplate(t, req, {}));
#ifndef VERL_MODELS_CHAT_TEMPLATE_H_
#define VERL_MODELS_CHAT_TEMPLATE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace verl::models {

namespace chat_template_internal {
struct Program;
}  // namespace chat_template_internal

// A parsed (compiled) template; cheap to copy, safe to render concurrently.
class ChatTemplate {
 public:
  // Parses Jinja `source`. Syntax errors are InvalidArgument and name the
  // line ("chat template line 7: ...").
  static absl::StatusOr<ChatTemplate> Parse(absl::string_view source);

  // Renders with the variables of `context_json` (a JSON object; key order
  // is kept, so `tojson` prints keys in the order given). `now_unix_seconds`
  // is the clock of `strftime_now` (local time; default: the current time).
  // Errors: bad JSON, `raise_exception(...)`, and runtime type errors
  // (e.g. adding a string to a number), each naming the template line.
  absl::StatusOr<std::string> Render(
      absl::string_view context_json,
      std::optional<int64_t> now_unix_seconds = std::nullopt) const;

 private:
  std::shared_ptr<const chat_template_internal::Program> program_;
};

// The inputs of transformers' `tokenizer.apply_chat_template(...)`.
struct ChatRequest {
  // JSON array of messages: {"role", "content", optional "tool_calls",
  // "reasoning_content", ...}.
  std::string messages_json = "[]";
  // JSON array of tool schemas; empty means no tools (`tools` is None).
  std::string tools_json;
  bool add_generation_prompt = false;
  // JSON object of extra template variables, e.g. {"enable_thinking": false}.
  std::string kwargs_json;
  // Clock for `strftime_now`; default: the current time.
  std::optional<int64_t> now_unix_seconds;
};

// Renders `request` with `tmpl`. `special_tokens` are the tokenizer's
// special-token variables (bos_token, eos_token, ...), passed like
// transformers passes `special_tokens_map`; kwargs override them.
absl::StatusOr<std::string> ApplyChatTemplate(
    const ChatTemplate& tmpl, const ChatRequest& request,
    const std::map<std::string, std::string>& special_tokens);

}  // namespace verl::models

#endif  // VERL_MODELS_CHAT_TEMPLATE_H_
