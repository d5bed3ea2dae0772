// File: verl/profiler/memory_tracker_test.cc
// The tracker's counters, its snapshot and the written pickle all agree with
// the sum of the tensors' nbytes; Python's pickle reads the snapshot into the
// structure memory_viz expects; the ring buffer stays bounded.
#include "verl/profiler/memory_tracker.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/CPUAllocator.h>

#include <cstdlib>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "verl/core/file_util.h"
#include "verl/core/pickle.h"
#include "verl/profiler/memory_snapshot.h"

namespace verl::profiler {
namespace {

std::string TmpDir() {
  const char* d = std::getenv("TEST_TMPDIR");
  return d != nullptr ? d : "/tmp";
}

int Python(const std::string& code) {
  const std::string script = TmpDir() + "/check.py";
  EXPECT_TRUE(core::WriteFileAtomic(script, code).ok());
  return std::system(("python3 " + script).c_str());
}

int64_t SumSegments(const nlohmann::json& snapshot) {
  int64_t total = 0;
  for (const auto& seg : snapshot["segments"])
    total += seg["allocated_size"].get<int64_t>();
  return total;
}

class MemoryTrackerTest : public ::testing::Test {
 protected:
  void TearDown() override { MemoryTracker::Global().Disable(); }
};

TEST_F(MemoryTrackerTest, InstallsAndRestoresTheCpuAllocator) {
  c10::Allocator* before = c10::GetCPUAllocator();
  MemoryTracker::Global().Enable();
  EXPECT_NE(c10::GetCPUAllocator(), before);
  at::Tensor t = at::empty({1000}, at::kFloat);
  MemoryTracker::Global().Disable();
  EXPECT_EQ(c10::GetCPUAllocator(), before);
  // A block allocated while enabled still reports its free afterwards.
  const int64_t live = MemoryTracker::Global().Stats().live_bytes;
  t.reset();
  EXPECT_EQ(MemoryTracker::Global().Stats().live_bytes, live - 4000);
}

TEST_F(MemoryTrackerTest, ScopesNest) {
  EXPECT_EQ(CurrentMemoryPhase(), "");
  {
    MemoryScope a("update_actor");
    EXPECT_EQ(CurrentMemoryPhase(), "update_actor");
    {
      MemoryScope b("forward");
      EXPECT_EQ(CurrentMemoryPhase(), "update_actor/forward");
      MemoryCategoryScope c(MemoryCategory::kActivations);
      {
        MemoryCategoryScope g(MemoryCategory::kGradients);
        EXPECT_EQ(CurrentMemoryCategory(), MemoryCategory::kGradients);
      }
      EXPECT_EQ(CurrentMemoryCategory(), MemoryCategory::kActivations);
    }
    EXPECT_EQ(CurrentMemoryPhase(), "update_actor");
  }
  EXPECT_EQ(CurrentMemoryPhase(), "");
  EXPECT_EQ(CurrentMemoryCategory(), MemoryCategory::kOther);
}

TEST_F(MemoryTrackerTest, CountersSnapshotAndPickleAgree) {
  MemoryTracker& tracker = MemoryTracker::Global();
  tracker.Enable({/*trace_alloc_max_entries=*/1000, /*stack_depth=*/8});
  const MemoryStats base = tracker.Stats();

  std::vector<at::Tensor> keep;
  int64_t params = 0, acts = 0, gen = 0;
  {
    MemoryScope phase("update_actor");
    {
      MemoryCategoryScope cat(MemoryCategory::kParameters);
      for (int64_t n : {100, 2000, 30000}) {
        keep.push_back(at::empty({n}, at::kFloat));
        params += keep.back().nbytes();
      }
    }
    MemoryScope inner("forward");
    MemoryCategoryScope cat(MemoryCategory::kActivations);
    keep.push_back(at::empty({64, 1024}, at::kDouble));  // 512 KiB
    acts += keep.back().nbytes();
    at::Tensor temp = at::empty({400000}, at::kFloat);  // freed below: peak
    const MemoryStats at_peak = tracker.Stats();
    EXPECT_EQ(at_peak.peak_bytes - base.live_bytes, params + acts + 1600000);
    EXPECT_EQ(at_peak.peak_phase, "update_actor/forward");
  }
  {
    MemoryScope phase("gen");
    MemoryCategoryScope cat(MemoryCategory::kKvCache);
    keep.push_back(at::empty({3, 5, 7}, at::kLong));
    gen += keep.back().nbytes();
  }
  const MemoryTrace trace = tracker.Snapshot();
  const MemoryStats& s = trace.stats;
  const int64_t expected = params + acts + gen;
  EXPECT_EQ(s.live_bytes - base.live_bytes, expected);
  EXPECT_EQ(s.live_blocks - base.live_blocks, 5);
  auto cat = [&](MemoryCategory c) {
    const int i = static_cast<int>(c);
    return s.live_by_category[i] - base.live_by_category[i];
  };
  EXPECT_EQ(cat(MemoryCategory::kParameters), params);
  EXPECT_EQ(cat(MemoryCategory::kActivations), acts);
  EXPECT_EQ(cat(MemoryCategory::kKvCache), gen);
  EXPECT_EQ(s.live_by_phase.at("update_actor"), params);
  EXPECT_EQ(s.live_by_phase.at("update_actor/forward"), acts);
  EXPECT_EQ(s.live_by_phase.at("gen"), gen);
  EXPECT_EQ(s.peak_by_phase.at("update_actor/forward"), acts + 1600000);
  EXPECT_EQ(s.peak_phase, "update_actor/forward");
  EXPECT_EQ(
      s.at_peak_by_category[static_cast<int>(MemoryCategory::kActivations)] -
          base.live_by_category[static_cast<int>(MemoryCategory::kActivations)],
      acts + 1600000);
  EXPECT_EQ(s.num_allocs, 6);
  EXPECT_EQ(s.num_frees, 1);
  ASSERT_EQ(trace.events.size(), 7u);
  EXPECT_EQ(trace.events[5].action, MemoryEvent::Action::kFree);
  EXPECT_EQ(trace.events[5].size, 1600000);

  // The snapshot's live blocks and the pickle's segments hold the same total.
  int64_t live_sum = 0;
  for (const LiveBlock& b : trace.live) live_sum += b.size;
  EXPECT_EQ(live_sum, s.live_bytes);
  const std::string path = TmpDir() + "/step1/torch_memory_rank0_pid1.pickle";
  ASSERT_TRUE(WriteMemorySnapshot(trace, path).ok());
  auto snap = core::ReadPickleFile(path);
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(SumSegments(*snap), s.live_bytes);
  EXPECT_EQ((*snap)["verl"]["peak_phase"], "update_actor/forward");
  auto summary =
      core::ReadJsonFile(TmpDir() + "/step1/torch_memory_rank0_pid1.json");
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ((*summary)["live_bytes"], s.live_bytes);
  EXPECT_EQ((*summary)["live_bytes_by_category"]["kv_cache"],
            s.live_by_category[static_cast<int>(MemoryCategory::kKvCache)]);

  // Python's pickle reads it into memory_viz's structure.
  EXPECT_EQ(Python(R"(
import pickle, sys
d = pickle.load(open(')" +
                   path + R"(', 'rb'))
def frames_ok(fr):
    return isinstance(fr, list) and all(
        set(f) == {'filename', 'line', 'name'} and isinstance(f['filename'], str)
        and isinstance(f['line'], int) and isinstance(f['name'], str) for f in fr)
assert isinstance(d['segments'], list) and isinstance(d['device_traces'], list)
for seg in d['segments']:
    for k, t in [('address', int), ('total_size', int), ('stream', int),
                 ('segment_type', str), ('allocated_size', int),
                 ('active_size', int), ('blocks', list)]:
        assert isinstance(seg[k], t), (k, seg)
    assert seg['segment_type'] in ('small', 'large')
    assert sum(b['size'] for b in seg['blocks']) == seg['total_size']
    for b in seg['blocks']:
        assert b['state'] == 'active_allocated' and frames_ok(b['frames'])
        assert isinstance(b['address'], int) and b['requested_size'] == b['size']
assert len(d['device_traces']) == 1
tr = d['device_traces'][0]
assert [e['action'] for e in tr].count("alloc") == 6
assert [e['action'] for e in tr].count('free_requested') == 1
assert [e['action'] for e in tr].count('free_completed') == 1
assert [e['action'] for e in tr].count('segment_alloc') == 6
assert [e['action'] for e in tr].count('segment_free') == 1
# memory_viz replays segment_alloc, alloc, ..., free_*, segment_free per block
freed = [e['addr'] for e in tr if e['action'] == 'free_completed'][0]
acts = [e['action'] for e in tr if e['addr'] == freed]
assert acts == ['segment_alloc', 'alloc', 'free_requested', 'free_completed',
                'segment_free'], acts
assert all('category' not in e for e in tr)
assert set(e['verl_category'] for e in tr) <= {'parameters', 'activations', 'kv_cache'}
for e in tr:
    assert isinstance(e['addr'], int) and isinstance(e['size'], int)
    assert e['stream'] == 0 and frames_ok(e['frames'])
assert any(len(e['frames']) > 0 for e in tr)
assert len(tr[0]['frames']) <= 8
assert sum(s['allocated_size'] for s in d['segments']) == d['verl']['live_bytes']
assert d['verl']['peak_phase'] == 'update_actor/forward'
)"),
            0);

  // The SVG is well-formed XML with one band per category.
  EXPECT_EQ(Python(R"(
import xml.etree.ElementTree as ET
root = ET.parse(')" +
                   TmpDir() + R"(/step1/torch_memory_rank0_pid1.svg').getroot()
ns = '{http://www.w3.org/2000/svg}'
assert root.tag == ns + 'svg'
bands = root.findall(ns + 'polygon')
assert sorted(b.get('class') for b in bands) == sorted(['other', 'parameters',
    'gradients', 'optimizer_state', 'activations', 'kv_cache', 'communication'])
)"),
            0);

  keep.clear();
  EXPECT_EQ(tracker.Stats().live_bytes, base.live_bytes);
}

TEST_F(MemoryTrackerTest, RingBufferIsBounded) {
  MemoryTracker& tracker = MemoryTracker::Global();
  tracker.Enable({/*trace_alloc_max_entries=*/10, /*stack_depth=*/0});
  std::vector<at::Tensor> keep;
  for (int i = 1; i <= 30; ++i) keep.push_back(at::empty({i}, at::kByte));
  const MemoryTrace trace = tracker.Snapshot();
  ASSERT_EQ(trace.events.size(), 10u);
  EXPECT_EQ(trace.stats.dropped_events, 20);
  EXPECT_EQ(trace.stats.num_allocs, 30);
  // Oldest first: the last ten allocations, sizes 21..30, without stacks.
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(trace.events[i].size, 21 + i);
    EXPECT_EQ(trace.events[i].stack, -1);
  }
  // The counters still cover every block, not only the traced ones.
  EXPECT_GE(trace.stats.live_bytes, 30 * 31 / 2);
}

TEST_F(MemoryTrackerTest, RawAllocateStillWorks) {
  MemoryTracker& tracker = MemoryTracker::Global();
  tracker.Enable();
  const int64_t before = tracker.Stats().live_bytes;
  c10::Allocator* a = c10::GetCPUAllocator();
  void* p = a->raw_allocate(4096);
  EXPECT_EQ(tracker.Stats().live_bytes, before + 4096);
  a->raw_deallocate(p);
  EXPECT_EQ(tracker.Stats().live_bytes, before);
}

TEST_F(MemoryTrackerTest, RawDeleterFreesUntrackedInnerMemory) {
  // raw_allocate'd before tracking, freed through the wrapper's raw_deleter.
  void* p = c10::GetCPUAllocator()->raw_allocate(256);
  MemoryTracker& tracker = MemoryTracker::Global();
  tracker.Enable();
  const int64_t before = tracker.Stats().live_bytes;
  c10::GetCPUAllocator()->raw_deleter()(p);
  c10::GetCPUAllocator()->raw_deleter()(nullptr);
  EXPECT_EQ(tracker.Stats().live_bytes, before);
}

TEST_F(MemoryTrackerTest, ThreadsKeepTheirOwnPhasesAndCountersStayExact) {
  MemoryTracker& tracker = MemoryTracker::Global();
  tracker.Enable({/*trace_alloc_max_entries=*/100000, /*stack_depth=*/4});
  const MemoryStats base = tracker.Stats();
  constexpr int kIters = 200;
  auto work = [](const char* phase, int64_t n, std::vector<at::Tensor>* keep) {
    MemoryScope scope(phase);
    MemoryCategoryScope cat(MemoryCategory::kCommunication);
    for (int i = 0; i < kIters; ++i) {
      at::Tensor t = at::empty({n}, at::kFloat);  // freed at once
      if (i % 10 == 0) keep->push_back(at::empty({n}, at::kFloat));
    }
  };
  std::vector<at::Tensor> keep_a, keep_b;
  std::thread a(work, "gen", 100, &keep_a);
  std::thread b(work, "ref", 300, &keep_b);
  a.join();
  b.join();
  const MemoryStats s = tracker.Stats();
  EXPECT_EQ(s.live_by_phase.at("gen"), 20 * 400);
  EXPECT_EQ(s.live_by_phase.at("ref"), 20 * 1200);
  EXPECT_EQ(s.live_bytes - base.live_bytes, 20 * 400 + 20 * 1200);
  EXPECT_EQ(
      s.live_by_category[static_cast<int>(MemoryCategory::kCommunication)] -
          base.live_by_category[static_cast<int>(
              MemoryCategory::kCommunication)],
      20 * 1600);
  EXPECT_EQ(s.num_allocs, 2 * (kIters + 20));
  EXPECT_EQ(s.num_frees, 2 * kIters);
  EXPECT_EQ(CurrentMemoryPhase(), "");  // the main thread saw none of it
}

}  // namespace
}  // namespace verl::profiler
