// File: verl/profiler/memory_snapshot.h
//
// Writers for a MemoryTrace:
//  - the pickle layout of PyTorch's torch.cuda.memory._dump_snapshot, so the
//    file opens in https://pytorch.org/memory_viz: a dict with `segments`
//    (one per live CPU block; the CPU allocator does not cache) and
//    `device_traces` (one list of segment_alloc, alloc / free_requested,
//    free_completed, segment_free events with symbolized frames). Each block
//    and event also carries verl's `verl_category` and `phase`, and the
//    top-level key `verl` holds the summary.
//  - a JSON summary: live bytes by category and phase, the peak and its phase.
//  - an SVG of live memory over the traced window, stacked by category.
#ifndef VERL_PROFILER_MEMORY_SNAPSHOT_H_
#define VERL_PROFILER_MEMORY_SNAPSHOT_H_

#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "verl/profiler/memory_tracker.h"

namespace verl::profiler {

std::string MemorySnapshotPickle(const MemoryTrace& trace);
nlohmann::json MemorySummaryJson(const MemoryTrace& trace);
std::string MemoryTimelineSvg(const MemoryTrace& trace);

// Writes `pickle_path` and, beside it, the same name with `.json` and `.svg`
// in place of `.pickle`. Each file is written atomically; parent folders are
// created.
absl::Status WriteMemorySnapshot(const MemoryTrace& trace,
                                 const std::string& pickle_path);

}  // namespace verl::profiler

#endif  // VERL_PROFILER_MEMORY_SNAPSHOT_H_
