// File: verl/models/jinja/registry.h
//
// The table of built-ins a render looks names up in: filters (`x | f`),
// tests (`x is t`), global functions (`range(...)`), and the methods of str
// and dict values (`s.split(...)`, `d.items()`). The renderer depends only on
// this table, the built-ins only on values and this table (a filter such as
// `map` or `select` applies other entries through it), so neither depends on
// the other; builtins.h fills the default table.
#ifndef VERL_MODELS_JINJA_REGISTRY_H_
#define VERL_MODELS_JINJA_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "verl/models/jinja/value.h"

namespace verl::models::jinja {

// The evaluated arguments of a call.
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // The keyword argument `name`, else positional `index`; nullptr if neither.
  const Value* Get(size_t index, const char* name) const;
};

class Registry;

// What a built-in may use besides its arguments.
struct CallContext {
  const Registry* registry = nullptr;       // To apply other built-ins.
  int line = 0;                             // For TemplateError.
  std::optional<int64_t> now_unix_seconds;  // strftime_now's clock.
};

using FilterFn =
    std::function<Value(const Value& v, const Args& a, const CallContext& c)>;
using TestFn =
    std::function<bool(const Value& v, const Args& a, const CallContext& c)>;
using FunctionFn = std::function<Value(const Args& a, const CallContext& c)>;
using MethodFn = FilterFn;  // `self` first.

class Registry {
 public:
  void AddFilter(std::string name, FilterFn fn);
  void AddTest(std::string name, TestFn fn);
  void AddFunction(std::string name, FunctionFn fn);
  void AddStringMethod(std::string name, MethodFn fn);
  void AddDictMethod(std::string name, MethodFn fn);

  // Each fails (TemplateError at c.line) when `name` is not registered:
  // "unknown filter 'x'", "unknown test 'x'", "unknown function 'x'",
  // "'str' object has no method 'x'".
  Value ApplyFilter(absl::string_view name, const Value& v, const Args& a,
                    const CallContext& c) const;
  bool RunTest(absl::string_view name, const Value& v, const Args& a,
               const CallContext& c) const;
  Value CallFunction(absl::string_view name, const Args& a,
                     const CallContext& c) const;
  // `self` is a string value.
  Value CallStringMethod(const Value& self, absl::string_view name,
                         const Args& a, const CallContext& c) const;

  bool HasFunction(absl::string_view name) const;
  // nullptr when dicts have no such method.
  const MethodFn* FindDictMethod(absl::string_view name) const;

 private:
  absl::flat_hash_map<std::string, FilterFn> filters_;
  absl::flat_hash_map<std::string, TestFn> tests_;
  absl::flat_hash_map<std::string, FunctionFn> functions_;
  absl::flat_hash_map<std::string, MethodFn> string_methods_;
  absl::flat_hash_map<std::string, MethodFn> dict_methods_;
};

}  // namespace verl::models::jinja

#endif  // VERL_MODELS_JINJA_REGISTRY_H_
