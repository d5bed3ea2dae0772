// File: verl/models/vlm/testing/test_images.cc
#include "verl/models/vlm/testing/test_images.h"

#include <cstdint>

namespace verl::models::vlm::testing {

Image MakeRampImage(bool second) {
  Image im;
  im.width = im.height = 56;
  im.rgb.resize(56 * 56 * 3);
  for (int y = 0; y < 56; ++y) {
    for (int x = 0; x < 56; ++x) {
      for (int c = 0; c < 3; ++c) {
        int v = (x * 255 / 55 + 40 * c) % 256;
        if (second) v = ((x / 7 + y / 7) % 2) ? 255 - v : (y * 4) % 256;
        im.rgb[(y * 56 + x) * 3 + c] = static_cast<uint8_t>(v);
      }
    }
  }
  return im;
}

}  // namespace verl::models::vlm::testing
