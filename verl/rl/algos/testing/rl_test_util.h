// File: verl/rl/algos/testing/rl_test_util.h
//
// Test helpers for verl/rl: build small double tensors from nested
// initializer lists and compare tensors element-wise.
#ifndef VERL_RL_ALGOS_TESTING_RL_TEST_UTIL_H_
#define VERL_RL_ALGOS_TESTING_RL_TEST_UTIL_H_

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <vector>

namespace verl::rl::testing {

// [rows][cols] → kDouble tensor.
inline at::Tensor Mat(const std::vector<std::vector<double>>& rows) {
  const int64_t r = rows.size(), c = rows.empty() ? 0 : rows[0].size();
  at::Tensor t = at::zeros({r, c}, at::kDouble);
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) t[i][j] = rows[i][j];
  return t;
}

inline at::Tensor Vec(const std::vector<double>& v) {
  return at::tensor(v, at::kDouble);
}

inline void ExpectTensorNear(const at::Tensor& actual,
                             const at::Tensor& expected, double tol = 1e-6) {
  ASSERT_EQ(actual.sizes(), expected.sizes());
  at::Tensor a = actual.detach().to(at::kDouble).contiguous().reshape(-1);
  at::Tensor e = expected.detach().to(at::kDouble).contiguous().reshape(-1);
  for (int64_t i = 0; i < a.numel(); ++i) {
    EXPECT_NEAR(a[i].item<double>(), e[i].item<double>(), tol)
        << "at flat index " << i;
  }
}

}  // namespace verl::rl::testing

#endif  // VERL_RL_ALGOS_TESTING_RL_TEST_UTIL_H_
