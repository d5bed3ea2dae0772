// File: verl/core/config_loader_fuzz.cc
//
// libFuzzer entry for the config parsers. The input is a text proto, then
// (after the first NUL byte) newline-separated overrides, applied to the
// loader's test message. Each input must either be rejected with an
// InvalidArgument status or load; a loaded config must print to text that
// loads back to an equal message, and every dotted key must read back. A
// crash, sanitizer report or CHECK failure is a finding.
// config_loader_fuzz_test runs this entry without libFuzzer;
// config_loader_fuzz.sh builds it with clang's libFuzzer and fuzzes it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_split.h"
#include "glog/logging.h"
#include "google/protobuf/util/message_differencer.h"
#include "verl/core/config_loader.h"
#include "verl/core/config_loader_test.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using verl::core::testing::TestConfig;
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string text = input.substr(0, nul);
  TestConfig config;
  verl::core::MaterializeDefaults(&config);
  absl::Status status = verl::core::MergeTextProto(text, "fuzz", &config);
  if (nul != std::string::npos) {
    for (absl::string_view line :
         absl::StrSplit(absl::string_view(input).substr(nul + 1), '\n')) {
      if (!status.ok()) break;
      status = verl::core::ApplyOverride(line, &config);
    }
  }
  if (!status.ok()) {
    CHECK(status.code() == absl::StatusCode::kInvalidArgument) << status;
    return 0;
  }
  const std::string printed = verl::core::PrintConfig(config);
  TestConfig again;
  verl::core::MaterializeDefaults(&again);
  absl::Status reload = verl::core::MergeTextProto(printed, "printed", &again);
  CHECK(reload.ok()) << reload << "\n" << printed;
  CHECK(google::protobuf::util::MessageDifferencer::Equals(config, again))
      << printed;
  for (const std::string& key : verl::core::DottedKeys(*config.descriptor())) {
    if (key.find('<') != std::string::npos) continue;  // map placeholder
    CHECK(verl::core::GetConfigValue(config, key).ok()) << key;
  }
  return 0;
}
