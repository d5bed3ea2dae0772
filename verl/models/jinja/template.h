// File: verl/models/jinja/template.h
//
// A Jinja template engine with the settings HuggingFace chat templates are
// written for (transformers' ImmutableSandboxedEnvironment with trim_blocks
// and lstrip_blocks): the statements, expressions and built-ins listed in
// parser.h and builtins.h, Python's str()/repr() when printing values, and
// errors that name the template line. Parse once, render many times.
//
// The package's layers, bottom up (each a target of //verl/models/jinja):
//   value     Value and its Python semantics (value.h)
//   lexer     source -> text/tag chunks -> tag tokens (lexer.h)
//   parser    tokens -> syntax tree (ast.h, parser.h)
//   registry  name -> filter/test/function/method table (registry.h)
//   builtins  the default table's entries (builtins.h)
//   renderer  syntax tree + context + table -> text (renderer.h)
//   jinja     this facade: Status in, Status out.
//
// Example:
//   VERL_ASSIGN_OR_RETURN(jinja::Template t, jinja::Template::Parse(src));
//   VERL_ASSIGN_OR_RETURN(std::string out, t.Render(R"({"x": 1})"));
#ifndef VERL_MODELS_JINJA_TEMPLATE_H_
#define VERL_MODELS_JINJA_TEMPLATE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "verl/models/jinja/ast.h"
#include "verl/models/jinja/registry.h"
#include "verl/models/jinja/value.h"

namespace verl::models::jinja {

// A parsed template; cheap to copy, safe to render concurrently.
class Template {
 public:
  Template() = default;  // Not parsed: Render fails.

  // Parses `source`. Syntax errors are InvalidArgument "<what> line 7:
  // ..." (`what` names the template in all its error messages).
  static absl::StatusOr<Template> Parse(absl::string_view source,
                                        absl::string_view what = "template");

  // Renders with the variables of `context_json` (a JSON object; key order
  // is kept, so `tojson` prints keys in the order given) and the default
  // built-ins. `now_unix_seconds` is strftime_now's clock (local time;
  // default: the current time). Errors: bad JSON, raise_exception(...), and
  // runtime type errors, each naming the template line.
  absl::StatusOr<std::string> Render(
      absl::string_view context_json,
      std::optional<int64_t> now_unix_seconds = std::nullopt) const;

  // Same with the context as values and the built-ins of `registry` (e.g.
  // a copy of DefaultRegistry() with extra filters).
  absl::StatusOr<std::string> Render(
      const ValueDict& context, const Registry& registry,
      std::optional<int64_t> now_unix_seconds = std::nullopt) const;

  bool parsed() const { return body_ != nullptr; }

 private:
  std::shared_ptr<const Body> body_;
  std::string what_ = "template";
};

}  // namespace verl::models::jinja

#endif  // VERL_MODELS_JINJA_TEMPLATE_H_
