// File: verl/core/registry.h
//
// A thread-safe name -> value registry (verl's register_adv_est /
// register_policy_loss pattern): built-ins are installed on first use, users
// add their own, lookups of unknown names say which names exist.
#ifndef VERL_CORE_REGISTRY_H_
#define VERL_CORE_REGISTRY_H_

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace verl::core {

template <typename Value>
class Registry {
 public:
  // `what` names the registry in errors, e.g. "algorithm.adv_estimator".
  Registry(std::string what, std::map<std::string, Value> builtins)
      : what_(std::move(what)), values_(std::move(builtins)) {}

  // AlreadyExists if `name` is taken.
  absl::Status Register(const std::string& name, Value value) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!values_.emplace(name, std::move(value)).second) {
      return absl::AlreadyExistsError(
          absl::StrCat(what_, ": '", name, "' is already registered"));
    }
    return absl::OkStatus();
  }

  // NotFound naming the known entries.
  absl::StatusOr<Value> Get(const std::string& name) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = values_.find(name);
    if (it != values_.end()) return it->second;
    return absl::NotFoundError(
        absl::StrCat(what_, ": unknown '", name,
                     "' (known: ", absl::StrJoin(NamesLocked(), ", "), ")"));
  }

  // Sorted names.
  std::vector<std::string> Names() const {
    std::lock_guard<std::mutex> lock(mu_);
    return NamesLocked();
  }

 private:
  std::vector<std::string> NamesLocked() const {
    std::vector<std::string> names;
    for (const auto& entry : values_) names.push_back(entry.first);
    return names;
  }

  std::string what_;
  mutable std::mutex mu_;
  std::map<std::string, Value> values_;
};

}  // namespace verl::core

#endif  // VERL_CORE_REGISTRY_H_
