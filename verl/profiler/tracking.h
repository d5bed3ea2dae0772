// File: verl/profiler/tracking.h
//
// verl's `Tracking` (trainer.logger): fans each step's metrics out to the
// configured backends.
//   console      a readable block per step (metrics grouped by prefix) with
//                step/total, step time and ETA
//   file         verl's JSONL: one {"step": N, "data": {...}} line per step at
//                $VERL_FILE_LOGGER_PATH, else
//                {$VERL_FILE_LOGGER_ROOT or .}/{project}/{experiment}.jsonl
//                (appended to, so a resumed run keeps earlier lines)
//   tensorboard  event files in $TENSORBOARD_DIR, else
//                tensorboard_log/{project}/{experiment}
// Only rank 0 should create a Tracker.
#ifndef VERL_PROFILER_TRACKING_H_
#define VERL_PROFILER_TRACKING_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace verl::profiler {

using Metrics = std::map<std::string, double>;

struct TrackingOptions {
  std::string project_name = "verl_examples";
  std::string experiment_name = "gsm8k";
  std::vector<std::string> backends = {"console"};
  int64_t total_steps = 0;  // for the console ETA; 0 = unknown
  std::FILE* console = stdout;
};

class Tracker {
 public:
  class Backend {
   public:
    virtual ~Backend() = default;
    virtual absl::Status Log(const Metrics& metrics, int64_t step) = 0;
  };

  // Unknown backend names are an error listing the supported ones. verl's
  // network loggers (wandb, mlflow, swanlab, vemlp_wandb, clearml, trackio)
  // print one warning each and are skipped (see skipped()).
  static absl::StatusOr<std::unique_ptr<Tracker>> Create(
      const TrackingOptions& options);

  absl::Status Log(const Metrics& metrics, int64_t step);

  // Where the file / tensorboard backends write ("" when not enabled).
  const std::string& file_path() const { return file_path_; }
  const std::string& tensorboard_dir() const { return tensorboard_dir_; }
  // The network loggers left out (warned about once, at Create).
  const std::vector<std::string>& skipped() const { return skipped_; }

 private:
  std::vector<std::unique_ptr<Backend>> backends_;
  std::string file_path_;
  std::string tensorboard_dir_;
  std::vector<std::string> skipped_;
};

// Formats the console block for one step (exposed for tests).
std::string FormatConsoleStep(const Metrics& metrics, int64_t step,
                              int64_t total_steps, double eta_seconds);

// "1h02m", "3m12s", "45s".
std::string FormatDuration(double seconds);

}  // namespace verl::profiler

#endif  // VERL_PROFILER_TRACKING_H_
