// File: verl/profiler/progress.cc
#include "verl/profiler/progress.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "verl/profiler/tracking.h"

namespace verl::profiler {
namespace {

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

ProgressBar::ProgressBar(std::string label, int64_t total, std::string unit,
                         std::FILE* out, double min_interval_s)
    : label_(std::move(label)),
      total_(total),
      unit_(std::move(unit)),
      out_(out),
      min_interval_s_(min_interval_s),
      start_(std::chrono::steady_clock::now()),
      last_print_(start_) {
  tty_ = out_ != nullptr && isatty(fileno(out_));
}

ProgressBar::~ProgressBar() { Finish(); }

std::string ProgressBar::Format(const std::string& label, int64_t done,
                                int64_t total, const std::string& unit,
                                int64_t tokens, double elapsed_s) {
  std::string line = absl::StrCat("[", label, "] ", done);
  if (total > 0) {
    absl::StrAppend(
        &line, "/", total, " ", unit,
        absl::StrFormat(" %3d%%", static_cast<int>(100.0 * done / total)));
  } else {
    absl::StrAppend(&line, " ", unit);
  }
  if (tokens >= 0 && elapsed_s > 0) {
    absl::StrAppend(&line,
                    absl::StrFormat(" | %.1f tok/s", tokens / elapsed_s));
  }
  absl::StrAppend(&line, " | ", FormatDuration(elapsed_s), " elapsed");
  if (total > 0 && done > 0 && done < total) {
    absl::StrAppend(&line, " | eta ",
                    FormatDuration(elapsed_s / done * (total - done)));
  }
  return line;
}

void ProgressBar::Update(int64_t done, int64_t tokens) {
  if (out_ == nullptr || finished_) return;
  done_ = done;
  tokens_ = tokens;
  const auto now = std::chrono::steady_clock::now();
  const double interval = tty_ ? 0.1 : min_interval_s_;
  if (Seconds(now - last_print_) < interval) return;
  last_print_ = now;
  Print(false);
}

void ProgressBar::Finish() {
  if (out_ == nullptr || finished_) return;
  finished_ = true;
  Print(true);
}

void ProgressBar::Print(bool final_line) {
  const std::string line =
      Format(label_, done_, total_, unit_, tokens_,
             Seconds(std::chrono::steady_clock::now() - start_));
  if (tty_) {
    // \x1b[K clears what a longer previous line left behind.
    std::fprintf(out_, "\r%s\x1b[K%s", line.c_str(), final_line ? "\n" : "");
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

}  // namespace verl::profiler
