#include "verl/models/jinja/registry.h"

#include "absl/strings/str_cat.h"
#include "verl/models/jinja/error.h"

namespace verl::models::jinja {

const Value* Args::Get(size_t index, const char* name) const {
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return index < pos.size() ? &pos[index] : nullptr;
}

void Registry::AddFilter(std::string name, FilterFn fn) {
  filters_[std::move(name)] = std::move(fn);
}
void Registry::AddTest(std::string name, TestFn fn) {
  tests_[std::move(name)] = std::move(fn);
}
void Registry::AddFunction(std::string name, FunctionFn fn) {
  functions_[std::move(name)] = std::move(fn);
}
void Registry::AddStringMethod(std::string name, MethodFn fn) {
  string_methods_[std::move(name)] = std::move(fn);
}
void Registry::AddDictMethod(std::string name, MethodFn fn) {
  dict_methods_[std::move(name)] = std::move(fn);
}

Value Registry::ApplyFilter(absl::string_view name, const Value& v,
                            const Args& a, const CallContext& c) const {
  auto it = filters_.find(name);
  if (it == filters_.end())
    Fail(c.line, absl::StrCat("unknown filter '", name, "'"));
  return it->second(v, a, c);
}

bool Registry::RunTest(absl::string_view name, const Value& v, const Args& a,
                       const CallContext& c) const {
  auto it = tests_.find(name);
  if (it == tests_.end())
    Fail(c.line, absl::StrCat("unknown test '", name, "'"));
  return it->second(v, a, c);
}

Value Registry::CallFunction(absl::string_view name, const Args& a,
                             const CallContext& c) const {
  auto it = functions_.find(name);
  if (it == functions_.end())
    Fail(c.line, absl::StrCat("unknown function '", name, "'"));
  return it->second(a, c);
}

Value Registry::CallStringMethod(const Value& self, absl::string_view name,
                                 const Args& a, const CallContext& c) const {
  auto it = string_methods_.find(name);
  if (it == string_methods_.end())
    Fail(c.line, absl::StrCat("'str' object has no method '", name, "'"));
  return it->second(self, a, c);
}

bool Registry::HasFunction(absl::string_view name) const {
  return functions_.contains(name);
}

const MethodFn* Registry::FindDictMethod(absl::string_view name) const {
  auto it = dict_methods_.find(name);
  return it == dict_methods_.end() ? nullptr : &it->second;
}

}  // namespace verl::models::jinja
