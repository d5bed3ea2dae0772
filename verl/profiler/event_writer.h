// File: verl/profiler/event_writer.h
//
// Writes TensorBoard event files: TFRecord framing (u64 length, masked CRC-32C
// of the length, payload, masked CRC-32C of the payload) around Event protos;
// the first record is Event{file_version: "brain.Event:2"}. File name as
// TensorBoard's writer: events.out.tfevents.<10-digit time>.<host>.<pid>.<n>.
#ifndef VERL_PROFILER_EVENT_WRITER_H_
#define VERL_PROFILER_EVENT_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace verl::profiler {

class EventWriter {
 public:
  // Creates `log_dir` if needed and opens a new event file in it.
  static absl::StatusOr<std::unique_ptr<EventWriter>> Open(
      const std::string& log_dir);
  ~EventWriter();

  // Appends one Event holding every scalar of `values` at `step`, flushed.
  absl::Status WriteScalars(int64_t step,
                            const std::map<std::string, double>& values);
  const std::string& path() const { return path_; }

 private:
  EventWriter(std::FILE* file, std::string path)
      : file_(file), path_(std::move(path)) {}
  absl::Status WriteRecord(const std::string& payload);

  std::FILE* file_;
  std::string path_;
};

// Reads back TFRecord payloads, verifying both CRCs (for tests and tools).
absl::StatusOr<std::vector<std::string>> ReadRecords(const std::string& path);

}  // namespace verl::profiler

#endif  // VERL_PROFILER_EVENT_WRITER_H_
