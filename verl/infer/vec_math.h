// File: verl/infer/vec_math.h
//
// Vectorisable fp32 exp for the engine's softmax loops (decode attention,
// sampler). glibc's expf does not vectorise without -ffast-math; this one
// (Cephes polynomial after exact range reduction, ~1 ulp on the normal
// range) does under `#pragma omp simd`. Inputs below -87.3 give 0 (so -inf
// logits get probability exactly 0); inputs are expected <= 0 (softmax
// after subtracting the maximum).
#ifndef VERL_INFER_VEC_MATH_H_
#define VERL_INFER_VEC_MATH_H_

#include <cmath>
#include <cstdint>
#include <cstring>

namespace verl::infer {

#pragma omp declare simd
inline float VecExp(float x) {
  const float xc = std::fmin(std::fmax(x, -87.3f), 88.3f);
  const float n = std::floor(xc * 1.44269504088896341f + 0.5f);
  // x - n ln2 with ln2 split in two for exactness (Cephes C1, C2).
  const float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return x < -87.3f ? 0.0f : p * scale;
}

}  // namespace verl::infer

#endif  // VERL_INFER_VEC_MATH_H_
