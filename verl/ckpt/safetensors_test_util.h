// File: verl/ckpt/safetensors_test_util.h
//
// Test-only builders of raw safetensors bytes, and the table of malformed
// files (with the error each must produce) shared by the parser test and the
// fuzz-entry test.
#ifndef VERL_CKPT_SAFETENSORS_TEST_UTIL_H_
#define VERL_CKPT_SAFETENSORS_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace verl::ckpt {

// 8-byte little-endian `header_length` followed by `rest`.
std::string StWithLength(uint64_t header_length, absl::string_view rest);

// A file with `header_json` (unpadded) followed by `data`.
std::string StFile(absl::string_view header_json, absl::string_view data);

struct MalformedStCase {
  std::string name;
  std::string bytes;
  std::string error;  // substring the InvalidArgument message must contain
};

// At least 15 malformed inputs, one per validation rule.
std::vector<MalformedStCase> MalformedStCases();

}  // namespace verl::ckpt

#endif  // VERL_CKPT_SAFETENSORS_TEST_UTIL_H_
