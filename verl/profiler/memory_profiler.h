// File: verl/profiler/memory_profiler.h
//
// The `torch_memory` profiler tool as verl drives it. Constructed per worker
// with the trainer's `global_profiler` block and the role's resolved
// `profiler` block; when the role's tool (or else the global tool) is
// torch_memory, allocation recording starts at construction (verl records
// from the first worker construction, whatever `enable` says) with the
// role's (or else global) trace_alloc_max_entries / stack_depth.
//
//   StartStep(N) / StopStep(): for steps in `global_profiler.steps` on the
//     selected ranks (role `enable` and all_ranks / ranks, default rank 0),
//     StopStep writes {save_path}/step{N}/torch_memory_rank{R}_pid{P}.pickle
//   DumpPostUpdate(N): after every training step, on every rank, writes
//     {save_path}/step{N}/post_update_step{N}_rank{R}_pid{P}.pickle
// Each pickle gets its .json summary and .svg timeline beside it.
#ifndef VERL_PROFILER_MEMORY_PROFILER_H_
#define VERL_PROFILER_MEMORY_PROFILER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "verl/profiler/memory_tracker.h"
#include "verl/profiler/profiler_config.pb.h"

namespace verl::profiler {

// verl's DistProfiler selection: step N is in `global.steps`, the role is
// enabled, and this rank is chosen (all_ranks, else the listed ranks, else
// rank 0). Shared by every profiler tool.
bool RoleProfilesStep(const GlobalProfilerConfig& global,
                      const ProfilerConfig& role, int64_t step, int64_t rank);

// `trace` with only the events of the phases whose path ("step/values/...")
// has a component in `phases` (all when empty), plus the other half of each
// kept alloc/free pair so that the trace stays consistent for memory_viz.
// Live blocks and the exact counters are kept whole. Used for per-role
// snapshots (e.g. only the critic's "values" and "update_critic").
MemoryTrace KeepPhases(MemoryTrace trace,
                       const std::vector<std::string>& phases);

class MemoryProfiler {
 public:
  // `pid` defaults to the calling process's id.
  MemoryProfiler(const GlobalProfilerConfig& global, const ProfilerConfig& role,
                 int64_t rank, int64_t pid = -1);
  ~MemoryProfiler();
  MemoryProfiler(const MemoryProfiler&) = delete;
  MemoryProfiler& operator=(const MemoryProfiler&) = delete;

  // True when the resolved tool is torch_memory (allocations are recorded).
  bool recording() const { return recording_; }
  // True when step N is profiled on this rank.
  bool ProfilesStep(int64_t step) const;

  absl::Status StartStep(int64_t step);
  absl::Status StopStep();  // no-op unless a profiled step was started
  absl::Status DumpPostUpdate(int64_t step);  // no-op unless recording
  // Writes step N's snapshot now (whatever the step selection), with the
  // trace reduced to `phases` by KeepPhases; no-op unless recording.
  absl::Status WriteStepSnapshot(int64_t step,
                                 const std::vector<std::string>& phases) const;

  std::string StepSnapshotPath(int64_t step) const;
  std::string PostUpdatePath(int64_t step) const;

 private:
  GlobalProfilerConfig global_;
  ProfilerConfig role_;
  int64_t rank_;
  int64_t pid_;
  std::string save_path_;
  bool recording_ = false;
  int64_t current_step_ = -1;  // -1: no profiled step open
};

}  // namespace verl::profiler

#endif  // VERL_PROFILER_MEMORY_PROFILER_H_
