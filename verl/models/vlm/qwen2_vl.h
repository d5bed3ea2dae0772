// File: verl/models/vlm/qwen2_vl.h
//
// Qwen2_5_VLForConditionalGeneration: the Qwen2 language model (the decoder
// of verl/models, so `model.*` and `lm_head.*` are HF's names) plus the
// vision tower `visual.*`. A forward embeds the tokens, replaces the
// embeddings at <|image_pad|> tokens by the vision tower's outputs (in
// order, one per merged 2x2 patch window) and runs the decoder with M-RoPE
// positions [3, T] from RopeIndex (HF get_rope_index).
#ifndef VERL_MODELS_VLM_QWEN2_VL_H_
#define VERL_MODELS_VLM_QWEN2_VL_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "verl/models/decoder.h"
#include "verl/models/vlm/vision.h"
#include "verl/models/vlm/vlm_config.h"

namespace verl::models::vlm {

struct RopeIndexResult {
  at::Tensor position_ids;  // [3, T] int64
  int64_t delta =
      0;  // max position + 1 - T: decode step i sits at T + i + delta
};

// HF get_rope_index for one sequence holding images (no padding): text
// tokens count up on all three rows; an image's tokens (grid t x h/m x w/m)
// take (t_start, row, col) offsets from the position after the preceding
// text; text after an image continues at max position + 1. `grids` are the
// sequence's images in order. Too few/many pad tokens: InvalidArgument;
// with `pads_after_images_are_text`, pads after the last image are text (a
// response that sampled <|image_pad|>).
absl::StatusOr<RopeIndexResult> RopeIndex(
    const std::vector<int64_t>& input_ids, const std::vector<GridThw>& grids,
    const VlmConfig& config, bool pads_after_images_are_text = false);

class Qwen2VLForConditionalGeneration : public CausalLM {
 public:
  explicit Qwen2VLForConditionalGeneration(const VlmConfig& config);

  const VlmConfig& vlm_config() const { return vlm_config_; }

  // Packed sequences (input_ids [T], sequence s in [cu_seqlens[s],
  // cu_seqlens[s+1])) with their images: pixel_values [patches, 1176] and
  // image_grid_thw [images, 3], images in token order across sequences
  // (both undefined for text only). Returns logits [T, V].
  absl::StatusOr<ForwardOutput> ForwardMultimodal(
      const at::Tensor& input_ids, const std::vector<int64_t>& cu_seqlens,
      const at::Tensor& pixel_values, const at::Tensor& image_grid_thw);

  // Token embeddings with the image embeddings spliced in, and the M-RoPE
  // positions [3, T] (exposed for the rollout engine and tests).
  // `images_per_sequence` (one count per sequence; empty: inferred from the
  // pad tokens) assigns the images to the sequences, so pads after a
  // sequence's last image, which a sampled response can hold, are embedded
  // as text with text positions, as the rollout engine does.
  struct Inputs {
    at::Tensor embeds;
    at::Tensor position_ids;
  };
  absl::StatusOr<Inputs> PrepareInputs(
      const at::Tensor& input_ids, const std::vector<int64_t>& cu_seqlens,
      const at::Tensor& pixel_values, const at::Tensor& image_grid_thw,
      const std::vector<int64_t>& images_per_sequence = {});

  // verl's actor.freeze_vision_tower: the vision tower's parameters (the
  // merger included, as `visual.requires_grad_(False)`) stop requiring
  // gradients, so the update leaves them unchanged; false undoes it.
  void FreezeVisionTower(bool freeze = true);

  std::shared_ptr<VisionTower> visual;

 private:
  VlmConfig vlm_config_;
};

// A model with HF-style init from `seed` (as CreateModel: weights
// N(0, init_std), biases 0, norms 1), fp32.
std::shared_ptr<Qwen2VLForConditionalGeneration> CreateVlmModel(
    const VlmConfig& config, uint64_t seed, double init_std = 0.02);

}  // namespace verl::models::vlm

#endif  // VERL_MODELS_VLM_QWEN2_VL_H_
