// File: verl/models/vlm/testing/sharp_tiny_vlm.h
//
// Test helper: the tiny-qwen2.5-vl preset with its language model's query
// and key weights scaled up. Random tiny weights attend almost uniformly, so
// the images barely move the log-probs (~1e-6); sharper attention makes a
// lost or misplaced image visible to the trainer tests.
#ifndef VERL_MODELS_VLM_TESTING_SHARP_TINY_VLM_H_
#define VERL_MODELS_VLM_TESTING_SHARP_TINY_VLM_H_

#include <cstdint>
#include <memory>

#include "verl/models/vlm/qwen2_vl.h"

namespace verl::models::vlm::testing {

std::shared_ptr<Qwen2VLForConditionalGeneration> MakeSharpTinyVlm(
    uint64_t seed, double qk_scale = 5.0);

}  // namespace verl::models::vlm::testing

#endif  // VERL_MODELS_VLM_TESTING_SHARP_TINY_VLM_H_
