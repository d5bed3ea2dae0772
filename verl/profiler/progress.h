// File: verl/profiler/progress.h
//
// A console progress line for long phases (generation, validation):
//   [gen] 12/32 prompts  37% | 850.2 tok/s | 4s elapsed | eta 8s
// On a terminal it redraws one line in place (at most 10 times a second);
// otherwise (logs, CI) it prints a line at most every `min_interval_s` and
// one at the end. A bar with a null stream prints nothing.
#ifndef VERL_PROFILER_PROGRESS_H_
#define VERL_PROFILER_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace verl::profiler {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, std::string unit,
              std::FILE* out, double min_interval_s = 10.0);
  ~ProgressBar();  // Finish()
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Absolute progress: `done` of `total` units, `tokens` produced so far
  // (for tok/s; negative: not shown).
  void Update(int64_t done, int64_t tokens = -1);
  // Prints the final line (once).
  void Finish();

  // One line without the leading '\r' or trailing newline (for tests).
  static std::string Format(const std::string& label, int64_t done,
                            int64_t total, const std::string& unit,
                            int64_t tokens, double elapsed_s);

 private:
  void Print(bool final_line);

  std::string label_;
  int64_t total_;
  std::string unit_;
  std::FILE* out_;
  double min_interval_s_;
  bool tty_ = false;
  bool finished_ = false;
  int64_t done_ = 0;
  int64_t tokens_ = -1;
  std::chrono::steady_clock::time_point start_, last_print_;
};

}  // namespace verl::profiler

#endif  // VERL_PROFILER_PROGRESS_H_
