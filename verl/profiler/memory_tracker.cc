// File: verl/profiler/memory_tracker.cc
#include "verl/profiler/memory_tracker.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "c10/core/Allocator.h"
#include "c10/core/CPUAllocator.h"
#include "glog/logging.h"
#include "verl/profiler/build_config.h"

namespace verl::profiler {
namespace {

constexpr int kMaxStackDepth = 128;
constexpr int kSkipFrames = 2;  // CaptureStack + the allocator's allocate()
constexpr uint8_t kAllocatorPriority = 255;

thread_local std::vector<int32_t> tls_phases;  // ids of the open scopes
thread_local MemoryCategory tls_category = MemoryCategory::kOther;

int32_t CurrentPhaseId() { return tls_phases.empty() ? 0 : tls_phases.back(); }

// Wraps the CPU allocator that was current at install time. The DataPtr's
// context is the data pointer itself (so raw_allocate keeps working); the
// inner context and deleter live in the tracker's block table.
class TrackingAllocator final : public c10::Allocator {
 public:
  explicit TrackingAllocator(MemoryTracker* tracker) : tracker_(tracker) {}
  void set_inner(c10::Allocator* inner) { inner_ = inner; }
  c10::Allocator* inner() const { return inner_; }

  c10::DataPtr allocate(size_t n) const override {
    c10::DataPtr dp = inner_->allocate(n);
    void* p = dp.get();
    if (p == nullptr || !tracker_->enabled()) return dp;
    const c10::Device device = dp.device();
    c10::DeleterFnPtr deleter = dp.get_deleter();
    void* ctx = dp.release_context();
    tracker_->OnAlloc(p, static_cast<int64_t>(n), ctx, deleter);
    return {p, p, &MemoryTracker::TrackedDelete, device};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &MemoryTracker::TrackedDelete;
  }

 private:
  MemoryTracker* tracker_;
  c10::Allocator* inner_ = nullptr;
};

}  // namespace

const char* MemoryCategoryName(MemoryCategory c) {
  static constexpr const char* kNames[kNumMemoryCategories] = {
      "other",       "parameters", "gradients",    "optimizer_state",
      "activations", "kv_cache",   "communication"};
  const int i = static_cast<int>(c);
  CHECK(i >= 0 && i < kNumMemoryCategories) << "bad memory category " << i;
  return kNames[i];
}

struct MemoryTracker::State {
  struct Block {
    void* ctx;
    c10::DeleterFnPtr deleter;
    LiveBlock info;
  };

  std::atomic<bool> enabled{false};
  bool installed = false;
  TrackingAllocator* allocator = nullptr;
  MemoryTrackerOptions options;
  std::chrono::steady_clock::time_point epoch =
      std::chrono::steady_clock::now();

  mutable std::mutex mu;  // everything below
  absl::flat_hash_map<void*, Block> blocks;
  MemoryStats stats;
  absl::flat_hash_map<int32_t, int64_t> live_by_phase, peak_by_phase;
  int32_t peak_phase = 0;
  std::vector<MemoryEvent> ring;
  int64_t ring_next = 0;  // total events ever pushed since the last clear
  std::vector<std::vector<void*>> stacks;
  absl::flat_hash_map<uint64_t, int32_t> stack_ids;  // hash -> id

  mutable std::mutex phase_mu;
  std::vector<std::string> phases{""};
  absl::flat_hash_map<std::string, int32_t> phase_ids{{"", 0}};

  int64_t NowUs() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now() - epoch)
        .count();
  }

  void Push(const MemoryEvent& e) {
    const int64_t cap = options.trace_alloc_max_entries;
    if (cap <= 0) return;
    if (static_cast<int64_t>(ring.size()) < cap) {
      ring.push_back(e);
    } else {
      ring[ring_next % cap] = e;
      ++stats.dropped_events;
    }
    ++ring_next;
  }

  int32_t InternStack(void* const* frames, int n) {
    if (n <= 0) return -1;
    const uint64_t h = absl::HashOf(absl::MakeConstSpan(frames, n));
    auto it = stack_ids.find(h);
    if (it != stack_ids.end()) {
      const auto& s = stacks[it->second];
      if (s.size() == static_cast<size_t>(n) &&
          std::equal(s.begin(), s.end(), frames))
        return it->second;
    }
    const int32_t id = static_cast<int32_t>(stacks.size());
    stacks.emplace_back(frames, frames + n);
    if (it == stack_ids.end()) stack_ids.emplace(h, id);  // keep the first
    return id;
  }

  void ResetPeakLocked() {
    stats.peak_bytes = stats.live_bytes;
    stats.peak_time_us = NowUs();
    peak_phase = 0;
    stats.peak_by_category = stats.live_by_category;
    stats.at_peak_by_category = stats.live_by_category;
    peak_by_phase = live_by_phase;
  }
};

