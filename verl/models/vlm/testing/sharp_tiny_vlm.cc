// File: verl/models/vlm/testing/sharp_tiny_vlm.cc
#include "verl/models/vlm/testing/sharp_tiny_vlm.h"

#include <torch/csrc/autograd/grad_mode.h>

#include <string>

#include "verl/models/vlm/vlm_config.h"

namespace verl::models::vlm::testing {

std::shared_ptr<Qwen2VLForConditionalGeneration> MakeSharpTinyVlm(
    uint64_t seed, double qk_scale) {
  auto model = CreateVlmModel(*MakeVlmPreset("tiny-qwen2.5-vl"), seed);
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    const std::string& k = item.key();
    if (k.find("self_attn.q_proj.weight") != std::string::npos ||
        k.find("self_attn.k_proj.weight") != std::string::npos) {
      item.value().mul_(qk_scale);
    }
  }
  return model;
}

}  // namespace verl::models::vlm::testing
