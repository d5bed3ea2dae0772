#include "verl/models/tokenizer/chat_template.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "verl/core/status.h"
#include "verl/models/tokenizer/tokenizer.h"

namespace verl::models {

using Json = nlohmann::ordered_json;

absl::StatusOr<ChatTemplate> ChatTemplate::Parse(absl::string_view source) {
  auto parsed = jinja::Template::Parse(source, "chat template");
  if (!parsed.ok()) return parsed.status();
  ChatTemplate t;
  t.template_ = *std::move(parsed);
  return t;
}

absl::StatusOr<std::string> ChatTemplate::Render(
    absl::string_view context_json,
    std::optional<int64_t> now_unix_seconds) const {
  if (!template_.parsed())
    return absl::FailedPreconditionError("ChatTemplate was not parsed");
  return template_.Render(context_json, now_unix_seconds);
}

absl::StatusOr<std::string> ApplyChatTemplate(
    const ChatTemplate& tmpl, const ChatRequest& request,
    const std::map<std::string, std::string>& special_tokens) {
  const auto parse = [](const std::string& text, const char* what,
                        Json::value_t expected) -> absl::StatusOr<Json> {
    Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || j.type() != expected)
      return absl::InvalidArgumentError(
          absl::StrCat("apply_chat_template: ", what, " must be a JSON ",
                       expected == Json::value_t::array ? "array" : "object"));
    return j;
  };
  Json context = Json::object();
  {
    auto messages =
        parse(request.messages_json, "messages", Json::value_t::array);
    if (!messages.ok()) return messages.status();
    context["messages"] = *std::move(messages);
  }
  if (request.tools_json.empty()) {
    context["tools"] = nullptr;
  } else {
    auto tools = parse(request.tools_json, "tools", Json::value_t::array);
    if (!tools.ok()) return tools.status();
    context["tools"] = *std::move(tools);
  }
  context["documents"] = nullptr;
  context["add_generation_prompt"] = request.add_generation_prompt;
  for (const auto& [k, v] : special_tokens) context[k] = v;
  if (!request.kwargs_json.empty()) {
    auto kwargs = parse(request.kwargs_json, "kwargs", Json::value_t::object);
    if (!kwargs.ok()) return kwargs.status();
    for (const auto& [k, v] : kwargs->items()) context[k] = v;
  }
  return tmpl.Render(context.dump(), request.now_unix_seconds);
}

struct ChatFormatter::State {
  std::map<std::string, std::string> templates;
  std::map<std::string, std::string> special_tokens;
  std::string source;
  absl::Mutex mu;
  std::map<std::string, ChatTemplate> compiled ABSL_GUARDED_BY(mu);
};

ChatFormatter::ChatFormatter(std::map<std::string, std::string> templates,
                             std::map<std::string, std::string> special_tokens,
                             std::string source)
    : state_(std::make_shared<State>()) {
  state_->templates = std::move(templates);
  for (auto& [key, value] : special_tokens)
    if (!value.empty()) state_->special_tokens[key] = std::move(value);
  state_->source = std::move(source);
}

ChatFormatter::ChatFormatter(const Tokenizer& tokenizer)
    : ChatFormatter(tokenizer.chat_templates(),
                    {{"bos_token", tokenizer.bos_token()},
                     {"eos_token", tokenizer.eos_token()},
                     {"pad_token", tokenizer.pad_token()},
                     {"unk_token", tokenizer.unk_token()}},
                    tokenizer.source()) {}

bool ChatFormatter::empty() const { return state_->templates.empty(); }

absl::StatusOr<std::string> ChatFormatter::Apply(
    const ChatRequest& request, absl::string_view template_name) const {
  State& s = *state_;
  std::string name(template_name);
  if (name.empty()) {
    name = !request.tools_json.empty() && s.templates.count("tool_use")
               ? "tool_use"
               : "default";
  }
  auto source_it = s.templates.find(name);
  if (source_it == s.templates.end()) {
    std::vector<std::string> names;
    for (const auto& [n, t] : s.templates) names.push_back(n);
    return absl::NotFoundError(
        absl::StrCat(s.source, ": no chat template \"", name, "\" (have: ",
                     names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
  }
  ChatTemplate compiled;
  {
    absl::MutexLock lock(&s.mu);
    auto it = s.compiled.find(name);
    if (it == s.compiled.end()) {
      auto parsed = ChatTemplate::Parse(source_it->second);
      if (!parsed.ok())
        return Annotate(
            parsed.status(),
            absl::StrCat(s.source, " chat template \"", name, "\""));
      it = s.compiled.emplace(name, *std::move(parsed)).first;
    }
    compiled = it->second;
  }
  return ApplyChatTemplate(compiled, request, s.special_tokens);
}

absl::StatusOr<std::string> ApplyChatTemplate(const Tokenizer& tokenizer,
                                              const ChatRequest& request,
                                              absl::string_view template_name) {
  return ChatFormatter(tokenizer).Apply(request, template_name);
}

}  // namespace verl::models
