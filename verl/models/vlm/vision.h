// File: verl/models/vlm/vision.h
//
// The Qwen2.5-VL and Qwen2-VL vision towers (HF
// Qwen2_5_VisionTransformerPretrainedModel / Qwen2VisionTransformer-
// PretrainedModel, parameters named as HF's `visual.*`): the 3-D patch
// embedding (a Conv3d whose kernel equals its stride, computed as one matrix
// product on pixel_values rows), 2-D rotary embeddings (height and width
// halves), then per variant (VisionConfig::variant):
// - Qwen2.5-VL: RMSNorm + SwiGLU blocks with bidirectional attention inside
//   windows of window_size pixels, or over the whole image at
//   fullatt_block_indexes; the merger's ln_q an RMSNorm;
// - Qwen2-VL: LayerNorm (with bias) + fc1-act-fc2 blocks (act QuickGELU by
//   default), every block over the whole image (no window reordering); the
//   merger's ln_q a LayerNorm;
// and the patch merger (ln_q, 2x2 patches concatenated, Linear-GELU-Linear
// to the language model's hidden size). With gradient checkpointing on, each
// block is recomputed in backward (verl/models/recompute.h).
#ifndef VERL_MODELS_VLM_VISION_H_
#define VERL_MODELS_VLM_VISION_H_

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "verl/models/layers.h"
#include "verl/models/vlm/vlm_config.h"

namespace verl::models::vlm {

using GridThw = std::array<int64_t, 3>;  // (t, h, w) in patches

// Token layout of one vision forward, from the images' grids alone.
struct VisionLayout {
  // Merge units (spatial_merge_size^2 consecutive patches) in window order:
  // window_index[i] is the unit at position i (HF get_window_index); the
  // identity without windows (Qwen2-VL).
  std::vector<int64_t> window_index;
  std::vector<int64_t> cu_window;  // window boundaries in patches
  // Full-attention boundaries in patches: one span per frame (t) of each
  // image, as HF's cu_seqlens (t is 1 for images).
  std::vector<int64_t> cu_image;
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

// HF nn.LayerNorm over the last dim (`weight`, `bias`), in the input's
// dtype as torch computes it.
class LayerNorm : public torch::nn::Module {
 public:
  LayerNorm(int64_t dim, double eps);
  at::Tensor Forward(const at::Tensor& x) const;
  double eps;
  at::Tensor weight, bias;
};

// A vision norm registered under `name` in `parent`: RMSNorm (Qwen2.5-VL)
// or LayerNorm (Qwen2-VL), both with HF's parameter names.
class VisionNorm {
 public:
  VisionNorm(torch::nn::Module& parent, const std::string& name,
             const VisionConfig& config);
  at::Tensor Forward(const at::Tensor& x) const;
  std::shared_ptr<RMSNorm> rms;  // exactly one of the two is set
  std::shared_ptr<LayerNorm> layer_norm;
};

// The block MLP: SwiGLU with biases (Qwen2_5_VLMLP: gate/up/down_proj) or
// fc2(act(fc1(x))) (Qwen2-VL's VisionMlp, act = hidden_act).
class VisionMlp : public torch::nn::Module {
 public:
  explicit VisionMlp(const VisionConfig& config);
  at::Tensor Forward(const at::Tensor& x) const;
  std::shared_ptr<Linear> gate_proj, up_proj, down_proj;  // Qwen2.5-VL
  std::shared_ptr<Linear> fc1, fc2;                       // Qwen2-VL
  std::string act;                                        // Qwen2-VL
};

// HF ACT2FN[name] for Qwen2-VL's vision MLP: quick_gelu (x sigmoid(1.702
// x)), gelu (erf), gelu_pytorch_tanh, silu.
at::Tensor VisionActivation(const std::string& name, const at::Tensor& x);

class VisionBlock : public torch::nn::Module {
 public:
  explicit VisionBlock(const VisionConfig& config);
  at::Tensor Forward(const at::Tensor& x, const at::Tensor& cos,
                     const at::Tensor& sin,
                     const std::vector<int64_t>& cu) const;
  VisionNorm norm1, norm2;
  std::shared_ptr<VisionAttention> attn;
  std::shared_ptr<VisionMlp> mlp;
};

class PatchMerger : public torch::nn::Module {
 public:
  explicit PatchMerger(const VisionConfig& config);
  // x [N, D] -> [N / merge_unit, out_hidden_size].
  at::Tensor Forward(const at::Tensor& x) const;
  int64_t merged_dim;
  VisionNorm ln_q;
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

  // Recompute each block in backward instead of keeping its activations
  // (HF's gradient checkpointing of Qwen2(.5)-VL's vision blocks). The
  // multimodal model sets it from its own flag at every forward.
  void enable_gradient_checkpointing(bool enable = true) {
    checkpointing_ = enable;
  }
  bool gradient_checkpointing() const { return checkpointing_; }

  const VisionConfig& config() const { return config_; }
  std::shared_ptr<WeightHolder> patch_embed;  // `patch_embed.proj.weight`
  std::vector<std::shared_ptr<VisionBlock>> blocks;
  std::shared_ptr<PatchMerger> merger;

 private:
  VisionConfig config_;
  at::Tensor inv_freq_;  // [head_dim / 4], double
  bool checkpointing_ = false;
};

// Grids as a vector from image_grid_thw [images, 3].
std::vector<GridThw> GridsFromTensor(const at::Tensor& image_grid_thw);

}  // namespace verl::models::vlm

#endif  // VERL_MODELS_VLM_VISION_H_
