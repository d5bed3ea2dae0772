// File: verl/profiler/memory_snapshot.cc
#include "verl/profiler/memory_snapshot.h"

#include <cxxabi.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "verl/core/file_util.h"
#include "verl/profiler/pickle_writer.h"

namespace verl::profiler {
namespace {

using nlohmann::json;

constexpr int64_t kSmallSegment = 1 << 20;  // PyTorch's small/large split

struct Frame {
  std::string filename;
  std::string name;
};

// Symbolizes a return address with dladdr (no debug info: line is 0).
Frame Symbolize(void* addr) {
  Dl_info info{};
  Frame f;
  if (dladdr(addr, &info) == 0) {
    f.filename = "??";
    f.name = absl::StrFormat("%p", addr);
    return f;
  }
  f.filename = info.dli_fname != nullptr ? info.dli_fname : "??";
  if (info.dli_sname != nullptr) {
    int status = 0;
    char* demangled =
        abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
    f.name = status == 0 && demangled != nullptr ? demangled : info.dli_sname;
    std::free(demangled);
  } else {
    const auto base = reinterpret_cast<uintptr_t>(info.dli_fbase);
    f.name = absl::StrFormat("0x%x", reinterpret_cast<uintptr_t>(addr) - base);
  }
  return f;
}

// Writes a JSON value (objects, arrays, strings, numbers, bools, null).
void WriteJsonValue(PickleWriter& w, const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      w.BeginDict();
      for (const auto& [k, x] : v.items()) {
        w.String(k);
        WriteJsonValue(w, x);
      }
      w.EndDict();
      break;
    case json::value_t::array:
      w.BeginList();
      for (const auto& x : v) WriteJsonValue(w, x);
      w.EndList();
      break;
    case json::value_t::string:
      w.String(v.get<std::string>());
      break;
    case json::value_t::boolean:
      w.Bool(v.get<bool>());
      break;
    case json::value_t::number_integer:
      w.Int(v.get<int64_t>());
      break;
    case json::value_t::number_unsigned:
      w.UInt(v.get<uint64_t>());
      break;
    case json::value_t::number_float:
      w.Float(v.get<double>());
      break;
    default:
      w.None();
  }
}

// Emits each stack's frame list once and refers to it through the memo.
class StackTable {
 public:
  StackTable(PickleWriter* w, const std::vector<std::vector<void*>>* stacks)
      : w_(w), stacks_(stacks), memo_(stacks->size(), kNone) {}

  void Write(int32_t id) {
    if (id < 0) {
      w_->BeginList();
      w_->EndList();
      return;
    }
    if (memo_[id] != kNone) return w_->Get(memo_[id]);
    w_->BeginList();
    for (void* addr : (*stacks_)[id]) WriteFrame(addr);
    w_->EndList();
    memo_[id] = w_->Memoize();
  }

 private:
  static constexpr uint32_t kNone = ~0u;

  void WriteFrame(void* addr) {
    auto it = frames_.find(addr);
    if (it != frames_.end()) return w_->Get(it->second);
    const Frame f = Symbolize(addr);
    w_->BeginDict();
    w_->String("filename");
    w_->String(f.filename);
    w_->String("line");
    w_->Int(0);
    w_->String("name");
    w_->String(f.name);
    w_->EndDict();
    frames_[addr] = w_->Memoize();
  }

  PickleWriter* w_;
  const std::vector<std::vector<void*>>* stacks_;
  std::vector<uint32_t> memo_;
  std::unordered_map<void*, uint32_t> frames_;
};

void WriteAnnotations(PickleWriter& w, const MemoryTrace& t,
                      MemoryCategory category, int32_t phase) {
  // Not "category": memory_viz colors by a trace's `category` key and then
  // requires an "unknown" category to exist.
  w.String("verl_category");
  w.String(MemoryCategoryName(category));
  w.String("phase");
  w.String(t.phases.at(phase));
}

void WriteTraceEntry(PickleWriter& w, StackTable& stacks, const MemoryTrace& t,
                     const MemoryEvent& e, const char* action) {
  w.BeginDict();
  w.String("action");
  w.String(action);
  w.String("addr");
  w.UInt(e.addr);
  w.String("size");
  w.Int(e.size);
  w.String("stream");
  w.Int(0);
  w.String("time_us");
  w.Int(e.time_us);
  w.String("frames");
  stacks.Write(e.stack);
  WriteAnnotations(w, t, e.category, e.phase);
  w.EndDict();
}

json CategoryBytes(const std::array<int64_t, kNumMemoryCategories>& bytes) {
  json out = json::object();
  for (int c = 0; c < kNumMemoryCategories; ++c)
    out[MemoryCategoryName(static_cast<MemoryCategory>(c))] = bytes[c];
  return out;
}

// Live bytes per category before the first traced event, derived backwards
// from the current counters.
std::array<int64_t, kNumMemoryCategories> LiveAtTraceStart(
    const MemoryTrace& t) {
  auto live = t.stats.live_by_category;
  for (const MemoryEvent& e : t.events) {
    const int c = static_cast<int>(e.category);
    live[c] += e.action == MemoryEvent::Action::kAlloc ? -e.size : e.size;
  }
  return live;
}

std::string XmlEscape(absl::string_view in) {
  std::string out;
  for (char c : in) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '\'':
        out += "&apos;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string ReplaceSuffix(const std::string& path, const std::string& ext) {
  absl::string_view base(path);
  absl::ConsumeSuffix(&base, ".pickle");
  return absl::StrCat(base, ext);
}

}  // namespace

