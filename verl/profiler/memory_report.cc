// File: verl/profiler/memory_report.cc
#include "verl/profiler/memory_report.h"

#include <algorithm>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace verl::profiler {
namespace {

using nlohmann::json;

bool IsAllocatorFrame(const std::string& filename, const std::string& name) {
  return absl::StrContains(filename, "libc10") ||
         absl::StrContains(filename, "libtorch") ||
         absl::StrContains(name, "verl::profiler::MemoryTracker") ||
         absl::StrContains(name, "TrackingAllocator");
}

std::string Str(const json& v, const char* key) {
  auto it = v.find(key);
  return it != v.end() && it->is_string() ? it->get<std::string>() : "";
}

int64_t Int(const json& v, const char* key) {
  auto it = v.find(key);
  return it != v.end() && it->is_number() ? it->get<int64_t>() : 0;
}

std::string SiteOf(const json& entry) {
  auto it = entry.find("frames");
  if (it == entry.end() || !it->is_array() || it->empty()) return "(no stack)";
  const json* pick = &(*it)[0];
  for (const json& f : *it) {
    if (!IsAllocatorFrame(Str(f, "filename"), Str(f, "name"))) {
      pick = &f;
      break;
    }
  }
  std::string file = Str(*pick, "filename");
  const size_t slash = file.rfind('/');
  if (slash != std::string::npos) file = file.substr(slash + 1);
  const int64_t line = Int(*pick, "line");
  return absl::StrCat(Str(*pick, "name"), " (", file,
                      line > 0 ? absl::StrCat(":", line) : "", ")");
}

class SiteTable {
 public:
  void Add(const json& entry, int64_t bytes) {
    AllocationSite& s = sites_[SiteOf(entry)];
    s.bytes += bytes;
    ++s.count;
  }
  std::vector<AllocationSite> Top(int k) {
    std::vector<AllocationSite> out;
    for (auto& [name, s] : sites_) {
      s.site = name;
      out.push_back(s);
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
      return a.bytes != b.bytes ? a.bytes > b.bytes : a.site < b.site;
    });
    if (static_cast<int>(out.size()) > k) out.resize(k);
    return out;
  }

 private:
  std::unordered_map<std::string, AllocationSite> sites_;
};

std::string MiB(int64_t bytes) {
  return absl::StrFormat("%.3f MiB (%d bytes)", bytes / 1048576.0, bytes);
}

}  // namespace

absl::StatusOr<MemoryReport> AnalyzeMemorySnapshot(const json& snapshot,
                                                   int top_k) {
  if (!snapshot.is_object() || !snapshot.contains("segments") ||
      !snapshot["segments"].is_array())
    return absl::InvalidArgumentError(
        "memory snapshot: expected a dict with a 'segments' list");
  MemoryReport r;
  SiteTable live_sites, traced_sites;
  for (const json& seg : snapshot["segments"]) {
    if (!seg.contains("blocks") || !seg["blocks"].is_array()) continue;
    for (const json& b : seg["blocks"]) {
      if (Str(b, "state") != "active_allocated") continue;
      const int64_t size = Int(b, "size");
      r.live_bytes += size;
      ++r.live_blocks;
      live_sites.Add(b, size);
      if (b.contains("verl_category"))
        r.live_by_category[Str(b, "verl_category")] += size;
    }
  }
  // Replay the trace backwards: live after event i, from the live total.
  std::vector<const json*> events;
  if (snapshot.contains("device_traces") &&
      snapshot["device_traces"].is_array()) {
    for (const json& dev : snapshot["device_traces"])
      if (dev.is_array())
        for (const json& e : dev) events.push_back(&e);
  }
  int64_t live = r.live_bytes;
  r.trace_peak_bytes = live;
  for (size_t i = events.size(); i-- > 0;) {
    const json& e = *events[i];
    const std::string action = Str(e, "action");
    const int64_t size = Int(e, "size");
    if (action == "alloc") {
      traced_sites.Add(e, size);
      ++r.trace_events;
      if (live >= r.trace_peak_bytes) {
        r.trace_peak_bytes = live;
        r.trace_peak_phase = Str(e, "phase");
      }
      live -= size;
    } else if (action == "free_completed") {
      ++r.trace_events;
      live += size;
    }
  }
  if (snapshot.contains("verl") && snapshot["verl"].is_object()) {
    const json& v = snapshot["verl"];
    r.has_summary = true;
    r.peak_bytes = Int(v, "peak_bytes");
    r.peak_phase = Str(v, "peak_phase");
  } else {
    r.peak_bytes = r.trace_peak_bytes;
    r.peak_phase = r.trace_peak_phase;
  }
  r.top_live_sites = live_sites.Top(top_k);
  r.top_traced_sites = traced_sites.Top(top_k);
  return r;
}

std::string FormatMemoryReport(const MemoryReport& r) {
  auto phase = [](const std::string& p) { return p.empty() ? "(none)" : p; };
  std::string out;
  absl::StrAppend(&out, "live: ", MiB(r.live_bytes), " in ", r.live_blocks,
                  " blocks\n");
  for (const auto& [cat, bytes] : r.live_by_category)
    if (bytes > 0) absl::StrAppend(&out, "  ", cat, ": ", MiB(bytes), "\n");
  absl::StrAppend(
      &out, "peak: ", MiB(r.peak_bytes), " in phase ", phase(r.peak_phase),
      r.has_summary ? " (whole recording)\n" : " (traced window)\n");
  absl::StrAppend(&out, "traced window peak: ", MiB(r.trace_peak_bytes),
                  " in phase ", phase(r.trace_peak_phase), " over ",
                  r.trace_events, " events\n");
  auto table = [&](const char* title,
                   const std::vector<AllocationSite>& sites) {
    absl::StrAppend(&out, title, "\n");
    for (const AllocationSite& s : sites)
      absl::StrAppendFormat(&out, "  %14d bytes %6d x  %s\n", s.bytes, s.count,
                            s.site);
  };
  table("top allocation sites by live bytes:", r.top_live_sites);
  table("top allocation sites by bytes allocated in the trace:",
        r.top_traced_sites);
  return out;
}

}  // namespace verl::profiler
