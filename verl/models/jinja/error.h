// File: verl/models/jinja/error.h
//
// How template errors travel inside the Jinja package. The lexer, parser,
// built-ins and renderer are tree walkers that throw `TemplateError` (a
// recursive descent is much simpler that way); the package's public entry
// points (template.h) catch it and return an absl::Status naming the line.
#ifndef VERL_MODELS_JINJA_ERROR_H_
#define VERL_MODELS_JINJA_ERROR_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace verl::models::jinja {

struct TemplateError {
  int line;  // 1-based line of the template source.
  std::string message;
};

[[noreturn]] inline void Fail(int line, std::string message) {
  throw TemplateError{line, std::move(message)};
}

// InvalidArgument "<what> line <n>: <message>", e.g. "chat template line 7:
// unexpected 'y'".
inline absl::Status ToStatus(const TemplateError& e, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, " line ", e.line, ": ", e.message));
}

}  // namespace verl::models::jinja

#endif  // VERL_MODELS_JINJA_ERROR_H_