json MemorySummaryJson(const MemoryTrace& t) {
  const MemoryStats& s = t.stats;
  json out;
  out["live_bytes"] = s.live_bytes;
  out["live_blocks"] = s.live_blocks;
  out["live_bytes_by_category"] = CategoryBytes(s.live_by_category);
  out["live_bytes_by_phase"] = s.live_by_phase;
  out["peak_bytes"] = s.peak_bytes;
  out["peak_phase"] = s.peak_phase;
  out["peak_time_us"] = s.peak_time_us;
  out["peak_bytes_by_category"] = CategoryBytes(s.peak_by_category);
  out["at_peak_bytes_by_category"] = CategoryBytes(s.at_peak_by_category);
  out["peak_bytes_by_phase"] = s.peak_by_phase;
  out["num_allocs"] = s.num_allocs;
  out["num_frees"] = s.num_frees;
  out["trace_entries"] = t.events.size();
  out["dropped_events"] = s.dropped_events;
  out["time_us"] = t.now_us;
  return out;
}

std::string MemorySnapshotPickle(const MemoryTrace& t) {
  PickleWriter w;
  StackTable stacks(&w, &t.stacks);
  w.BeginDict();
  w.String("segments");
  w.BeginList();
  for (const LiveBlock& b : t.live) {
    w.BeginDict();
    w.String("device");
    w.Int(0);
    w.String("address");
    w.UInt(b.addr);
    w.String("total_size");
    w.Int(b.size);
    w.String("stream");
    w.Int(0);
    w.String("segment_type");
    w.String(b.size < kSmallSegment ? "small" : "large");
    w.String("allocated_size");
    w.Int(b.size);
    w.String("active_size");
    w.Int(b.size);
    w.String("requested_size");
    w.Int(b.size);
    w.String("blocks");
    w.BeginList();
    w.BeginDict();
    w.String("size");
    w.Int(b.size);
    w.String("requested_size");
    w.Int(b.size);
    w.String("address");
    w.UInt(b.addr);
    w.String("state");
    w.String("active_allocated");
    w.String("time_us");
    w.Int(b.time_us);
    w.String("frames");
    stacks.Write(b.stack);
    WriteAnnotations(w, t, b.category, b.phase);
    w.EndDict();
    w.EndList();
    w.EndDict();
  }
  w.EndList();
  w.String("device_traces");
  w.BeginList();
  w.BeginList();
  for (const MemoryEvent& e : t.events) {
    // Every CPU block is its own segment (malloc does not cache), so each
    // alloc / free comes with its segment event; memory_viz's segment views
    // need a segment around every block they replay. The CPU allocator frees
    // at once: requested and completed together.
    if (e.action == MemoryEvent::Action::kAlloc) {
      WriteTraceEntry(w, stacks, t, e, "segment_alloc");
      WriteTraceEntry(w, stacks, t, e, "alloc");
    } else {
      WriteTraceEntry(w, stacks, t, e, "free_requested");
      WriteTraceEntry(w, stacks, t, e, "free_completed");
      WriteTraceEntry(w, stacks, t, e, "segment_free");
    }
  }
  w.EndList();
  w.EndList();
  w.String("verl");
  WriteJsonValue(w, MemorySummaryJson(t));
  w.EndDict();
  return w.Finish();
}

