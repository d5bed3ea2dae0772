// File: verl/profiler/build_config.h
//
// Whether the profilers were compiled in. `bazel build
// --define=verl_profiler=off` compiles the profiler libraries with
// VERL_PROFILER_DISABLED: the annotation scopes (MemoryScope,
// MemoryCategoryScope, TraceScope, ProfileScope) become empty, and
// MemoryTracker::Enable / Timeline::Enable only warn (no allocator hook is
// installed, no event is recorded). The define is local to the profiler's own
// sources, so switching it recompiles a handful of files, not the tree.
#ifndef VERL_PROFILER_BUILD_CONFIG_H_
#define VERL_PROFILER_BUILD_CONFIG_H_

namespace verl::profiler {

// False in a --define=verl_profiler=off build.
bool ProfilerCompiledIn();

// The one-line explanation used by warnings when profiling is requested in a
// compiled-out build.
inline constexpr const char* kProfilerCompiledOutMessage =
    "profiling was compiled out (built with --define=verl_profiler=off); no "
    "memory snapshots or traces will be written";

}  // namespace verl::profiler

#endif  // VERL_PROFILER_BUILD_CONFIG_H_
