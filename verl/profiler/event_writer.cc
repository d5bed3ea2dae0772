#include "verl/profiler/event_writer.h"

#include <unistd.h>

#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "verl/core/file_util.h"
#include "verl/profiler/crc32c.h"
#include "verl/profiler/tensorboard.pb.h"

namespace verl::profiler {
namespace {

double WallTime() {
  using namespace std::chrono;
  return duration_cast<duration<double>>(system_clock::now().time_since_epoch())
      .count();
}

void PutLe(uint64_t v, int bytes, char* out) {
  for (int i = 0; i < bytes; ++i)
    out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

uint64_t GetLe(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EventWriter>> EventWriter::Open(
    const std::string& log_dir) {
  absl::Status s = core::MakeDirs(log_dir);
  if (!s.ok()) return s;
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  static int counter = 0;
  const std::string path = absl::StrCat(log_dir, "/events.out.tfevents.",
                                        static_cast<int64_t>(WallTime()), ".",
                                        host, ".", ::getpid(), ".", counter++);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f)
    return absl::InternalError(
        absl::StrCat(path, ": cannot create event file"));
  std::unique_ptr<EventWriter> writer(new EventWriter(f, path));
  tensorboard::Event first;
  first.set_wall_time(WallTime());
  first.set_file_version("brain.Event:2");
  s = writer->WriteRecord(first.SerializeAsString());
  if (!s.ok()) return s;
  return writer;
}

EventWriter::~EventWriter() {
  if (file_) std::fclose(file_);
}

absl::Status EventWriter::WriteRecord(const std::string& payload) {
  char header[12];
  PutLe(payload.size(), 8, header);
  PutLe(MaskCrc(Crc32c(header, 8)), 4, header + 8);
  char footer[4];
  PutLe(MaskCrc(Crc32c(payload.data(), payload.size())), 4, footer);
  if (std::fwrite(header, 1, 12, file_) != 12 ||
      std::fwrite(payload.data(), 1, payload.size(), file_) != payload.size() ||
      std::fwrite(footer, 1, 4, file_) != 4 || std::fflush(file_) != 0) {
    return absl::InternalError(absl::StrCat(path_, ": write failed"));
  }
  return absl::OkStatus();
}

absl::Status EventWriter::WriteScalars(
    int64_t step, const std::map<std::string, double>& values) {
  tensorboard::Event event;
  event.set_wall_time(WallTime());
  event.set_step(step);
  for (const auto& [tag, value] : values) {
    auto* v = event.mutable_summary()->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
  }
  return WriteRecord(event.SerializeAsString());
}

absl::StatusOr<std::vector<std::string>> ReadRecords(const std::string& path) {
  auto data = core::ReadFile(path);
  if (!data.ok()) return data.status();
  const auto* p = reinterpret_cast<const unsigned char*>(data->data());
  const size_t n = data->size();
  std::vector<std::string> records;
  size_t pos = 0;
  while (pos < n) {
    if (n - pos < 12)
      return absl::DataLossError(absl::StrCat(path, ": truncated header"));
    const uint64_t len = GetLe(p + pos, 8);
    if (GetLe(p + pos + 8, 4) != MaskCrc(Crc32c(p + pos, 8))) {
      return absl::DataLossError(
          absl::StrCat(path, ": bad length CRC at ", pos));
    }
    if (len > n - pos - 12 || n - pos - 12 - len < 4) {
      return absl::DataLossError(
          absl::StrCat(path, ": truncated record at ", pos));
    }
    const unsigned char* body = p + pos + 12;
    if (GetLe(body + len, 4) != MaskCrc(Crc32c(body, len))) {
      return absl::DataLossError(absl::StrCat(path, ": bad data CRC at ", pos));
    }
    records.emplace_back(reinterpret_cast<const char*>(body), len);
    pos += 12 + len + 4;
  }
  return records;
}

}  // namespace verl::profiler
