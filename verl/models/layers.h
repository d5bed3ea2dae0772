// File: verl/models/layers.h
//
// Decoder building blocks as torch::nn::Modules whose parameter names match
// HuggingFace (`weight`, `bias`): Linear (with an optional LoRA adapter slot
// managed by lora.h), RMSNorm (fp32 compute like HF), SwiGLU MLP, and rotary
// position embeddings (default and Llama-3 scaling).
#ifndef VERL_MODELS_LAYERS_H_
#define VERL_MODELS_LAYERS_H_

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "verl/models/model_config.h"

namespace verl::models {

// A module holding one parameter named "weight" (LoRA A/B matrices, so that
// their names read `q_proj.lora_A.weight` as in PEFT's saved adapters).
class WeightHolder : public torch::nn::Module {
 public:
  explicit WeightHolder(const at::Tensor& w);
  at::Tensor weight;
};

// LoRA adapter attached to one Linear: y += scale * B(A(x)).
struct LoraAdapter {
  std::shared_ptr<WeightHolder> lora_A;  // [r, in]
  std::shared_ptr<WeightHolder> lora_B;  // [out, r]
  double scale = 0.0;                    // lora_alpha / r
  bool enabled = true;                   // false => base output only
  bool merged = false;                   // true => delta folded into weight
};

// y = x W^T (+ b). Weight [out, in] like nn.Linear.
class Linear : public torch::nn::Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias);
  at::Tensor Forward(const at::Tensor& x) const;

  int64_t in_features;
  int64_t out_features;
  at::Tensor weight;
  at::Tensor bias;   // undefined when bias=false
  LoraAdapter lora;  // lora.lora_A == nullptr => no adapter
  // Row-parallel seam (the tensor-parallel rollout's o_proj / down_proj,
  // verl/infer/tensor_parallel.h): when set, Forward returns
  // output_hook(x W^T) — there, the all-reduce of the partial products.
  // Empty (the default): none.
  std::function<at::Tensor(const at::Tensor&)> output_hook;
};

// HF RMSNorm: normalise in fp32 (double stays double), cast back, scale.
class RMSNorm : public torch::nn::Module {
 public:
  RMSNorm(int64_t dim, double eps);
  at::Tensor Forward(const at::Tensor& x) const;

  double eps;
  at::Tensor weight;
};

// SwiGLU MLP: down(silu(gate(x)) * up(x)); HF names gate/up/down_proj.
// A container whose children are named "<index>" (HF nn.ModuleList).
class ModuleList : public torch::nn::Module {
 public:
  template <typename M>
  void Add(const std::shared_ptr<M>& m) {
    register_module(std::to_string(count_++), m);
  }

 private:
  int64_t count_ = 0;
};

class MLP : public torch::nn::Module {
 public:
  MLP(int64_t hidden, int64_t intermediate);
  at::Tensor Forward(const at::Tensor& x) const;

  std::shared_ptr<Linear> gate_proj, up_proj, down_proj;
};

// Rotary embeddings. Inverse frequencies [head_dim/2] (double, CPU) for the
// config's rope_theta and rope_scaling ("default", "llama3" or "yarn").
at::Tensor RopeInvFreq(const ModelConfig& config);

// The factor HF multiplies cos/sin by (yarn's attention_factor; else 1).
double RopeAttentionFactor(const ModelConfig& config);

// HF yarn_get_mscale: 0.1 * mscale * ln(scale) + 1 for scale > 1, else 1.
double YarnMscale(double scale, double mscale);

// cos/sin tables [T, head_dim] for `position_ids` [T] in `dtype`, computed in
// fp32 like HF (double when dtype is double).
std::pair<at::Tensor, at::Tensor> RopeCosSin(const at::Tensor& inv_freq,
                                             const at::Tensor& position_ids,
                                             c10::ScalarType dtype);

// M-RoPE tables [T, head_dim] for `position_ids` [3, T] (temporal, height,
// width rows): frequency j takes its position from the row whose
// `mrope_section` slice holds j (HF apply_multimodal_rotary_pos_emb).
std::pair<at::Tensor, at::Tensor> MropeCosSin(
    const at::Tensor& inv_freq, const at::Tensor& position_ids,
    const std::vector<int64_t>& mrope_section, c10::ScalarType dtype);

// Applies RoPE (rotate-half convention) to x [T, heads, head_dim].
at::Tensor ApplyRope(const at::Tensor& x, const at::Tensor& cos,
                     const at::Tensor& sin);

// Compute dtype for norms/softmax: fp32, or double for double tensors.
c10::ScalarType ComputeDtype(c10::ScalarType dtype);

// Whether GEMMs on `t` run in fp32: CPU bf16/fp16 tensors. LibTorch 1.13's
// CPU bf16 GEMM is ~20x slower than fp32 BLIS without AVX512-BF16, and fp32
// accumulation with a rounded bf16 output is what GPU bf16 GEMMs compute.
bool UpcastGemm(const at::Tensor& t);

// at::linear(x, w, b) honouring UpcastGemm (result in x's dtype).
at::Tensor LinearOp(const at::Tensor& x, const at::Tensor& w,
                    const at::Tensor& b = at::Tensor());

}  // namespace verl::models

#endif  // VERL_MODELS_LAYERS_H_
