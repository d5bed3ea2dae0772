// File: verl/models/tokenizer/chat_template.h
//
// Chat templates as HuggingFace models ship them: Jinja source in
// tokenizer_config.json (or chat_template.jinja), rendered the way
// transformers' `apply_chat_template` renders it: the request's messages,
// tools and extra kwargs plus the tokenizer's special tokens (bos_token,
// eos_token, ...) become the template's variables, and the template is
// picked by name ("tool_use" when tools are given and it exists, else
// "default"). The Jinja engine itself is //verl/models/jinja.
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
#include "verl/models/jinja/template.h"

namespace verl::models {

class Tokenizer;

// A parsed (compiled) chat template; cheap to copy, safe to render
// concurrently. Errors say "chat template line N: ...".
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
  jinja::Template template_;
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

// A tokenizer's named chat templates with its special tokens: what
// transformers' apply_chat_template(tokenize=False) uses. Templates are
// compiled on first use and kept; cheap to copy (copies share the cache),
// thread-safe.
class ChatFormatter {
 public:
  // `templates` by name (a plain string template is "default");
  // `special_tokens` as for ApplyChatTemplate (empty values are left out);
  // `source` names the origin (e.g. the tokenizer.json path) in errors.
  ChatFormatter(std::map<std::string, std::string> templates,
                std::map<std::string, std::string> special_tokens,
                std::string source);
  // The templates and special tokens (bos/eos/pad/unk) of `tokenizer`.
  explicit ChatFormatter(const Tokenizer& tokenizer);

  // Renders `request` with `template_name`, else "tool_use" when tools are
  // given and it exists, else "default". NotFound names the templates there
  // are; a template's syntax error names `source` and the template.
  absl::StatusOr<std::string> Apply(const ChatRequest& request,
                                    absl::string_view template_name = "") const;

  bool empty() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// transformers' tokenizer.apply_chat_template(tokenize=False) in one call:
// ChatFormatter(tokenizer).Apply(request, template_name). Compiles the
// template on every call; hold a ChatFormatter to render many requests.
absl::StatusOr<std::string> ApplyChatTemplate(
    const Tokenizer& tokenizer, const ChatRequest& request,
    absl::string_view template_name = "");

}  // namespace verl::models

#endif  // VERL_MODELS_CHAT_TEMPLATE_H_
