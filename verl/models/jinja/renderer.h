// File: verl/models/jinja/renderer.h
//
// Walks a parsed template (ast.h) and prints it. Variables live in a stack
// of scopes: the context at the bottom, one scope per loop iteration (so a
// `set` inside a loop does not leak out, as in Jinja; use a namespace),
// and a fresh stack for a macro call (it sees the globals and its
// parameters). Filters, tests, global functions and str/dict methods come
// from a Registry (registry.h), so the renderer knows none of them.
// Throws TemplateError (error.h).
#ifndef VERL_MODELS_JINJA_RENDERER_H_
#define VERL_MODELS_JINJA_RENDERER_H_

#include <cstdint>
#include <optional>
#include <string>

#include "verl/models/jinja/ast.h"
#include "verl/models/jinja/registry.h"
#include "verl/models/jinja/value.h"

namespace verl::models::jinja {

// `context` are the template's global variables; `now_unix_seconds` is the
// clock passed to the built-ins (strftime_now).
std::string Render(const Body& body, const ValueDict& context,
                   const Registry& registry,
                   std::optional<int64_t> now_unix_seconds);

}  // namespace verl::models::jinja

#endif  // VERL_MODELS_JINJA_RENDERER_H_
