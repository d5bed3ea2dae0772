#include "verl/profiler/timeline.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "verl/core/file_util.h"
#include "verl/profiler/build_config.h"
#include "verl/profiler/gzip.h"

namespace verl::profiler {

Timeline& Timeline::Global() {
  static Timeline* timeline = new Timeline();
  return *timeline;
}

void Timeline::Enable(int64_t rank, int64_t max_events) {
#ifdef VERL_PROFILER_DISABLED
  static std::once_flag warned;
  std::call_once(warned, [] {
    LOG(WARNING) << "timeline: " << kProfilerCompiledOutMessage;
  });
  return;
#endif
  std::lock_guard<std::mutex> lock(mu_);
  rank_ = rank;
  max_events_ = max_events;
  enabled_.store(true, std::memory_order_relaxed);
}

void Timeline::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  events_.clear();
  dropped_ = 0;
}

int64_t Timeline::NowMicros() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now() - epoch_)
      .count();
}

void Timeline::Record(TraceEvent event) {
  std::lock_guard<std::mutex> lock(mu_);
  if (static_cast<int64_t>(events_.size()) >= max_events_) {
    ++dropped_;
    return;
  }
  events_.push_back(std::move(event));
}

std::vector<TraceEvent> Timeline::Events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

nlohmann::json Timeline::ToJson() const {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", rank_},
                    {"args", {{"name", absl::StrCat("rank ", rank_)}}}});
  std::vector<int64_t> tids;
  for (const auto& e : events_) {
    bool seen = false;
    for (int64_t t : tids) seen |= t == e.tid;
    if (!seen) tids.push_back(e.tid);
  }
  for (int64_t tid : tids) {
    events.push_back(
        {{"name", "thread_name"},
         {"ph", "M"},
         {"pid", rank_},
         {"tid", tid},
         {"args",
          {{"name", tid == 0 ? "main" : absl::StrCat("thread ", tid)}}}});
  }
  for (const auto& e : events_) {
    nlohmann::json j = {
        {"name", e.name},   {"cat", e.category},    {"ph", "X"},
        {"ts", e.start_us}, {"dur", e.duration_us}, {"pid", rank_},
        {"tid", e.tid}};
    if (!e.args.is_null()) j["args"] = e.args;
    events.push_back(std::move(j));
  }
  nlohmann::json out = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  if (dropped_ > 0) out["otherData"] = {{"dropped_events", dropped_}};
  return out;
}

absl::Status Timeline::WriteJson(const std::string& path) const {
  const size_t slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0) {
    absl::Status s = core::MakeDirs(path.substr(0, slash));
    if (!s.ok()) return s;
  }
  std::string json = ToJson().dump();
  // verl's torch tool writes prof_rank-R.json.gz.
  if (absl::EndsWith(path, ".gz")) {
    absl::StatusOr<std::string> gz = GzipCompress(json);
    if (!gz.ok()) return gz.status();
    json = std::move(*gz);
  }
  return core::WriteFileAtomic(path, json);
}

absl::Status ValidateTrace(const nlohmann::json& trace) {
  if (!trace.is_object() || !trace.contains("traceEvents") ||
      !trace["traceEvents"].is_array()) {
    return absl::InvalidArgumentError("trace: no traceEvents array");
  }
  struct Span {
    int64_t start, end;
    std::string name;
  };
  std::map<std::pair<int64_t, int64_t>, std::vector<Span>> tracks;
  int64_t index = 0;
  for (const auto& e : trace["traceEvents"]) {
    const std::string where = absl::StrCat("trace event ", index++);
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string() ||
        !e.contains("ph") || !e["ph"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": needs string name and ph"));
    }
    if (e["ph"] != "X") continue;
    for (const char* key : {"ts", "dur", "pid", "tid"}) {
      if (!e.contains(key) || !e[key].is_number_integer()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, " (", e["name"].get<std::string>(),
                         "): needs integer ", key));
      }
    }
    const int64_t ts = e["ts"], dur = e["dur"];
    if (dur < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": negative duration"));
    }
    tracks[{e["pid"].get<int64_t>(), e["tid"].get<int64_t>()}].push_back(
        {ts, ts + dur, e["name"]});
  }
  for (auto& [track, spans] : tracks) {
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
      return a.start != b.start ? a.start < b.start : a.end > b.end;
    });
    std::vector<const Span*> open;
    for (const Span& s : spans) {
      while (!open.empty() && open.back()->end <= s.start) open.pop_back();
      if (!open.empty() && s.end > open.back()->end) {
        return absl::InvalidArgumentError(absl::StrCat(
            "trace: span '", s.name, "' [", s.start, ", ", s.end,
            ") overlaps '", open.back()->name, "' [", open.back()->start, ", ",
            open.back()->end, ") on pid ", track.first, " tid ", track.second));
      }
      open.push_back(&s);
    }
  }
  return absl::OkStatus();
}

int64_t CurrentThreadId() {
  static std::atomic<int64_t> next{0};
  thread_local int64_t id = next.fetch_add(1);
  return id;
}

TraceScope::TraceScope(const char* name, const char* category,
                       nlohmann::json args)
    : name_(name), category_(category), args_(std::move(args)) {
#ifndef VERL_PROFILER_DISABLED
  Timeline& t = Timeline::Global();
  if (t.enabled()) start_us_ = t.NowMicros();
#endif
}

TraceScope::~TraceScope() {
#ifdef VERL_PROFILER_DISABLED
  return;
#endif
  if (start_us_ < 0) return;
  Timeline& t = Timeline::Global();
  if (!t.enabled()) return;
  t.Record({name_, category_, start_us_, t.NowMicros() - start_us_,
            CurrentThreadId(), std::move(args_)});
}

}  // namespace verl::profiler
