// File: verl/models/jinja/parser.h
//
// Jinja source -> syntax tree (ast.h). Statements: if/elif/else, for (tuple
// targets, `if` filter, `else`), set (names, tuples, `ns.attr`, block set),
// macro, break, continue, and transformers' {% generation %}. Expressions
// follow Jinja's precedence: conditional `a if c else b`, or, and, not,
// comparisons and `in`/`not in`, + -, ~, * / // %, **, unary -, then
// postfix attribute/subscript/slice/call, filters `|f(...)` and tests
// `is [not] t(...)`. Throws TemplateError (error.h) on syntax errors.
#ifndef VERL_MODELS_JINJA_PARSER_H_
#define VERL_MODELS_JINJA_PARSER_H_

#include <string>

#include "absl/strings/string_view.h"
#include "verl/models/jinja/ast.h"

namespace verl::models::jinja {

// The statements of a whole template.
Body ParseTemplate(absl::string_view source);

// One expression (the inside of a {{ }} tag, tuples allowed); `line` is for
// errors.
ExprPtr ParseExpression(const std::string& source, int line = 1);

}  // namespace verl::models::jinja

#endif  // VERL_MODELS_JINJA_PARSER_H_
