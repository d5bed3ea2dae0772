// File: verl/profiler/memory_report.h
//
// Analysis of a memory snapshot (ours or PyTorch's _dump_snapshot layout, as
// decoded by ReadPickle): live bytes, the peak and its phase, and the top
// allocation sites. The peak comes from verl's summary when the snapshot has
// one (exact over the whole recording) and is also recomputed over the traced
// window by replaying `device_traces` backwards from the live total. A site is
// the first frame outside the allocator (libc10, libtorch, the tracker).
#ifndef VERL_PROFILER_MEMORY_REPORT_H_
#define VERL_PROFILER_MEMORY_REPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace verl::profiler {

struct AllocationSite {
  std::string site;
  int64_t bytes = 0;
  int64_t count = 0;
};

struct MemoryReport {
  int64_t live_bytes = 0;  // active blocks in `segments`
  int64_t live_blocks = 0;
  std::map<std::string, int64_t> live_by_category;  // blocks with a category
  bool has_summary = false;  // verl's whole-recording counters present
  int64_t peak_bytes = 0;
  std::string peak_phase;
  int64_t trace_events = 0;
  int64_t trace_peak_bytes = 0;  // over the traced window
  std::string trace_peak_phase;
  std::vector<AllocationSite> top_live_sites;    // by live bytes
  std::vector<AllocationSite> top_traced_sites;  // by bytes allocated in trace
};

absl::StatusOr<MemoryReport> AnalyzeMemorySnapshot(
    const nlohmann::json& snapshot, int top_k = 10);
std::string FormatMemoryReport(const MemoryReport& report);

}  // namespace verl::profiler

#endif  // VERL_PROFILER_MEMORY_REPORT_H_
