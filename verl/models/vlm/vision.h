// File: verl/models/vlm/vision.h
//
// The Qwen2.5-VL vision tower (HF Qwen2_5_VisionTransformerPretrainedModel,
// parameters named as HF's `visual.*`): the 3-D patch embedding (a Conv3d
// whose kernel equals its stride, computed as one matrix product on
// pixel_values rows), 2-D rotary embeddings (height and width halves),
// RMSNorm + SwiGLU blocks with bidirectional attention inside windows of
// window_size pixels, or over the whole image at fullatt_block_indexes, and
// the patch merger (RMSNorm, 2x2 patches concatenated, Linear-GELU-Linear to
// the language model's hidden size).
#ifndef VERL_MODELS_VLM_VISION_H_
#define VERL_MODELS_VLM_VISION_H_

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "verl/models/layers.h"
#include "verl/models/vlm/vlm_config.h"

namespace verl::models::vlm {

using GridThw = std::array<int64_t, 3>;  // (t, h, w) in patches

// Token layout of one vision forward, from the images' grids alone.
struct VisionLayout {
  // Merge units (spatial_merge_size^2 consecutive patches) in window order:
  // window_index[i] is the unit at position i (HF get_window_index).
  std::vector<int64_t> window_index;
  std::vector<int64_t> cu_window;  // window boundaries in patches
  std::vector<int64_t> cu_image;   // image boundaries in patches
  // Per patch, in pixel_values order: its row and column in the image grid.
  std::vector<int64_t> row, col;
};
VisionLayout MakeVisionLayout(const std::vector<GridThw>& grids,
                              const VisionConfig& config);

class VisionAttention : public torch::nn::Module {
 public:
  VisionAttention(int64_t dim, int64_t heads);
  // x [N, D], cos/sin [N, head_dim]; attention within [cu[i], cu[i+1]).
  at::Tensor Forward(const at::Tensor& x, const at::Tensor& cos,
                     const at::Tensor& sin,
                     const std::vector<int64_t>& cu) const;
  int64_t heads;
  std::shared_ptr<Linear> qkv, proj;
};

// SwiGLU with biases (Qwen2_5_VLMLP).
class VisionMlp : public torch::nn::Module {
 public:
  VisionMlp(int64_t dim, int64_t hidden);
  at::Tensor Forward(const at::Tensor& x) const;
  std::shared_ptr<Linear> gate_proj, up_proj, down_proj;
};

class VisionBlock : public torch::nn::Module {
 public:
  explicit VisionBlock(const VisionConfig& config);
  at::Tensor Forward(const at::Tensor& x, const at::Tensor& cos,
                     const at::Tensor& sin,
                     const std::vector<int64_t>& cu) const;
  std::shared_ptr<RMSNorm> norm1, norm2;
  std::shared_ptr<VisionAttention> attn;
  std::shared_ptr<VisionMlp> mlp;
};

class PatchMerger : public torch::nn::Module {
 public:
  explicit PatchMerger(const VisionConfig& config);
  // x [N, D] -> [N / merge_unit, out_hidden_size].
  at::Tensor Forward(const at::Tensor& x) const;
  int64_t merged_dim;
  std::shared_ptr<RMSNorm> ln_q;
  std::shared_ptr<Linear> fc1, fc2;  // HF `mlp.0`, `mlp.2`
};

class VisionTower : public torch::nn::Module {
 public:
  explicit VisionTower(const VisionConfig& config);
  // pixel_values [patches, PatchDim()] (HF processor order) for images with
  // `grids` -> image embeddings [patches / merge_unit, out_hidden_size] in
  // the order of the <|image_pad|> tokens.
  at::Tensor Forward(const at::Tensor& pixel_values,
                     const std::vector<GridThw>& grids) const;

  const VisionConfig& config() const { return config_; }
  std::shared_ptr<WeightHolder> patch_embed;  // `patch_embed.proj.weight`
  std::vector<std::shared_ptr<VisionBlock>> blocks;
  std::shared_ptr<PatchMerger> merger;

 private:
  VisionConfig config_;
  at::Tensor inv_freq_;  // [head_dim / 4], double
};

// Grids as a vector from image_grid_thw [images, 3].
std::vector<GridThw> GridsFromTensor(const at::Tensor& image_grid_thw);

}  // namespace verl::models::vlm

#endif  // VERL_MODELS_VLM_VISION_H_
