// File: verl/core/file_util.h
//
// Small file helpers shared by every writer of user-visible artifacts.
// Writers never leave a half-written file under the final name: they write a
// temporary sibling, fsync it, rename it over the target and fsync the folder.
#ifndef VERL_CORE_FILE_UTIL_H_
#define VERL_CORE_FILE_UTIL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace verl::core {

// InternalError "<path>: <what>: <strerror(errno)>", for a failed system call.
absl::Status ErrnoError(absl::string_view what, absl::string_view path);

// The folder part of `path` ("." for a bare name, "/" for a root entry).
std::string ParentDir(const std::string& path);

// Reads a whole file. NotFound / Internal errors name the path.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// Atomically replaces `path` with `contents` (temp + fsync + rename + dir
// fsync).
absl::Status WriteFileAtomic(const std::string& path,
                             absl::string_view contents);

// fsyncs a file or directory by path.
absl::Status FsyncPath(const std::string& path);

// Creates `path` and its parents (like mkdir -p).
absl::Status MakeDirs(const std::string& path);

// Parses a JSON file; errors name the file and the parser's position.
absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path);

// Reads JSON Lines (blank lines skipped); errors name the file and 1-based
// line.
absl::StatusOr<std::vector<nlohmann::json>> ReadJsonl(const std::string& path);

// Writes JSON Lines atomically.
absl::Status WriteJsonlAtomic(const std::string& path,
                              const std::vector<nlohmann::json>& rows);

// "<prefix><host>-<pid>": a per-process temp name under `prefix`, for
// RemoveDeadTempDirs to recognize after a crash.
std::string ProcessTempName(absl::string_view prefix);

// Removes the entries of `dir` named by ProcessTempName(prefix) on this host
// whose process is gone (a killed or crashed run's temp folders), and legacy
// "<prefix><pid>" entries of dead pids. Entries of live processes, of other
// hosts and any other name are left alone. Returns how many were removed.
int RemoveDeadTempDirs(const std::string& dir, absl::string_view prefix);

}  // namespace verl::core

#endif  // VERL_CORE_FILE_UTIL_H_
