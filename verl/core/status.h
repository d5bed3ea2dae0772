// File: verl/core/status.h
//
// absl::Status helpers used at every library boundary: early-return macros
// (Debian's Abseil predates ABSL_RETURN_IF_ERROR) and context annotation.
#ifndef VERL_CORE_STATUS_H_
#define VERL_CORE_STATUS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace verl {

// Returns `status` with `context` prepended to its message ("context: msg").
absl::Status Annotate(const absl::Status& status, absl::string_view context);

}  // namespace verl

#define VERL_STATUS_CONCAT_INNER_(a, b) a##b
#define VERL_STATUS_CONCAT_(a, b) VERL_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status); returns it from the caller if not OK.
#define VERL_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::absl::Status verl_status_ = (expr);        \
    if (!verl_status_.ok()) return verl_status_; \
  } while (0)

// `VERL_ASSIGN_OR_RETURN(auto x, F())`: assigns the value of an
// absl::StatusOr or returns its error from the caller.
#define VERL_ASSIGN_OR_RETURN(lhs, expr)                                     \
  VERL_ASSIGN_OR_RETURN_IMPL_(VERL_STATUS_CONCAT_(verl_statusor_, __LINE__), \
                              lhs, expr)
#define VERL_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return std::move(tmp).status();    \
  lhs = std::move(tmp).value()

// Aborts with the status message if not OK (for tests, tools and invariants).
#define VERL_CHECK_OK(expr)                              \
  do {                                                   \
    ::absl::Status verl_status_ = (expr);                \
    CHECK(verl_status_.ok()) << verl_status_.ToString(); \
  } while (0)

#endif  // VERL_CORE_STATUS_H_
