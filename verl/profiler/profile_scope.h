// File: verl/profiler/profile_scope.h
//
// One RAII annotation for both profilers: a timeline span (TraceScope) and a
// memory phase (MemoryScope) of the same name, optionally with the memory
// category of the allocations made inside. Use it for regions that should
// carry the same name in the Perfetto trace and in memory snapshots:
//
//   ProfileScope step("update_actor");
//   ProfileScope fwd("forward", MemoryCategory::kActivations);
//
// With both profilers off it costs one relaxed atomic load, a phase lookup
// and two thread-local pushes (tens of ns); `name` must outlive the scope
// (string literals do).
#ifndef VERL_PROFILER_PROFILE_SCOPE_H_
#define VERL_PROFILER_PROFILE_SCOPE_H_

#include "verl/profiler/memory_tracker.h"
#include "verl/profiler/timeline.h"

namespace verl::profiler {

class ProfileScope {
 public:
  // Keeps the calling thread's current memory category.
  explicit ProfileScope(const char* name, const char* trace_category = "phase")
      : ProfileScope(name, CurrentMemoryCategory(), trace_category) {}
  ProfileScope(const char* name, MemoryCategory category,
               const char* trace_category = "phase")
      : memory_(name), category_(category), trace_(name, trace_category) {}
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  MemoryScope memory_;
  MemoryCategoryScope category_;
  TraceScope trace_;
};

}  // namespace verl::profiler

#endif  // VERL_PROFILER_PROFILE_SCOPE_H_
