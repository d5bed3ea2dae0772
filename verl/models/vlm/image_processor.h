// File: verl/models/vlm/image_processor.h
//
// HF's Qwen2-VL image processor (Qwen2VLImageProcessor, shared by Qwen2.5-VL)
// step for step: smart_resize to multiples of patch_size * merge_size within
// [min_pixels, max_pixels], PIL's bicubic resize on 8-bit RGB, rescale by
// 1/255, normalize with the CLIP mean/std (float32 as numpy does it), then
// patchify into pixel_values [patches, 3 * temporal_patch_size *
// patch_size^2] with the single image repeated temporal_patch_size times and
// the patches of each merge_size x merge_size window consecutive (HF order),
// plus image_grid_thw [images, 3] = (1, height / patch, width / patch).
#ifndef VERL_MODELS_VLM_IMAGE_PROCESSOR_H_
#define VERL_MODELS_VLM_IMAGE_PROCESSOR_H_

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "verl/models/vlm/image.h"

namespace verl::models::vlm {

// preprocessor_config.json keys; defaults are Qwen2VLImageProcessor's.
struct ImageProcessorConfig {
  int64_t min_pixels = 56 * 56;
  int64_t max_pixels = 28 * 28 * 1280;
  int64_t patch_size = 14;
  int64_t temporal_patch_size = 2;
  int64_t merge_size = 2;
  bool do_resize = true;
  bool do_rescale = true;
  bool do_normalize = true;
  double rescale_factor = 1.0 / 255.0;
  std::array<float, 3> image_mean = {0.48145466f, 0.4578275f, 0.40821073f};
  std::array<float, 3> image_std = {0.26862954f, 0.26130258f, 0.27577711f};

  int64_t PatchDim() const {
    return 3 * temporal_patch_size * patch_size * patch_size;
  }
};

// Reads the keys above (min/max_pixels also from size.shortest_edge /
// size.longest_edge); unknown keys are ignored, wrong types are errors.
absl::StatusOr<ImageProcessorConfig> ImageProcessorConfigFromJson(
    const nlohmann::json& json, absl::string_view source);
nlohmann::json ImageProcessorConfigToJson(const ImageProcessorConfig& config);

// HF smart_resize: {height, width}, both multiples of `factor`, aspect kept
// as well as possible, pixel count within [min_pixels, max_pixels]. Python's
// round() (half to even) included. Aspect ratio over 200 is InvalidArgument.
absl::StatusOr<std::pair<int64_t, int64_t>> SmartResize(int64_t height,
                                                        int64_t width,
                                                        int64_t factor,
                                                        int64_t min_pixels,
                                                        int64_t max_pixels);

// PIL's Image.resize(size, Image.BICUBIC) on RGB: separable convolution
// (horizontal pass first, over the rows the vertical pass needs), support
// 2 * max(1, scale) (antialiasing when shrinking), coefficients normalised
// and rounded to 22-bit fixed point, results rounded and clipped to 8 bits.
Image ResizeBicubic(const Image& image, int64_t width, int64_t height);

struct ProcessedImages {
  at::Tensor pixel_values;    // [sum of patches, PatchDim()] float32
  at::Tensor image_grid_thw;  // [images, 3] int64
};

// The processor over `images` (each becomes grid_t = 1).
absl::StatusOr<ProcessedImages> PreprocessImages(
    const std::vector<Image>& images, const ImageProcessorConfig& config);

// Number of <|image_pad|> tokens an image with grid (t, h, w) expands to.
inline int64_t NumImageTokens(int64_t t, int64_t h, int64_t w,
                              int64_t merge_size) {
  return t * h * w / (merge_size * merge_size);
}

}  // namespace verl::models::vlm

#endif  // VERL_MODELS_VLM_IMAGE_PROCESSOR_H_
