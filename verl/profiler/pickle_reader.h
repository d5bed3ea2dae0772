// File: verl/profiler/pickle_reader.h
//
// A minimal unpickler for plain data (protocols 2-4): dict, list, tuple
// (read as a list), str, bytes-free ints, float, bool, None and the memo.
// Enough to read the memory snapshots PickleWriter writes and the same
// structures written by Python's pickle. Objects come back as JSON values.
#ifndef VERL_PROFILER_PICKLE_READER_H_
#define VERL_PROFILER_PICKLE_READER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace verl::profiler {

// Decodes one pickle. Unsupported opcodes, truncation and malformed input are
// InvalidArgument errors naming the byte offset (and `source` if given).
absl::StatusOr<nlohmann::json> ReadPickle(absl::string_view bytes,
                                          absl::string_view source = "");

// Reads and decodes a pickle file.
absl::StatusOr<nlohmann::json> ReadPickleFile(const std::string& path);

}  // namespace verl::profiler

#endif  // VERL_PROFILER_PICKLE_READER_H_
