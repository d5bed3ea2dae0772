// File: verl/profiler/memory_tracker.h
//
// Process-wide tracking of LibTorch CPU allocations (the `torch_memory`
// profiler tool). Enable() installs a c10::Allocator for DeviceType::CPU that
// wraps the previous one; every allocation is recorded with its size, time,
// address, the active phase (MemoryScope, e.g. "update_actor/forward"), the
// active category (MemoryCategoryScope: parameters, gradients, ...) and a
// bounded raw stack (`stack_depth` return addresses, symbolized only when a
// snapshot is written). The last `trace_alloc_max_entries` alloc/free events
// are kept in a ring buffer; live bytes and peaks by category and by phase are
// exact counters over every tracked block.
//
// Off by default: until Enable() nothing is wrapped, so the only cost of the
// scopes is a thread-local push/pop. Disable() restores the previous
// allocator; blocks allocated while enabled still report their frees so the
// counters stay equal to the sum of live tracked blocks.
#ifndef VERL_PROFILER_MEMORY_TRACKER_H_
#define VERL_PROFILER_MEMORY_TRACKER_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace verl::profiler {

enum class MemoryCategory : uint8_t {
  kOther = 0,
  kParameters,
  kGradients,
  kOptimizerState,
  kActivations,
  kKvCache,
  kCommunication,
};
inline constexpr int kNumMemoryCategories = 7;
// "other", "parameters", "gradients", "optimizer_state", "activations",
// "kv_cache", "communication".
const char* MemoryCategoryName(MemoryCategory c);

struct MemoryTrackerOptions {
  int64_t trace_alloc_max_entries = 100000;  // ring buffer size (0: no trace)
  int stack_depth = 32;                      // frames per event (0: none)
};

struct MemoryEvent {
  enum class Action : uint8_t { kAlloc, kFree };
  Action action = Action::kAlloc;
  MemoryCategory category = MemoryCategory::kOther;
  uint64_t addr = 0;
  int64_t size = 0;
  int64_t time_us = 0;  // since the tracker's epoch
  int32_t phase = 0;    // index into MemoryTrace::phases
  int32_t stack = -1;   // index into MemoryTrace::stacks, -1: none
};

struct LiveBlock {
  uint64_t addr = 0;
  int64_t size = 0;
  int64_t time_us = 0;
  MemoryCategory category = MemoryCategory::kOther;
  int32_t phase = 0;
  int32_t stack = -1;
};

struct MemoryStats {
  int64_t live_bytes = 0;
  int64_t live_blocks = 0;
  int64_t peak_bytes = 0;  // since Enable() / ResetPeak()
  std::string peak_phase;  // phase of the allocation that reached the peak
  int64_t peak_time_us = 0;
  std::array<int64_t, kNumMemoryCategories> live_by_category{};
  std::array<int64_t, kNumMemoryCategories> peak_by_category{};
  std::array<int64_t, kNumMemoryCategories> at_peak_by_category{};
  std::map<std::string, int64_t> live_by_phase;  // phase "" = no scope
  std::map<std::string, int64_t> peak_by_phase;
  int64_t num_allocs = 0;  // tracked events since Enable()
  int64_t num_frees = 0;
  int64_t dropped_events = 0;  // overwritten in the ring buffer
};

// A consistent copy of the tracker at one moment.
struct MemoryTrace {
  MemoryStats stats;
  std::vector<LiveBlock> live;             // sorted by address
  std::vector<MemoryEvent> events;         // oldest first
  std::vector<std::string> phases;         // id -> phase path ("" is id 0)
  std::vector<std::vector<void*>> stacks;  // id -> return addresses
  int64_t now_us = 0;
};

class MemoryTracker {
 public:
  // The process-wide tracker (never destroyed).
  static MemoryTracker& Global();

  // Installs the wrapping CPU allocator (if not yet), clears the event trace
  // and resets the peaks to the current live bytes.
  void Enable(const MemoryTrackerOptions& options = {});
  // Restores the allocator that was active before Enable().
  void Disable();
  bool enabled() const;

  void ResetPeak();
  MemoryStats Stats() const;
  MemoryTrace Snapshot() const;

  // Interns a phase path; used by MemoryScope.
  int32_t InternPhase(const std::string& path);
  std::string PhaseName(int32_t id) const;

  // Allocation hooks, called by the wrapping allocator.
  void OnAlloc(void* ptr, int64_t size, void* ctx, void (*deleter)(void*));
  static void TrackedDelete(void* ptr);

 private:
  MemoryTracker();
  MemoryStats StatsLocked() const;  // requires the state's mutex
  struct State;
  State* s_;
};

// RAII phase annotation; nested scopes form a path "outer/inner".
class MemoryScope {
 public:
  explicit MemoryScope(const std::string& name);
  ~MemoryScope();
  MemoryScope(const MemoryScope&) = delete;
  MemoryScope& operator=(const MemoryScope&) = delete;
};

// RAII category annotation for allocations made on this thread.
class MemoryCategoryScope {
 public:
  explicit MemoryCategoryScope(MemoryCategory category);
  ~MemoryCategoryScope();
  MemoryCategoryScope(const MemoryCategoryScope&) = delete;
  MemoryCategoryScope& operator=(const MemoryCategoryScope&) = delete;

 private:
  MemoryCategory saved_;
};

// The calling thread's current phase path ("" outside any MemoryScope) and
// category.
std::string CurrentMemoryPhase();
MemoryCategory CurrentMemoryCategory();

}  // namespace verl::profiler

#endif  // VERL_PROFILER_MEMORY_TRACKER_H_
