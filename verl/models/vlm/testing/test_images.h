// File: verl/models/vlm/testing/test_images.h
//
// Test helper: two distinct 56x56 RGB images (4 merged image tokens each)
// for the generate and serve tests of vision-language models.
#ifndef VERL_MODELS_VLM_TESTING_TEST_IMAGES_H_
#define VERL_MODELS_VLM_TESTING_TEST_IMAGES_H_

#include "verl/models/vlm/image.h"

namespace verl::models::vlm::testing {

// A horizontal ramp, or (second) its inverse with a checkerboard.
Image MakeRampImage(bool second);

}  // namespace verl::models::vlm::testing

#endif  // VERL_MODELS_VLM_TESTING_TEST_IMAGES_H_
