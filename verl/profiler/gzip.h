// File: verl/profiler/gzip.h
//
// gzip compression (zlib's deflate with a gzip header) for trace files:
// Timeline::WriteJson writes `*.json.gz` compressed, as verl's torch tool
// writes prof_rank-R.json.gz.
#ifndef VERL_PROFILER_GZIP_H_
#define VERL_PROFILER_GZIP_H_

#include <string>

#include "absl/status/statusor.h"

namespace verl::profiler {

// `data` as one gzip member (RFC 1952), readable by gzip -d / Python's gzip.
absl::StatusOr<std::string> GzipCompress(const std::string& data);

}  // namespace verl::profiler

#endif  // VERL_PROFILER_GZIP_H_
