// File: verl/models/vlm/image_fuzz.cc
//
// libFuzzer entry for PNG/JPEG decoding: any input must decode to a
// consistent image or be rejected with a Status; a crash, sanitizer report or
// CHECK failure is a finding. image_fuzz_test runs it over truncations and
// byte flips of valid files without libFuzzer.
#include <glog/logging.h>

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "verl/models/vlm/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  verl::models::vlm::DecodeLimits limits;
  limits.max_pixels = 1 << 22;  // keep each run cheap
  auto image = verl::models::vlm::DecodeImage(
      absl::string_view(reinterpret_cast<const char*>(data), size), "fuzz",
      limits);
  if (!image.ok()) return 0;
  CHECK_GT(image->width, 0);
  CHECK_GT(image->height, 0);
  CHECK_EQ(image->rgb.size(),
           static_cast<size_t>(image->width * image->height * 3));
  return 0;
}
