#include "verl/core/file_util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace verl::core {
absl::Status ErrnoError(absl::string_view what, absl::string_view path) {
  return absl::InternalError(
      absl::StrCat(path, ": ", what, ": ", std::strerror(errno)));
}

std::string ParentDir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT)
      return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return ErrnoError("cannot open", path);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return ErrnoError("read failed", path);
  return ss.str();
}

absl::Status FsyncPath(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return ErrnoError("cannot open for fsync", path);
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return ErrnoError("fsync failed", path);
  return absl::OkStatus();
}

absl::Status MakeDirs(const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoError("mkdir failed", partial);
    }
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": exists and is not a directory"));
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomic(const std::string& path,
                             absl::string_view contents) {
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return ErrnoError("cannot create", tmp);
  const char* data = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      absl::Status s = ErrnoError("write failed", tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return s;
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    absl::Status s = ErrnoError("fsync/close failed", tmp);
    ::unlink(tmp.c_str());
    return s;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status s = ErrnoError("rename failed", path);
    ::unlink(tmp.c_str());
    return s;
  }
  return FsyncPath(ParentDir(path));
}

absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  nlohmann::json value =
      nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    // Re-parse with exceptions only to recover the error position for the
    // message.
    try {
      (void)nlohmann::json::parse(*text);
    } catch (const nlohmann::json::exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": invalid JSON: ", e.what()));
    }
    return absl::InvalidArgumentError(absl::StrCat(path, ": invalid JSON"));
  }
  return value;
}

absl::StatusOr<std::vector<nlohmann::json>> ReadJsonl(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  std::vector<nlohmann::json> rows;
  std::istringstream in(*text);
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      rows.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_no, ": invalid JSON: ", e.what()));
    }
  }
  return rows;
}

absl::Status WriteJsonlAtomic(const std::string& path,
                              const std::vector<nlohmann::json>& rows) {
  std::string out;
  for (const auto& row : rows) {
    out += row.dump();
    out += '\n';
  }
  return WriteFileAtomic(path, out);
}

std::string ProcessTempName(absl::string_view prefix) {
  char host[256] = {0};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = 0;
  return absl::StrCat(prefix, host, "-", ::getpid());
}

int RemoveDeadTempDirs(const std::string& dir, absl::string_view prefix) {
  namespace fs = std::filesystem;
  char host[256] = {0};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = 0;
  const std::string mine = absl::StrCat(prefix, host, "-");
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    absl::string_view pid_text = name;
    // This host's "<prefix><host>-<pid>", or a legacy "<prefix><pid>".
    if (!absl::ConsumePrefix(&pid_text, mine) &&
        !absl::ConsumePrefix(&pid_text, prefix)) {
      continue;
    }
    int pid = 0;
    if (!absl::SimpleAtoi(pid_text, &pid) || pid <= 0 ||
        pid_text.find_first_not_of("0123456789") != absl::string_view::npos) {
      continue;
    }
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or unknown)
    std::error_code rm;
    fs::remove_all(entry.path(), rm);
    if (!rm) ++removed;
  }
  return removed;
}

}  // namespace verl::core
