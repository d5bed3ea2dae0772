#include "verl/models/jinja/template.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "verl/models/jinja/builtins.h"
#include "verl/models/jinja/error.h"
#include "verl/models/jinja/parser.h"
#include "verl/models/jinja/renderer.h"

namespace verl::models::jinja {

absl::StatusOr<Template> Template::Parse(absl::string_view source,
                                         absl::string_view what) {
  Template t;
  t.what_ = std::string(what);
  try {
    t.body_ = std::make_shared<const Body>(ParseTemplate(source));
  } catch (const TemplateError& e) {
    return ToStatus(e, what);
  }
  return t;
}

absl::StatusOr<std::string> Template::Render(
    absl::string_view context_json,
    std::optional<int64_t> now_unix_seconds) const {
  using Json = nlohmann::ordered_json;
  Json context = Json::parse(context_json, nullptr, /*allow_exceptions=*/false);
  if (context.is_discarded())
    return absl::InvalidArgumentError(
        absl::StrCat(what_, " context is not valid JSON"));
  if (!context.is_object())
    return absl::InvalidArgumentError(
        absl::StrCat(what_, " context must be a JSON object"));
  ValueDict values;
  for (const auto& [k, v] : context.items())
    values.emplace_back(k, FromJson(v));
  return Render(values, DefaultRegistry(), now_unix_seconds);
}

absl::StatusOr<std::string> Template::Render(
    const ValueDict& context, const Registry& registry,
    std::optional<int64_t> now_unix_seconds) const {
  if (body_ == nullptr)
    return absl::FailedPreconditionError(
        absl::StrCat(what_, " was not parsed"));
  try {
    return jinja::Render(*body_, context, registry, now_unix_seconds);
  } catch (const TemplateError& e) {
    return ToStatus(e, what_);
  }
}

}  // namespace verl::models::jinja