std::string MemoryTimelineSvg(const MemoryTrace& t) {
  constexpr double kW = 960, kH = 420, kLeft = 80, kRight = 180, kTop = 40,
                   kBottom = 50;
  constexpr int kMaxPoints = 2000;
  static constexpr const char* kColors[kNumMemoryCategories] = {
      "#9e9e9e", "#1f77b4", "#ff7f0e", "#2ca02c",
      "#d62728", "#9467bd", "#8c564b"};

  // Series of (time, live bytes per category) after each event.
  std::vector<std::pair<int64_t, std::array<int64_t, kNumMemoryCategories>>>
      points;
  auto live = LiveAtTraceStart(t);
  const int64_t t0 = t.events.empty() ? 0 : t.events.front().time_us;
  points.emplace_back(t0, live);
  for (const MemoryEvent& e : t.events) {
    const int c = static_cast<int>(e.category);
    live[c] += e.action == MemoryEvent::Action::kAlloc ? e.size : -e.size;
    points.emplace_back(e.time_us, live);
  }
  points.emplace_back(std::max(t.now_us, t0), live);
  if (points.size() > kMaxPoints) {
    // Keep, per bucket, the point with the largest total (peaks stay visible).
    const size_t bucket = (points.size() + kMaxPoints - 1) / kMaxPoints;
    std::vector<decltype(points)::value_type> kept;
    for (size_t i = 0; i < points.size(); i += bucket) {
      size_t best = i;
      int64_t best_total = -1;
      for (size_t j = i; j < std::min(points.size(), i + bucket); ++j) {
        int64_t total = 0;
        for (int64_t b : points[j].second) total += b;
        if (total > best_total) best_total = total, best = j;
      }
      kept.push_back(points[best]);
    }
    kept.push_back(points.back());
    points = std::move(kept);
  }
  int64_t max_total = 1;
  for (const auto& p : points) {
    int64_t total = 0;
    for (int64_t b : p.second) total += b;
    max_total = std::max(max_total, total);
  }
  const int64_t t1 = std::max(points.back().first, t0 + 1);
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  auto x = [&](int64_t us) {
    return kLeft + pw * static_cast<double>(us - t0) / (t1 - t0);
  };
  auto y = [&](int64_t bytes) {
    return kTop + ph * (1.0 - static_cast<double>(bytes) / max_total);
  };

  std::string svg = absl::StrFormat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
      "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"white\"/>\n<text x=\"%.0f\" y=\"20\" font-size=\"14\">Live CPU "
      "memory by category (peak %.2f MiB in phase '%s')</text>\n",
      kW, kH, kW, kH, kLeft, t.stats.peak_bytes / 1048576.0,
      XmlEscape(t.stats.peak_phase.empty() ? "(none)" : t.stats.peak_phase));
  // Stacked bands: category c spans [sum_{<c}, sum_{<=c}].
  std::vector<int64_t> below(points.size(), 0);
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    std::string top, bottom;
    for (size_t i = 0; i < points.size(); ++i) {
      const int64_t hi = below[i] + points[i].second[c];
      absl::StrAppendFormat(&top, "%.1f,%.1f ", x(points[i].first), y(hi));
    }
    for (size_t i = points.size(); i-- > 0;)
      absl::StrAppendFormat(&bottom, "%.1f,%.1f ", x(points[i].first),
                            y(below[i]));
    for (size_t i = 0; i < points.size(); ++i) below[i] += points[i].second[c];
    absl::StrAppendFormat(
        &svg,
        "<polygon class=\"%s\" fill=\"%s\" fill-opacity=\"0.85\" "
        "points=\"%s%s\"/>\n",
        MemoryCategoryName(static_cast<MemoryCategory>(c)), kColors[c], top,
        bottom);
    const double ly = kTop + 18.0 * c;
    absl::StrAppendFormat(
        &svg,
        "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" "
        "fill=\"%s\"/><text x=\"%.0f\" y=\"%.0f\">%s</text>\n",
        kW - kRight + 16, ly, kColors[c], kW - kRight + 34, ly + 11,
        MemoryCategoryName(static_cast<MemoryCategory>(c)));
  }
  absl::StrAppendFormat(
      &svg,
      "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" "
      "stroke=\"black\"/>\n"
      "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" "
      "stroke=\"black\"/>\n"
      "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%.2f MiB</text>\n"
      "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">0</text>\n"
      "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">time (%.3f s "
      "traced, %zu events)</text>\n</svg>\n",
      kLeft, kTop, kLeft, kTop + ph, kLeft, kTop + ph, kLeft + pw, kTop + ph,
      kLeft - 6, kTop + 4, max_total / 1048576.0, kLeft - 6, kTop + ph,
      kLeft + pw / 2, kH - 15, (t1 - t0) / 1e6, t.events.size());
  return svg;
}

absl::Status WriteMemorySnapshot(const MemoryTrace& trace,
                                 const std::string& pickle_path) {
  const size_t slash = pickle_path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    absl::Status s = core::MakeDirs(pickle_path.substr(0, slash));
    if (!s.ok()) return s;
  }
  absl::Status s =
      core::WriteFileAtomic(pickle_path, MemorySnapshotPickle(trace));
  if (!s.ok()) return s;
  s = core::WriteFileAtomic(ReplaceSuffix(pickle_path, ".json"),
                            MemorySummaryJson(trace).dump(2) + "\n");
  if (!s.ok()) return s;
  return core::WriteFileAtomic(ReplaceSuffix(pickle_path, ".svg"),
                               MemoryTimelineSvg(trace));
}

}  // namespace verl::profiler