MemoryTracker& MemoryTracker::Global() {
  static MemoryTracker* tracker = new MemoryTracker();
  return *tracker;
}

MemoryTracker::MemoryTracker() : s_(new State()) {
  s_->allocator = new TrackingAllocator(this);
}

bool MemoryTracker::enabled() const {
  return s_->enabled.load(std::memory_order_relaxed);
}

void MemoryTracker::Enable(const MemoryTrackerOptions& options) {
  CHECK_GE(options.stack_depth, 0);
#ifdef VERL_PROFILER_DISABLED
  // Compiled out: never install the allocator hook.
  static std::once_flag warned;
  std::call_once(warned, [] {
    LOG(WARNING) << "torch_memory: " << kProfilerCompiledOutMessage;
  });
  return;
#endif
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->options = options;
    s_->options.stack_depth = std::min(options.stack_depth, kMaxStackDepth);
    s_->ring.clear();
    s_->ring.reserve(
        std::min<int64_t>(options.trace_alloc_max_entries, 1 << 16));
    s_->ring_next = 0;
    s_->stats.dropped_events = 0;
    s_->stats.num_allocs = 0;
    s_->stats.num_frees = 0;
    s_->ResetPeakLocked();
    if (!s_->installed) {
      // libunwind's per-thread cache makes a capture ~10x cheaper than
      // glibc's backtrace(), which searches the unwind tables per frame.
      unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
      s_->allocator->set_inner(c10::GetCPUAllocator());
      c10::SetCPUAllocator(s_->allocator, kAllocatorPriority);
      s_->installed = true;
    }
  }
  s_->enabled.store(true, std::memory_order_relaxed);
}

void MemoryTracker::Disable() {
  s_->enabled.store(false, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(s_->mu);
  if (s_->installed) {
    c10::SetCPUAllocator(s_->allocator->inner(), kAllocatorPriority);
    s_->installed = false;
  }
}

void MemoryTracker::ResetPeak() {
  std::lock_guard<std::mutex> lock(s_->mu);
  s_->ResetPeakLocked();
}

int32_t MemoryTracker::InternPhase(const std::string& path) {
  std::lock_guard<std::mutex> lock(s_->phase_mu);
  auto [it, inserted] =
      s_->phase_ids.emplace(path, static_cast<int32_t>(s_->phases.size()));
  if (inserted) s_->phases.push_back(path);
  return it->second;
}

std::string MemoryTracker::PhaseName(int32_t id) const {
  std::lock_guard<std::mutex> lock(s_->phase_mu);
  CHECK(id >= 0 && id < static_cast<int32_t>(s_->phases.size()));
  return s_->phases[id];
}

void MemoryTracker::OnAlloc(void* ptr, int64_t size, void* ctx,
                            void (*deleter)(void*)) {
  void* frames[kMaxStackDepth + kSkipFrames];
  const int depth = s_->options.stack_depth;
  int n = depth > 0 ? unw_backtrace(frames, depth + kSkipFrames) : 0;
  const int skip = std::min(n, kSkipFrames);
  const int32_t phase = CurrentPhaseId();
  const MemoryCategory cat = tls_category;
  const int c = static_cast<int>(cat);

  std::lock_guard<std::mutex> lock(s_->mu);
  State& s = *s_;
  LiveBlock info{
      reinterpret_cast<uint64_t>(ptr),       size, s.NowUs(), cat, phase,
      s.InternStack(frames + skip, n - skip)};
  s.blocks[ptr] = State::Block{ctx, deleter, info};
  MemoryStats& st = s.stats;
  st.live_bytes += size;
  ++st.live_blocks;
  ++st.num_allocs;
  st.live_by_category[c] += size;
  st.peak_by_category[c] =
      std::max(st.peak_by_category[c], st.live_by_category[c]);
  int64_t& phase_live = s.live_by_phase[phase];
  phase_live += size;
  int64_t& phase_peak = s.peak_by_phase[phase];
  phase_peak = std::max(phase_peak, phase_live);
  if (st.live_bytes > st.peak_bytes) {
    st.peak_bytes = st.live_bytes;
    st.peak_time_us = info.time_us;
    st.at_peak_by_category = st.live_by_category;
    s.peak_phase = phase;
  }
  s.Push(MemoryEvent{MemoryEvent::Action::kAlloc, cat, info.addr, size,
                     info.time_us, phase, info.stack});
}

void MemoryTracker::TrackedDelete(void* ptr) {
  if (ptr == nullptr) return;  // deleters may run on empty DataPtrs
  State& s = *Global().s_;
  void* ctx = ptr;
  c10::DeleterFnPtr deleter = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.blocks.find(ptr);
    if (it == s.blocks.end()) {
      // Memory of the wrapped allocator's raw path handed to our
      // raw_deleter(): free it as that allocator would.
      deleter = s.allocator->inner()->raw_deleter();
      CHECK(deleter != nullptr) << "MemoryTracker: free of untracked " << ptr;
    } else {
      ctx = it->second.ctx;
      deleter = it->second.deleter;
      const LiveBlock& b = it->second.info;
      MemoryStats& st = s.stats;
      st.live_bytes -= b.size;
      --st.live_blocks;
      st.live_by_category[static_cast<int>(b.category)] -= b.size;
      s.live_by_phase[b.phase] -= b.size;
      if (s.enabled.load(std::memory_order_relaxed)) {
        ++st.num_frees;
        // The free is attributed to the freeing thread's phase, like the
        // caching allocator's trace; the block keeps its own category.
        s.Push(MemoryEvent{MemoryEvent::Action::kFree, b.category, b.addr,
                           b.size, s.NowUs(), CurrentPhaseId(), b.stack});
      }
      s.blocks.erase(it);
    }
  }
  if (deleter != nullptr) deleter(ctx);
}

