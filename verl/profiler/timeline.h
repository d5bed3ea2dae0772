// File: verl/profiler/timeline.h
//
// A per-process Chrome-trace / Perfetto timeline (global_profiler.tool =
// "timeline" or "torch"). Code marks spans with TraceScope (RL phases such as
// "gen" and "update_actor", micro-batches, forward/backward, each collective
// with its bytes); Timeline::Global().WriteJson() writes
//   {"traceEvents": [...], "displayTimeUnit": "ms"}
// with complete ("X") events, pid = rank, one tid per thread, and metadata
// events naming them. Recording is off by default; a disabled TraceScope
// costs one relaxed atomic load.
#ifndef VERL_PROFILER_TIMELINE_H_
#define VERL_PROFILER_TIMELINE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace verl::profiler {

struct TraceEvent {
  std::string name;
  std::string category;
  int64_t start_us = 0;
  int64_t duration_us = 0;
  int64_t tid = 0;
  nlohmann::json args;  // null when empty
};

class Timeline {
 public:
  static Timeline& Global();

  void Enable(int64_t rank, int64_t max_events = 1 << 20);
  void Disable() { enabled_.store(false, std::memory_order_relaxed); }
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  void Clear();

  // Microseconds since the timeline's epoch (process start of recording).
  int64_t NowMicros() const;
  void Record(TraceEvent event);
  std::vector<TraceEvent> Events() const;

  // The trace as JSON (also used by tests).
  nlohmann::json ToJson() const;
  // Writes ToJson() atomically to `path`, creating its folder.
  absl::Status WriteJson(const std::string& path) const;

 private:
  std::atomic<bool> enabled_{false};
  int64_t rank_ = 0;
  int64_t max_events_ = 0;
  int64_t dropped_ = 0;
  std::chrono::steady_clock::time_point epoch_ =
      std::chrono::steady_clock::now();
  mutable std::mutex mu_;
  std::vector<TraceEvent> events_;
};

// Checks a Chrome-trace object: `traceEvents` is an array of events with a
// name and a phase; complete events ("X") have integer ts, dur >= 0, pid and
// tid; and on each (pid, tid) track they nest (any two are disjoint or one
// contains the other), as a viewer stacks them. Errors name the event.
absl::Status ValidateTrace(const nlohmann::json& trace);

// Small dense id of the calling thread (0 for the first thread seen).
int64_t CurrentThreadId();

// RAII span on the global timeline. `args` are shown in the trace viewer
// (e.g. {"bytes": 4096} for a collective).
class TraceScope {
 public:
  explicit TraceScope(const char* name, const char* category = "phase",
                      nlohmann::json args = nullptr);
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  const char* name_;
  const char* category_;
  nlohmann::json args_;
  int64_t start_us_ = -1;  // -1 when recording was off at entry
};

}  // namespace verl::profiler

#endif  // VERL_PROFILER_TIMELINE_H_
