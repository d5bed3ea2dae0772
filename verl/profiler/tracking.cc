#include "verl/profiler/tracking.h"

#include <cmath>
#include <cstdlib>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "verl/core/file_util.h"
#include "verl/profiler/event_writer.h"

namespace verl::profiler {
namespace {

using core::ParentDir;

// verl's loggers that report to a remote service (no network here).
constexpr const char* kNetworkBackends[] = {
    "wandb", "mlflow", "swanlab", "vemlp_wandb", "clearml", "trackio"};

bool IsNetworkBackend(const std::string& name) {
  for (const char* n : kNetworkBackends) {
    if (name == n) return true;
  }
  return false;
}

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

class ConsoleBackend : public Tracker::Backend {
 public:
  ConsoleBackend(std::FILE* out, int64_t total_steps)
      : out_(out), total_steps_(total_steps) {}
  absl::Status Log(const Metrics& metrics, int64_t step) override {
    const auto now = std::chrono::steady_clock::now();
    double eta = -1;
    if (first_step_ < 0) {
      first_step_ = step;
      start_ = now;
    } else if (total_steps_ > 0 && step > first_step_) {
      const double per_step =
          std::chrono::duration<double>(now - start_).count() /
          (step - first_step_);
      eta = per_step * std::max<int64_t>(0, total_steps_ - step);
    }
    std::fputs(FormatConsoleStep(metrics, step, total_steps_, eta).c_str(),
               out_);
    std::fflush(out_);
    return absl::OkStatus();
  }

 private:
  std::FILE* out_;
  int64_t total_steps_;
  int64_t first_step_ = -1;
  std::chrono::steady_clock::time_point start_;
};

class FileBackend : public Tracker::Backend {
 public:
  static absl::StatusOr<std::unique_ptr<FileBackend>> Open(
      const std::string& path) {
    absl::Status s = core::MakeDirs(ParentDir(path));
    if (!s.ok()) return s;
    std::FILE* f = std::fopen(path.c_str(), "ab");
    if (!f)
      return absl::InternalError(
          absl::StrCat(path, ": cannot open metrics file"));
    return std::unique_ptr<FileBackend>(new FileBackend(f, path));
  }
  ~FileBackend() override { std::fclose(file_); }
  absl::Status Log(const Metrics& metrics, int64_t step) override {
    nlohmann::json data = nlohmann::json::object();
    for (const auto& [k, v] : metrics) {
      // JSON has no NaN/Inf; verl's orjson writes null for them.
      if (std::isfinite(v)) {
        data[k] = v;
      } else {
        data[k] = nullptr;
      }
    }
    const std::string line =
        nlohmann::json{{"step", step}, {"data", data}}.dump() + "\n";
    if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() ||
        std::fflush(file_) != 0) {
      return absl::InternalError(absl::StrCat(path_, ": write failed"));
    }
    return absl::OkStatus();
  }

 private:
  FileBackend(std::FILE* f, std::string path)
      : file_(f), path_(std::move(path)) {}
  std::FILE* file_;
  std::string path_;
};

class TensorBoardBackend : public Tracker::Backend {
 public:
  explicit TensorBoardBackend(std::unique_ptr<EventWriter> w)
      : writer_(std::move(w)) {}
  absl::Status Log(const Metrics& metrics, int64_t step) override {
    return writer_->WriteScalars(step, metrics);
  }

 private:
  std::unique_ptr<EventWriter> writer_;
};

}  // namespace

std::string FormatDuration(double seconds) {
  if (seconds < 0) return "?";
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

std::string FormatConsoleStep(const Metrics& metrics, int64_t step,
                              int64_t total_steps, double eta_seconds) {
  std::string out = absl::StrCat("step ", step);
  if (total_steps > 0) absl::StrAppend(&out, "/", total_steps);
  auto it = metrics.find("timing_s/step");
  if (it != metrics.end())
    absl::StrAppend(&out, " | ", absl::StrFormat("%.2fs", it->second));
  if (eta_seconds >= 0)
    absl::StrAppend(&out, " | eta ", FormatDuration(eta_seconds));
  out += "\n";
  // Group by the prefix before the first '/', one line per group.
  std::map<std::string, std::vector<std::string>> groups;
  for (const auto& [key, value] : metrics) {
    const size_t slash = key.find('/');
    const std::string group =
        slash == std::string::npos ? "" : key.substr(0, slash);
    const std::string name =
        slash == std::string::npos ? key : key.substr(slash + 1);
    groups[group].push_back(absl::StrFormat("%s=%.4g", name, value));
  }
  for (const auto& [group, items] : groups) {
    absl::StrAppend(&out, "  ",
                    absl::StrFormat("%-22s", group.empty() ? "-" : group + "/"),
                    absl::StrJoin(items, "  "), "\n");
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Tracker>> Tracker::Create(
    const TrackingOptions& options) {
  auto tracker = std::make_unique<Tracker>();
  for (const auto& name : options.backends) {
    if (name == "console") {
      tracker->backends_.push_back(std::make_unique<ConsoleBackend>(
          options.console, options.total_steps));
    } else if (name == "file") {
      const std::string path =
          EnvOr("VERL_FILE_LOGGER_PATH",
                absl::StrCat(EnvOr("VERL_FILE_LOGGER_ROOT", "."), "/",
                             options.project_name, "/", options.experiment_name,
                             ".jsonl"));
      auto backend = FileBackend::Open(path);
      if (!backend.ok()) return backend.status();
      tracker->file_path_ = path;
      tracker->backends_.push_back(*std::move(backend));
    } else if (name == "tensorboard") {
      const std::string dir =
          EnvOr("TENSORBOARD_DIR",
                absl::StrCat("tensorboard_log/", options.project_name, "/",
                             options.experiment_name));
      auto writer = EventWriter::Open(dir);
      if (!writer.ok()) return writer.status();
      tracker->tensorboard_dir_ = dir;
      tracker->backends_.push_back(
          std::make_unique<TensorBoardBackend>(*std::move(writer)));
    } else if (IsNetworkBackend(name)) {
      // verl's default logger list has wandb: warn once, keep the others.
      tracker->skipped_.push_back(name);
      std::cerr << "warning: trainer.logger: \"" << name
                << "\" needs a network service that is not available here; "
                   "skipped (available: console, file, tensorboard)"
                << std::endl;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("trainer.logger: unsupported backend \"", name,
                       "\" (supported: console, file, tensorboard; ",
                       absl::StrJoin(kNetworkBackends, ", "),
                       " are skipped with a warning)"));
    }
  }
  return tracker;
}

absl::Status Tracker::Log(const Metrics& metrics, int64_t step) {
  for (auto& backend : backends_) {
    absl::Status s = backend->Log(metrics, step);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace verl::profiler