MemoryStats MemoryTracker::Stats() const {
  std::lock_guard<std::mutex> lock(s_->mu);
  return StatsLocked();
}

MemoryStats MemoryTracker::StatsLocked() const {
  MemoryStats out = s_->stats;
  std::lock_guard<std::mutex> lock(s_->phase_mu);
  const auto& names = s_->phases;
  out.peak_phase = names[s_->peak_phase];
  for (const auto& [id, bytes] : s_->live_by_phase)
    if (bytes != 0) out.live_by_phase[names[id]] = bytes;
  for (const auto& [id, bytes] : s_->peak_by_phase)
    if (bytes != 0) out.peak_by_phase[names[id]] = bytes;
  return out;
}

MemoryTrace MemoryTracker::Snapshot() const {
  MemoryTrace t;
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    t.live.reserve(s_->blocks.size());
    for (const auto& [ptr, b] : s_->blocks) t.live.push_back(b.info);
    const int64_t cap = s_->options.trace_alloc_max_entries;
    const int64_t n = static_cast<int64_t>(s_->ring.size());
    const int64_t start = n < cap ? 0 : s_->ring_next % cap;
    t.events.reserve(n);
    for (int64_t i = 0; i < n; ++i)
      t.events.push_back(s_->ring[(start + i) % n]);
    t.stacks = s_->stacks;
    t.now_us = s_->NowUs();
    t.stats = StatsLocked();
    std::lock_guard<std::mutex> phase_lock(s_->phase_mu);
    t.phases = s_->phases;
  }
  std::sort(
      t.live.begin(), t.live.end(),
      [](const LiveBlock& a, const LiveBlock& b) { return a.addr < b.addr; });
  return t;
}

#ifdef VERL_PROFILER_DISABLED
// Compiled out: the scopes do nothing (CurrentMemoryPhase() stays "").
MemoryScope::MemoryScope(const std::string&) {}
MemoryScope::~MemoryScope() {}
MemoryCategoryScope::MemoryCategoryScope(MemoryCategory)
    : saved_(MemoryCategory::kOther) {}
MemoryCategoryScope::~MemoryCategoryScope() {}
#else
MemoryScope::MemoryScope(const std::string& name) {
  MemoryTracker& tracker = MemoryTracker::Global();
  const std::string path =
      tls_phases.empty() ? name
                         : tracker.PhaseName(tls_phases.back()) + "/" + name;
  tls_phases.push_back(tracker.InternPhase(path));
}

MemoryScope::~MemoryScope() { tls_phases.pop_back(); }

MemoryCategoryScope::MemoryCategoryScope(MemoryCategory category)
    : saved_(tls_category) {
  tls_category = category;
}

MemoryCategoryScope::~MemoryCategoryScope() { tls_category = saved_; }
#endif  // VERL_PROFILER_DISABLED

std::string CurrentMemoryPhase() {
  return MemoryTracker::Global().PhaseName(CurrentPhaseId());
}

MemoryCategory CurrentMemoryCategory() { return tls_category; }

}  // namespace verl::profiler
