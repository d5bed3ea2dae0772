// File: verl/profiler/memory_profiler.cc
#include "verl/profiler/memory_profiler.h"

#include <unistd.h>

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "verl/core/status.h"
#include "verl/profiler/build_config.h"
#include "verl/profiler/memory_snapshot.h"
#include "verl/profiler/memory_tracker.h"

namespace verl::profiler {

MemoryProfiler::MemoryProfiler(const GlobalProfilerConfig& global,
                               const ProfilerConfig& role, int64_t rank,
                               int64_t pid)
    : global_(global),
      role_(role),
      rank_(rank),
      pid_(pid >= 0 ? pid : static_cast<int64_t>(getpid())) {
  save_path_ = role.has_save_path() ? role.save_path() : global.save_path();
  const bool has_tool = role.has_tool() || global.has_tool();
  const ProfilerTool::Value tool =
      role.has_tool() ? role.tool() : global.tool();
  // Compiled out (--define=verl_profiler=off): no recording, no files.
  recording_ =
      has_tool && tool == ProfilerTool::torch_memory && ProfilerCompiledIn();
  if (!recording_) return;
  MemoryTrackerOptions options;
  if (role.tool_config().has_torch_memory()) {
    options.trace_alloc_max_entries =
        role.tool_config().torch_memory().trace_alloc_max_entries();
    options.stack_depth = role.tool_config().torch_memory().stack_depth();
  } else {
    options.trace_alloc_max_entries =
        global.global_tool_config().torch_memory().trace_alloc_max_entries();
    options.stack_depth =
        global.global_tool_config().torch_memory().stack_depth();
  }
  MemoryTracker::Global().Enable(options);
}

MemoryProfiler::~MemoryProfiler() {
  if (recording_) MemoryTracker::Global().Disable();
}

bool RoleProfilesStep(const GlobalProfilerConfig& global,
                      const ProfilerConfig& role, int64_t step, int64_t rank) {
  if (!role.enable()) return false;
  const auto& steps = global.steps();
  if (std::find(steps.begin(), steps.end(), step) == steps.end()) return false;
  if (role.all_ranks()) return true;
  if (role.ranks_size() == 0) return rank == 0;
  return std::find(role.ranks().begin(), role.ranks().end(), rank) !=
         role.ranks().end();
}

MemoryTrace KeepPhases(MemoryTrace trace,
                       const std::vector<std::string>& phases) {
  if (phases.empty()) return trace;
  std::vector<bool> phase_kept(trace.phases.size(), false);
  for (size_t id = 0; id < trace.phases.size(); ++id) {
    for (absl::string_view part : absl::StrSplit(trace.phases[id], '/')) {
      if (std::find(phases.begin(), phases.end(), part) != phases.end()) {
        phase_kept[id] = true;
        break;
      }
    }
  }
  auto in_phase = [&](const MemoryEvent& e) {
    return e.phase >= 0 && e.phase < static_cast<int32_t>(phase_kept.size()) &&
           phase_kept[e.phase];
  };
  // addr -> a kept allocation whose free must be kept too.
  absl::flat_hash_map<uint64_t, bool> open;
  std::vector<MemoryEvent> kept;
  for (const MemoryEvent& e : trace.events) {
    if (e.action == MemoryEvent::Action::kAlloc) {
      if (in_phase(e)) {
        open[e.addr] = true;
        kept.push_back(e);
      } else {
        open.erase(e.addr);
      }
      continue;
    }
    auto it = open.find(e.addr);
    const bool pairs_kept_alloc = it != open.end();
    if (pairs_kept_alloc) open.erase(it);
    if (pairs_kept_alloc || in_phase(e)) kept.push_back(e);
  }
  trace.events = std::move(kept);
  return trace;
}

bool MemoryProfiler::ProfilesStep(int64_t step) const {
  return recording_ && RoleProfilesStep(global_, role_, step, rank_);
}

std::string MemoryProfiler::StepSnapshotPath(int64_t step) const {
  return absl::StrCat(save_path_, "/step", step, "/torch_memory_rank", rank_,
                      "_pid", pid_, ".pickle");
}

std::string MemoryProfiler::PostUpdatePath(int64_t step) const {
  return absl::StrCat(save_path_, "/step", step, "/post_update_step", step,
                      "_rank", rank_, "_pid", pid_, ".pickle");
}

absl::Status MemoryProfiler::StartStep(int64_t step) {
  current_step_ = ProfilesStep(step) ? step : -1;
  return absl::OkStatus();
}

absl::Status MemoryProfiler::StopStep() {
  if (current_step_ < 0) return absl::OkStatus();
  const int64_t step = current_step_;
  current_step_ = -1;
  return Annotate(
      WriteMemorySnapshot(MemoryTracker::Global().Snapshot(),
                          StepSnapshotPath(step)),
      absl::StrCat("torch_memory snapshot of step ", step, " on rank ", rank_));
}

absl::Status MemoryProfiler::WriteStepSnapshot(
    int64_t step, const std::vector<std::string>& phases) const {
  if (!recording_) return absl::OkStatus();
  return Annotate(
      WriteMemorySnapshot(
          KeepPhases(MemoryTracker::Global().Snapshot(), phases),
          StepSnapshotPath(step)),
      absl::StrCat("torch_memory snapshot of step ", step, " on rank ", rank_));
}

absl::Status MemoryProfiler::DumpPostUpdate(int64_t step) {
  if (!recording_) return absl::OkStatus();
  return Annotate(WriteMemorySnapshot(MemoryTracker::Global().Snapshot(),
                                      PostUpdatePath(step)),
                  absl::StrCat("post-update memory snapshot of step ", step,
                               " on rank ", rank_));
}

}  // namespace verl::profiler
