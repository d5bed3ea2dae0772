// File: verl/models/vlm/image.h
//
// 8-bit RGB images and their PNG / JPEG codecs (Debian's libpng and
// libjpeg-turbo). Decoding yields what PIL's `Image.open(f).convert("RGB")`
// yields, which is what HF's image processors start from: palette and
// grayscale expand to RGB, alpha is dropped (not composited), 16-bit samples
// keep their high byte, no gamma correction; JPEG with libjpeg's defaults
// (ISLOW DCT, fancy upsampling) as PIL decodes it.
//
// Untrusted input: a malformed, truncated or oversized file is an
// absl::Status naming `source`, never a crash. Images over `max_pixels`
// are refused from the header, before any pixel memory is allocated.
#ifndef VERL_MODELS_VLM_IMAGE_H_
#define VERL_MODELS_VLM_IMAGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace verl::models::vlm {

// Row-major height x width x 3 (RGB) bytes.
struct Image {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> rgb;

  uint8_t at(int64_t y, int64_t x, int c) const {
    return rgb[(y * width + x) * 3 + c];
  }
};

struct DecodeLimits {
  // PIL refuses images over 2 * Image.MAX_IMAGE_PIXELS (178956970) as
  // decompression bombs; the default here is stricter.
  int64_t max_pixels = 64LL << 20;
  int64_t max_side = 1 << 16;
};

// Format from the magic bytes: "png", "jpeg" or "" (unknown).
std::string SniffImageFormat(absl::string_view bytes);

// Decodes PNG or JPEG bytes (format sniffed). `source` names the input in
// errors (a path, "row 17 of train.parquet", ...).
absl::StatusOr<Image> DecodeImage(absl::string_view bytes,
                                  absl::string_view source,
                                  const DecodeLimits& limits = {});
absl::StatusOr<Image> DecodePng(absl::string_view bytes,
                                absl::string_view source,
                                const DecodeLimits& limits = {});
absl::StatusOr<Image> DecodeJpeg(absl::string_view bytes,
                                 absl::string_view source,
                                 const DecodeLimits& limits = {});

// Reads and decodes the file at `path`.
absl::StatusOr<Image> ReadImageFile(const std::string& path,
                                    const DecodeLimits& limits = {});

// Encodes `image` as an 8-bit RGB PNG (zlib level 6, no filters chosen by
// hand), e.g. for dataset rows that carry image bytes.
absl::StatusOr<std::string> EncodePng(const Image& image);

}  // namespace verl::models::vlm

#endif  // VERL_MODELS_VLM_IMAGE_H_
